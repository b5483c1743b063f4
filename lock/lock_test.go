package lock

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/names"
)

// backends are the Redis deployments the core flows run on: the test
// server (real when redis-server is on PATH, else embedded miniredis) and
// the 3-master cluster.
var backends = []struct {
	name string
	get  func(testing.TB) *redistest.Redis
}{
	{"server", redistest.New},
	{"cluster", redistest.Cluster},
}

func forEachBackend(t *testing.T, fn func(t *testing.T, r *redistest.Redis)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			fn(t, b.get(t))
		})
	}
}

func newTestClient(r *redistest.Redis, rdb redis.UniversalClient) *Client {
	if rdb == nil {
		rdb = r.Client
	}
	return New(rdb, Config{Prefix: r.Prefix, Registerer: prometheus.NewRegistry()})
}

func TestAcquireRelease(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, r *redistest.Redis) {
		ctx := context.Background()
		c := newTestClient(r, nil)
		lockKey, fenceKey := c.Keys("lobby:general")

		l, err := c.Acquire(ctx, "lobby:general", time.Minute, nil)
		require.NoError(t, err)
		assert.Equal(t, "lobby:general", l.Name())
		assert.Len(t, l.Token(), 32, "128 bits in hex")
		assert.Equal(t, int64(1), l.Fence(), "first fence")
		assert.Equal(t, l.Token(), r.Client.Get(ctx, lockKey).Val(), "the lock key holds the token")
		assert.Equal(t, "1", r.Client.Get(ctx, fenceKey).Val())
		assert.Equal(t, time.Duration(-1), r.Client.TTL(ctx, fenceKey).Val(), "the fence never expires")
		ttl, err := l.TTL(ctx)
		require.NoError(t, err)
		assert.Greater(t, ttl, time.Duration(0))
		assert.LessOrEqual(t, ttl, time.Minute)

		t.Run("another owner is refused", func(t *testing.T) {
			other := newTestClient(r, r.NewClient(t))
			_, err := other.TryAcquire(ctx, "lobby:general", time.Minute)
			assert.ErrorIs(t, err, ErrNotObtained)
			assert.ErrorContains(t, err, "lobby:general")
			// a wait long enough for a loaded CI machine's cluster to answer
			// (300 ms was not, once)
			_, err = other.Acquire(ctx, "lobby:general", time.Minute, &Options{Wait: 2 * time.Second})
			assert.ErrorIs(t, err, ErrNotObtained)
		})
		t.Run("other names are independent", func(t *testing.T) {
			l2, err := c.TryAcquire(ctx, "lobby:other", time.Minute)
			require.NoError(t, err)
			assert.Equal(t, int64(1), l2.Fence())
			assert.NoError(t, l2.Release(ctx))
		})

		require.NoError(t, l.Refresh(ctx, 2*time.Minute))
		assert.Greater(t, r.Client.PTTL(ctx, lockKey).Val(), time.Minute, "refresh set the new ttl")
		require.NoError(t, l.Release(ctx))
		assert.Equal(t, int64(0), r.Client.Exists(ctx, lockKey).Val(), "released")
		assert.ErrorIs(t, l.Release(ctx), ErrNotHeld, "a second release")
		assert.ErrorIs(t, l.Refresh(ctx, time.Minute), ErrNotHeld, "refresh after release")
		ttl, err = l.TTL(ctx)
		require.NoError(t, err)
		assert.Zero(t, ttl)

		l3, err := c.TryAcquire(ctx, "lobby:general", time.Minute)
		require.NoError(t, err)
		assert.Equal(t, int64(2), l3.Fence(), "fences grow")
		require.NoError(t, l3.Release(ctx))
		select {
		case <-l.Lost():
			t.Error("a released lock is not lost")
		default:
		}
	})
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	c := newTestClient(r, nil)
	ctx := context.Background()

	_, err := c.Acquire(ctx, "lobby:a}{b", time.Second, nil)
	assert.ErrorIs(t, err, names.ErrBadName)
	_, err = c.TryAcquire(ctx, "nokind", time.Second)
	assert.ErrorIs(t, err, names.ErrBadName)
	_, err = c.Acquire(ctx, "lobby:a", time.Microsecond, nil)
	assert.ErrorContains(t, err, "below 1ms")
	assert.ErrorIs(t, c.FencedHSet(ctx, "lobby", 1, "k", "f", "v"), names.ErrBadName)
}

