// Package realtimetest is the one way the tests build a node without a
// network: a started node composed as chatd composes it (realtime/app) on
// a real Redis (internal/redistest), whose clients write through
// testkit's Transport, the in-memory transport of the core's own tests
// (like centrifuge's testTransport). The tests of the core's node, of
// chat, polls, sessions, match and admin use it.
package realtimetest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/realtime/app"
	"github.com/chatd/chatd/realtime/chat"
)

var (
	_ realtime.Transport = (*testkit.Transport)(nil)
	_ realtime.Aborter   = (*testkit.Transport)(nil)
)

// Node is a started node — the realtime core and its use cases, composed
// as chatd composes them (realtime/app) — shut down when the test ends.
type Node struct {
	*app.App
	ID string
}

// StartNode starts a node with id on r (its own Redis client), with the
// say rate raised (tests send faster than a person); each opt changes the
// node's Config first (a clock, a registry, a hook on the client).
func StartNode(t testing.TB, r *redistest.Redis, id string, opts ...func(*realtime.Config)) *Node {
	t.Helper()
	cfg := realtime.Config{Redis: r.NewClient(t), Node: id, Prefix: r.Prefix,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, o := range opts {
		o(&cfg)
	}
	n, err := app.New(cfg)
	require.NoError(t, err)
	require.NoError(t, n.Start(context.Background()))
	_, err = n.Services.Settings.Set(context.Background(), "rate.messages_per_second", []byte("10000"))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.Shutdown(ctx)
	})
	return &Node{App: n, ID: id}
}

// Connect opens a client of user (session "s-<user>-<node>") through a
// testkit.Transport and waits for its hello; a client closed from elsewhere is
// disconnected, as a transport's reader does.
func (n *Node) Connect(t testing.TB, user string) (*realtime.Client, *testkit.Transport) {
	t.Helper()
	return n.ConnectAs(t, realtime.Principal{User: user, Session: "s-" + user + "-" + n.ID})
}

// ConnectAs is Connect for the principal p (a guest's: its Holder and
// Expires set).
func (n *Node) ConnectAs(t testing.TB, p realtime.Principal) (*realtime.Client, *testkit.Transport) {
	t.Helper()
	f := testkit.NewTransport()
	c, err := n.Chat.Connect(p, "", f)
	require.NoError(t, err)
	return n.opened(t, c, f)
}

// OpenStream opens a stream of p through a testkit.Transport, from the
// position after, as web's SSE handler does, and waits for its hello.
func (n *Node) OpenStream(t testing.TB, p realtime.Principal, after chat.Position) (*realtime.Client, *testkit.Transport) {
	t.Helper()
	f := testkit.NewTransport()
	c, err := n.REST.Stream(context.Background(), p, "", f, after)
	require.NoError(t, err)
	return n.opened(t, c, f)
}

// opened waits for c's hello, and disconnects c when it is closed from
// elsewhere, as a transport's reader does.
func (n *Node) opened(t testing.TB, c *realtime.Client, f *testkit.Transport) (*realtime.Client, *testkit.Transport) {
	t.Helper()
	f.First(t, "hello", nil)
	go func() {
		<-c.Finished()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n.Chat.Disconnect(ctx, c)
	}()
	t.Cleanup(func() { c.Close(realtime.CloseNormal, "") })
	return c, f
}

// JoinRoom joins c to lobby and returns the room's id.
func (n *Node) JoinRoom(t testing.TB, c *realtime.Client, f *testkit.Transport, lobby string) string {
	t.Helper()
	require.NoError(t, n.Chat.Join(context.Background(), c, lobby))
	j := f.First(t, "joined", func(m map[string]any) bool {
		r, _ := m["room"].(map[string]any)
		return r["lobby"] == lobby
	})
	return j["room"].(map[string]any)["id"].(string)
}

// Say sends a say of c with ref and waits for its ack; it returns the
// message's id.
func (n *Node) Say(t testing.TB, c *realtime.Client, f *testkit.Transport, room, text, ref string) string {
	t.Helper()
	require.NoError(t, n.Chat.Say(c, room, text, ref))
	a := f.First(t, "ack", func(m map[string]any) bool { return m["ref"] == ref })
	return a["id"].(string)
}

// CloseCode waits until f is closed and returns its close code.
func CloseCode(t testing.TB, f *testkit.Transport) int {
	t.Helper()
	code, _ := f.Closed(t)
	return code
}
