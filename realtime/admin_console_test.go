package realtime

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/names"
	"github.com/chatd/chatd/presence"
	"github.com/chatd/chatd/rooms"
)

// TestAdminConsoleAcrossTwoNodes: the admin console's reads and actions,
// taken on one node, about users of the other.
func TestAdminConsoleAcrossTwoNodes(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	n1, n2 := startNode(t, r, "n1"), startNode(t, r, "n2")
	ca, fa := n1.connect(t, "alice")
	ca2, fa2 := n1.connect(t, "alice")
	cb, fb := n2.connect(t, "bob")
	cc, fc := n2.connect(t, "carol")
	pop := n1.joinRoom(t, ca, fa, "pop")
	require.Equal(t, pop, n2.joinRoom(t, cb, fb, "pop"))
	quiet := n2.joinRoom(t, cc, fc, "quiet")

	t.Run("rooms come most populated first", func(t *testing.T) {
		rs, err := n2.Admin.RoomsByPopulation(ctx, 10)
		require.NoError(t, err)
		require.Len(t, rs, 2)
		assert.Equal(t, pop, rs[0].ID)
		assert.Equal(t, []string{"alice", "bob"}, rs[0].Members)
		assert.Equal(t, quiet, rs[1].ID)
		rs, err = n2.Admin.RoomsByPopulation(ctx, 1)
		require.NoError(t, err)
		assert.Len(t, rs, 1, "limit is honoured")
	})

	t.Run("the system speaks in a room; members on the other node hear it, and it is in the room's detail", func(t *testing.T) {
		m, err := n2.Admin.SystemSay(ctx, pop, "maintenance at 22:00")
		require.NoError(t, err)
		assert.Equal(t, rooms.SystemSender, m.From)
		fa.first(t, "message", func(ev map[string]any) bool {
			msg, _ := ev["message"].(map[string]any)
			return msg["from"] == rooms.SystemSender && msg["text"] == "maintenance at 22:00"
		})
		d, err := n1.Admin.RoomDetail(ctx, pop, 10)
		require.NoError(t, err)
		require.NotEmpty(t, d.Messages)
		assert.Equal(t, m.ID, d.Messages[len(d.Messages)-1].ID)
		require.Len(t, d.Members, 2)
		assert.Equal(t, "alice", d.Members[0].User)
		assert.True(t, d.Members[0].Online)

		_, err = n2.Admin.SystemSay(ctx, "nowhere-1", "hello?")
		assert.ErrorIs(t, err, rooms.ErrUnknownRoom)
		_, err = n2.Admin.SystemSay(ctx, pop, "")
		assert.ErrorIs(t, err, ErrEmptyText)
	})

	t.Run("a search by prefix finds alice, in either case, with her two connections on n1", func(t *testing.T) {
		var us []UserDetail
		require.Eventually(t, func() bool {
			var err error
			us, err = n2.Admin.SearchUsers(ctx, "AL", 10)
			return err == nil && len(us) == 1 && len(us[0].Connections) == 2
		}, 30*time.Second, 50*time.Millisecond, "alice's connections are listed")
		assert.Equal(t, "alice", us[0].User)
		assert.ElementsMatch(t, []presence.Conn{{ID: ca.ID(), Session: "s-alice-n1", Node: "n1"}, {ID: ca2.ID(), Session: "s-alice-n1", Node: "n1"}}, us[0].Connections)
		assert.Equal(t, []string{"s-alice-n1"}, us[0].Sessions)
		assert.Equal(t, []string{pop}, us[0].Rooms)
		_, err := n2.Admin.SearchUsers(ctx, "a*", 10)
		assert.ErrorIs(t, err, names.ErrBadName)
	})

	t.Run("one connection is disconnected from the other node, then the user", func(t *testing.T) {
		require.NoError(t, n2.Admin.Disconnect(ctx, "alice", "n1", ca.ID(), ""))
		assert.Equal(t, CloseKicked, fa.closeCode(t))
		fa.mu.Lock()
		assert.Equal(t, "disconnected by an admin", fa.reason)
		fa.mu.Unlock()
		assert.False(t, ca2.Closing(), "the other connection stays")

		require.NoError(t, n2.Admin.Disconnect(ctx, "ALICE", "", "", "bye"))
		assert.Equal(t, CloseKicked, fa2.closeCode(t))
		assert.False(t, cb.Closing(), "nobody else is disconnected")
		assert.ErrorIs(t, n2.Admin.Disconnect(ctx, "alice", "n1", "bad id!", ""), ErrBadConnection)
	})
}

// TestNodesReportTheirFigures: each node's heartbeat carries its version,
// start time and process figures, read by any node.
func TestNodesReportTheirFigures(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	n1 := startNode(t, r, "n1", func(c *Config) { c.Version = "v9.8.7" })
	n2 := startNode(t, r, "n2")
	n1.connect(t, "dora")
	var ns []presence.Node
	require.Eventually(t, func() bool {
		var err error
		ns, err = n2.Admin.Nodes(context.Background())
		return err == nil && len(ns) == 2 && ns[0].Connections == 1
	}, 30*time.Second, 100*time.Millisecond, "n1's heartbeat counts dora's connection")
	assert.Equal(t, "n1", ns[0].ID)
	assert.Equal(t, "v9.8.7", ns[0].Version)
	assert.False(t, ns[0].StartedAt.IsZero())
	assert.False(t, ns[0].StartedAt.After(ns[0].LastHeartbeat), "started before its heartbeat")
	assert.Positive(t, ns[0].Goroutines)
	assert.Positive(t, ns[0].MemoryBytes)
	assert.Positive(t, ns[0].HeapBytes)
	assert.GreaterOrEqual(t, ns[0].CPU, 0.0)
	assert.Empty(t, ns[1].Version, "n2 was given no version")
}
