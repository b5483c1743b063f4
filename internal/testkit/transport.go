package testkit

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Transport is a realtime Client's Transport in memory (realtime.Transport
// and realtime.Aborter), like centrifuge's testTransport: it records each
// event a Client writes, decoded, and the close. Write can be made to
// block (Block: a peer that stops reading) until the transport is aborted.
// The realtime core's tests and the use-case packages' tests
// (realtime/realtimetest) speak through it.
type Transport struct {
	mu      sync.Mutex
	frames  []map[string]any
	arrived chan struct{}
	closed  chan struct{}
	code    int
	reason  string
	stuck   chan struct{} // non-nil: Write blocks until the transport aborts
	aborted chan struct{}
	once    sync.Once
}

// NewTransport returns an open Transport.
func NewTransport() *Transport {
	return &Transport{arrived: make(chan struct{}, 1), closed: make(chan struct{}), aborted: make(chan struct{})}
}

// Write records events, each a JSON object (it panics on one that is not:
// the core wrote a broken frame); after Block it waits for Abort and
// returns a timeout.
func (f *Transport) Write(events [][]byte) error {
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

// Abort cuts a blocked Write short.
func (f *Transport) Abort() {
	select {
	case <-f.aborted:
	default:
		close(f.aborted)
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string { return "write timeout" }
func (timeoutErr) Timeout() bool { return true }

// Block makes every later Write block until Abort.
func (f *Transport) Block() {
	f.mu.Lock()
	f.stuck = make(chan struct{})
	f.mu.Unlock()
}

// All returns a copy of every event so far.
func (f *Transport) All() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.frames...)
}

// Wait waits up to 20 s until pred holds for the events so far and
// returns them; it fails t (naming what) if pred never holds.
func (f *Transport) Wait(t testing.TB, what string, pred func([]map[string]any) bool) []map[string]any {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		fs := f.All()
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

// First waits for the first event of type typ for which match (nil = any)
// holds, and returns it.
func (f *Transport) First(t testing.TB, typ string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	var got map[string]any
	f.Wait(t, typ, func(fs []map[string]any) bool {
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

// Messages returns the ids of the message events of room, in order.
func (f *Transport) Messages(room string) []string {
	var ids []string
	for _, m := range f.All() {
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
