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

// Each benchmark with a raw-Redis baseline runs the subject and the
// baseline alternately in every iteration, on the same server and client,
// so both see the same machine load; it reports the ratio of their times
// (x-raw: the subject takes x times the baseline) and each one's mean. They
// need a real redis-server (skip without one, fail under
// CHATD_TEST_STRICT=1): a ratio against miniredis says nothing of Redis.

var trivialScript = redis.NewScript(`return 1`)

// BenchmarkJoin interleaves a seat claim's baseline, one EVALSHA round trip
// of a script that does nothing, with the rejoin of a seated user (one
// seat script) and the seating of a new user (every 50th creates a room
// under the lock). It reports seated-x-raw and new-x-raw.
func BenchmarkJoin(b *testing.B) {
	r := redistest.Real(b)
	ctx := context.Background()
	s := nodes(b, r, 1, Config{})[0]
	for i := range 49 {
		_, err := s.Seats.Join(ctx, "seated", fmt.Sprintf("u%d", i), ws1)
		require.NoError(b, err)
	}
	require.NoError(b, trivialScript.Run(ctx, r.Client, []string{r.Prefix + ":x"}).Err())
	var raw, seated, fresh time.Duration
	i := 0
	for b.Loop() {
		i++
		t0 := time.Now()
		if err := trivialScript.Run(ctx, r.Client, []string{r.Prefix + ":x"}).Err(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := s.Seats.Join(ctx, "seated", "u7", ws1); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if _, err := s.Seats.Join(ctx, "new", fmt.Sprintf("u%d", i), ws1); err != nil {
			b.Fatal(err)
		}
		raw += t1.Sub(t0)
		seated += t2.Sub(t1)
		fresh += time.Since(t2)
	}
	b.ReportMetric(float64(seated)/float64(raw), "seated-x-raw")
	b.ReportMetric(float64(fresh)/float64(raw), "new-x-raw")
	b.ReportMetric(float64(raw.Nanoseconds())/float64(b.N), "raw-ns/op")
	b.ReportMetric(float64(seated.Nanoseconds())/float64(b.N), "seated-ns/op")
	b.ReportMetric(float64(fresh.Nanoseconds())/float64(b.N), "new-ns/op")
}

// BenchmarkJoinContended: 3 nodes join new users to one lobby from many
// goroutines (capacity 50); reports joins/s, p99 join latency and p99 lock
// hold time.
func BenchmarkJoinContended(b *testing.B) {
	r := redistest.Real(b)
	ctx := context.Background()
	ss := nodes(b, r, 3, Config{Registerer: prometheus.NewRegistry()})
	var mu sync.Mutex
	var holds, lat []float64
	for _, s := range ss {
		s.Seats.m.lockHold = prometheus.ObserverFunc(func(v float64) { mu.Lock(); holds = append(holds, v); mu.Unlock() })
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
			if _, err := ss[i%3].Seats.Join(ctx, "bench", fmt.Sprintf("u%d", i), ws1); err != nil {
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

// BenchmarkSend interleaves one message (seat check, XADD, PUBLISH, INCR
// in one script) with its baseline, XADD MAXLEN ~ and PUBLISH of a
// message-sized payload in one pipeline; it reports x-raw.
func BenchmarkSend(b *testing.B) {
	r := redistest.Real(b)
	ctx := context.Background()
	s := nodes(b, r, 1, Config{})[0]
	_, err := s.Seats.Join(ctx, "bench", "alice", ws1)
	require.NoError(b, err)
	key, ch := r.Prefix+":{x}:history", r.Prefix+":{x}:events"
	payload := `{"type":"message","message":{"id":"1764504000123-000007","room":"bench-1","from":"alice","text":"hello, world","ts":"2026-11-30T12:00:00.123Z"}}`
	var raw, send time.Duration
	for b.Loop() {
		t0 := time.Now()
		pipe := r.Client.Pipeline()
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: key, MaxLen: 1000, Approx: true, Values: []any{"from", "alice", "text", "hello, world", "ts", "1764504000123"}})
		pipe.Publish(ctx, ch, payload)
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := s.say(ctx, "bench-1", "alice", "hello, world"); err != nil {
			b.Fatal(err)
		}
		raw += t1.Sub(t0)
		send += time.Since(t1)
	}
	b.ReportMetric(float64(send)/float64(raw), "x-raw")
	b.ReportMetric(float64(raw.Nanoseconds())/float64(b.N), "raw-ns/op")
	b.ReportMetric(float64(send.Nanoseconds())/float64(b.N), "send-ns/op")
}

// BenchmarkRenew1000 interleaves the renewal of 1,000 seats in 20 rooms of
// 2 lobbies (one pipeline of two scripts) with its baseline, 1,000 ZADD XX
// in one pipeline; it reports x-raw.
func BenchmarkRenew1000(b *testing.B) {
	r := redistest.Real(b)
	ctx := context.Background()
	s := nodes(b, r, 1, Config{})[0]
	var seats []Attachment
	for _, lobby := range []string{"l1", "l2"} {
		for i := range 500 {
			room, err := s.Seats.Join(ctx, lobby, fmt.Sprintf("u%d", i), ws1)
			require.NoError(b, err)
			seats = append(seats, Attachment{room.ID, fmt.Sprintf("u%d", i), "ws1"})
		}
	}
	key := r.Prefix + ":{x}:seats"
	for i := range 1000 {
		require.NoError(b, r.Client.ZAdd(ctx, key, redis.Z{Score: 1, Member: fmt.Sprintf("u%d", i)}).Err())
	}
	exp := float64(time.Now().UnixMilli())
	var raw, renew time.Duration
	for b.Loop() {
		exp++
		t0 := time.Now()
		pipe := r.Client.Pipeline()
		for i := range 1000 {
			pipe.ZAddXX(ctx, key, redis.Z{Score: exp, Member: fmt.Sprintf("u%d", i)})
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		lost, err := s.Seats.Renew(ctx, seats)
		if err != nil || len(lost) != 0 {
			b.Fatal(err, len(lost))
		}
		raw += t1.Sub(t0)
		renew += time.Since(t1)
	}
	b.ReportMetric(float64(renew)/float64(raw), "x-raw")
	b.ReportMetric(float64(raw.Nanoseconds())/float64(b.N), "raw-ns/op")
	b.ReportMetric(float64(renew.Nanoseconds())/float64(b.N), "renew-ns/op")
}
