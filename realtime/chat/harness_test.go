package chat

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/matchmaking"
)

// The realtime core is tested here without a network transport: a
// fakeTransport records what a Client writes, like centrifuge's
// testTransport. Redis is real (internal/redistest): the core's rules are
// about what Redis holds.

// fakeTransport is testkit's Transport, with the names these tests use.
type fakeTransport struct{ *testkit.Transport }

func newFake() *fakeTransport { return &fakeTransport{testkit.NewTransport()} }

func (f *fakeTransport) block()                        { f.Block() }
func (f *fakeTransport) all() []map[string]any         { return f.All() }
func (f *fakeTransport) messages(room string) []string { return f.Messages(room) }

func (f *fakeTransport) wait(t testing.TB, what string, pred func([]map[string]any) bool) []map[string]any {
	t.Helper()
	return f.Wait(t, what, pred)
}

func (f *fakeTransport) first(t testing.TB, typ string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	return f.First(t, typ, match)
}

func (f *fakeTransport) closeCode(t testing.TB) int {
	t.Helper()
	code, _ := f.Closed(t)
	return code
}

// testNode is a started Node on its own Redis client.
type testNode struct {
	*Node
	Chat  *Chat
	REST  *REST
	Reads *Reads
	Polls *Polls
	rdb   redis.UniversalClient
}

func startNode(t testing.TB, r *redistest.Redis, id string, cfg ...func(*Config)) *testNode {
	t.Helper()
	rdb := r.NewClient(t)
	c := Config{Redis: rdb, Node: id, Prefix: r.Prefix, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, f := range cfg {
		f(&c)
	}
	// composed and started as realtime/app does (which this package's
	// tests cannot import)
	n, err := New(c)
	require.NoError(t, err)
	tn := &testNode{Node: n, rdb: rdb}
	tn.Chat = NewChat(n, nil) // no connection leases (package sessions tests them)
	// the poll's match section reads the matchmaking events (package
	// match's tests run its use case)
	tn.REST, tn.Reads = NewREST(tn.Chat), NewReads(tn.Chat)
	tn.Polls = NewPolls(n, tn.REST, matchmaking.New(rdb, matchmaking.Config{Prefix: r.Prefix}))
	require.NoError(t, n.Start(context.Background()))
	require.NoError(t, tn.Chat.Start(context.Background()))
	// tests send faster than a person: the default say rate would refuse
	_, err = n.Services.Settings.Set(context.Background(), "rate.messages_per_second", []byte("10000"))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.Shutdown(ctx)
	})
	return tn
}

// connect opens a client of user on n through a fake transport and waits
// for its hello.
func (n *testNode) connect(t testing.TB, user string) (*Client, *fakeTransport) {
	t.Helper()
	f := newFake()
	c, err := n.Chat.Connect(Principal{User: user, Session: "s-" + user + "-" + n.cfg.Node}, "", f)
	require.NoError(t, err)
	f.first(t, "hello", nil)
	// as the transport's reader does: when the client is closed (a kick,
	// the drain, a slow reader), it is disconnected
	go func() {
		<-c.Finished()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n.Chat.Disconnect(ctx, c)
	}()
	t.Cleanup(func() { c.Close(CloseNormal, "") })
	return c, f
}

// joinRoom joins lobby and returns the room id.
func (n *testNode) joinRoom(t testing.TB, c *Client, f *fakeTransport, lobby string) string {
	t.Helper()
	require.NoError(t, n.Chat.Join(context.Background(), c, lobby))
	j := f.first(t, "joined", func(m map[string]any) bool {
		r, _ := m["room"].(map[string]any)
		return r["lobby"] == lobby
	})
	return j["room"].(map[string]any)["id"].(string)
}

// say sends a say with ref and waits for its ack; returns the message id.
func (n *testNode) say(t testing.TB, c *Client, f *fakeTransport, room, text, ref string) string {
	t.Helper()
	require.NoError(t, n.Chat.Say(c, room, text, ref))
	a := f.first(t, "ack", func(m map[string]any) bool { return m["ref"] == ref })
	return a["id"].(string)
}
