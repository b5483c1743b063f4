package admin_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/names"
	"github.com/chatd/chatd/presence"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/realtime/admin"
	"github.com/chatd/chatd/realtime/realtimetest"
	"github.com/chatd/chatd/rooms"
)

// TestAdminConsoleAcrossTwoNodes: the admin console's reads and actions,
// taken on one node, about users of the other.
func TestAdminConsoleAcrossTwoNodes(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	n1, n2 := realtimetest.StartNode(t, r, "n1"), realtimetest.StartNode(t, r, "n2")
	a1, a2 := n1.Admin, n2.Admin // as chatd composes them (realtime/app)
	ca, fa := n1.Connect(t, "alice")
	ca2, fa2 := n1.Connect(t, "alice")
	cb, fb := n2.Connect(t, "bob")
	cc, fc := n2.Connect(t, "carol")
	pop := n1.JoinRoom(t, ca, fa, "pop")
	require.Equal(t, pop, n2.JoinRoom(t, cb, fb, "pop"))
	quiet := n2.JoinRoom(t, cc, fc, "quiet")

	t.Run("rooms come most populated first", func(t *testing.T) {
		rs, err := a2.RoomsByPopulation(ctx, 10)
		require.NoError(t, err)
		require.Len(t, rs, 2)
		assert.Equal(t, pop, rs[0].ID)
		assert.Equal(t, []string{"alice", "bob"}, rs[0].Members)
		assert.Equal(t, quiet, rs[1].ID)
		rs, err = a2.RoomsByPopulation(ctx, 1)
		require.NoError(t, err)
		assert.Len(t, rs, 1, "limit is honoured")
	})

	t.Run("the system speaks in a room; members on the other node hear it, and it is in the room's detail", func(t *testing.T) {
		m, err := a2.SystemSay(ctx, pop, "maintenance at 22:00")
		require.NoError(t, err)
		assert.Equal(t, rooms.SystemSender, m.From)
		fa.First(t, "message", func(ev map[string]any) bool {
			msg, _ := ev["message"].(map[string]any)
			return msg["from"] == rooms.SystemSender && msg["text"] == "maintenance at 22:00"
		})
		d, err := a1.RoomDetail(ctx, pop, 10)
		require.NoError(t, err)
		require.NotEmpty(t, d.Messages)
		assert.Equal(t, m.ID, d.Messages[len(d.Messages)-1].ID)
		require.Len(t, d.Members, 2)
		assert.Equal(t, "alice", d.Members[0].User)
		assert.True(t, d.Members[0].Online)

		_, err = a2.SystemSay(ctx, "nowhere-1", "hello?")
		assert.ErrorIs(t, err, rooms.ErrUnknownRoom)
		_, err = a2.SystemSay(ctx, pop, "")
		assert.ErrorIs(t, err, realtime.ErrEmptyText)
	})

	t.Run("a search by prefix finds alice, in either case, with her two connections on n1", func(t *testing.T) {
		var us []admin.UserDetail
		require.Eventually(t, func() bool {
			var err error
			us, err = a2.SearchUsers(ctx, "AL", 10)
			return err == nil && len(us) == 1 && len(us[0].Connections) == 2
		}, 30*time.Second, 50*time.Millisecond, "alice's connections are listed")
		assert.Equal(t, "alice", us[0].User)
		assert.ElementsMatch(t, []presence.Conn{{ID: ca.ID(), Session: "s-alice-n1", Node: "n1"}, {ID: ca2.ID(), Session: "s-alice-n1", Node: "n1"}}, us[0].Connections)
		assert.Equal(t, []string{"s-alice-n1"}, us[0].Sessions)
		assert.Equal(t, []string{pop}, us[0].Rooms)
		_, err := a2.SearchUsers(ctx, "a*", 10)
		assert.ErrorIs(t, err, names.ErrBadName)
	})

	t.Run("one connection is disconnected from the other node, then the user", func(t *testing.T) {
		require.NoError(t, a2.Disconnect(ctx, "alice", "n1", ca.ID(), ""))
		code, reason := fa.Closed(t)
		assert.Equal(t, realtime.CloseKicked, code)
		assert.Equal(t, "disconnected by an admin", reason)
		assert.False(t, ca2.Closing(), "the other connection stays")

		require.NoError(t, a2.Disconnect(ctx, "ALICE", "", "", "bye"))
		code, _ = fa2.Closed(t)
		assert.Equal(t, realtime.CloseKicked, code)
		assert.False(t, cb.Closing(), "nobody else is disconnected")
		assert.ErrorIs(t, a2.Disconnect(ctx, "alice", "n1", "bad id!", ""), admin.ErrBadConnection)
	})
}
