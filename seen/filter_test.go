package seen

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testkit"
)

func TestGenerationRateKeepsTheTargetOverAllGenerations(t *testing.T) {
	for _, g := range []int{1, 2, 3, 5} {
		for _, p := range []float64{0.0001, 0.01, 0.1} {
			pg := generationFP(p, g)
			assert.InDelta(t, p, 1-pow(1-pg, g), 1e-12, "g=%d p=%g", g, p)
		}
	}
	assert.Equal(t, 0.01, generationFP(0.01, 1))
}

// fpOf is the false-positive rate of a bloom filter of s's m bits and k
// hashes holding n items.
func fpOf(s size, n int) float64 {
	return pow(-math.Expm1(-float64(s.k)*float64(n)/float64(s.m)), int(s.k))
}

func TestPlan(t *testing.T) {
	for _, capacity := range []int{100, 128, 300, 10000, 1000000, 10000000} {
		for _, p := range []float64{0.0001, 0.01, 0.1} {
			for _, g := range []int{1, 2, 3} {
				pl, err := newPlan(capacity, p, g)
				require.NoError(t, err)
				name := fmt.Sprintf("capacity %d rate %g generations %d", capacity, p, g)
				last := pl.sizes[len(pl.sizes)-1]
				assert.Equal(t, capacity, last.c, name)
				assert.Equal(t, (g-1)*capacity, pl.keep, name)
				assert.LessOrEqual(t, len(pl.sizes), growingSlots, "%s: growing sizes fit the slots", name)
				// the worst filters kept: every growing generation, full,
				// with g-1 full-size ones; or g full-size ones. (k from
				// bloom.EstimateParameters is rounded up, which costs up to
				// 3% over the rate a generation was sized for.)
				growing := 0.0
				for i, s := range pl.sizes[:len(pl.sizes)-1] {
					assert.Equal(t, FirstCapacity*int(math.Pow(Growth, float64(i))), s.c, name)
					growing += fpOf(s, s.c)
					assert.LessOrEqual(t, s.k, pl.k, name)
				}
				assert.LessOrEqual(t, growing+float64(g-1)*fpOf(last, last.c), p*1.03, "%s: growing and full-size", name)
				assert.LessOrEqual(t, 1-pow(1-fpOf(last, last.c), g), p*1.03, "%s: full-size", name)
			}
		}
	}
	t.Run("the default starts small and grows to capacity", func(t *testing.T) {
		pl, err := newPlan(DefaultCapacity, DefaultFPRate, DefaultGenerations)
		require.NoError(t, err)
		var caps []int
		for _, s := range pl.sizes {
			caps = append(caps, s.c)
		}
		assert.Equal(t, []int{128, 512, 2048, 8192, 10000}, caps)
		t.Logf("sizes %+v", pl.sizes)
	})
}

func pow(x float64, n int) float64 {
	out := 1.0
	for range n {
		out *= x
	}
	return out
}

// randomItems returns n random byte strings of 1..MaxItemLen bytes.
func randomItems(rng *rand.Rand, n int) []string {
	out := make([]string, n)
	for i := range out {
		b := make([]byte, 1+rng.IntN(MaxItemLen))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		out[i] = string(b)
	}
	return out
}

// model is a user's scalable filter in memory, made of bloom/v3 filters:
// what the scripts must do, written plainly.
type model struct {
	pl    plan
	slots int
	gens  []*modelGen
}

type modelGen struct {
	g int
	s size
	n int
	f *bloom.BloomFilter
}

func (md *model) mark(item string) {
	if len(md.gens) == 0 || md.cur().n >= md.cur().s.c {
		g := 0
		if len(md.gens) > 0 {
			g = md.cur().g + 1
		}
		held := 0
		for _, gen := range md.gens {
			held += gen.s.c
		}
		for len(md.gens) > 0 && (held-md.gens[0].s.c >= md.pl.keep || len(md.gens) >= md.slots) {
			held -= md.gens[0].s.c
			md.gens = md.gens[1:]
		}
		s := md.pl.sizes[min(g, len(md.pl.sizes)-1)]
		md.gens = append(md.gens, &modelGen{g: g, s: s, f: bloom.New(s.m, s.k)})
	}
	if !md.cur().f.TestAndAddString(item) {
		md.cur().n++
	}
}

func (md *model) cur() *modelGen { return md.gens[len(md.gens)-1] }

func (md *model) test(item string) bool {
	for _, gen := range md.gens {
		if gen.f.TestString(item) {
			return true
		}
	}
	return false
}

