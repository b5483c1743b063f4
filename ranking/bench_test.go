package ranking

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redistest"
)

// Benchmarks run on one board of a million players, built once per test
// binary on the shared real server and removed by TestMain.
//
//	go test -run '^$' -bench . -benchtime 2s ./ranking/
const bigPlayers = 1_000_000

var bigBoard struct {
	once   sync.Once
	prefix string
	err    error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bigBoard.prefix != "" && os.Getenv("CHATD_TEST_REDIS") != "" {
		// An external server keeps its data: remove the big board.
		c := redis.NewClient(&redis.Options{Addr: os.Getenv("CHATD_TEST_REDIS")})
		sp := keyspace.New(bigBoard.prefix)
		_ = c.Unlink(context.Background(), boardKey(sp, "big"), playersKey(sp, "big"), seqKey(sp, "big"), rawKey(sp)).Err()
		_ = c.Close()
	}
	os.Exit(code)
}

func bigName(i int) string { return fmt.Sprintf("u%07d", i) }

// rawKey is the baseline's plain sorted set: player -> score as a double.
func rawKey(sp keyspace.Space) string { return sp.Key("lb", "raw", "z") } // ZSET

// bigService returns a Service on the million-player board "big", building
// the board (and the baselines' plain sorted set) on first use with
// pipelined ZADD/HSET of pre-encoded members.
func bigService(b *testing.B) (*Service, *redistest.Redis) {
	b.Helper()
	r := redistest.Real(b)
	bigBoard.once.Do(func() {
		start := time.Now()
		bigBoard.prefix = r.Prefix
		bigBoard.err = buildBig(r.Client, keyspace.New(r.Prefix))
		sp := keyspace.New(r.Prefix)
		var bytes int64
		for _, key := range []string{boardKey(sp, "big"), playersKey(sp, "big")} {
			n, _ := r.Client.MemoryUsage(context.Background(), key, 0).Result()
			bytes += n
		}
		b.Logf("built a %d-player board in %v; it takes %d MB of Redis memory (ZSET + HASH)",
			bigPlayers, time.Since(start).Round(time.Millisecond), bytes>>20)
	})
	if bigBoard.err != nil {
		b.Fatalf("building the big board: %v", bigBoard.err)
	}
	return New(r.Client, Config{Prefix: bigBoard.prefix}), r
}

func buildBig(rdb redis.UniversalClient, sp keyspace.Space) error {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	// Members are inserted in their sorted order: a skiplist filled at its
	// tail stays in the CPU cache, three times faster than random inserts.
	members := make([]string, bigPlayers)
	raw := make([]redis.Z, bigPlayers)
	for i := range members {
		// Scores 0..99999.9 with one decimal: plenty of ties.
		members[i] = revOf(Score(rng.IntN(1_000_000)*100)) + ":" + fmt.Sprintf("%015d", i+1) + ":" + bigName(i)
		raw[i] = redis.Z{Score: float64(rng.IntN(1_000_000)), Member: bigName(i)}
	}
	slices.Sort(members)
	slices.SortFunc(raw, func(a, b redis.Z) int { return cmp.Compare(a.Score, b.Score) })
	const chunk = 10_000
	pipe := rdb.Pipeline()
	for lo := 0; lo < bigPlayers; lo += chunk {
		zs := make([]redis.Z, 0, chunk)
		fields := make([]any, 0, 2*chunk)
		for _, m := range members[lo : lo+chunk] {
			zs = append(zs, redis.Z{Member: m})
			fields = append(fields, m[memberSkip:], m[:prefixLen])
		}
		pipe.ZAdd(ctx, boardKey(sp, "big"), zs...)
		pipe.HSet(ctx, playersKey(sp, "big"), fields...)
		pipe.ZAdd(ctx, rawKey(sp), raw[lo:lo+chunk]...)
		if pipe.Len() >= 30 {
			if _, err := pipe.Exec(ctx); err != nil {
				return err
			}
		}
	}
	pipe.Set(ctx, seqKey(sp, "big"), bigPlayers, 0)
	_, err := pipe.Exec(ctx)
	return err
}

// latencies collects per-call durations.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d []time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d...)
	l.mu.Unlock()
}

func (l *latencies) total() time.Duration {
	var t time.Duration
	for _, d := range l.d {
		t += d
	}
	return t
}

// report reports the p50 and p99 as name-p50-µs and name-p99-µs.
func (l *latencies) report(b *testing.B, name string) {
	if len(l.d) == 0 {
		return
	}
	slices.Sort(l.d)
	b.ReportMetric(float64(l.d[len(l.d)*99/100].Microseconds()), name+"-p99-µs")
	b.ReportMetric(float64(l.d[len(l.d)/2].Microseconds()), name+"-p50-µs")
}

