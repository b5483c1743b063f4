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

// BenchmarkTouch1000 renews 1,000 users of one node: one pipeline per op.
func BenchmarkTouch1000(b *testing.B) {
	r := redistest.Real(b)
	ctx := context.Background()
	p := New(r.Client, Config{Prefix: r.Prefix})
	users := benchStates()
	b.ResetTimer()
	for b.Loop() {
		if err := p.Touch(ctx, "node-a", users); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchUsers, "ns/user")
}

// BenchmarkRawSetPipeline1000 is the floor: 1,000 bare SET PX in one pipeline.
func BenchmarkRawSetPipeline1000(b *testing.B) {
	r := redistest.Real(b)
	ctx := context.Background()
	keys := make([]string, benchUsers)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s:{user:u%04d}:online", r.Prefix, i)
	}
	b.ResetTimer()
	for b.Loop() {
		_, err := r.Client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			for _, k := range keys {
				pipe.Set(ctx, k, "node-a", 30*time.Second)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchUsers, "ns/user")
}

// BenchmarkNaiveTouchPerUser1000 renews 1,000 users with one round trip each:
// what Touch saves.
func BenchmarkNaiveTouchPerUser1000(b *testing.B) {
	r := redistest.Real(b)
	ctx := context.Background()
	keys := make([]string, benchUsers)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s:{user:u%04d}:online", r.Prefix, i)
	}
	b.ResetTimer()
	for b.Loop() {
		for _, k := range keys {
			if err := r.Client.Set(ctx, k, "node-a", 30*time.Second).Err(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchUsers, "ns/user")
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
