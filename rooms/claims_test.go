package rooms

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// TestFollowClaimRecords: nodes share through a mark in Redis since when
// no node has written a keyed say's record without its claim (v0.1.0
// did). A deployment that never stored a message is settled at once, and
// a keyed say then reads its claim only; off deletes the mark; once
// messages were stored, a new mark is now, and a node that turns claim
// records on later is settled with the mark, not with its own clock.
func TestFollowClaimRecords(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	ctx := context.Background()
	clock := newClock()
	ss := nodes(t, r, 3, Config{Now: clock.Now})
	a, b, c := ss[0].Messages, ss[1].Messages, ss[2].Messages
	mark := claimsSinceKey(a.ks)
	room, err := ss[0].Seats.Join(ctx, "claims", "alice", ws1)
	require.NoError(t, err)

	t.Run("a deployment that never stored a message is settled at once", func(t *testing.T) {
		require.Zero(t, r.Client.Exists(ctx, messagesTotalKey(a.ks)).Val())
		require.NoError(t, a.FollowClaimRecords(ctx, true))
		assert.Equal(t, "2", a.claimMode(clock.Now()))
		assert.Equal(t, "1", r.Client.Get(ctx, mark).Val())

		_, err := a.Send(ctx, room.ID, "alice", "warm-up", SendOptions{}) // the script loaded, the counter made
		require.NoError(t, err)
		require.NoError(t, r.Client.ConfigResetStat(ctx).Err())
		out := a.SendMany(ctx, []SendRequest{{Room: room.ID, User: "alice", Text: "keyed", Key: "s1:k1"}}, SendOptions{})[0]
		require.NoError(t, out.Err)
		calls := commandStats(t, r.Client)
		assert.Equal(t, int64(1), calls["get"], "the claim only: no record in the lobby to look for")

		require.NoError(t, b.FollowClaimRecords(ctx, true))
		assert.Equal(t, "2", b.claimMode(clock.Now()), "the mark holds, though messages exist now")
	})

	t.Run("off deletes the mark", func(t *testing.T) {
		require.NoError(t, a.FollowClaimRecords(ctx, false))
		require.NoError(t, b.FollowClaimRecords(ctx, false))
		assert.Empty(t, a.claimMode(clock.Now()))
		assert.Zero(t, r.Client.Exists(ctx, mark).Val())
	})

	t.Run("once messages were stored a new mark is now", func(t *testing.T) {
		clock.Add(time.Second)
		require.NoError(t, b.FollowClaimRecords(ctx, true))
		assert.Equal(t, "1", b.claimMode(clock.Now()), "the lobby is read: a v0.1.0 node may have recorded says there")
		assert.Equal(t, strconv.FormatInt(clock.Now().UnixMilli(), 10), r.Client.Get(ctx, mark).Val())
		require.NoError(t, r.Client.ConfigResetStat(ctx).Err())
		require.NoError(t, b.FollowClaimRecords(ctx, true))
		assert.Zero(t, measuredCalls(commandStats(t, r.Client)), "the mark, once read, is not read again at each beat")

		clock.Add(DefaultIdempotencyTTL)
		require.NoError(t, c.FollowClaimRecords(ctx, true))
		assert.Equal(t, "1", c.claimMode(clock.Now()))

		clock.Add(DefaultIdempotencyTTL + time.Second)
		assert.Equal(t, "2", b.claimMode(clock.Now()))
		assert.Equal(t, "2", c.claimMode(clock.Now()), "c turned them on a TTL later, and is settled with the mark")
		require.NoError(t, a.FollowClaimRecords(ctx, true))
		assert.Equal(t, "2", a.claimMode(clock.Now()), "a turns them on now, and is settled with the mark")
	})
}