// versus runs, in every iteration, the call measured and then its raw-Redis
// baseline, so both see the same machine load. It reports x-raw (the call's
// total time over the baseline's) and both latency distributions.
func versus(b *testing.B, call, raw func(i int) error) {
	b.Helper()
	lc := &latencies{d: make([]time.Duration, 0, b.N)}
	lr := &latencies{d: make([]time.Duration, 0, b.N)}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		if err := call(i); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := raw(i); err != nil {
			b.Fatal(err)
		}
		lc.d = append(lc.d, t1.Sub(t0))
		lr.d = append(lr.d, time.Since(t1))
	}
	b.StopTimer()
	b.ReportMetric(float64(lc.total())/float64(lr.total()), "x-raw")
	lc.report(b, "call")
	lr.report(b, "raw")
}

// BenchmarkTop100 reads the top 100 of the million-player board, against
// its baseline, the bare ZRANGE 0 99 under Top, in the same iterations.
func BenchmarkTop100(b *testing.B) {
	s, r := bigService(b)
	ctx := context.Background()
	key := boardKey(s.sp, "big")
	versus(b, func(int) error {
		es, err := s.Top(ctx, "big", 100)
		if err == nil && len(es) != 100 {
			err = fmt.Errorf("top has %d entries", len(es))
		}
		return err
	}, func(int) error { return r.Client.ZRange(ctx, key, 0, 99).Err() })
}

// BenchmarkRank reads a random player's entry, against its baseline in the
// same iterations: one bare ZRANK of a known member (what a board keyed by
// player name alone, with name-ordered ties, costs).
func BenchmarkRank(b *testing.B) {
	s, r := bigService(b)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	key := boardKey(s.sp, "big")
	members, err := r.Client.ZRange(ctx, key, 0, 999).Result()
	if err != nil {
		b.Fatal(err)
	}
	versus(b, func(int) error {
		_, err := s.Get(ctx, "big", bigName(rng.IntN(bigPlayers)))
		return err
	}, func(i int) error { return r.Client.ZRank(ctx, key, members[i%len(members)]).Err() })
}

func hundredPlayers(rng *rand.Rand) []string {
	ps := make([]string, 100)
	for i := range ps {
		ps[i] = bigName(rng.IntN(bigPlayers))
	}
	return ps
}

// BenchmarkRanks100Speedup interleaves one batch and the same 100 sequential
// calls per iteration, so both see the same machine load, and reports how
// many times faster the batch is.
func BenchmarkRanks100Speedup(b *testing.B) {
	s, _ := bigService(b)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 8))
	var batch, seq time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ps := hundredPlayers(rng)
		t0 := time.Now()
		if _, err := s.Ranks(ctx, "big", ps); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		for _, p := range ps {
			if _, err := s.Get(ctx, "big", p); err != nil {
				b.Fatal(err)
			}
		}
		batch, seq = batch+t1.Sub(t0), seq+time.Since(t1)
	}
	b.ReportMetric(float64(seq)/float64(batch), "x-faster")
}

// BenchmarkPost posts best/incr/set scores for random players of the big
// board from 8×GOMAXPROCS goroutines, each alternating a Post with its
// baseline, a bare ZADD GT of a player's score to a million-member sorted set
// of player -> score (no tie order, no modes, no entry answered), built with
// the big board. It reports post/raw, the throughput ratio (the raw ZADD's
// total time over Post's), and both latency distributions.
func BenchmarkPost(b *testing.B) {
	s, r := bigService(b)
	ctx := context.Background()
	key := rawKey(s.sp)
	modes := []Mode{Best, Incr, Set}
	lp, lr := &latencies{}, &latencies{}
	var seed sync.Mutex
	n := uint64(0)
	b.SetParallelism(8) // × GOMAXPROCS goroutines
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		seed.Lock()
		n++
		rng := rand.New(rand.NewPCG(n, 99))
		seed.Unlock()
		var dp, dr []time.Duration
		for pb.Next() {
			t0 := time.Now()
			if _, err := s.Post(ctx, "big", bigName(rng.IntN(bigPlayers)), Score(rng.IntN(1_000_000)*100), modes[rng.IntN(3)]); err != nil {
				b.Error(err)
				return
			}
			t1 := time.Now()
			if err := r.Client.ZAddGT(ctx, key, redis.Z{Score: float64(rng.IntN(1_000_000)), Member: bigName(rng.IntN(bigPlayers))}).Err(); err != nil {
				b.Error(err)
				return
			}
			dp, dr = append(dp, t1.Sub(t0)), append(dr, time.Since(t1))
		}
		lp.add(dp)
		lr.add(dr)
	})
	b.StopTimer()
	b.ReportMetric(float64(lr.total())/float64(lp.total()), "post/raw")
	lp.report(b, "post")
	lr.report(b, "raw")
}
