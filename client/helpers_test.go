package client_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/chatdtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	chatdtest.Cleanup()
	os.Exit(code)
}

// wait bounds every wait for something the server does: generous, for
// -race on a loaded 2-core machine; only a lost event takes that long.
const wait = 30 * time.Second

// skipShort skips the tests that start chatd processes under -short.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts chatd processes: skipped with -short")
	}
}

// newClient returns a Client of urls, signed in as user ("" = not signed
// in).
func newClient(t *testing.T, user string, cfg client.Config) *client.Client {
	t.Helper()
	c, err := client.New(cfg)
	require.NoError(t, err)
	if user != "" {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		require.NoError(t, c.SignIn(ctx, user))
		require.Equal(t, user, c.User())
	}
	return c
}

// adminOf returns a Client of the cluster's first node with the admin
// token.
func adminOf(t *testing.T, cl *chatdtest.Cluster) *client.Client {
	t.Helper()
	c := newClient(t, "", client.Config{BaseURL: cl.Nodes[0].URL})
	return c.WithToken(cl.AdminToken)
}

// connect opens c's WebSocket, closed when the test ends, and records its
// events.
func connect(t *testing.T, c *client.Client, o client.ConnOptions) (*client.Conn, *recorder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cn, err := c.Connect(ctx, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cn.Close() })
	return cn, record(cn)
}

// recorder collects a Conn's events.
type recorder struct {
	mu     sync.Mutex
	evs    []client.Event
	change chan struct{} // closed and replaced at each event
	closed bool          // Events was closed
}

func record(cn *client.Conn) *recorder {
	r := &recorder{change: make(chan struct{})}
	go func() {
		for ev := range cn.Events() {
			r.mu.Lock()
			r.evs = append(r.evs, ev)
			close(r.change)
			r.change = make(chan struct{})
			r.mu.Unlock()
		}
		r.mu.Lock()
		r.closed = true
		close(r.change)
		r.change = make(chan struct{})
		r.mu.Unlock()
	}()
	return r
}

// events returns a copy of the events so far.
func (r *recorder) events() []client.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.evs)
}

// waitFor waits until ok holds for the events so far, failing after wait
// with what describes what was expected.
func (r *recorder) waitFor(t *testing.T, what string, ok func(evs []client.Event) bool) []client.Event {
	t.Helper()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		evs, ch := slices.Clone(r.evs), r.change
		r.mu.Unlock()
		if ok(evs) {
			return evs
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("no %s within %s; events: %s", what, wait, describe(evs))
			return nil
		}
	}
}

// messages returns the messages of room among evs, in order.
func messages(evs []client.Event, room string) []client.Message {
	var out []client.Message
	for _, ev := range evs {
		if m, ok := ev.(client.MessageEvent); ok && m.Message.Room == room {
			out = append(out, m.Message)
		}
	}
	return out
}

// has reports whether evs holds an event for which ok holds.
func has[E client.Event](evs []client.Event, ok func(E) bool) bool {
	for _, ev := range evs {
		if e, is := ev.(E); is && ok(e) {
			return true
		}
	}
	return false
}

func describe(evs []client.Event) string {
	s := ""
	for i, ev := range evs {
		if i == 60 {
			return s + fmt.Sprintf(" … (%d more)", len(evs)-i)
		}
		s += fmt.Sprintf("\n  %T%+v", ev, ev)
	}
	return s
}

func ids(ms []client.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
	t.Cleanup(cancel)
	return ctx
}
