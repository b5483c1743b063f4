package bus

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// TestConfirmProbesALateCanary: a canary that is merely late (a loaded
// machine) does not make a working connection look dead to a readiness
// probe — Confirm publishes one and sees it come back — while a connection
// that receives nothing is still reported, within the probe's deadline.
func TestConfirmProbesALateCanary(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	ctx := context.Background()
	// A period so long that only the first canary comes back by itself.
	b := New(r.NewClient(t), Config{Prefix: r.Prefix, CanaryEvery: time.Hour})
	stop := b.Start(ctx)
	defer stop()
	require.Eventually(t, b.Ready, 10*time.Second, 10*time.Millisecond)

	t.Run("a late canary: Ready says no, Confirm says yes", func(t *testing.T) {
		b.lastCanary.Store(time.Now().Add(-4 * time.Hour).UnixNano())
		require.False(t, b.Ready())
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		assert.True(t, b.Confirm(pctx))
		assert.True(t, b.Ready(), "the probe's canary counts")
	})

	t.Run("Redis gone: Confirm says no by the deadline", func(t *testing.T) {
		r.Server.Kill(t)
		b.lastCanary.Store(time.Now().Add(-4 * time.Hour).UnixNano())
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		assert.False(t, b.Confirm(pctx))
	})
}
