package shop

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/redistest"
)

// Run with a real redis-server on PATH, e.g.
//
//	go test -run '^$' -bench . -benchtime 2s ./shop/
//
// purchases/s counts successful purchases; retries/op is WATCH/MULTI/EXEC
// retries per purchase attempt; conflicts/op the attempts that ran out of
// retries (ErrConflict).

// BenchmarkBuy gives each path's own figures; the ratio between the paths
// comes from BenchmarkLuaVsWatch, which alternates them.
func BenchmarkBuy(b *testing.B) {
	r := redistest.Real(b)
	for _, p := range paths {
		for _, c := range []struct{ items, buyers int }{{1, 1}, {1, 32}, {32, 32}} {
			b.Run(fmt.Sprintf("%s/items=%d/buyers=%d", p.name, c.items, c.buyers), func(b *testing.B) {
				runBuyers(b, r, p.buy, c.items, c.buyers)
			})
		}
	}
}

// BenchmarkDurability is what shop.durability=replica costs a purchase
// (Buy, one item per buyer, so nothing conflicts): a redis-server and one
// replica on this machine, each mode by turns, 1 and 32 buyers.
func BenchmarkDurability(b *testing.B) {
	r := redistest.Own(b, redistest.Options{})
	redistest.StartReplica(b, r.Server)
	for _, buyers := range []int{1, 32} {
		for _, mode := range []string{DurabilityNone, DurabilityReplica} {
			b.Run(fmt.Sprintf("%s/buyers=%d", mode, buyers), func(b *testing.B) {
				cfg := Config{Durability: func() string { return mode }}
				runBuyersWith(b, r, cfg, (*Shop).Buy, buyers, buyers)
			})
		}
	}
}

