package matchmaking

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// countHook counts the commands a client sends and its round trips (a
// command alone, or a pipeline).
type countHook struct{ cmds, trips atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.cmds.Add(1)
		h.trips.Add(1)
		return next(ctx, cmd)
	}
}

func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.cmds.Add(int64(len(cmds)))
		h.trips.Add(1)
		return next(ctx, cmds)
	}
}

// skills returns 2n skills in random order: n pairs 10 apart from the
// next, each pair within 0.01, so every ticket has one partner clearly
// closest and no straggler waits for its window to widen (which would
// measure the widening, not the matcher).
func skills(n int) []float64 {
	rng := rand.New(rand.NewPCG(3, 4))
	out := make([]float64, 2*n)
	for i := range out {
		out[i] = float64(i/2)*10 + rng.Float64()/100
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// fill submits 2n single tickets with skills().
func fill(b *testing.B, s *Service, n int) {
	b.Helper()
	ctx := context.Background()
	for i, sk := range skills(n) {
		_, err := s.Submit(ctx, "duel", Ticket{User: fmt.Sprintf("u%d", i), Skill: sk})
		require.NoError(b, err)
	}
}

// BenchmarkMatchers: one op is one match of two formed by a node's
// Matchers from a queue filled beforehand (pick + fenced formation,
// announcements acknowledged), as matches per second and Redis commands
// and round trips per match counted on the matcher's client.
func BenchmarkMatchers(b *testing.B) {
	r := redistest.Real(b)
	raw := `{"duel":{"min":2,"max":2,"window":100,"widen_per_second":10,"max_wait_seconds":3600}}`
	filler := New(r.Client, Config{Prefix: r.Prefix, Queues: newDefs(raw).get})
	fill(b, filler, b.N)

	var formed atomic.Int64
	done := make(chan struct{})
	cfg := MatchersConfig{Lease: 5 * time.Second, Tick: 5 * time.Millisecond, TryEvery: 10 * time.Millisecond,
		OnMatched: func(context.Context, Match) error {
			if formed.Add(1) == int64(b.N) {
				close(done)
			}
			return nil
		}}
	n := newNode(b, r, setup{defs: newDefs(raw), mcfg: cfg})
	hook := &countHook{}
	n.svc.rdb.AddHook(hook)
	b.ResetTimer()
	start := time.Now()
	n.start(b)
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("%d of %d matches formed in 5 minutes", formed.Load(), b.N)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "matches/s")
	b.ReportMetric(float64(hook.cmds.Load())/float64(b.N), "cmds/match")
	b.ReportMetric(float64(hook.trips.Load())/float64(b.N), "trips/match")
}

// BenchmarkNaiveTwoStep is the baseline: the naive matcher, ZRANGEBYSCORE
// of the two lowest skills, then ZREM of both, then HSET of the match, in
// three round trips per match. It is only correct with one matcher and
// nothing else touching the queue (see the package doc); it measures what
// the atomic, fenced formation costs beside it.
func BenchmarkNaiveTwoStep(b *testing.B) {
	r := redistest.Real(b)
	ctx := context.Background()
	pool := r.Prefix + ":{mm:duel}:naive"
	sk := skills(b.N)
	for i := 0; i < 2*b.N; i += 1000 {
		zs := make([]redis.Z, 0, 1000)
		for j := i; j < min(i+1000, 2*b.N); j++ {
			zs = append(zs, redis.Z{Score: sk[j], Member: fmt.Sprintf("u%d", j)})
		}
		require.NoError(b, r.Client.ZAdd(ctx, pool, zs...).Err())
	}
	rdb := r.NewClient(b)
	hook := &countHook{}
	rdb.AddHook(hook)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; {
		two, err := rdb.ZRangeByScore(ctx, pool, &redis.ZRangeBy{Min: "-inf", Max: "+inf", Count: 2}).Result()
		require.NoError(b, err)
		if len(two) < 2 {
			b.Fatalf("pool ran dry at match %d", i)
		}
		n, err := rdb.ZRem(ctx, pool, two[0], two[1]).Result()
		require.NoError(b, err)
		if n != 2 {
			continue
		}
		i++
		require.NoError(b, rdb.HSet(ctx, fmt.Sprintf("%s:{mm:duel}:nm:%d", r.Prefix, i), "a", two[0], "b", two[1]).Err())
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "matches/s")
	b.ReportMetric(float64(hook.cmds.Load())/float64(b.N), "cmds/match")
	b.ReportMetric(float64(hook.trips.Load())/float64(b.N), "trips/match")
}
