package realtime

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/bus"
	"github.com/chatd/chatd/rooms"
)

// testHub is a Hub whose rooms' bus handlers the test calls itself.
type testHub struct {
	*Hub
	env      *clientEnv
	mu       sync.Mutex
	handlers map[string]bus.Handler // room → its channel's handler
}

func newTestHub(tb testing.TB) *testHub {
	g := newGroup()
	tb.Cleanup(func() { _ = g.Stop(context.Background()) })
	m := newMetrics(prometheus.NewRegistry())
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	th := &testHub{handlers: map[string]bus.Handler{}}
	th.Hub = newHub(hubDeps{
		subscribe: func(_ context.Context, channel string, h bus.Handler) (*bus.Subscription, error) {
			th.mu.Lock()
			th.handlers[channel] = h
			th.mu.Unlock()
			return nil, nil
		},
		channel: func(room string) string { return room },
		read: func(string) ReadFunc {
			return func(context.Context, string, int) ([]rooms.Message, error) { return nil, nil }
		},
		run: g.Go, m: m, log: log,
	})
	th.env = &clientEnv{m: m, clock: newCoarseClock(time.Now), log: log, run: g.Go}
	return th
}

// join adds a member to room whose feed delivers to deliver (nil: the
// member's client, writing to t, as Enter makes it) and returns its client.
func (th *testHub) join(tb testing.TB, room, user string, t Transport, deliver DeliverFunc) *Client {
	if t == nil {
		t = countingTransport{new(atomic.Int64)}
	}
	c := newClient(th.env, t, Principal{User: user}, user)
	tb.Cleanup(func() { c.ping.Stop() })
	if deliver == nil {
		deliver = c.deliverMessage
	}
	f := NewFeed("", deliver)
	since, err := th.addToRoom(context.Background(), room, c, f)
	require.NoError(tb, err)
	f.StartAt(since)
	return c
}

func (th *testHub) publish(room string, seq int) {
	th.mu.Lock()
	h := th.handlers[room]
	th.mu.Unlock()
	h.Receive(room, fmt.Appendf(nil, `{"type":"message","message":{"id":"1764504000123-%06d","room":%q}}`, seq, room))
}

func TestFanOutASlowRoomDoesNotHoldUpRoomsOnOtherWorkers(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one fan-out worker with GOMAXPROCS 1")
	}
	th := newTestHub(t)
	// two rooms on different workers
	slow := "slow-1"
	var fast string
	for i := 1; fast == ""; i++ {
		r := fmt.Sprintf("fast-%d", i)
		n := uint64(runtime.GOMAXPROCS(0))
		if th.fanWorker(r)%n != th.fanWorker(slow)%n {
			fast = r
		}
	}
	release := make(chan struct{})
	defer close(release)
	stuck := make(chan struct{})
	th.join(t, slow, "ann", nil, func(string, []byte) { close(stuck); <-release })
	got := make(chan string, 1)
	th.join(t, fast, "bob", nil, func(id string, _ []byte) { got <- id })

	bus := make(chan int, 2) // the bus goroutine, fed in order
	go func() {
		for room := range bus {
			th.publish([]string{slow, fast}[room], 1)
		}
	}()
	defer close(bus)
	bus <- 0
	<-stuck // ann's delivery holds the slow room's fan-out
	bus <- 1
	select {
	case id := <-got:
		assert.Equal(t, "1764504000123-000001", id)
	case <-time.After(5 * time.Second):
		t.Fatal("a room's message waited for another room's fan-out")
	}
}

func TestFanOutKeepsEachRoomsOrder(t *testing.T) {
	th := newTestHub(t)
	const nRooms, msgs = 8, 500
	var mu sync.Mutex
	got := map[string][]string{}
	for r := range nRooms {
		room := fmt.Sprintf("order-%d", r+1)
		for i := range 3 {
			user := fmt.Sprintf("%s-u%d", room, i)
			th.join(t, room, user, nil, func(id string, _ []byte) {
				mu.Lock()
				got[user] = append(got[user], id)
				mu.Unlock()
			})
		}
	}
	for k := 1; k <= msgs; k++ {
		for r := range nRooms {
			th.publish(fmt.Sprintf("order-%d", r+1), k)
		}
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, ids := range got {
			if len(ids) < msgs {
				return false
			}
		}
		return len(got) == nRooms*3
	}, 10*time.Second, 10*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	for user, ids := range got {
		require.Len(t, ids, msgs, user)
		for k, id := range ids {
			require.Equal(t, fmt.Sprintf("1764504000123-%06d", k+1), id, "%s: every message once, in order", user)
		}
	}
}
