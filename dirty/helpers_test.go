package dirty

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/bus"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testkit"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// node is one simulated chatd node: its own client, Bus and Tracker.
type node struct {
	*Tracker
	rdb redis.UniversalClient
	bus *bus.Bus
}

// nodes starts n nodes on r sharing cfg (Prefix and Node are set here).
func nodes(tb testing.TB, r *redistest.Redis, n int, cfg Config) []*node {
	tb.Helper()
	cfg.Prefix = r.Prefix
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	out := make([]*node, n)
	for i := range out {
		c := cfg
		c.Node = fmt.Sprintf("node-%d", i)
		rdb := r.NewClient(tb)
		b := bus.New(rdb, bus.Config{Node: c.Node, Prefix: r.Prefix, Logger: quiet, CanaryEvery: 200 * time.Millisecond})
		stop := b.Start(context.Background())
		tb.Cleanup(stop)
		t := New(rdb, c)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		require.NoError(tb, t.Start(ctx, b))
		cancel()
		tb.Cleanup(func() { _ = t.Stop(context.Background()) })
		out[i] = &node{Tracker: t, rdb: rdb, bus: b}
	}
	return out
}

func newClock() *testkit.Clock { return testkit.NewClock(time.Now()) }

// waitResult is what a Wait returned.
type waitResult struct {
	m   Mask
	err error
}

// goWait runs Wait in a goroutine and returns its result channel.
func goWait(ctx context.Context, t *Tracker, session string, max time.Duration) <-chan waitResult {
	ch := make(chan waitResult, 1)
	go func() {
		m, err := t.Wait(ctx, session, max)
		ch <- waitResult{m, err}
	}()
	return ch
}

// within returns the result of ch, failing the test when none comes in d.
func within(tb testing.TB, ch <-chan waitResult, d time.Duration, msg string) waitResult {
	tb.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		tb.Fatalf("no result within %v: %s", d, msg)
		return waitResult{}
	}
}

// registered waits until a long poll of session is registered in Redis.
func registered(tb testing.TB, r *redistest.Redis, k keys, session string) {
	tb.Helper()
	require.Eventually(tb, func() bool {
		return r.Client.Exists(context.Background(), k.waiters(session)).Val() == 1
	}, 5*time.Second, time.Millisecond, "the long poll registers")
}