func TestRedisFilterAnswersAsInMemoryBloom(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	tests := []struct {
		capacity, marked, generations int
		p                             float64
	}{
		{100, 350, 2, 0.1},    // full-size generations only, rotated
		{1000, 700, 2, 0.01},  // growing generations
		{1000, 2900, 2, 0.01}, // growing, then full-size ones, rotated
		{5000, 5000, 2, 0.0001},
		{3000, 1500, 2, 0.05},
		{600, 3000, 3, 0.01},
		{200, 700, 1, 0.01},
	}
	for i, tt := range tests {
		user := "u" + strconv.Itoa(i)
		name := fmt.Sprintf("capacity %d rate %g generations %d marked %d", tt.capacity, tt.p, tt.generations, tt.marked)
		t.Run(name+" answers exactly as bloom.New(m, k) generations", func(t *testing.T) {
			cfg := Config{Prefix: r.Prefix, Capacity: fixed(tt.capacity), FPRate: fixed(tt.p), Generations: tt.generations}
			// both ways the scripts read and write bits, mixed
			bitwise, whole := New(r.Client, cfg), New(r.Client, cfg)
			bitwise.readWhole, whole.readWhole = 0, 1<<30
			pl, err := newPlan(tt.capacity, tt.p, tt.generations)
			require.NoError(t, err)
			md := &model{pl: pl, slots: whole.slots}
			marked := randomItems(rng, tt.marked)
			for _, it := range marked {
				md.mark(it)
			}
			for rest, turn := marked, 0; len(rest) > 0; turn++ {
				n := min(len(rest), 1+rng.IntN(400))
				f := []*Filter{bitwise, whole}[turn%2]
				require.NoError(t, f.Mark(ctx, user, rest[:n]))
				rest = rest[n:]
			}

			gens := generations(t, r.Client, r.Prefix, user)
			want := make([]meta, len(md.gens))
			for i, g := range md.gens {
				want[i] = meta{g: g.g, m: int(g.s.m), k: int(g.s.k), c: g.s.c, n: g.n}
			}
			require.Equal(t, want, gens, "the generations kept, their sizes and counts")
			for _, g := range md.gens {
				bits, err := r.Client.Get(ctx, bitsKey(keyspace.New(r.Prefix), user, g.g%whole.slots)).Bytes()
				require.NoError(t, err)
				require.Len(t, bits, int(g.s.m+7)/8, "the bitmap holds m bits")
				differ := 0
				for i := range g.s.m {
					inRedis := bits[i/8]&(0x80>>(i%8)) != 0
					if inRedis != g.f.BitSet().Test(i) {
						differ++
					}
				}
				assert.Zero(t, differ, "generation %d: bits that differ between Redis and bloom.BloomFilter", g.g)
			}

			probes := append(randomItems(rng, 5000), marked...)
			rng.Shuffle(len(probes), func(i, j int) { probes[i], probes[j] = probes[j], probes[i] })
			held := 0
			for _, f := range []*Filter{bitwise, whole} {
				got := seenAll(t, f, user, probes)
				held = 0
				for i, it := range probes {
					require.Equal(t, md.test(it), got[i], "item %d, readWhole %d", i, f.readWhole)
					if got[i] {
						held++
					}
				}
			}
			t.Logf("generations %+v, %d of %d probes maybe seen", gens, held, len(probes))
		})
	}
}

