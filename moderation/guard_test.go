package moderation

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testkit"
)

// TestGuardServesFromItsCacheUntilAnEventOrItsAge: a status is read once
// and then served from the cache; another node's mute reaches it by the
// event (Receive), a missed one by Reset or by GuardFresh passing.
func TestGuardServesFromItsCacheUntilAnEventOrItsAge(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	clk := testkit.NewClock(time.Now())
	other := New(r.NewClient(t), Config{Prefix: r.Prefix}) // the node that decides
	var got []Event
	g := NewGuard(New(r.NewClient(t), Config{Prefix: r.Prefix}), GuardConfig{Now: clk.Now,
		OnEvent: func(ev Event) { got = append(got, ev) }})

	st, err := g.Status(ctx, "Nina")
	require.NoError(t, err)
	require.False(t, st.Muted)
	_, err = other.Mute(ctx, "nina", time.Hour, "spam")
	require.NoError(t, err)

	t.Run("without the event the cached status stands", func(t *testing.T) {
		st, err := g.Status(ctx, "nina")
		require.NoError(t, err)
		assert.False(t, st.Muted)
	})
	t.Run("the event drops the user's entry and is handed on", func(t *testing.T) {
		g.Receive("", []byte(`{"type":"mute","user":"NINA","until":"2030-01-01T00:00:00Z"}`))
		st, err := g.Status(ctx, "nina")
		require.NoError(t, err)
		assert.True(t, st.Muted)
		require.Len(t, got, 1)
		assert.Equal(t, "mute", got[0].Type)
		g.Receive("", []byte(`not an event`))
		assert.Len(t, got, 1, "what is not an event is ignored")
	})
	t.Run("a missed unmute is read after Reset, or once the entry is GuardFresh old", func(t *testing.T) {
		require.NoError(t, other.Unmute(ctx, "nina"))
		st, _ := g.Status(ctx, "nina")
		assert.True(t, st.Muted, "still cached")
		g.Reset()
		st, _ = g.Status(ctx, "nina")
		assert.False(t, st.Muted)

		_, err := other.Mute(ctx, "nina", time.Hour, "")
		require.NoError(t, err)
		clk.Add(GuardFresh)
		st, _ = g.Status(ctx, "nina")
		assert.True(t, st.Muted)
	})
}
