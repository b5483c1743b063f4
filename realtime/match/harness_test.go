package match

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
)

// This package's tests drive a started core with Chat, Polls and the
// matchmaking use case, composed as realtime/app composes them (which
// these internal tests cannot import), through testkit's Transport.

// fakeTransport is testkit's Transport, with the names these tests use.
type fakeTransport struct{ *testkit.Transport }

func newFake() *fakeTransport { return &fakeTransport{testkit.NewTransport()} }

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

// testNode is a started node: the core, Chat, Polls and Match.
type testNode struct {
	*realtime.Node
	id    string
	Chat  *realtime.Chat
	REST  *realtime.REST
	Reads *realtime.Reads
	Polls *realtime.Polls
	Match *Matchmaking
}

func startNode(t testing.TB, r *redistest.Redis, id string) *testNode {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rdb := r.NewClient(t)
	n, err := realtime.New(realtime.Config{Redis: rdb, Node: id, Prefix: r.Prefix, Logger: log})
	require.NoError(t, err)
	tn := &testNode{Node: n, id: id, Chat: realtime.NewChat(n, nil)}
	tn.Match, err = New(Config{Node: n, Redis: rdb, Prefix: r.Prefix, Logger: log})
	require.NoError(t, err)
	tn.REST, tn.Reads = realtime.NewREST(tn.Chat), realtime.NewReads(tn.Chat)
	tn.Polls = realtime.NewPolls(n, tn.REST, tn.Match)
	ctx := context.Background()
	require.NoError(t, n.Start(ctx))
	require.NoError(t, tn.Chat.Start(ctx))
	require.NoError(t, tn.Match.Start(ctx))
	// tests send faster than a person
	_, err = n.Services.Settings.Set(ctx, "rate.messages_per_second", []byte("10000"))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.Drain(ctx)
		_ = tn.Match.Shutdown(ctx)
		_ = n.Shutdown(ctx)
	})
	return tn
}

// connect opens a client of user on n and waits for its hello; a client
// closed from elsewhere is disconnected, as a transport's reader does.
func (n *testNode) connect(t testing.TB, user string) (*realtime.Client, *fakeTransport) {
	t.Helper()
	f := newFake()
	c, err := n.Chat.Connect(realtime.Principal{User: user, Session: "s-" + user + "-" + n.id}, "", f)
	require.NoError(t, err)
	f.first(t, "hello", nil)
	go func() {
		<-c.Finished()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n.Chat.Disconnect(ctx, c)
	}()
	t.Cleanup(func() { c.Close(realtime.CloseNormal, "") })
	return c, f
}

// say sends a say with ref and waits for its ack; returns the message id.
func (n *testNode) say(t testing.TB, c *realtime.Client, f *fakeTransport, room, text, ref string) string {
	t.Helper()
	require.NoError(t, n.Chat.Say(c, room, text, ref))
	a := f.first(t, "ack", func(m map[string]any) bool { return m["ref"] == ref })
	return a["id"].(string)
}
