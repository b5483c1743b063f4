package dirty

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// TestFollowForOnlyLengthensFollowers: FollowFor gives the user's follows
// index the shorter life and a new followers SET too, but never shortens
// a followers SET that a plain Follow keeps longer.
func TestFollowForOnlyLengthensFollowers(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	const long, short = 7 * 24 * time.Hour, 24 * time.Hour
	tr := New(r.NewClient(t), Config{Prefix: r.Prefix, FollowTTL: long, Logger: quiet})
	pttl := func(key string) time.Duration {
		d, err := r.Client.PTTL(ctx, key).Result()
		require.NoError(t, err)
		return d
	}

	require.NoError(t, tr.FollowFor(ctx, "lb:guests", "gus", short))
	assert.LessOrEqual(t, pttl(tr.k.followers("lb:guests")), short)
	assert.Greater(t, pttl(tr.k.followers("lb:guests")), short-time.Minute)
	assert.LessOrEqual(t, pttl(tr.k.follows("gus")), short)
	assert.Greater(t, pttl(tr.k.follows("gus")), short-time.Minute)

	require.NoError(t, tr.Follow(ctx, "lb:kept", "reg"))
	require.NoError(t, tr.FollowFor(ctx, "lb:kept", "gus", short))
	assert.Greater(t, pttl(tr.k.followers("lb:kept")), long-time.Minute, "a guest's follow does not shorten the set")
	assert.Greater(t, pttl(tr.k.follows("reg")), long-time.Minute)
	assert.LessOrEqual(t, pttl(tr.k.follows("gus")), short)
}