// TestMutualExclusion runs a non-atomic read-sleep-write increment under the
// lock from 3 nodes (each its own Redis client) × 8 goroutines: without
// exclusion, increments would be lost.
func TestMutualExclusion(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, r *redistest.Redis) {
		const nodes, workers, total = 3, 8, 300
		ctx := context.Background()
		counter := keyspace.New(r.Prefix).Key("lobby", "mx", "counter")
		var tickets atomic.Int64
		tickets.Store(total)
		var maxFence atomic.Int64
		var wg sync.WaitGroup
		for n := 0; n < nodes; n++ {
			c := newTestClient(r, r.NewClient(t))
			for w := 0; w < workers; w++ {
				wg.Go(func() {
					for tickets.Add(-1) >= 0 {
						err := c.Do(ctx, "lobby:mx", 10*time.Second, &Options{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond},
							func(ctx context.Context, l *Lock) error {
								v, err := r.Client.Get(ctx, counter).Int64()
								if err != nil && !errors.Is(err, redis.Nil) {
									return err
								}
								time.Sleep(100 * time.Microsecond) // widen the race window
								maxFence.Store(max(maxFence.Load(), l.Fence()))
								return r.Client.Set(ctx, counter, v+1, 0).Err()
							})
						if !assert.NoError(t, err) {
							return
						}
					}
				})
			}
		}
		wg.Wait()
		assert.Equal(t, strconv.Itoa(total), r.Client.Get(ctx, counter).Val())
		assert.Equal(t, int64(total), maxFence.Load(), "one fence per acquisition")
	})
}

// TestExpiredHolder: a holder that stops refreshing loses the lock after its
// ttl; its late Release and fenced write are refused.
func TestExpiredHolder(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, r *redistest.Redis) {
		ctx := context.Background()
		reg := prometheus.NewRegistry()
		a := New(r.Client, Config{Prefix: r.Prefix, Registerer: reg})
		b := New(r.NewClient(t), Config{Prefix: r.Prefix, Registerer: reg})
		lockKey, _ := a.Keys("lobby:exp")
		room := keyspace.New(r.Prefix).Key("lobby", "exp", "room")

		old, err := a.Acquire(ctx, "lobby:exp", 100*time.Millisecond, nil)
		require.NoError(t, err)
		require.NoError(t, a.FencedHSet(ctx, "lobby:exp", old.Fence(), room, "owner", "a"))

		// b waits until a's lock expires.
		cur, err := b.Acquire(ctx, "lobby:exp", time.Minute, &Options{Wait: 30 * time.Second})
		require.NoError(t, err)
		assert.Greater(t, cur.Fence(), old.Fence())

		assert.ErrorIs(t, old.Release(ctx), ErrNotHeld, "the late release")
		assert.Equal(t, cur.Token(), r.Client.Get(ctx, lockKey).Val(), "the new holder's lock stays")
		assert.ErrorIs(t, old.Refresh(ctx, time.Minute), ErrNotHeld)
		select {
		case <-old.Lost():
		default:
			t.Error("Lost is closed once the lock is found gone")
		}

		err = a.FencedHSet(ctx, "lobby:exp", old.Fence(), room, "owner", "a-late")
		assert.ErrorIs(t, err, ErrFenceStale, "the stale holder's write is refused")
		require.NoError(t, b.FencedHSet(ctx, "lobby:exp", cur.Fence(), room, map[string]any{"owner": "b", "seq": 2}))
		assert.Equal(t, map[string]string{"owner": "b", "seq": "2"}, r.Client.HGetAll(ctx, room).Val())

		require.NoError(t, cur.Release(ctx))
		assert.Equal(t, 1.0, counter(t, reg, "chatd_lock_expired_total"))
	})
}

