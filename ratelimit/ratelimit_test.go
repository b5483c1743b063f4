package ratelimit

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/names"
)

func newClock() *testkit.Clock { return testkit.NewClock(time.UnixMilli(1_700_000_000_000)) }

func rateOf(r float64) func() float64 { return func() float64 { return r } }

// drain calls Allow until it refuses and returns how many were allowed.
func drain(t *testing.T, l *Limiter, user string) int {
	t.Helper()
	for n := 0; n < 100000; n++ {
		ok, _, err := l.Allow(context.Background(), user)
		require.NoError(t, err)
		if !ok {
			return n
		}
	}
	t.Fatal("never refused")
	return 0
}

func TestAllow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := redistest.New(t)

	t.Run("burst then refusal then refill", func(t *testing.T) {
		clk := newClock()
		reg := prometheus.NewRegistry()
		l := New(r.Client, Config{Prefix: r.Prefix, Rate: rateOf(10), Now: clk.Now, Registerer: reg})

		assert.Equal(t, 10, drain(t, l, "alice"))
		ok, retry, err := l.Allow(ctx, "alice")
		require.NoError(t, err)
		assert.False(t, ok)
		assert.Equal(t, 100*time.Millisecond, retry)

		clk.Add(99 * time.Millisecond)
		ok, _, err = l.Allow(ctx, "alice")
		require.NoError(t, err)
		assert.False(t, ok, "a token is not back before 1/rate")

		clk.Add(time.Millisecond)
		ok, _, err = l.Allow(ctx, "alice")
		require.NoError(t, err)
		assert.True(t, ok, "one token back after 1/rate")

		clk.Add(time.Hour)
		assert.Equal(t, 10, drain(t, l, "alice"), "refill stops at the burst")

		assert.Equal(t, 21.0, testkit.Value(t, l.checks.WithLabelValues("allowed")))
		assert.GreaterOrEqual(t, testkit.Value(t, l.checks.WithLabelValues("limited")), 3.0)
	})

	t.Run("users have separate buckets", func(t *testing.T) {
		clk := newClock()
		l := New(r.Client, Config{Prefix: r.Prefix, Rate: rateOf(3), Now: clk.Now})
		assert.Equal(t, 3, drain(t, l, "u1"))
		assert.Equal(t, 3, drain(t, l, "u2"))
	})

	t.Run("fractional rate has a burst of one and refills slowly", func(t *testing.T) {
		clk := newClock()
		l := New(r.Client, Config{Prefix: r.Prefix, Rate: rateOf(0.5), Now: clk.Now})
		assert.Equal(t, 1, drain(t, l, "half"))
		_, retry, err := l.Allow(ctx, "half")
		require.NoError(t, err)
		assert.Equal(t, 2*time.Second, retry)

		clk.Add(1999 * time.Millisecond)
		ok, _, err := l.Allow(ctx, "half")
		require.NoError(t, err)
		assert.False(t, ok)
		clk.Add(time.Millisecond)
		ok, _, err = l.Allow(ctx, "half")
		require.NoError(t, err)
		assert.True(t, ok)
	})

	t.Run("fractional rate above one has a fractional burst", func(t *testing.T) {
		clk := newClock()
		l := New(r.Client, Config{Prefix: r.Prefix, Rate: rateOf(2.5), Now: clk.Now})
		assert.Equal(t, 2, drain(t, l, "twohalf"), "burst 2.5 holds two whole tokens")
		clk.Add(200 * time.Millisecond) // +0.5 token: 0.5+0.5 = 1
		ok, _, err := l.Allow(ctx, "twohalf")
		require.NoError(t, err)
		assert.True(t, ok)
	})

	t.Run("a live rate change applies to the next check", func(t *testing.T) {
		clk := newClock()
		var rate atomic.Value
		rate.Store(2.0)
		l := New(r.Client, Config{Prefix: r.Prefix, Rate: func() float64 { return rate.Load().(float64) }, Now: clk.Now})
		assert.Equal(t, 2, drain(t, l, "live"))
		rate.Store(100.0)
		clk.Add(10 * time.Millisecond) // one token at 100/s
		ok, _, err := l.Allow(ctx, "live")
		require.NoError(t, err)
		assert.True(t, ok)
		rate.Store(1.0)
		clk.Add(time.Hour)
		assert.Equal(t, 1, drain(t, l, "live"), "a lowered burst caps a full bucket")
	})

	t.Run("a clock behind the bucket refills nothing", func(t *testing.T) {
		clk := newClock()
		l := New(r.Client, Config{Prefix: r.Prefix, Rate: rateOf(1), Now: clk.Now})
		assert.Equal(t, 1, drain(t, l, "skew"))
		clk.Add(-time.Hour)
		ok, retry, err := l.Allow(ctx, "skew")
		require.NoError(t, err)
		assert.False(t, ok)
		assert.Equal(t, time.Second, retry)
	})

	t.Run("bad rate falls back to the default", func(t *testing.T) {
		for _, bad := range []float64{0, -1, math.NaN(), math.Inf(1)} {
			l := New(r.Client, Config{Prefix: r.Prefix, Rate: rateOf(bad)})
			rate, burst := l.Rate()
			assert.Equal(t, float64(DefaultRate), rate)
			assert.Equal(t, float64(DefaultRate), burst)
		}
		rate, _ := New(r.Client, Config{}).Rate()
		assert.Equal(t, float64(DefaultRate), rate)
	})

	t.Run("a window of a minute admits N in any 60 s, never 2N", func(t *testing.T) {
		clk := newClock()
		l := New(r.Client, Config{Prefix: r.Prefix, Burst: rateOf(5), Window: time.Minute, Now: clk.Now})
		assert.Equal(t, 5, drain(t, l, "window"), "five at once")
		_, retry, err := l.Allow(ctx, "window")
		require.NoError(t, err)
		assert.Equal(t, time.Minute, retry, "then none until the first leaves the window")
		clk.Add(59*time.Second + 999*time.Millisecond)
		ok, _, err := l.Allow(ctx, "window")
		require.NoError(t, err)
		assert.False(t, ok, "a bucket refilling at 5/60 would have let 4 more in by now")
		clk.Add(time.Millisecond)
		assert.Equal(t, 5, drain(t, l, "window"), "the window moved past all five")
		ttl, err := r.Client.PTTL(ctx, l.keys.window("window")).Result()
		require.NoError(t, err)
		assert.LessOrEqual(t, ttl, time.Minute, "the log lives one window")
		n, err := r.Client.ZCard(ctx, l.keys.window("window")).Result()
		require.NoError(t, err)
		assert.Equal(t, int64(5), n, "the log holds at most N events")
	})

	t.Run("the window's last event, its call sent twice, is admitted", func(t *testing.T) {
		// go-redis sends a call again when its answer comes late, and the
		// first copy may have logged the event: the retry must not count
		// it against itself and refuse it (a spurious 429).
		clk := newClock()
		h := redistest.ResendScript("ratelimit.window")
		rdb := h.Client(t, r)
		l := New(rdb, Config{Prefix: r.Prefix, Burst: rateOf(2), Window: time.Minute, Now: clk.Now})
		ok, _, err := l.Allow(ctx, "lastslot")
		require.NoError(t, err)
		require.True(t, ok)
		h.Arm(nil)
		ok, _, err = l.Allow(ctx, "lastslot")
		require.NoError(t, err)
		h.Resent(t)
		assert.True(t, ok, "the retry of the admitted event answers admitted")
		n, err := r.Client.ZCard(ctx, l.keys.window("lastslot")).Result()
		require.NoError(t, err)
		assert.Equal(t, int64(2), n, "logged once")
	})

	t.Run("a per-minute cap is rate N/60 with burst N", func(t *testing.T) {
		clk := newClock()
		l := New(r.Client, Config{Prefix: r.Prefix, Rate: rateOf(5.0 / 60), Burst: rateOf(5), Now: clk.Now})
		rate, burst := l.Rate()
		assert.InDelta(t, 5.0/60, rate, 1e-12)
		assert.Equal(t, 5.0, burst)
		assert.Equal(t, 5, drain(t, l, "perminute"), "five at once")
		_, retry, err := l.Allow(ctx, "perminute")
		require.NoError(t, err)
		assert.Equal(t, 12*time.Second, retry, "then one every 60/5 s")
		clk.Add(12*time.Second - time.Millisecond)
		ok, _, err := l.Allow(ctx, "perminute")
		require.NoError(t, err)
		assert.False(t, ok)
		clk.Add(time.Millisecond)
		ok, _, err = l.Allow(ctx, "perminute")
		require.NoError(t, err)
		assert.True(t, ok)
		clk.Add(time.Hour)
		assert.Equal(t, 5, drain(t, l, "perminute"), "an hour refills the burst, no more")
		ttl, err := r.Client.PTTL(ctx, l.keys.bucket("perminute")).Result()
		require.NoError(t, err)
		assert.Greater(t, ttl, 55*time.Second+slack, "empty: full again after burst/rate = 60 s")
		assert.LessOrEqual(t, ttl, 60*time.Second+slack)
	})

	t.Run("a burst below one or not finite falls back to max(1, rate)", func(t *testing.T) {
		for _, tc := range []struct{ rate, burst, want float64 }{
			{10, 0, 10}, {10, 0.5, 10}, {0.5, -3, 1}, {10, math.NaN(), 10}, {10, math.Inf(1), 10}, {10, 1, 1}, {0.5, 2, 2},
		} {
			_, burst := New(r.Client, Config{Prefix: r.Prefix, Rate: rateOf(tc.rate), Burst: rateOf(tc.burst)}).Rate()
			assert.Equal(t, tc.want, burst, "rate %v burst %v", tc.rate, tc.burst)
		}
		clk := newClock()
		l := New(r.Client, Config{Prefix: r.Prefix, Rate: rateOf(10), Burst: rateOf(3), Now: clk.Now})
		assert.Equal(t, 3, drain(t, l, "smallburst"), "a burst below the rate caps it")
	})

	t.Run("bad user name is refused before Redis", func(t *testing.T) {
		l := New(r.Client, Config{Prefix: r.Prefix})
		ok, _, err := l.Allow(ctx, "a}{b")
		assert.False(t, ok)
		assert.ErrorIs(t, err, names.ErrBadName)
	})

	t.Run("bucket key expires once it would be full", func(t *testing.T) {
		// At 0.01 tokens/s (burst 1) an empty bucket is full again after 100 s,
		// so its key lives 100 s + slack. A refusal takes nothing, so it
		// writes nothing: the bucket is full at the same moment as before.
		// The bounds allow 20 s between the script and the PTTL read and
		// still refuse a key kept for slack alone (60 s).
		clk := newClock()
		l := New(r.Client, Config{Prefix: r.Prefix, Rate: rateOf(0.01), Now: clk.Now})
		// within checks the key's PTTL is want, or at most 20 s less.
		within := func(want time.Duration, msg string) {
			t.Helper()
			ttl, err := r.Client.PTTL(ctx, l.keys.bucket("ttl")).Result()
			require.NoError(t, err)
			assert.LessOrEqual(t, ttl, want, msg)
			assert.Greater(t, ttl, want-20*time.Second, msg)
		}
		ok, _, err := l.Allow(ctx, "ttl")
		require.NoError(t, err)
		require.True(t, ok)
		within(100*time.Second+slack, "empty: full again after 1/rate")

		clk.Add(50 * time.Second)
		ok, _, err = l.Allow(ctx, "ttl")
		require.NoError(t, err)
		require.False(t, ok, "half a token")
		within(100*time.Second+slack, "a refusal leaves the key's expiry as it was")

		clk.Add(50 * time.Second)
		ok, _, err = l.Allow(ctx, "ttl")
		require.NoError(t, err)
		require.True(t, ok, "a whole token again")
		within(100*time.Second+slack, "empty again: full after 1/rate")
	})
}

