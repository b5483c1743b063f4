package chat_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/settings"
)

// TestARunWhoseLeaseEndedLosesItsSeatsAndItsClientsLearnIt: a node's
// connections are kept by its run's lease in each lobby (package rooms,
// KeepRun), not one by one. Here n1's run lease in the lobby ends (as when
// n1 is paused past the lease, or killed): the sweeper of a live node
// reaps alice's seat at once ("left" reaches bob on n2), carol on n3 takes
// it, and at n1's next seat tick alice's connection learns it lost the
// seat (not_seated) and leaves the room, while bob keeps his.
func TestARunWhoseLeaseEndedLosesItsSeatsAndItsClientsLearnIt(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	n1 := startNode(t, r, "n1")
	_, err := n1.Services.Settings.Set(ctx, settings.RoomCapacity, []byte("2"))
	require.NoError(t, err)
	n2 := startNode(t, r, "n2")
	n3 := startNode(t, r, "n3")
	a, fa := n1.Connect(t, "alice")
	b, fb := n2.Connect(t, "bob")
	c, fc := n3.Connect(t, "carol")
	room := n1.JoinRoom(t, a, fa, "paused")
	require.Equal(t, room, n2.JoinRoom(t, b, fb, "paused"))
	n1.Chat.RenewSeats(ctx) // idle ticks
	n2.Chat.RenewSeats(ctx)

	// n1's run lease in the lobby runs out.
	keys, err := r.Client.Keys(ctx, r.Prefix+"*{lobby:paused}:runs").Result()
	require.NoError(t, err)
	require.Len(t, keys, 1)
	require.NoError(t, r.Client.ZAdd(ctx, keys[0], redis.Z{Score: 1, Member: n1.Core.RunID()}).Err())
	// The sweeper's index has the lobby due at its runs' earliest expiry:
	// now, as it would be when the lease ran out by itself.
	require.NoError(t, r.Client.ZAdd(ctx, keyspace.New(r.Prefix).Global("rooms", "lobbies"), redis.Z{Score: 1, Member: "paused"}).Err())

	fb.First(t, "presence", func(m map[string]any) bool { return m["user"] == "alice" && m["state"] == "left" })
	assert.Equal(t, room, n3.JoinRoom(t, c, fc, "paused"), "carol takes the freed seat")

	n1.Chat.RenewSeats(ctx)
	e := fa.First(t, "error", func(m map[string]any) bool { return m["code"] == "not_seated" })
	assert.Equal(t, room, e["room"])
	assert.False(t, a.InRoom(room))
	n2.Chat.RenewSeats(ctx)
	assert.True(t, b.InRoom(room), "bob's seat, kept by n2's run, stays")
	for _, m := range fb.All() {
		assert.NotEqual(t, "not_seated", m["code"], "bob is told nothing")
	}
}