func TestFilterKeepsItsSize(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	var capacity atomic.Int64
	capacity.Store(1000)
	var p atomic.Value
	p.Store(0.0001)
	reg := prometheus.NewRegistry()
	cfg := Config{
		Prefix:     r.Prefix,
		Capacity:   func() int { return int(capacity.Load()) },
		FPRate:     func() float64 { return p.Load().(float64) },
		Registerer: reg,
	}
	f := New(r.Client, cfg)
	old := ids("old", 0, 600)
	require.NoError(t, f.Mark(ctx, "alice", old))
	before := generations(t, r.Client, r.Prefix, "alice")
	require.Len(t, before, 2)
	tight := sizeOf(t, 1000, 0.0001, DefaultGenerations, 1)
	require.Equal(t, meta{g: 1, m: int(tight.m), k: int(tight.k), c: 512, n: 600 - 128}, before[1])

	capacity.Store(5000)
	p.Store(0.1)
	loose, err := newPlan(5000, 0.1, DefaultGenerations)
	require.NoError(t, err)
	require.Less(t, loose.k, tight.k, "the new settings need fewer hashes")
	t.Run("a filter made before a settings change still answers", func(t *testing.T) {
		got, err := f.Unseen(ctx, "alice", old)
		require.NoError(t, err)
		assert.Empty(t, got)
		assert.Equal(t, 1.0, testkit.Value(t, f.metrics.resends), "sent again with more hashes")
		_, err = f.Unseen(ctx, "alice", old)
		require.NoError(t, err)
		assert.Equal(t, 1.0, testkit.Value(t, f.metrics.resends), "and remembered")
	})
	t.Run("another node learns it as well", func(t *testing.T) {
		g := New(r.Client, cfg)
		require.NoError(t, g.Mark(ctx, "alice", ids("mid", 0, 10)))
		assert.Equal(t, 2.0, testkit.Value(t, g.metrics.resends))
	})
	t.Run("marks go on into the old-sized generation until it is full", func(t *testing.T) {
		require.NoError(t, f.Mark(ctx, "alice", ids("mid", 10, 30)))
		gens := generations(t, r.Client, r.Prefix, "alice")
		require.Len(t, gens, 2)
		assert.Equal(t, int(tight.m), gens[1].m)
		assert.Equal(t, 512, gens[1].c)
	})
	t.Run("the next generation takes the new size", func(t *testing.T) {
		require.NoError(t, f.Mark(ctx, "alice", ids("new", 0, 400)))
		gens := generations(t, r.Client, r.Prefix, "alice")
		require.Len(t, gens, 3)
		s := loose.sizes[2]
		assert.Equal(t, meta{g: 2, m: int(s.m), k: int(s.k), c: 2048, n: gens[2].n}, gens[2])
		assert.Equal(t, 512, gens[1].n, "the old generation was full")
	})
	t.Run("all sizes are checked together", func(t *testing.T) {
		all := append(append(append([]string{}, old...), ids("mid", 0, 40)...), ids("new", 0, 400)...)
		assert.NotContains(t, seenAll(t, f, "alice", all), false)
	})
}

func TestTTL(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	s := keyspace.New(r.Prefix)

	t.Run("every key of a filter carries the TTL and each mark renews them all", func(t *testing.T) {
		var ttl atomic.Int64
		ttl.Store(int64(time.Hour))
		f := New(r.Client, Config{Prefix: r.Prefix, Capacity: fixed(1000), TTL: func() time.Duration { return time.Duration(ttl.Load()) }})
		require.NoError(t, f.Mark(ctx, "alice", ids("a", 0, 900))) // generations 0, 1 and 2
		gens := generations(t, r.Client, r.Prefix, "alice")
		require.Len(t, gens, 3)
		keys := []string{metaKey(s, "alice")}
		for _, g := range gens {
			keys = append(keys, bitsKey(s, "alice", g.g%f.slots))
		}
		pttl := func(key string) time.Duration {
			d, err := r.Client.PTTL(ctx, key).Result()
			require.NoError(t, err)
			return d
		}
		for _, key := range keys {
			assert.InDelta(t, time.Hour, pttl(key), float64(time.Minute), key)
		}
		ttl.Store(int64(3 * time.Hour))
		require.NoError(t, f.Mark(ctx, "alice", []string{"b"}))
		for _, key := range keys {
			assert.InDelta(t, 3*time.Hour, pttl(key), float64(time.Minute), key)
		}
		_, err := f.Unseen(ctx, "alice", []string{"b"})
		require.NoError(t, err)
		assert.InDelta(t, 3*time.Hour, pttl(keys[0]), float64(time.Minute), "a check renews nothing")
	})
	t.Run("the default is a week", func(t *testing.T) {
		for _, d := range []func() time.Duration{nil, fixed(time.Duration(0)), fixed(-time.Second)} {
			assert.Equal(t, 7*24*time.Hour, New(r.Client, Config{TTL: d}).TTL())
		}
		f := New(r.Client, Config{Prefix: r.Prefix})
		require.NoError(t, f.Mark(ctx, "carol", []string{"x"}))
		for _, key := range []string{metaKey(s, "carol"), bitsKey(s, "carol", 0)} {
			d, err := r.Client.PTTL(ctx, key).Result()
			require.NoError(t, err)
			assert.InDelta(t, DefaultTTL, d, float64(time.Minute), key)
		}
	})
	t.Run("an expired filter forgets", func(t *testing.T) {
		f := New(r.Client, Config{Prefix: r.Prefix, TTL: fixed(50 * time.Millisecond)})
		require.NoError(t, f.Mark(ctx, "bob", []string{"x"}))
		require.Eventually(t, func() bool {
			got, err := f.Unseen(ctx, "bob", []string{"x"})
			return err == nil && len(got) == 1
		}, 5*time.Second, 20*time.Millisecond)
		require.NoError(t, f.Mark(ctx, "bob", []string{"y"}))
		assert.Equal(t, 0, generations(t, r.Client, r.Prefix, "bob")[0].g, "starts over")
	})
}

