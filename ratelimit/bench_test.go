package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redistest"
)

// BenchmarkAllow is one check (validate the name, run the bucket script),
// interleaved in every iteration with its two baselines so all three see the
// same machine load: the same script by hand (EVALSHA with fixed arguments,
// no wrapper) and the floor, a round trip running a script that does
// nothing. It reports x-raw (Allow's time over the bare script's) and
// x-noop (over the empty script's), and each one's mean time. It needs a
// real redis-server (skips without one, fails under CHATD_TEST_STRICT=1).
func BenchmarkAllow(b *testing.B) {
	r := redistest.Real(b)
	ctx := context.Background()
	l := New(r.Client, Config{Prefix: r.Prefix, Rate: func() float64 { return 1e9 }})
	sha, err := r.Client.ScriptLoad(ctx, BucketLua+bucketTakeSrc).Result()
	if err != nil {
		b.Fatal(err)
	}
	key := keys{keyspace.New(r.Prefix)}.bucket("raw")
	noop := redis.NewScript("return 1")
	if err := noop.Load(ctx, r.Client).Err(); err != nil {
		b.Fatal(err)
	}
	noopKey := []string{r.Prefix + ":{user:bench}:x"}
	var allow, raw, floor time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, _, err := l.Allow(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := r.Client.EvalSha(ctx, sha, []string{key}, 1, "1e9", "1e9", 60000).Err(); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if err := noop.EvalSha(ctx, r.Client, noopKey).Err(); err != nil {
			b.Fatal(err)
		}
		allow, raw, floor = allow+t1.Sub(t0), raw+t2.Sub(t1), floor+time.Since(t2)
	}
	b.ReportMetric(float64(allow)/float64(raw), "x-raw")
	b.ReportMetric(float64(allow)/float64(floor), "x-noop")
	b.ReportMetric(float64(allow.Nanoseconds())/float64(b.N), "allow-ns")
	b.ReportMetric(float64(raw.Nanoseconds())/float64(b.N), "raw-ns")
	b.ReportMetric(float64(floor.Nanoseconds())/float64(b.N), "noop-ns")
}
