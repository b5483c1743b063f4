package bus

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

type recorder struct {
	mu     sync.Mutex
	got    []string
	resubs int
	ch     chan string
}

func newRecorder() *recorder { return &recorder{ch: make(chan string, 1000)} }

func (r *recorder) Receive(_ string, p []byte) {
	r.mu.Lock()
	r.got = append(r.got, string(p))
	r.mu.Unlock()
	r.ch <- string(p)
}

func (r *recorder) Resubscribed() {
	r.mu.Lock()
	r.resubs++
	r.mu.Unlock()
}

func (r *recorder) resubscribes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.resubs
}

func next(t *testing.T, ch chan string) string {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(15 * time.Second): // a loaded CI box (Chromium, -race) stalls for seconds
		t.Fatal("no message within 15s")
		return ""
	}
}

func TestSubscribeReceivesEverythingPublishedAfterIt(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	// The default canary period: this test is about subscriptions, and with
	// a 100 ms period a loaded machine's half-second stall makes the bus
	// replace a healthy connection (staleCanaries), losing what was
	// published meanwhile — which its handlers are told (Resubscribed), but
	// which this test would read as a lost message.
	b := New(r.NewClient(t), Config{Prefix: r.Prefix, Registerer: prometheus.NewRegistry()})
	stop := b.Start(ctx)
	defer stop()

	rec := newRecorder()
	ch := r.Prefix + ":room"
	sub, err := b.Subscribe(ctx, ch, rec)
	require.NoError(t, err)
	for _, m := range []string{"a", "b", "c"} {
		require.NoError(t, r.Client.Publish(ctx, ch, m).Err())
	}
	assert.Equal(t, "a", next(t, rec.ch))
	assert.Equal(t, "b", next(t, rec.ch))
	assert.Equal(t, "c", next(t, rec.ch))
	require.Eventually(t, b.Ready, 5*time.Second, 20*time.Millisecond, "canary comes back")

	t.Run("two handlers share one channel; closing one keeps the other", func(t *testing.T) {
		rec2 := newRecorder()
		sub2, err := b.Subscribe(ctx, ch, rec2)
		require.NoError(t, err)
		require.NoError(t, r.Client.Publish(ctx, ch, "d").Err())
		assert.Equal(t, "d", next(t, rec.ch))
		assert.Equal(t, "d", next(t, rec2.ch))
		require.NoError(t, sub.Close(ctx))
		require.NoError(t, r.Client.Publish(ctx, ch, "e").Err())
		assert.Equal(t, "e", next(t, rec2.ch))
		require.NoError(t, sub2.Close(ctx))
		require.Eventually(t, func() bool {
			n, _ := r.Client.PubSubNumSub(ctx, ch).Result()
			return n[ch] == 0
		}, 5*time.Second, 20*time.Millisecond, "last close unsubscribes in Redis")
	})

	t.Run("close then subscribe again quickly stays subscribed", func(t *testing.T) {
		for i := 0; i < 20; i++ {
			s, err := b.Subscribe(ctx, ch, newRecorder())
			require.NoError(t, err)
			require.NoError(t, s.Close(ctx))
		}
		rec3 := newRecorder()
		_, err := b.Subscribe(ctx, ch, rec3)
		require.NoError(t, err)
		require.NoError(t, r.Client.Publish(ctx, ch, "f").Err())
		assert.Equal(t, "f", next(t, rec3.ch))
	})
}

func TestKilledConnectionResubscribesAndTellsHandlers(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	c := r.NewClient(t)
	b := New(c, Config{Prefix: r.Prefix, Node: "n1", CanaryEvery: 100 * time.Millisecond})
	stop := b.Start(ctx)
	defer stop()

	rec := newRecorder()
	ch := r.Prefix + ":room"
	_, err := b.Subscribe(ctx, ch, rec)
	require.NoError(t, err)

	// Kill only this bus's pub/sub connection: find it by its subscription.
	var killed int64
	require.Eventually(t, func() bool {
		clients, err := r.Client.ClientList(ctx).Result()
		require.NoError(t, err)
		for _, line := range splitLines(clients) {
			if contains(line, "sub=2") && contains(line, "cmd=subscribe") {
				id := field(line, "id")
				n, err := r.Client.Do(ctx, "CLIENT", "KILL", "ID", id).Int64()
				if err == nil {
					killed += n
				}
			}
		}
		return killed > 0
	}, 5*time.Second, 50*time.Millisecond)

	require.Eventually(t, func() bool { return rec.resubscribes() == 1 }, 10*time.Second, 20*time.Millisecond,
		"the handler is told its channel was resubscribed")
	require.NoError(t, r.Client.Publish(ctx, ch, "after").Err())
	assert.Equal(t, "after", next(t, rec.ch))
	require.Eventually(t, b.Ready, 5*time.Second, 20*time.Millisecond)
}

func TestRedisRestartIsSurvived(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	ctx := context.Background()
	b := New(r.NewClient(t), Config{Prefix: r.Prefix, CanaryEvery: 100 * time.Millisecond})
	stop := b.Start(ctx)
	defer stop()
	rec := newRecorder()
	ch := r.Prefix + ":room"
	_, err := b.Subscribe(ctx, ch, rec)
	require.NoError(t, err)
	require.Eventually(t, b.Ready, 5*time.Second, 20*time.Millisecond)

	r.Server.Kill(t)
	require.Eventually(t, func() bool { return !b.Ready() }, 5*time.Second, 20*time.Millisecond, "not ready while Redis is down")
	r.Server.Start(t)
	require.Eventually(t, func() bool { return rec.resubscribes() >= 1 }, 15*time.Second, 20*time.Millisecond)
	require.Eventually(t, b.Ready, 10*time.Second, 20*time.Millisecond, "ready again")
	require.NoError(t, r.Client.Publish(ctx, ch, "back").Err())
	assert.Equal(t, "back", next(t, rec.ch))
}

func TestClusterPubSub(t *testing.T) {
	t.Parallel()
	r := redistest.Cluster(t)
	ctx := context.Background()
	b := New(r.NewClient(t), Config{Prefix: r.Prefix, CanaryEvery: 100 * time.Millisecond})
	stop := b.Start(ctx)
	defer stop()
	// channels whose names hash to all three masters all arrive on one connection
	recs := map[string]*recorder{}
	for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
		rec := newRecorder()
		ch := r.Prefix + ":{room:" + name + "}:events"
		_, err := b.Subscribe(ctx, ch, rec)
		require.NoError(t, err)
		recs[ch] = rec
	}
	pub := r.NewClient(t)
	for ch := range recs {
		require.NoError(t, pub.Publish(ctx, ch, ch).Err())
	}
	for ch, rec := range recs {
		assert.Equal(t, ch, next(t, rec.ch))
	}
	require.Eventually(t, b.Ready, 5*time.Second, 20*time.Millisecond)
}

func TestSubscribeAfterRunEndsFails(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	b := New(r.NewClient(t), Config{Prefix: r.Prefix})
	stop := b.Start(context.Background())
	stop()
	_, err := b.Subscribe(context.Background(), "x", newRecorder())
	assert.ErrorIs(t, err, ErrClosed)
}
