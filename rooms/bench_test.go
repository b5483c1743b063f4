package rooms

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// Each benchmark has a raw-Redis baseline in this file, run on the same
// server, so a ratio can be read off.

var trivialScript = redis.NewScript(`return 1`)

// BenchmarkRawEvalSha is the baseline of a seat claim: one EVALSHA round
// trip of a script that does nothing.
func BenchmarkRawEvalSha(b *testing.B) {
	r := redistest.New(b)
	ctx := context.Background()
	require.NoError(b, trivialScript.Run(ctx, r.Client, []string{r.Prefix + ":x"}).Err())
	b.ResetTimer()
	for b.Loop() {
		if err := trivialScript.Run(ctx, r.Client, []string{r.Prefix + ":x"}).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkJoinSeated is the rejoin of a seated user: one seat script.
func BenchmarkJoinSeated(b *testing.B) {
	r := redistest.New(b)
	ctx := context.Background()
	s := nodes(b, r, 1, Config{})[0]
	for i := range 49 {
		_, err := s.Join(ctx, "bench", fmt.Sprintf("u%d", i), ws1)
		require.NoError(b, err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Join(ctx, "bench", "u7", ws1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkJoinNew seats a new user each time, one at a time; every 50th
// creates a room under the lock.
func BenchmarkJoinNew(b *testing.B) {
	r := redistest.New(b)
	ctx := context.Background()
	s := nodes(b, r, 1, Config{})[0]
	i := 0
	b.ResetTimer()
	for b.Loop() {
		i++
		if _, err := s.Join(ctx, "bench", fmt.Sprintf("u%d", i), ws1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkJoinContended: 3 nodes join new users to one lobby from many
// goroutines (capacity 50); reports joins/s, p99 join latency and p99 lock
// hold time.
func BenchmarkJoinContended(b *testing.B) {
	r := redistest.New(b)
	ctx := context.Background()
	ss := nodes(b, r, 3, Config{Registerer: prometheus.NewRegistry()})
	var mu sync.Mutex
	var holds, lat []float64
	for _, s := range ss {
		s.m.lockHold = prometheus.ObserverFunc(func(v float64) { mu.Lock(); holds = append(holds, v); mu.Unlock() })
	}
	var n atomic.Int64
	b.SetParallelism(16) // 32 joiners on 2 cores
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		var mine []float64
		for pb.Next() {
			i := n.Add(1)
			t0 := time.Now()
			if _, err := ss[i%3].Join(ctx, "bench", fmt.Sprintf("u%d", i), ws1); err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(t0).Seconds())
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	b.ReportMetric(float64(n.Load())/time.Since(start).Seconds(), "joins/s")
	b.ReportMetric(p99(lat)*1000, "p99-join-ms")
	b.ReportMetric(p99(holds)*1000, "p99-lock-hold-ms")
}

func p99(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)*99/100]
}

// BenchmarkSend is one message: seat check, XADD, PUBLISH, INCR.
func BenchmarkSend(b *testing.B) {
	r := redistest.New(b)
	ctx := context.Background()
	s := nodes(b, r, 1, Config{})[0]
	_, err := s.Join(ctx, "bench", "alice", ws1)
	require.NoError(b, err)
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.say(ctx, "bench-1", "alice", "hello, world"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawXAddPublish is Send's baseline: XADD MAXLEN ~ and PUBLISH of
// a message-sized payload in one pipeline.
func BenchmarkRawXAddPublish(b *testing.B) {
	r := redistest.New(b)
	ctx := context.Background()
	key, ch := r.Prefix+":{x}:history", r.Prefix+":{x}:events"
	payload := `{"type":"message","message":{"id":"1764504000123-000007","room":"bench-1","from":"alice","text":"hello, world","ts":"2026-11-30T12:00:00.123Z"}}`
	b.ResetTimer()
	for b.Loop() {
		pipe := r.Client.Pipeline()
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: key, MaxLen: 1000, Approx: true, Values: []any{"from", "alice", "text", "hello, world", "ts", "1764504000123"}})
		pipe.Publish(ctx, ch, payload)
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRenew1000 renews 1,000 seats in 20 rooms of 2 lobbies: one
// pipeline of two scripts.
func BenchmarkRenew1000(b *testing.B) {
	r := redistest.New(b)
	ctx := context.Background()
	s := nodes(b, r, 1, Config{})[0]
	var seats []Attachment
	for _, lobby := range []string{"l1", "l2"} {
		for i := range 500 {
			room, err := s.Join(ctx, lobby, fmt.Sprintf("u%d", i), ws1)
			require.NoError(b, err)
			seats = append(seats, Attachment{room.ID, fmt.Sprintf("u%d", i), "ws1"})
		}
	}
	b.ResetTimer()
	for b.Loop() {
		lost, err := s.Renew(ctx, seats)
		if err != nil || len(lost) != 0 {
			b.Fatal(err, len(lost))
		}
	}
}

// BenchmarkRawZAddXX1000 is Renew's baseline: 1,000 ZADD XX in one pipeline.
func BenchmarkRawZAddXX1000(b *testing.B) {
	r := redistest.New(b)
	ctx := context.Background()
	key := r.Prefix + ":{x}:seats"
	for i := range 1000 {
		r.Client.ZAdd(ctx, key, redis.Z{Score: 1, Member: fmt.Sprintf("u%d", i)})
	}
	exp := float64(time.Now().UnixMilli())
	b.ResetTimer()
	for b.Loop() {
		exp++
		pipe := r.Client.Pipeline()
		for i := range 1000 {
			pipe.ZAddXX(ctx, key, redis.Z{Score: exp, Member: fmt.Sprintf("u%d", i)})
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
