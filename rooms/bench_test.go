package rooms

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
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
// goroutines (capacity 50), on a private redis-server; reports joins/s,
// p99 join latency, p99 lock hold time, and Redis commands and CPU per
// join. "group commit" runs the Seats started (Seats.Start: joins queued
// behind one in progress are seated in batches), "inline" without (each
// join seated by its own script calls), as chatd's Node runs them today.
func BenchmarkJoinContended(b *testing.B) {
	for _, mode := range []string{"group commit", "inline"} {
		b.Run(mode, func(b *testing.B) { benchJoinContended(b, mode == "inline") })
	}
}

func benchJoinContended(b *testing.B, inline bool) {
	r := redistest.Own(b, redistest.Options{})
	ctx := context.Background()
	ss := nodes(b, r, 3, Config{Registerer: prometheus.NewRegistry()})
	var mu sync.Mutex
	var holds, lat []float64
	for _, s := range ss {
		s.Seats.m.lockHold = prometheus.ObserverFunc(func(v float64) { mu.Lock(); holds = append(holds, v); mu.Unlock() })
		if inline {
			require.NoError(b, s.Seats.Close(ctx)) // joins from now on run inline
		}
	}
	require.NoError(b, r.Client.ConfigResetStat(ctx).Err())
	cpu0 := redisCPU(b, r.Client)
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
	elapsed := time.Since(start)
	b.StopTimer()
	cpu := redisCPU(b, r.Client) - cpu0
	calls := commandCalls(b, r.Client)
	b.ReportMetric(float64(n.Load())/elapsed.Seconds(), "joins/s")
	b.ReportMetric(p99(lat)*1000, "p99-join-ms")
	b.ReportMetric(p99(holds)*1000, "p99-lock-hold-ms")
	b.ReportMetric(calls/float64(n.Load()), "cmds/join")
	b.ReportMetric(cpu*1e6/float64(n.Load()), "redis-cpu-µs/join")
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

// BenchmarkSendCommands sends says of 50 seated users in batches of 16, as
// chat's say worker does (one SendMany per batch, rate-limited and
// unkeyed), on a private redis-server, and reports what each say costs
// Redis: cmds/say from INFO commandstats (every command, those inside
// scripts included) and redis-cpu-µs/say from INFO cpu (the server's user
// and system CPU, network I/O included).
func BenchmarkSendCommands(b *testing.B) {
	r := redistest.Own(b, redistest.Options{})
	ctx := context.Background()
	s := nodes(b, r, 1, Config{})[0]
	var room string
	for i := range 50 {
		got, err := s.Seats.Join(ctx, "bench", fmt.Sprintf("u%d", i), ws1)
		require.NoError(b, err)
		room = got.ID
	}
	opt := SendOptions{Rate: 1e6, Burst: 1e6} // the bucket is taken, never empty
	reqs := make([]SendRequest, 16)
	send := func(n int) {
		for j := range reqs {
			reqs[j] = SendRequest{Room: room, User: fmt.Sprintf("u%d", (n*16+j)%50), Text: "hello, world"}
		}
		for _, rep := range s.Messages.SendMany(ctx, reqs, opt) {
			if rep.Err != nil {
				b.Fatal(rep.Err)
			}
		}
	}
	send(0) // scripts loaded, the history's TTL set
	require.NoError(b, r.Client.ConfigResetStat(ctx).Err())
	cpu0 := redisCPU(b, r.Client)
	n := 0
	for b.Loop() {
		n++
		send(n)
	}
	cpu := redisCPU(b, r.Client) - cpu0
	calls := commandCalls(b, r.Client)
	says := float64(n * len(reqs))
	b.ReportMetric(calls/says, "cmds/say")
	b.ReportMetric(cpu*1e6/says, "redis-cpu-µs/say")
}

// commandCalls sums the calls of INFO commandstats (measuredCalls) and
// logs each command's calls.
func commandCalls(tb testing.TB, rdb redis.UniversalClient) float64 {
	stats := commandStats(tb, rdb)
	for name, c := range stats {
		tb.Logf("%s calls=%d", name, c)
	}
	return measuredCalls(stats)
}

// redisCPU returns the server's used_cpu_user + used_cpu_sys, seconds.
func redisCPU(tb testing.TB, rdb redis.UniversalClient) (sec float64) {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	require.NoError(tb, err)
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_user" || k == "used_cpu_sys" {
			x, _ := strconv.ParseFloat(v, 64)
			sec += x
		}
	}
	return sec
}
