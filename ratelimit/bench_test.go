package ratelimit

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redistest"
)

// BenchmarkAllow is one check: validate the name, run the bucket script.
// Compare with BenchmarkRawEvalSha (the same script by hand) and
// BenchmarkRawEvalShaNoop (a round trip running a script that does nothing).
func BenchmarkAllow(b *testing.B) {
	r := redistest.Real(b)
	l := New(r.Client, Config{Prefix: r.Prefix, Rate: func() float64 { return 1e9 }})
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		if _, _, err := l.Allow(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawEvalSha is the baseline: EVALSHA of the bucket script with
// fixed arguments, no wrapper.
func BenchmarkRawEvalSha(b *testing.B) {
	r := redistest.Real(b)
	ctx := context.Background()
	sha, err := r.Client.ScriptLoad(ctx, bucketTakeSrc).Result()
	if err != nil {
		b.Fatal(err)
	}
	key := keys{keyspace.New(r.Prefix)}.bucket("bench")
	b.ResetTimer()
	for b.Loop() {
		if err := r.Client.EvalSha(ctx, sha, []string{key}, 1, "1e9", "1e9", 60000).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawEvalShaNoop is the floor: EVALSHA of "return 1".
func BenchmarkRawEvalShaNoop(b *testing.B) {
	r := redistest.Real(b)
	ctx := context.Background()
	noop := redis.NewScript("return 1")
	if err := noop.Load(ctx, r.Client).Err(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if err := noop.EvalSha(ctx, r.Client, []string{r.Prefix + ":{user:bench}:x"}).Err(); err != nil {
			b.Fatal(err)
		}
	}
}