func TestFencedHSet(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	c := newTestClient(r, nil)
	ks := keyspace.New(r.Prefix)
	l, err := c.Acquire(ctx, "lobby:f", time.Minute, nil)
	require.NoError(t, err)
	defer l.Release(ctx)

	t.Run("a key of another unit is refused", func(t *testing.T) {
		err := c.FencedHSet(ctx, "lobby:f", l.Fence(), ks.Key("lobby", "g", "room"), "a", 1)
		assert.ErrorIs(t, err, ErrKeyNotInUnit)
		err = c.FencedHSet(ctx, "lobby:f", l.Fence(), ks.Global("room"), "a", 1)
		assert.ErrorIs(t, err, ErrKeyNotInUnit)
	})
	t.Run("odd values are refused", func(t *testing.T) {
		assert.Error(t, c.FencedHSet(ctx, "lobby:f", l.Fence(), ks.Key("lobby", "f", "room"), "a"))
		assert.Error(t, c.FencedHSet(ctx, "lobby:f", l.Fence(), ks.Key("lobby", "f", "room")))
	})
	t.Run("pairs and maps are written", func(t *testing.T) {
		key := ks.Key("lobby", "f", "room")
		require.NoError(t, c.FencedHSet(ctx, "lobby:f", l.Fence(), key, "a", 1, "b", "x"))
		require.NoError(t, c.FencedHSet(ctx, "lobby:f", l.Fence(), key, map[string]string{"c": "y"}))
		assert.Equal(t, map[string]string{"a": "1", "b": "x", "c": "y"}, r.Client.HGetAll(ctx, key).Val())
	})
	t.Run("an older fence is stale", func(t *testing.T) {
		key := ks.Key("lobby", "f", "other")
		assert.ErrorIs(t, c.FencedHSet(ctx, "lobby:f", l.Fence()-1, key, "a", 1), ErrFenceStale)
		assert.ErrorIs(t, c.FencedHSet(ctx, "lobby:never", 1, ks.Key("lobby", "never", "x"), "a", 1), ErrFenceStale, "no fence issued yet")
		assert.Equal(t, int64(0), r.Client.Exists(ctx, key).Val(), "nothing written")
	})
}

// TestFenceCheckLua composes the exported guard into a script of the
// caller's own, as rooms does for room creation.
func TestFenceCheckLua(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, r *redistest.Redis) {
		ctx := context.Background()
		c := newTestClient(r, nil)
		ks := keyspace.New(r.Prefix)
		create := redis.NewScript(FenceCheckLua + `
if not fence_is_current(KEYS[1], ARGV[1]) then return -1 end
redis.call('SET', KEYS[2], ARGV[2])
return redis.call('INCR', KEYS[3])`)
		_, fenceKey := c.Keys("lobby:s")
		keys := []string{fenceKey, ks.Key("lobby", "s", "room"), ks.Key("lobby", "s", "seq")}

		l1, err := c.TryAcquire(ctx, "lobby:s", time.Minute)
		require.NoError(t, err)
		n, err := create.Run(ctx, r.Client, keys, l1.Fence(), "by-1").Int()
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		require.NoError(t, l1.Release(ctx))

		l2, err := c.TryAcquire(ctx, "lobby:s", time.Minute)
		require.NoError(t, err)
		defer l2.Release(ctx)
		n, err = create.Run(ctx, r.Client, keys, l1.Fence(), "by-1-late").Int()
		require.NoError(t, err)
		assert.Equal(t, -1, n, "the old fence is refused")
		assert.Equal(t, "by-1", r.Client.Get(ctx, keys[1]).Val())
	})
}