func TestAllowRedisDown(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	l := New(r.Client, Config{Prefix: r.Prefix, Registerer: prometheus.NewRegistry()})
	r.Server.Kill(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ok, _, err := l.Allow(ctx, "alice")
	assert.False(t, ok)
	assert.Error(t, err)
	assert.Equal(t, 1.0, testkit.Value(t, l.checks.WithLabelValues("error")))
}

// TestSharedBucket: three limiters, each with its own client (three nodes),
// draw from one bucket per user.
func TestSharedBucket(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		get  func(testing.TB) *redistest.Redis
	}{
		{"single server", redistest.Real},
		{"cluster", redistest.Cluster},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := tc.get(t)
			clk := newClock()
			var ls []*Limiter
			for i := 0; i < 3; i++ {
				ls = append(ls, New(r.NewClient(t), Config{Prefix: r.Prefix, Rate: rateOf(5), Now: clk.Now}))
			}
			allowed := 0
			for i := 0; i < 30; i++ {
				ok, _, err := ls[i%3].Allow(context.Background(), "shared")
				require.NoError(t, err)
				if ok {
					allowed++
				}
			}
			assert.Equal(t, 5, allowed, "the three nodes share one burst")

			clk.Add(time.Second)
			assert.Equal(t, 5, drain(t, ls[2], "shared"), "refilled once for all nodes")
		})
	}
}

