// Package realtimetest drives the realtime core without a network, for the
// tests of the use-case packages built above it (realtime/admin and the
// next ones): a Transport that records what a Client writes, like
// centrifuge's testTransport, and a started Node on a real Redis
// (internal/redistest). The core's own tests keep their fuller fake inside
// package realtime, which cannot import this one.
package realtimetest

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/realtime"
)

// Transport is a Client's Transport in memory.
type Transport struct {
	mu      sync.Mutex
	frames  []map[string]any
	arrived chan struct{}
	closed  chan struct{}
	code    int
	reason  string
	once    sync.Once
}

var _ realtime.Transport = (*Transport)(nil)

// NewTransport returns an open Transport.
func NewTransport() *Transport {
	return &Transport{arrived: make(chan struct{}, 1), closed: make(chan struct{})}
}

// Write records events; an event that is not a JSON object is an error.
func (f *Transport) Write(events [][]byte) error {
	f.mu.Lock()
	for _, e := range events {
		var m map[string]any
		if err := json.Unmarshal(e, &m); err != nil {
			f.mu.Unlock()
			return err
		}
		f.frames = append(f.frames, m)
	}
	f.mu.Unlock()
	select {
	case f.arrived <- struct{}{}:
	default:
	}
	return nil
}

// Ping does nothing.
func (f *Transport) Ping() error { return nil }

// Close records the first close's code and reason.
func (f *Transport) Close(code int, reason string) {
	f.once.Do(func() {
		f.mu.Lock()
		f.code, f.reason = code, reason
		f.mu.Unlock()
		close(f.closed)
	})
}

// First waits up to 20 s for the first frame of type typ for which match
// (nil = any) holds, and returns it; it fails t if none comes.
func (f *Transport) First(t testing.TB, typ string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		f.mu.Lock()
		fs := append([]map[string]any(nil), f.frames...)
		f.mu.Unlock()
		for _, m := range fs {
			if m["type"] == typ && (match == nil || match(m)) {
				return m
			}
		}
		select {
		case <-f.arrived:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %s; got %v", typ, fs)
		}
	}
}

// Closed waits up to 20 s for the transport to be closed and returns the
// close code and reason; it fails t if it is not.
func (f *Transport) Closed(t testing.TB) (code int, reason string) {
	t.Helper()
	select {
	case <-f.closed:
	case <-time.After(20 * time.Second):
		t.Fatal("the transport was not closed")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.code, f.reason
}

// Node is a started realtime.Node, shut down when the test ends.
type Node struct {
	*realtime.Node
	ID string
}

// StartNode starts a node with id on r, with the say rate raised (tests
// send faster than a person).
func StartNode(t testing.TB, r *redistest.Redis, id string) *Node {
	t.Helper()
	n, err := realtime.New(realtime.Config{Redis: r.NewClient(t), Node: id, Prefix: r.Prefix,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	require.NoError(t, n.Start(context.Background()))
	_, err = n.Services.Settings.Set(context.Background(), "rate.messages_per_second", []byte("10000"))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.Shutdown(ctx)
	})
	return &Node{Node: n, ID: id}
}

// Connect opens a client of user (session "s-<user>-<node>") through a
// Transport and waits for its hello; a client closed from elsewhere is
// disconnected, as a transport's reader does.
func (n *Node) Connect(t testing.TB, user string) (*realtime.Client, *Transport) {
	t.Helper()
	f := NewTransport()
	c, err := n.Chat.Connect(realtime.Principal{User: user, Session: "s-" + user + "-" + n.ID}, "", f)
	require.NoError(t, err)
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
func (n *Node) JoinRoom(t testing.TB, c *realtime.Client, f *Transport, lobby string) string {
	t.Helper()
	require.NoError(t, n.Chat.Join(context.Background(), c, lobby))
	j := f.First(t, "joined", func(m map[string]any) bool {
		r, _ := m["room"].(map[string]any)
		return r["lobby"] == lobby
	})
	return j["room"].(map[string]any)["id"].(string)
}