func TestAcquireStops(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	reg := prometheus.NewRegistry()
	c := New(r.Client, Config{Prefix: r.Prefix, Registerer: reg})
	ctx := context.Background()
	holder, err := c.Acquire(ctx, "lobby:busy", time.Hour, nil)
	require.NoError(t, err)
	defer holder.Release(ctx)

	t.Run("the wait limit returns ErrNotObtained", func(t *testing.T) {
		// a wait long enough for Redis to answer at least once on a loaded
		// machine: with no answer at all the error is "no answer from
		// redis", not ErrNotObtained
		_, err := c.Acquire(ctx, "lobby:busy", time.Minute, &Options{Wait: 2 * time.Second})
		assert.ErrorIs(t, err, ErrNotObtained)
		assert.ErrorContains(t, err, "lobby:busy")
	})
	t.Run("a context deadline returns its error", func(t *testing.T) {
		dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, err := c.Acquire(dctx, "lobby:busy", time.Minute, nil)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.NotErrorIs(t, err, ErrNotObtained)
	})
	t.Run("a canceled context returns context.Canceled", func(t *testing.T) {
		before := counter(t, reg, "chatd_lock_contended_total")
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := c.Acquire(cctx, "lobby:busy", time.Minute, &Options{MinBackoff: time.Hour, MaxBackoff: time.Hour})
			done <- err
		}()
		// Cancel once the waiter has found the lock held and is backing off
		// (for an hour).
		require.Eventually(t, func() bool { return counter(t, reg, "chatd_lock_contended_total") > before }, 10*time.Second, time.Millisecond)
		cancel()
		select {
		case err := <-done:
			assert.ErrorIs(t, err, context.Canceled)
		case <-time.After(30 * time.Second):
			t.Fatal("Acquire kept waiting after its context was canceled")
		}
	})
	t.Run("an ended context fails before trying", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := c.TryAcquire(cctx, "lobby:free", time.Minute)
		assert.ErrorIs(t, err, context.Canceled)
	})
	assert.Greater(t, histogramCount(t, reg, "chatd_lock_wait_seconds", "not_obtained"), uint64(0))
	assert.Greater(t, histogramCount(t, reg, "chatd_lock_wait_seconds", "canceled"), uint64(0))
}

// TestPausedRedis SIGSTOPs the server: calls must fail with ErrNoAnswer at
// their bound instead of waiting out the client's timeouts, both on a client
// that ignores context deadlines (the calls run on goroutines the lock
// abandons) and on one with ContextTimeoutEnabled (go-redis stops them).
func TestPausedRedis(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	ctx := context.Background()
	type node struct {
		name string
		c    *Client
		held *Lock
	}
	var nodes []*node
	for _, cte := range []bool{false, true} {
		// A minute per try, retried: only the lock's own bound can end the
		// calls within the test's time.
		rdb := redis.NewClient(&redis.Options{Addr: r.Addrs[0], ReadTimeout: time.Minute, WriteTimeout: time.Minute, ContextTimeoutEnabled: cte})
		t.Cleanup(func() { _ = rdb.Close() })
		n := &node{name: "client ignoring deadlines", c: newTestClient(r, rdb)}
		if cte {
			n.name = "client with ContextTimeoutEnabled"
		}
		require.Equal(t, cte, n.c.ctxDeadlines)
		var err error
		n.held, err = n.c.Acquire(ctx, "lobby:held-"+strconv.Itoa(len(nodes)), time.Minute, nil)
		require.NoError(t, err)
		nodes = append(nodes, n)
	}

	r.Server.Pause(t)

	returns := func(t *testing.T, what string, fn func() error) error {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- fn() }()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatalf("%s hung on a paused Redis", what)
			return nil
		}
	}
	var tried []string
	for i, n := range nodes {
		t.Run(n.name, func(t *testing.T) {
			a, b := "lobby:a"+strconv.Itoa(i), "lobby:b"+strconv.Itoa(i)
			tried = append(tried, a, b)
			t.Run("Acquire stops at the wait limit", func(t *testing.T) {
				err := returns(t, "Acquire", func() error {
					_, err := n.c.Acquire(ctx, a, 2*time.Second, &Options{Wait: 200 * time.Millisecond})
					return err
				})
				assert.ErrorIs(t, err, ErrNoAnswer)
				assert.ErrorIs(t, err, context.DeadlineExceeded)
				assert.NotErrorIs(t, err, ErrNotObtained, "Redis never said the lock is held")
				assert.ErrorContains(t, err, a)
				assert.ErrorContains(t, err, "wait")
			})
			t.Run("TryAcquire stops at the context deadline", func(t *testing.T) {
				dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				defer cancel()
				err := returns(t, "TryAcquire", func() error {
					_, err := n.c.TryAcquire(dctx, b, 2*time.Second)
					return err
				})
				assert.ErrorIs(t, err, ErrNoAnswer)
				assert.ErrorIs(t, err, context.DeadlineExceeded)
			})
			t.Run("Release stops at the context deadline", func(t *testing.T) {
				dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				defer cancel()
				err := returns(t, "Release", func() error { return n.held.Release(dctx) })
				assert.ErrorIs(t, err, ErrNoAnswer)
			})
		})
	}

	// The unanswered tries may reach Redis when it resumes: what they took
	// is released when their answer arrives, or expires after its ttl (2s).
	r.Server.Resume(t)
	other := newTestClient(r, nil)
	for _, name := range tried {
		require.Eventually(t, func() bool {
			l, err := other.TryAcquire(ctx, name, time.Minute)
			return err == nil && l.Release(ctx) == nil
		}, 10*time.Second, 10*time.Millisecond, name)
	}
	for _, n := range nodes {
		// Whether the unanswered release ran is unknown; releasing again
		// either deletes the lock or finds it gone.
		if err := n.held.Release(ctx); err != nil {
			assert.ErrorIs(t, err, ErrNotHeld)
		}
		heldKey, _ := n.c.Keys(n.held.Name())
		assert.Zero(t, r.Client.Exists(ctx, heldKey).Val())
	}
}