// TestConcurrentNeverExceedsBurst: many goroutines over several clients race
// for one bucket whose clock stands still; exactly burst are allowed.
func TestConcurrentNeverExceedsBurst(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	clk := newClock()
	var ls []*Limiter
	for i := 0; i < 3; i++ {
		ls = append(ls, New(r.NewClient(t), Config{Prefix: r.Prefix, Rate: rateOf(25), Now: clk.Now}))
	}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 30; g++ {
		wg.Add(1)
		go func(l *Limiter) {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				ok, _, err := l.Allow(context.Background(), "crowd")
				if !assert.NoError(t, err) {
					return
				}
				if ok {
					allowed.Add(1)
				}
			}
		}(ls[g%3])
	}
	wg.Wait()
	assert.Equal(t, int64(25), allowed.Load())
}

// scriptCalls returns how many EVAL and EVALSHA the server ran since its
// last CONFIG RESETSTAT (INFO commandstats).
func scriptCalls(t *testing.T, r *redistest.Redis) int {
	t.Helper()
	return int(redistest.Calls(t, r.Client, "evalsha", "eval"))
}

// TestFloodOnAnEmptyBucketIsRefusedLocally is issue #28 (5)'s cost: each
// refusal was one script call. Now, once Redis said the bucket is empty,
// the Limiter refuses from memory until the refill: 2,000 refused calls
// from 20 goroutines cost Redis no script at all, each gets the right
// retry-after, and the first call after the refill time is admitted.
func TestFloodOnAnEmptyBucketIsRefusedLocally(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{}) // a private server: its stats are ours
	ctx := context.Background()
	clk := newClock()
	reg := prometheus.NewRegistry()
	l := New(r.Client, Config{Prefix: r.Prefix, Rate: rateOf(2), Now: clk.Now, Registerer: reg})
	assert.Equal(t, 2, drain(t, l, "flood"), "the refusal here came from Redis")
	require.NoError(t, r.Client.ConfigResetStat(ctx).Err())

	clk.Add(100 * time.Millisecond)
	var wg sync.WaitGroup
	var refused atomic.Int64
	for g := 0; g < 20; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				ok, retry, err := l.Allow(ctx, "flood")
				if !assert.NoError(t, err) || !assert.False(t, ok) || !assert.Equal(t, 400*time.Millisecond, retry) {
					return
				}
				refused.Add(1)
			}
		}()
	}
	wg.Wait()
	assert.EqualValues(t, 2000, refused.Load())
	calls := scriptCalls(t, r)
	t.Logf("2000 refused calls cost %d script calls", calls)
	assert.Zero(t, calls)
	assert.Equal(t, 2000.0, testkit.Value(t, l.refusals.WithLabelValues("local")))
	assert.Equal(t, 1.0, testkit.Value(t, l.refusals.WithLabelValues("redis")))

	t.Run("the first call at the refill time asks Redis and is admitted", func(t *testing.T) {
		clk.Add(400*time.Millisecond - time.Millisecond)
		ok, retry, err := l.Allow(ctx, "flood")
		require.NoError(t, err)
		assert.False(t, ok)
		assert.Equal(t, time.Millisecond, retry)
		clk.Add(time.Millisecond)
		ok, _, err = l.Allow(ctx, "flood")
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, 1, scriptCalls(t, r))
	})
	t.Run("another node's limiter still asks Redis, which refuses too", func(t *testing.T) {
		other := New(r.NewClient(t), Config{Prefix: r.Prefix, Rate: rateOf(2), Now: clk.Now})
		ok, retry, err := other.Allow(ctx, "flood")
		require.NoError(t, err)
		assert.False(t, ok)
		assert.Equal(t, 500*time.Millisecond, retry)
	})
}

func TestKnownEmptyIsBounded(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	clk := newClock()
	l := New(r.Client, Config{Prefix: r.Prefix, Rate: rateOf(1), Now: clk.Now, MaxEmpty: 10, Registerer: prometheus.NewRegistry()})
	for i := 0; i < 25; i++ {
		assert.Equal(t, 1, drain(t, l, fmt.Sprintf("u%d", i)))
	}
	assert.Len(t, l.empty, 10)
	assert.Equal(t, 15.0, testkit.Value(t, l.evicted))
	clk.Add(2 * time.Second) // every bucket refilled: the next insert sweeps them
	assert.Equal(t, 1, drain(t, l, "last"))
	assert.Len(t, l.empty, 1)
}
