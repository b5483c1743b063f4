package redismetrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/redismetrics"
	"github.com/chatd/chatd/internal/redistest"
)

// BenchmarkHook measures what the hook costs: against a real Redis, a
// client without hooks and an instrumented one called in turn in the same
// loop (GET, a named script, a 50-command pipeline; hooked/bare is the
// ratio), and the hook alone around a command that does nothing (its own
// nanoseconds per command).
func BenchmarkHook(b *testing.B) {
	r := redistest.Real(b)
	ctx := context.Background()
	key := r.Prefix + ":bench"
	clients := map[string]*redis.Client{
		"bare":   redis.NewClient(&redis.Options{Addr: r.Addrs[0]}),
		"hooked": redis.NewClient(&redis.Options{Addr: r.Addrs[0]}),
	}
	redismetrics.New(prometheus.NewRegistry()).Instrument(clients["hooked"])
	for _, c := range clients {
		defer c.Close()
		if err := incrScript.Load(ctx, c).Err(); err != nil {
			b.Fatal(err)
		}
	}
	for _, op := range []struct {
		name string
		run  func(*redis.Client) error
	}{
		{"get", func(c *redis.Client) error { return c.Get(ctx, key).Err() }},
		{"script", func(c *redis.Client) error { return incrScript.EvalSha(ctx, c, []string{key}).Err() }},
		{"pipeline50", func(c *redis.Client) error {
			_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
				for i := 0; i < 50; i++ {
					p.Incr(ctx, key)
				}
				return nil
			})
			return err
		}},
	} {
		// Interleaved, one bare and one hooked call per iteration, so that
		// the noise of a shared machine falls on both alike.
		b.Run(op.name, func(b *testing.B) {
			var bare, hooked time.Duration
			for b.Loop() {
				t0 := time.Now()
				if err := op.run(clients["bare"]); err != nil && err != redis.Nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := op.run(clients["hooked"]); err != nil && err != redis.Nil {
					b.Fatal(err)
				}
				bare, hooked = bare+t1.Sub(t0), hooked+time.Since(t1)
			}
			n := float64(b.N)
			b.ReportMetric(float64(bare.Nanoseconds())/n, "bare-ns/op")
			b.ReportMetric(float64(hooked.Nanoseconds())/n, "hooked-ns/op")
			b.ReportMetric(float64(hooked)/float64(bare), "hooked/bare")
		})
	}
	b.Run("hook-alone/script", func(b *testing.B) {
		h := redismetrics.New(prometheus.NewRegistry()).Hook()
		process := h.ProcessHook(func(context.Context, redis.Cmder) error { return nil })
		cmd := redis.NewCmd(ctx, "evalsha", incrScript.Hash(), 1, key)
		for b.Loop() {
			_ = process(ctx, cmd)
		}
	})
	b.Run("hook-alone/get", func(b *testing.B) {
		h := redismetrics.New(prometheus.NewRegistry()).Hook()
		process := h.ProcessHook(func(context.Context, redis.Cmder) error { return nil })
		cmd := redis.NewStringCmd(ctx, "get", key)
		for b.Loop() {
			_ = process(ctx, cmd)
		}
	})
}
