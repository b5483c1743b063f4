package realtime

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// The realtime core is tested here without a network transport: a
// fakeTransport records what a Client writes, like centrifuge's
// testTransport. Redis is real (internal/redistest): the core's rules are
// about what Redis holds.

// fakeTransport is a Client's Transport in memory. Write can be made to
// block (a peer that stops reading).
type fakeTransport struct {
	mu      sync.Mutex
	frames  []map[string]any
	raw     int // bytes written
	arrived chan struct{}
	closed  chan struct{}
	code    int
	reason  string
	stuck   chan struct{} // non-nil: Write blocks until it is closed or the transport aborts
	aborted chan struct{}
	once    sync.Once
}

func newFake() *fakeTransport {
	return &fakeTransport{arrived: make(chan struct{}, 1), closed: make(chan struct{}), aborted: make(chan struct{})}
}

func (f *fakeTransport) Write(events [][]byte) error {
	f.mu.Lock()
	stuck := f.stuck
	f.mu.Unlock()
	if stuck != nil {
		select {
		case <-stuck:
		case <-f.aborted:
			return timeoutErr{}
		}
	}
	f.mu.Lock()
	for _, e := range events {
		var m map[string]any
		if err := json.Unmarshal(e, &m); err != nil {
			panic(fmt.Sprintf("the core wrote a frame that is not JSON: %q", e))
		}
		f.frames = append(f.frames, m)
		f.raw += len(e)
	}
	f.mu.Unlock()
	select {
	case f.arrived <- struct{}{}:
	default:
	}
	return nil
}

func (f *fakeTransport) Ping() error { return nil }

func (f *fakeTransport) Close(code int, reason string) {
	f.once.Do(func() {
		f.mu.Lock()
		f.code, f.reason = code, reason
		f.mu.Unlock()
		close(f.closed)
	})
}

func (f *fakeTransport) Abort() {
	select {
	case <-f.aborted:
	default:
		close(f.aborted)
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string { return "write timeout" }
func (timeoutErr) Timeout() bool { return true }

// block makes Write block until unblock.
func (f *fakeTransport) block() {
	f.mu.Lock()
	f.stuck = make(chan struct{})
	f.mu.Unlock()
}

// all returns a copy of every frame so far.
func (f *fakeTransport) all() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.frames...)
}

// wait waits until pred holds for the frames so far, or fails.
func (f *fakeTransport) wait(t testing.TB, what string, pred func([]map[string]any) bool) []map[string]any {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		fs := f.all()
		if pred(fs) {
			return fs
		}
		select {
		case <-f.arrived:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %s; got %v", what, fs)
		}
	}
}

// next waits for the first frame of type typ after the first skip frames.
func (f *fakeTransport) first(t testing.TB, typ string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	var got map[string]any
	f.wait(t, typ, func(fs []map[string]any) bool {
		for _, m := range fs {
			if m["type"] == typ && (match == nil || match(m)) {
				got = m
				return true
			}
		}
		return false
	})
	return got
}

// messages returns the ids of the message frames of room, in order.
func (f *fakeTransport) messages(room string) []string {
	var ids []string
	for _, m := range f.all() {
		if m["type"] != "message" {
			continue
		}
		msg, _ := m["message"].(map[string]any)
		if msg["room"] == room {
			ids = append(ids, msg["id"].(string))
		}
	}
	return ids
}

func (f *fakeTransport) closeCode(t testing.TB) int {
	t.Helper()
	select {
	case <-f.closed:
	case <-time.After(20 * time.Second):
		t.Fatal("the transport was not closed")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.code
}

// testNode is a started Node on its own Redis client.
type testNode struct {
	*Node
	rdb redis.UniversalClient
}

func startNode(t testing.TB, r *redistest.Redis, id string, cfg ...func(*Config)) *testNode {
	t.Helper()
	rdb := r.NewClient(t)
	c := Config{Redis: rdb, Node: id, Prefix: r.Prefix, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, f := range cfg {
		f(&c)
	}
	n, err := New(c)
	require.NoError(t, err)
	require.NoError(t, n.Start(context.Background()))
	// tests send faster than a person: the default say rate would refuse
	_, err = n.Services.Settings.Set(context.Background(), "rate.messages_per_second", []byte("10000"))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.Shutdown(ctx)
	})
	return &testNode{Node: n, rdb: rdb}
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
