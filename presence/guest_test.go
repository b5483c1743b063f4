package presence

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// TestGuestRecordKeptGuestRetention: a guest's record is kept
// GuestRetention after its Touch and after its Offline; a registered
// user's, Retention.
func TestGuestRecordKeptGuestRetention(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	p := New(r.NewClient(t), Config{Prefix: r.Prefix, Run: "run-1"})
	pttl := func(user string) time.Duration {
		d, err := r.Client.PTTL(ctx, p.k.user(user)).Result()
		require.NoError(t, err)
		return d
	}
	long := 30 * 24 * time.Hour
	require.NoError(t, p.Touch(ctx, "n1", []UserState{
		{User: "gus", Rooms: []string{"r1"}, Guest: true},
		{User: "reg", Rooms: []string{"r1"}},
	}))
	assert.LessOrEqual(t, pttl("gus"), DefaultGuestRetention)
	assert.Greater(t, pttl("gus"), DefaultGuestRetention-time.Minute)
	assert.Greater(t, pttl("reg"), long-time.Minute)

	require.NoError(t, p.Offline(ctx, "gus", "n1"))
	require.NoError(t, p.Offline(ctx, "reg", "n1"))
	assert.LessOrEqual(t, pttl("gus"), DefaultGuestRetention, "Offline keeps a guest's record its retention")
	assert.Greater(t, pttl("gus"), DefaultGuestRetention-time.Minute)
	assert.Greater(t, pttl("reg"), long-time.Minute)
	st, err := p.Get(ctx, "gus")
	require.NoError(t, err)
	assert.False(t, st.Online)
	assert.False(t, st.LastSeen.IsZero())
}