// TestWatchdog: a lock whose ttl passes several times over is still held
// while its watchdog runs, and free once released. The ttl is seconds long
// and the check comes 1.5 ttls after the acquisition, so a watchdog goroutine
// (refreshing every ttl/3) starved for up to 2 s on a loaded machine still
// keeps it; without refreshes the key expires a whole half-ttl before the
// check.
func TestWatchdog(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, r *redistest.Redis) {
		ctx := context.Background()
		c := newTestClient(r, nil)
		other := newTestClient(r, r.NewClient(t))
		const ttl = 3 * time.Second

		start := time.Now()
		l, err := c.Acquire(ctx, "lobby:dog", ttl, &Options{Watchdog: true})
		require.NoError(t, err)
		// Past the ttl by half a ttl: only refreshes can keep the lock.
		time.Sleep(time.Until(start.Add(ttl + ttl/2)))
		_, err = other.TryAcquire(ctx, "lobby:dog", time.Minute)
		assert.ErrorIs(t, err, ErrNotObtained, "held past its ttl")
		left, err := l.TTL(ctx)
		require.NoError(t, err)
		assert.Greater(t, left, time.Duration(0))
		select {
		case <-l.Lost():
			t.Error("Lost is closed while the watchdog keeps the lock")
		default:
		}

		require.NoError(t, l.Release(ctx))
		select {
		case <-l.dogDone:
		default:
			t.Error("the watchdog still runs after Release")
		}
		l2, err := other.TryAcquire(ctx, "lobby:dog", time.Minute)
		require.NoError(t, err)
		require.NoError(t, l2.Release(ctx))
	})
}

func TestWatchdogFindsLoss(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	c := newTestClient(r, nil)
	lockKey, _ := c.Keys("lobby:gone")

	err := c.Do(ctx, "lobby:gone", 90*time.Millisecond, &Options{Watchdog: true}, func(ctx context.Context, l *Lock) error {
		// Another owner takes the key behind the holder's back (as after an
		// expiry); the watchdog's next refresh finds it.
		require.NoError(t, r.Client.Set(ctx, lockKey, "someone-else", time.Minute).Err())
		<-ctx.Done()
		assert.ErrorIs(t, context.Cause(ctx), ErrNotHeld)
		return nil
	})
	assert.ErrorIs(t, err, ErrNotHeld, "Do reports the loss")
	assert.Equal(t, "someone-else", r.Client.Get(ctx, lockKey).Val(), "nothing deleted")
}

