package presence

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/redistest"
)

const benchUsers = 1000

func benchStates() []UserState {
	users := make([]UserState, benchUsers)
	for i := range users {
		users[i] = UserState{User: fmt.Sprintf("u%04d", i), Rooms: []string{fmt.Sprintf("general-%d", i/50+1)}}
	}
	return users
}

// BenchmarkTouch1000 renews 1,000 users of one node (one pipeline per op),
// and in the same iterations its two baselines, so all three see the same
// machine load: the floor, 1,000 bare SET PX in one pipeline, and the naive
// renewal, one round trip per user (what Touch saves). It reports x-raw
// (Touch's time over the floor's), naive/touch (how many times faster Touch
// is than the naive renewal) and each one's time per user. It needs a real
// redis-server (skips without one, fails under CHATD_TEST_STRICT=1).
func BenchmarkTouch1000(b *testing.B) {
	r := redistest.Real(b)
	ctx := context.Background()
	p := New(r.Client, Config{Prefix: r.Prefix})
	users := benchStates()
	keys := make([]string, benchUsers)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s:{user:u%04d}:raw", r.Prefix, i)
	}
	var touch, raw, naive time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := p.Touch(ctx, "node-a", users); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		_, err := r.Client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			for _, k := range keys {
				pipe.Set(ctx, k, "node-a", 30*time.Second)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		for _, k := range keys {
			if err := r.Client.Set(ctx, k, "node-a", 30*time.Second).Err(); err != nil {
				b.Fatal(err)
			}
		}
		touch, raw, naive = touch+t1.Sub(t0), raw+t2.Sub(t1), naive+time.Since(t2)
	}
	perUser := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) / benchUsers }
	b.ReportMetric(float64(touch)/float64(raw), "x-raw")
	b.ReportMetric(float64(naive)/float64(touch), "naive/touch")
	b.ReportMetric(perUser(touch), "touch-ns/user")
	b.ReportMetric(perUser(raw), "raw-ns/user")
	b.ReportMetric(perUser(naive), "naive-ns/user")
}

// BenchmarkGet reads one user's presence (one round trip).
func BenchmarkGet(b *testing.B) {
	r := redistest.Real(b)
	ctx := context.Background()
	p := New(r.Client, Config{Prefix: r.Prefix})
	if err := p.Touch(ctx, "node-a", benchStates()[:1]); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := p.Get(ctx, "u0000"); err != nil {
			b.Fatal(err)
		}
	}
}
