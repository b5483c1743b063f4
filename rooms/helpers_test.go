package rooms

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// fakeClock is a settable clock shared by the simulated nodes of a test.
type fakeClock struct{ ms atomic.Int64 }

func newClock() *fakeClock {
	c := &fakeClock{}
	c.ms.Store(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).UnixMilli())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.UnixMilli(c.ms.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

// nodes returns n Services on r, each with its own client (a simulated chatd
// node), all sharing cfg and one fresh registry.
func nodes(t testing.TB, r *redistest.Redis, n int, cfg Config) []*Service {
	t.Helper()
	cfg.Prefix = r.Prefix
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	out := make([]*Service, n)
	for i := range out {
		s, err := New(r.NewClient(t), cfg)
		require.NoError(t, err)
		out[i] = s
	}
	return out
}

func fixed(n int) func() int { return func() int { return n } }

// subscribe subscribes to the room's channel and returns its messages.
func subscribe(t *testing.T, rdb redis.UniversalClient, ch string) <-chan *redis.Message {
	t.Helper()
	ctx := context.Background()
	ps := rdb.Subscribe(ctx, ch)
	t.Cleanup(func() { _ = ps.Close() })
	_, err := ps.Receive(ctx) // the subscription confirmation
	require.NoError(t, err)
	return ps.Channel()
}

// nextEvent returns the next event on c, failing after 5s.
func nextEvent(t *testing.T, c <-chan *redis.Message) Event {
	t.Helper()
	select {
	case m := <-c:
		e, err := DecodeEvent([]byte(m.Payload))
		require.NoError(t, err)
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
		return Event{}
	}
}
