package lock

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redistest"
)

// BenchmarkUncontended interleaves, in every iteration, four pairs so all
// see the same machine load: the raw SET NX PX + DEL the lock is built on,
// the bare acquire and release scripts (EVALSHA, no Go code of this
// package), Acquire+Release under a cancelable context (a request context,
// which runs each call on a goroutine of its own: see Client.call) and under
// context.Background. It reports the throughput ratios lock/raw (goal:
// >= 0.9), lock-bg/raw and scripts/raw (what server-side Lua costs by
// itself), and each pair's mean time. It needs a real redis-server (skips
// without one, fails under CHATD_TEST_STRICT=1).
func BenchmarkUncontended(b *testing.B) {
	r := redistest.Real(b)
	c := New(r.Client, Config{Prefix: r.Prefix})
	raw := keyspace.New(r.Prefix).Key("lobby", "raw", "lock")
	lk, fk := c.Keys("lobby:scripts")
	token := newToken()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pair := func(ctx context.Context, name string) {
		l, err := c.Acquire(ctx, name, time.Minute, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	var rawTime, scriptTime, lockTime, bgTime time.Duration
	for b.Loop() {
		t0 := time.Now()
		if ok, err := r.Client.SetNX(ctx, raw, token, time.Minute).Result(); err != nil || !ok {
			b.Fatal(ok, err)
		}
		if err := r.Client.Del(ctx, raw).Err(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := acquireScript.Run(ctx, r.Client, []string{lk, fk}, token, 60000).Err(); err != nil {
			b.Fatal(err)
		}
		if err := releaseScript.Run(ctx, r.Client, []string{lk}, token).Err(); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		pair(ctx, "lobby:bench")
		t3 := time.Now()
		pair(context.Background(), "lobby:bench-bg")
		rawTime += t1.Sub(t0)
		scriptTime += t2.Sub(t1)
		lockTime += t3.Sub(t2)
		bgTime += time.Since(t3)
	}
	b.ReportMetric(float64(rawTime)/float64(lockTime), "lock/raw")
	b.ReportMetric(float64(rawTime)/float64(bgTime), "lock-bg/raw")
	b.ReportMetric(float64(rawTime)/float64(scriptTime), "scripts/raw")
	b.ReportMetric(float64(rawTime.Nanoseconds())/float64(b.N), "raw-ns/pair")
	b.ReportMetric(float64(lockTime.Nanoseconds())/float64(b.N), "lock-ns/pair")
}

// BenchmarkContended16 has 16 goroutines (on 3 clients, as 3 nodes) take
// and release one lock b.N times in all, and reports acquisitions per second
// and the 99th percentile of the time an Acquire waited. It needs a real
// redis-server, like BenchmarkUncontended.
func BenchmarkContended16(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts *Options
	}{
		{"default backoff 5-200ms", nil},
		{"backoff 1-20ms", &Options{MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := redistest.Real(b)
			clients := []*Client{
				New(r.Client, Config{Prefix: r.Prefix}),
				New(r.NewClient(b), Config{Prefix: r.Prefix}),
				New(r.NewClient(b), Config{Prefix: r.Prefix}),
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var left atomic.Int64
			left.Store(int64(b.N))
			waits := make([][]time.Duration, 16)
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for g := range 16 {
				c := clients[g%len(clients)]
				wg.Go(func() {
					for left.Add(-1) >= 0 {
						t := time.Now()
						l, err := c.Acquire(ctx, "lobby:hot", time.Minute, bc.opts)
						if err != nil {
							b.Error(err)
							return
						}
						waits[g] = append(waits[g], time.Since(t))
						if err := l.Release(ctx); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			all := slices.Concat(waits...)
			slices.Sort(all)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "acq/s")
			b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-wait-ms")
			b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-wait-ms")
		})
	}
}
