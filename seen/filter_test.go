package seen

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redistest"
)

// bloomEstimate is the geometry a generation gets for capacity and rate p
// when g generations are kept.
func bloomEstimate(capacity int, p float64, g int) (m, k int) {
	um, uk := bloom.EstimateParameters(uint(capacity), generationFP(p, g))
	return int(um), int(uk)
}

func TestGenerationRateKeepsTheTargetOverAllGenerations(t *testing.T) {
	for _, g := range []int{1, 2, 3, 5} {
		for _, p := range []float64{0.0001, 0.01, 0.1} {
			pg := generationFP(p, g)
			assert.InDelta(t, p, 1-pow(1-pg, g), 1e-12, "g=%d p=%g", g, p)
		}
	}
	assert.Equal(t, 0.01, generationFP(0.01, 1))
}

// value reads a counter.
func value(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, c.Write(&m))
	return m.GetCounter().GetValue()
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

func TestRedisFilterAnswersAsInMemoryBloom(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	tests := []struct {
		capacity, marked int
		p                float64
	}{
		{100, 100, 0.1},
		{1000, 700, 0.01},
		{5000, 5000, 0.0001},
		{3000, 1500, 0.05},
	}
	for i, tt := range tests {
		user := "u" + strconv.Itoa(i)
		name := "capacity " + strconv.Itoa(tt.capacity) + " rate " + strconv.FormatFloat(tt.p, 'g', -1, 64)
		t.Run(name+" answers exactly as bloom.New(m, k)", func(t *testing.T) {
			cfg := Config{Prefix: r.Prefix, Capacity: fixed(tt.capacity), FPRate: fixed(tt.p)}
			// both ways the scripts read and write bits, mixed
			bitwise, whole := New(r.Client, cfg), New(r.Client, cfg)
			bitwise.readWhole, whole.readWhole = 0, 1<<30
			marked := randomItems(rng, tt.marked)
			for rest, turn := marked, 0; len(rest) > 0; turn++ {
				n := min(len(rest), 1+rng.IntN(400))
				f := []*Filter{bitwise, whole}[turn%2]
				require.NoError(t, f.Mark(ctx, user, rest[:n]))
				rest = rest[n:]
			}

			gens := generations(t, r.Client, r.Prefix, user, DefaultGenerations)
			g := gens[1]
			require.Equal(t, 1, g.g, "one generation")
			m, k := bloomEstimate(tt.capacity, tt.p, DefaultGenerations)
			require.Equal(t, []int{m, k}, []int{g.m, g.k}, "m and k of bloom.EstimateParameters")
			mem := bloom.NewWithEstimates(uint(tt.capacity), generationFP(tt.p, DefaultGenerations))
			require.Equal(t, []uint{uint(m), uint(k)}, []uint{mem.Cap(), mem.K()})
			for _, it := range marked {
				mem.AddString(it)
			}

			bits, err := r.Client.Get(ctx, bitsKey(keyspace.New(r.Prefix), user, 1)).Bytes()
			require.NoError(t, err)
			require.Len(t, bits, (m+7)/8, "the bitmap holds m bits")
			differ := 0
			for i := range uint(m) {
				inRedis := int(i/8) < len(bits) && bits[i/8]&(0x80>>(i%8)) != 0
				if inRedis != mem.BitSet().Test(i) {
					differ++
				}
			}
			assert.Zero(t, differ, "bits that differ between Redis and bloom.BloomFilter")

			probes := append(randomItems(rng, 5000), marked...)
			rng.Shuffle(len(probes), func(i, j int) { probes[i], probes[j] = probes[j], probes[i] })
			held := 0
			for _, f := range []*Filter{bitwise, whole} {
				got := seenAll(t, f, user, probes)
				held = 0
				for i, it := range probes {
					require.Equal(t, mem.TestString(it), got[i], "item %d, readWhole %d", i, f.readWhole)
					if got[i] {
						held++
					}
				}
			}
			t.Logf("m=%d k=%d, %d of %d probes maybe seen", m, k, held, len(probes))
		})
	}
}

