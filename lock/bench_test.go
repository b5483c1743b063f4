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

// BenchmarkUncontended compares one Acquire+Release (two script round trips)
// with the raw pair it is built on, SET NX PX + DEL, on the same server in
// the same run. "cancelable ctx" is the usual case of a request context,
// which runs each call on a goroutine of its own (see Client.call).
func BenchmarkUncontended(b *testing.B) {
	r := redistest.New(b)
	c := New(r.Client, Config{Prefix: r.Prefix})
	raw := keyspace.New(r.Prefix).Key("lobby", "raw", "lock")
	token := newToken()

	b.Run("raw SET NX PX + DEL", func(b *testing.B) {
		ctx := context.Background()
		for b.Loop() {
			if ok, err := r.Client.SetNX(ctx, raw, token, time.Minute).Result(); err != nil || !ok {
				b.Fatal(ok, err)
			}
			if err := r.Client.Del(ctx, raw).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	lockLoop := func(b *testing.B, ctx context.Context) {
		for b.Loop() {
			l, err := c.Acquire(ctx, "lobby:bench", time.Minute, nil)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("Acquire+Release", func(b *testing.B) { lockLoop(b, context.Background()) })
	b.Run("Acquire+Release cancelable ctx", func(b *testing.B) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		lockLoop(b, ctx)
	})
}

// BenchmarkUncontendedRatio interleaves three pairs so all see the same
// machine load: the raw SET NX PX + DEL, the bare acquire and release
// scripts (EVALSHA, no Go code of this package), and Acquire+Release under
// a cancelable context. It reports the throughput ratios lock/raw (goal:
// >= 0.9) and scripts/raw: what server-side Lua costs by itself.
func BenchmarkUncontendedRatio(b *testing.B) {
	r := redistest.New(b)
	c := New(r.Client, Config{Prefix: r.Prefix})
	raw := keyspace.New(r.Prefix).Key("lobby", "raw", "lock")
	lk, fk := c.Keys("lobby:scripts")
	token := newToken()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var rawTime, scriptTime, lockTime time.Duration
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
		l, err := c.Acquire(ctx, "lobby:bench", time.Minute, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
		rawTime += t1.Sub(t0)
		scriptTime += t2.Sub(t1)
		lockTime += time.Since(t2)
	}
	b.ReportMetric(float64(rawTime)/float64(lockTime), "lock/raw")
	b.ReportMetric(float64(rawTime)/float64(scriptTime), "scripts/raw")
	b.ReportMetric(float64(rawTime.Nanoseconds())/float64(b.N), "raw-ns/pair")
	b.ReportMetric(float64(lockTime.Nanoseconds())/float64(b.N), "lock-ns/pair")
}

// BenchmarkContended16 has 16 goroutines (on 3 clients, as 3 nodes) take
// and release one lock b.N times in all, and reports acquisitions per second
// and the 99th percentile of the time an Acquire waited.
func BenchmarkContended16(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts *Options
	}{
		{"default backoff 5-200ms", nil},
		{"backoff 1-20ms", &Options{MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := redistest.New(b)
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
