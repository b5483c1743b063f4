package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/internal/chatdtest"
)

// These tests run real chatd processes (internal/chatdtest) on a private
// redis-server.

// A say on one node is acked with its id and delivered, with that id, to
// a member connected to another node; typing, read marks, ping and leave
// do what they say; a say to a room the user is not in is not_seated.
func TestSayAckedAndDeliveredAcrossNodes(t *testing.T) {
	skipShort(t)
	cl := chatdtest.Start(t, chatdtest.Options{Nodes: 2})
	ctx := ctxT(t)
	alice := newClient(t, "alice", client.Config{BaseURL: cl.Nodes[0].URL})
	bob := newClient(t, "bob", client.Config{BaseURL: cl.Nodes[1].URL})
	ca, ra := connect(t, alice, client.ConnOptions{})
	cb, rb := connect(t, bob, client.ConnOptions{Unbatched: true})
	assert.Equal(t, "n1", ca.Node())
	assert.Equal(t, "n2", cb.Node())

	room, err := ca.Join(ctx, "general")
	require.NoError(t, err)
	assert.Equal(t, "general-1", room.ID)
	assert.Contains(t, room.Members, "alice")
	room2, err := cb.Join(ctx, "general")
	require.NoError(t, err)
	assert.Equal(t, room.ID, room2.ID)
	ra.waitFor(t, "bob's presence", func(evs []client.Event) bool {
		return has(evs, func(e client.PresenceEvent) bool { return e.User == "bob" && e.State == "joined" })
	})

	id, err := ca.Say(ctx, room.ID, "hello from n1")
	require.NoError(t, err)
	assert.Regexp(t, `^[0-9]{13}-[0-9]{6}$`, id)
	evs := rb.waitFor(t, "alice's message on n2", func(evs []client.Event) bool { return len(messages(evs, room.ID)) == 1 })
	m := messages(evs, room.ID)[0]
	assert.Equal(t, id, m.ID)
	assert.Equal(t, "alice", m.From)
	assert.Equal(t, "hello from n1", m.Text)
	assert.WithinDuration(t, time.Now(), m.TS, time.Minute)
	ra.waitFor(t, "alice's own message", func(evs []client.Event) bool { return len(messages(evs, room.ID)) == 1 })

	require.NoError(t, cb.Typing(ctx, room.ID))
	ra.waitFor(t, "bob typing", func(evs []client.Event) bool {
		return has(evs, func(e client.TypingEvent) bool { return e.User == "bob" && e.Room == room.ID })
	})
	rtt, err := ca.Ping(ctx)
	require.NoError(t, err)
	assert.Greater(t, rtt, time.Duration(0))

	// read marks over the WebSocket feed GET /unread
	_, err = cb.Say(ctx, room.ID, "second")
	require.NoError(t, err)
	unread, err := alice.Unread(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, unread[room.ID])
	require.NoError(t, ca.MarkRead(ctx, room.ID, id))
	unread, err = alice.Unread(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, unread[room.ID])

	// a room the user holds no seat in
	side, err := cb.Join(ctx, "side")
	require.NoError(t, err)
	_, err = ca.Say(ctx, side.ID, "not mine")
	require.Error(t, err)
	assert.True(t, errcode.Is(err, errcode.NotSeated), "%v", err)
	assert.ErrorIs(t, err, client.ErrNotSeated)
	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, side.ID, e.Room)
	assert.Equal(t, "say", e.Op)
	// a typing refusal comes as an event
	require.NoError(t, ca.Typing(ctx, side.ID))
	ra.waitFor(t, "the typing refusal", func(evs []client.Event) bool {
		return has(evs, func(e client.ErrorEvent) bool { return e.Err.Code == errcode.NotSeated && e.Err.Op == "typing" })
	})

	require.NoError(t, ca.Leave(ctx, room.ID))
	assert.Empty(t, ca.Rooms())
	rb.waitFor(t, "alice's leave", func(evs []client.Event) bool {
		return has(evs, func(e client.PresenceEvent) bool { return e.User == "alice" && e.State == "left" })
	})
	for _, r := range []*recorder{ra, rb} {
		assert.False(t, has(r.events(), func(client.BadFrameEvent) bool { return true }), "no undecodable event")
	}
}