func TestFilterKeepsItsSize(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	var capacity atomic.Int64
	capacity.Store(1000)
	var clock atomic.Int64 // seconds since start
	start := time.Now()
	reg := prometheus.NewRegistry()
	f := New(r.Client, Config{
		Prefix:     r.Prefix,
		Capacity:   func() int { return int(capacity.Load()) },
		Now:        func() time.Time { return start.Add(time.Duration(clock.Load()) * time.Second) },
		Registerer: reg,
	})
	old := ids("old", 0, 600)
	require.NoError(t, f.Mark(ctx, "alice", old))
	before := generations(t, r.Client, r.Prefix, "alice", DefaultGenerations)
	m1, _ := bloomEstimate(1000, DefaultFPRate, DefaultGenerations)
	require.Equal(t, m1, before[1].m)

	capacity.Store(5000)
	t.Run("a filter made before a settings change still answers", func(t *testing.T) {
		got, err := f.Unseen(ctx, "alice", old)
		require.NoError(t, err)
		assert.Empty(t, got)
		assert.Equal(t, 1.0, value(t, f.metrics.resends), "sent again with the stored size")
	})
	t.Run("marks go on into the old-sized generation until it is full", func(t *testing.T) {
		require.NoError(t, f.Mark(ctx, "alice", ids("mid", 0, 300)))
		gens := generations(t, r.Client, r.Prefix, "alice", DefaultGenerations)
		assert.Equal(t, 1, gens[1].g)
		assert.Equal(t, m1, gens[1].m)
		assert.Equal(t, 1000, gens[1].c)
	})
	t.Run("the next generation takes the new size", func(t *testing.T) {
		require.NoError(t, f.Mark(ctx, "alice", ids("new", 0, 400)))
		gens := generations(t, r.Client, r.Prefix, "alice", DefaultGenerations)
		m2, k2 := bloomEstimate(5000, DefaultFPRate, DefaultGenerations)
		assert.Equal(t, meta{g: 2, m: m2, k: k2, c: 5000, n: gens[0].n}, gens[0])
		assert.Equal(t, 1000, gens[1].n, "the old generation was full")
		assert.Positive(t, gens[0].n)
	})
	t.Run("both sizes are checked together", func(t *testing.T) {
		all := append(append(append([]string{}, old...), ids("mid", 0, 300)...), ids("new", 0, 400)...)
		assert.NotContains(t, seenAll(t, f, "alice", all), false)
	})
	t.Run("the old size is sent along for a while, then learned again", func(t *testing.T) {
		assert.Equal(t, 1.0, value(t, f.metrics.resends), "one resend so far")
		clock.Add(int64(learnFor/time.Second) + 1)
		_, err := f.Unseen(ctx, "alice", old)
		require.NoError(t, err)
		assert.Equal(t, 2.0, value(t, f.metrics.resends))
		_, err = f.Unseen(ctx, "alice", old)
		require.NoError(t, err)
		assert.Equal(t, 2.0, value(t, f.metrics.resends))
	})
}

func TestTTL(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	s := keyspace.New(r.Prefix)

	t.Run("a write refreshes only the current generation", func(t *testing.T) {
		short := New(r.Client, Config{Prefix: r.Prefix, Capacity: fixed(100), TTL: time.Hour})
		long := New(r.Client, Config{Prefix: r.Prefix, Capacity: fixed(100), TTL: 3 * time.Hour})
		require.NoError(t, short.Mark(ctx, "alice", ids("a", 0, 150))) // generation 1 full, 2 current
		require.NoError(t, long.Mark(ctx, "alice", ids("b", 0, 10)))
		ttl := func(key string) time.Duration {
			d, err := r.Client.PTTL(ctx, key).Result()
			require.NoError(t, err)
			return d
		}
		for _, key := range []string{bitsKey(s, "alice", 1), metaKey(s, "alice", 1)} {
			assert.InDelta(t, time.Hour, ttl(key), float64(time.Minute), "old generation %s", key)
		}
		for _, key := range []string{bitsKey(s, "alice", 0), metaKey(s, "alice", 0)} {
			assert.InDelta(t, 3*time.Hour, ttl(key), float64(time.Minute), "current generation %s", key)
		}
	})
	t.Run("an expired filter forgets", func(t *testing.T) {
		f := New(r.Client, Config{Prefix: r.Prefix, TTL: 50 * time.Millisecond})
		require.NoError(t, f.Mark(ctx, "bob", []string{"x"}))
		require.Eventually(t, func() bool {
			got, err := f.Unseen(ctx, "bob", []string{"x"})
			return err == nil && len(got) == 1
		}, 5*time.Second, 20*time.Millisecond)
		require.NoError(t, f.Mark(ctx, "bob", []string{"y"}))
		assert.Equal(t, 1, generations(t, r.Client, r.Prefix, "bob", DefaultGenerations)[1].g, "starts over")
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
	gens := generations(t, r.Client, r.Prefix, "alice", 3)
	assert.Equal(t, []int{3, 4, 5}, []int{gens[0].g, gens[1].g, gens[2].g}, "generation g in slot g mod 3")
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
	t.Run("rotation and a size change work on the cluster", func(t *testing.T) {
		capacity.Store(400)
		require.NoError(t, nodes[1].Mark(ctx, "alice", ids("alice", 150, 300)))
		got, err := nodes[2].Unseen(ctx, "alice", ids("alice", 0, 450))
		require.NoError(t, err)
		assert.Empty(t, got)
		gens := generations(t, r.Client, r.Prefix, "alice", DefaultGenerations)
		assert.Equal(t, 200, gens[1].c)
		assert.Equal(t, 400, gens[0].c)
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

	assert.Equal(t, 150.0, value(t, f.metrics.marked))
	assert.Equal(t, 2.0, value(t, f.metrics.rotations), "the first generation and one rotation")
	assert.Equal(t, 3.0, value(t, f.metrics.checked))
	assert.Equal(t, 2.0, value(t, f.metrics.maybeSeen))
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