func TestDo(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	c := newTestClient(r, nil)
	lockKey, _ := c.Keys("lobby:do")

	t.Run("fn runs holding the lock, which is released after", func(t *testing.T) {
		var fence int64
		err := c.Do(ctx, "lobby:do", time.Minute, nil, func(ctx context.Context, l *Lock) error {
			fence = l.Fence()
			assert.Equal(t, l.Token(), r.Client.Get(ctx, lockKey).Val())
			return nil
		})
		require.NoError(t, err)
		assert.Positive(t, fence)
		assert.Zero(t, r.Client.Exists(ctx, lockKey).Val())
	})
	t.Run("fn's error is returned and the lock released", func(t *testing.T) {
		boom := errors.New("boom")
		assert.ErrorIs(t, c.Do(ctx, "lobby:do", time.Minute, nil, func(context.Context, *Lock) error { return boom }), boom)
		assert.Zero(t, r.Client.Exists(ctx, lockKey).Val())
	})
	t.Run("a panic releases the lock", func(t *testing.T) {
		assert.Panics(t, func() {
			_ = c.Do(ctx, "lobby:do", time.Minute, nil, func(context.Context, *Lock) error { panic("boom") })
		})
		assert.Zero(t, r.Client.Exists(ctx, lockKey).Val())
	})
	t.Run("fn does not run without the lock", func(t *testing.T) {
		l, err := c.TryAcquire(ctx, "lobby:do", time.Minute)
		require.NoError(t, err)
		defer l.Release(ctx)
		ran := false
		err = c.Do(ctx, "lobby:do", time.Minute, &Options{Wait: 300 * time.Millisecond}, func(context.Context, *Lock) error { ran = true; return nil })
		assert.ErrorIs(t, err, ErrNotObtained)
		assert.False(t, ran)
	})
	t.Run("the lock is released after ctx ended", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		err := c.Do(cctx, "lobby:do", time.Minute, nil, func(context.Context, *Lock) error { cancel(); return nil })
		require.NoError(t, err)
		assert.Zero(t, r.Client.Exists(ctx, lockKey).Val())
	})
}

func TestMetricsShareARegistry(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	r := redistest.New(t)
	a := New(r.Client, Config{Prefix: r.Prefix, Registerer: reg})
	b := New(r.Client, Config{Prefix: r.Prefix, Registerer: reg})
	ctx := context.Background()
	l, err := a.TryAcquire(ctx, "lobby:m", time.Minute)
	require.NoError(t, err)
	_, err = b.TryAcquire(ctx, "lobby:m", time.Minute)
	require.ErrorIs(t, err, ErrNotObtained)
	require.NoError(t, l.Release(ctx))
	assert.Equal(t, 1.0, counter(t, reg, "chatd_lock_contended_total"))
	assert.Equal(t, uint64(1), histogramCount(t, reg, "chatd_lock_wait_seconds", "obtained"))
	assert.Equal(t, uint64(1), histogramCount(t, reg, "chatd_lock_wait_seconds", "not_obtained"))
}

func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

func histogramCount(t *testing.T, reg *prometheus.Registry, name, result string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "result" && lp.GetValue() == result {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

// TestWaitEndsWithATryOut: once Redis has answered that another owner holds
// the lock, a wait that passes while a try is out is ErrNotObtained (with
// ErrNoAnswer for the unanswered try), not a Redis that never answered. On a
// loaded machine the last try is often out when the wait ends; CI read
// "no answer" there once. The pause makes the try out for certain.
func TestWaitEndsWithATryOut(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	ctx := context.Background()
	c := newTestClient(r, nil)
	held, err := c.Acquire(ctx, "lobby:busy", time.Minute, nil)
	require.NoError(t, err)

	other := newTestClient(r, r.NewClient(t))
	done := make(chan error, 1)
	go func() {
		_, err := other.Acquire(ctx, "lobby:busy", time.Minute, &Options{Wait: time.Second, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
		done <- err
	}()
	time.Sleep(300 * time.Millisecond) // a few tries answered "held"
	r.Server.Pause(t)
	var got error
	select {
	case got = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Acquire hung on a paused Redis")
	}
	r.Server.Resume(t)
	assert.ErrorIs(t, got, ErrNotObtained)
	assert.ErrorIs(t, got, ErrNoAnswer, "the last try went unanswered")
	assert.NotErrorIs(t, got, context.DeadlineExceeded, "the caller's context did not end")
	assert.ErrorContains(t, got, "lobby:busy")

	// The unanswered try ran after the resume or not at all: either way the
	// lock is still the first owner's.
	lockKey, _ := c.Keys("lobby:busy")
	assert.Eventually(t, func() bool { return r.Client.Get(ctx, lockKey).Val() == held.Token() }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, held.Release(ctx))
}