// A kick, a ban and a sign-out from another session of the same guest end
// the Conn with ErrKicked, ErrBanned and ErrSessionEnded; a kick with
// ReconnectAfterKick reconnects.
func TestModerationAndSignOutEndTheConn(t *testing.T) {
	skipShort(t)
	cl := chatdtest.Start(t, chatdtest.Options{Nodes: 1})
	ctx := ctxT(t)
	adm := adminOf(t, cl)
	cfg := client.Config{BaseURL: cl.Nodes[0].URL}

	ended := func(t *testing.T, cn *client.Conn, r *recorder, want error) {
		t.Helper()
		select {
		case <-cn.Done():
		case <-time.After(wait):
			t.Fatalf("the Conn did not end; events: %s", describe(r.events()))
		}
		assert.ErrorIs(t, cn.Err(), want)
		r.waitFor(t, "the final disconnect", func(evs []client.Event) bool {
			return has(evs, func(e client.DisconnectedEvent) bool { return e.Final && errors.Is(e.Err, want) })
		})
		_, err := cn.Say(ctx, "general-1", "after the end")
		assert.ErrorIs(t, err, want, "calls after the end fail with its reason")
	}

	t.Run("kick", func(t *testing.T) {
		u := newClient(t, "kicked", cfg)
		cn, r := connect(t, u, client.ConnOptions{})
		require.NoError(t, adm.Kick(ctx, "kicked", "be nice"))
		ended(t, cn, r, client.ErrKicked)
		var ce *client.CloseError
		require.ErrorAs(t, cn.Err(), &ce)
		assert.Equal(t, client.CloseKicked, ce.Reason)
		assert.Equal(t, "be nice", ce.Text)
	})
	t.Run("kick with reconnect", func(t *testing.T) {
		u := newClient(t, "kicked2", cfg)
		cn, r := connect(t, u, client.ConnOptions{ReconnectAfterKick: true})
		room, err := cn.Join(ctx, "kicks")
		require.NoError(t, err)
		require.NoError(t, adm.Kick(ctx, "kicked2", ""))
		r.waitFor(t, "the reconnect after the kick", func(evs []client.Event) bool {
			return has(evs, func(e client.DisconnectedEvent) bool { return !e.Final && errors.Is(e.Err, client.ErrKicked) }) &&
				has(evs, func(e client.JoinedEvent) bool { return e.Resumed && e.Room.ID == room.ID })
		})
		_, err = cn.Say(ctx, room.ID, "back")
		require.NoError(t, err)
	})
	t.Run("ban", func(t *testing.T) {
		u := newClient(t, "banned", cfg)
		cn, r := connect(t, u, client.ConnOptions{})
		until, err := adm.Ban(ctx, "banned", time.Hour, "spam")
		require.NoError(t, err)
		assert.WithinDuration(t, time.Now().Add(time.Hour), until, time.Minute)
		ended(t, cn, r, client.ErrBanned)
		_, err = u.Wallet(ctx)
		assert.ErrorIs(t, err, client.ErrBanned)
		assert.True(t, errcode.Is(err, errcode.Banned))
		_, err = u.Connect(ctx, client.ConnOptions{})
		assert.ErrorIs(t, err, client.ErrBanned, "the open is refused")
		s, err := adm.Moderation(ctx)
		require.NoError(t, err)
		require.Len(t, s.Bans, 1)
		assert.Equal(t, "spam", s.Bans[0].Reason)
		require.NoError(t, adm.Unban(ctx, "banned"))
	})
	t.Run("sign-out", func(t *testing.T) {
		u := newClient(t, "leaver", cfg)
		cn, r := connect(t, u, client.ConnOptions{})
		other, err := u.NewSession(ctx)
		require.NoError(t, err)
		assert.NotEqual(t, u.Token(), other.Token())
		assert.Equal(t, "leaver", other.User())
		require.NoError(t, other.SignOut(ctx))
		ended(t, cn, r, client.ErrSessionEnded)
		_, err = u.Wallet(ctx)
		assert.ErrorIs(t, err, client.ErrBadToken)
		_, err = u.Connect(ctx, client.ConnOptions{})
		assert.ErrorIs(t, err, client.ErrBadToken)
	})
}