// BenchmarkLuaVsWatch is the ratio quoted for the two purchase paths: 32
// buyers (one user each) hammer one item, in rounds of 1,000 purchases per
// path (long enough that the last backoff of a round weighs little),
// each iteration one round of each, the order swapped every iteration, so
// both paths see the same machine load. It reports lua/watch, the ratio of
// successful purchases per second, and each path's rate and WATCH retries
// per attempt. It needs a real redis-server (skips without one, fails under
// CHATD_TEST_STRICT=1).
func BenchmarkLuaVsWatch(b *testing.B) {
	const buyers, round = 32, 1000
	r := redistest.Real(b)
	ctx := context.Background()
	rdb := benchClient(b, r)
	s := New(rdb, Config{Prefix: r.Prefix})
	if err := s.Stock(ctx, "item-0", MaxStock, 1); err != nil {
		b.Fatal(err)
	}
	for i := range buyers {
		if err := rdb.Set(ctx, s.keys.balance(buyerName(i)), MaxBalance, 0).Err(); err != nil {
			b.Fatal(err)
		}
	}
	type tally struct {
		ok      atomic.Int64
		elapsed time.Duration
	}
	var watch, lua tally
	runRound := func(buy buyFunc, t *tally) {
		var next atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for i := range buyers {
			wg.Go(func() {
				for next.Add(1) <= round {
					_, err := buy(s, ctx, buyerName(i), "item-0", 1, "")
					switch {
					case err == nil:
						t.ok.Add(1)
					case !errors.Is(err, ErrConflict):
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		t.elapsed += time.Since(start)
	}
	retries := s.retries.Load()
	odd := false
	for b.Loop() {
		if odd {
			runRound((*Shop).BuyLua, &lua)
			runRound((*Shop).Buy, &watch)
		} else {
			runRound((*Shop).Buy, &watch)
			runRound((*Shop).BuyLua, &lua)
		}
		odd = !odd
	}
	watchRate := float64(watch.ok.Load()) / watch.elapsed.Seconds()
	luaRate := float64(lua.ok.Load()) / lua.elapsed.Seconds()
	b.ReportMetric(luaRate/watchRate, "lua/watch")
	b.ReportMetric(watchRate, "watch-purchases/s")
	b.ReportMetric(luaRate, "lua-purchases/s")
	b.ReportMetric(float64(s.retries.Load()-retries)/float64(b.N*round), "watch-retries/op")
}

// BenchmarkBuyCluster measures the one-slot trade-off: the whole shop sits on
// one master of the three, whether buyers want one item or many.
func BenchmarkBuyCluster(b *testing.B) {
	r := redistest.Cluster(b)
	for _, p := range paths {
		for _, c := range []struct{ items, buyers int }{{1, 32}, {32, 32}} {
			b.Run(fmt.Sprintf("%s/items=%d/buyers=%d", p.name, c.items, c.buyers), func(b *testing.B) {
				runBuyers(b, r, p.buy, c.items, c.buyers)
			})
		}
	}
}

// BenchmarkRetryPolicy compares retry budgets and backoffs for the WATCH
// path in its worst case, 32 buyers hammering one item.
func BenchmarkRetryPolicy(b *testing.B) {
	r := redistest.Real(b)
	for _, cfg := range []Config{
		{MinBackoff: 100 * time.Microsecond, MaxBackoff: 10 * time.Millisecond},
		{MinBackoff: time.Millisecond, MaxBackoff: 50 * time.Millisecond},
		{}, // the default
		{MinBackoff: 5 * time.Millisecond, MaxBackoff: 500 * time.Millisecond},
		{MaxRetries: 50},
	} {
		name := fmt.Sprintf("retries=%d/min=%s/max=%s", cmp.Or(cfg.MaxRetries, 20), cmp.Or(cfg.MinBackoff, 2*time.Millisecond), cmp.Or(cfg.MaxBackoff, 200*time.Millisecond))
		b.Run(name, func(b *testing.B) {
			runBuyersWith(b, r, cfg, (*Shop).Buy, 1, 32)
		})
	}
}

// BenchmarkRaw is the baseline: the cheapest write a purchase must make (one
// HINCRBY on the stock), bare and through EVALSHA, on the same servers.
func BenchmarkRaw(b *testing.B) {
	r := redistest.Real(b)
	script := redis.NewScript(`return redis.call('HINCRBY', KEYS[1], 'stock', -1)`)
	for _, buyers := range []int{1, 32} {
		b.Run(fmt.Sprintf("hincrby/buyers=%d", buyers), func(b *testing.B) {
			rdb := benchClient(b, r)
			key := r.Prefix + ":{shop:main}:item:raw"
			parallel(b, buyers, func(int) error { return rdb.HIncrBy(context.Background(), key, "stock", -1).Err() })
		})
		b.Run(fmt.Sprintf("evalsha/buyers=%d", buyers), func(b *testing.B) {
			rdb := benchClient(b, r)
			keys := []string{r.Prefix + ":{shop:main}:item:raw"}
			parallel(b, buyers, func(int) error { return script.Run(context.Background(), rdb, keys).Err() })
		})
	}
}

// BenchmarkRawCluster shows what one slot forgoes: 32 writers on one slot
// (one master) against 32 writers spread over 32 slots (all three masters).
func BenchmarkRawCluster(b *testing.B) {
	r := redistest.Cluster(b)
	for _, slots := range []int{1, 32} {
		b.Run(fmt.Sprintf("incr/slots=%d/buyers=32", slots), func(b *testing.B) {
			rdb := benchClient(b, r)
			parallel(b, 32, func(i int) error {
				return rdb.Incr(context.Background(), fmt.Sprintf("%s:{u%d}:n", r.Prefix, i%slots)).Err()
			})
		})
	}
}

// runBuyers has buyers goroutines, each a different user, buy one unit at a
// time of items items (buyer i wants item i%items) until b.N attempts ran.
func runBuyers(b *testing.B, r *redistest.Redis, buy buyFunc, items, buyers int) {
	runBuyersWith(b, r, Config{}, buy, items, buyers)
}

func runBuyersWith(b *testing.B, r *redistest.Redis, cfg Config, buy buyFunc, items, buyers int) {
	ctx := context.Background()
	rdb := benchClient(b, r)
	cfg.Prefix = r.Prefix
	s := New(rdb, cfg)
	for i := range items {
		if err := s.Stock(ctx, fmt.Sprintf("item-%d", i), MaxStock, 1); err != nil {
			b.Fatal(err)
		}
	}
	for i := range buyers {
		if err := rdb.Set(ctx, s.keys.balance(buyerName(i)), MaxBalance, 0).Err(); err != nil {
			b.Fatal(err)
		}
	}
	trips := &tripCounter{}
	rdb.AddHook(trips) // after the setup, so only purchases count
	before := s.retries.Load()
	var conflicts atomic.Int64
	lat := make([][]time.Duration, buyers) // per goroutine: no lock
	elapsed := parallel(b, buyers, func(i int) error {
		t0 := time.Now()
		_, err := buy(s, ctx, buyerName(i), fmt.Sprintf("item-%d", i%items), 1, "")
		lat[i] = append(lat[i], time.Since(t0))
		if errors.Is(err, ErrConflict) {
			conflicts.Add(1)
			return nil
		}
		return err
	})
	ok := float64(int64(b.N) - conflicts.Load())
	b.ReportMetric(ok/elapsed.Seconds(), "purchases/s")
	b.ReportMetric(float64(s.retries.Load()-before)/float64(b.N), "retries/op")
	b.ReportMetric(float64(conflicts.Load())/float64(b.N), "conflicts/op")
	all := slices.Sorted(slices.Values(slices.Concat(lat...)))
	b.ReportMetric(float64(all[len(all)*99/100])/1e6, "p99-ms")
	b.ReportMetric(float64(all[len(all)-1])/1e6, "max-ms")
	if r.Kind != redistest.Clusters { // a cluster's Watch runs on node clients the hook does not see
		b.ReportMetric(float64(trips.n.Load())/float64(b.N), "roundtrips/op")
	}
}

// tripCounter counts network round trips: one per command or pipeline.
type tripCounter struct{ n atomic.Int64 }

func (h *tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// parallel runs b.N calls of fn over n goroutines (fn gets its goroutine's
// index) and returns the wall time they took.
func parallel(b *testing.B, n int, fn func(i int) error) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := fn(i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	return elapsed
}

// benchClient is a client with a pool big enough for 32 goroutines.
func benchClient(b *testing.B, r *redistest.Redis) redis.UniversalClient {
	var c redis.UniversalClient
	if r.Kind == redistest.Clusters {
		c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: r.Addrs, PoolSize: 64})
	} else {
		c = redis.NewClient(&redis.Options{Addr: r.Addrs[0], PoolSize: 64})
	}
	b.Cleanup(func() { _ = c.Close() })
	return c
}