func TestGenerationsSetting(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	f := New(r.Client, Config{Prefix: r.Prefix, Capacity: fixed(100), Generations: 3})
	for i := range 5 {
		require.NoError(t, f.Mark(ctx, "alice", ids("b"+strconv.Itoa(i), 0, 100)))
	}
	gens := generations(t, r.Client, r.Prefix, "alice")
	assert.Equal(t, []int{2, 3, 4}, numbers(gens), "three full-size generations kept")
	got, err := f.Unseen(ctx, "alice", ids("b2", 0, 100))
	require.NoError(t, err)
	assert.Empty(t, got, "the oldest of three kept generations is checked")
	got, err = f.Unseen(ctx, "alice", ids("b1", 0, 100))
	require.NoError(t, err)
	assert.Greater(t, len(got), 90, "a dropped generation is forgotten")
}

func TestCluster(t *testing.T) {
	t.Parallel()
	r := redistest.Cluster(t)
	ctx := context.Background()
	var capacity atomic.Int64
	capacity.Store(200)
	nodes := make([]*Filter, 3)
	for i := range nodes {
		nodes[i] = New(r.NewClient(t), Config{Prefix: r.Prefix, Capacity: func() int { return int(capacity.Load()) }})
	}
	users := []string{"alice", "bob", "carol", "dave", "erin"}
	for i, u := range users {
		require.NoError(t, nodes[i%3].Mark(ctx, u, ids(u, 0, 150)))
	}
	t.Run("every node sees every user's marks", func(t *testing.T) {
		for _, f := range nodes {
			for _, u := range users {
				got, err := f.Unseen(ctx, u, append(ids(u, 0, 150), "never-marked"))
				require.NoError(t, err)
				assert.Equal(t, []string{"never-marked"}, got, u)
			}
		}
	})
	t.Run("growth, rotation and a size change work on the cluster", func(t *testing.T) {
		capacity.Store(400)
		require.NoError(t, nodes[1].Mark(ctx, "alice", ids("alice", 150, 1000)))
		got, err := nodes[2].Unseen(ctx, "alice", ids("alice", 750, 400))
		require.NoError(t, err)
		assert.Empty(t, got)
		gens := generations(t, r.Client, r.Prefix, "alice")
		require.Len(t, gens, 2, "%+v", gens)
		assert.Equal(t, []int{400, 400}, []int{gens[0].c, gens[1].c})
	})
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	f := New(r.Client, Config{Prefix: r.Prefix, Capacity: fixed(100), Registerer: reg})
	g := New(r.Client, Config{Prefix: r.Prefix, Capacity: fixed(100), Registerer: reg}) // shares the collectors

	require.NoError(t, f.Mark(ctx, "alice", ids("a", 0, 150)))
	_, err := g.Unseen(ctx, "alice", []string{"a-1", "a-149", "zzz"})
	require.NoError(t, err)

	assert.Equal(t, 150.0, testkit.Value(t, f.metrics.marked))
	assert.Equal(t, 2.0, testkit.Value(t, f.metrics.rotations), "the first generation and one rotation")
	assert.Equal(t, 3.0, testkit.Value(t, f.metrics.checked))
	assert.Equal(t, 2.0, testkit.Value(t, f.metrics.maybeSeen))
	families, err := reg.Gather()
	require.NoError(t, err)
	series := map[string]int{}
	for _, mf := range families {
		series[mf.GetName()] = len(mf.GetMetric())
	}
	assert.Equal(t, 2, series["chatd_seen_call_duration_seconds"], "one series per op")
	assert.Equal(t, 1, series["chatd_seen_rotations_total"])
}

func TestRedisDownIsAnError(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	ctx := context.Background()
	f := New(r.Client, Config{Prefix: r.Prefix})
	require.NoError(t, f.Mark(ctx, "alice", []string{"x"}))
	r.Server.Kill(t)
	assert.Error(t, f.Mark(ctx, "alice", []string{"y"}))
	_, err := f.Unseen(ctx, "alice", []string{"x"})
	assert.Error(t, err)

	r.Server.Start(t)
	require.Eventually(t, func() bool {
		_, err := f.Unseen(ctx, "alice", []string{"x"})
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "answers again once Redis is back")
}
