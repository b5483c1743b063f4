package seen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/names"
)

// fixed returns a live-setting func that always answers v.
func fixed[T any](v T) func() T { return func() T { return v } }

// ids returns n distinct item ids "<prefix>-<i>" starting at from.
func ids(prefix string, from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + "-" + strconv.Itoa(from+i)
	}
	return out
}

// markAll marks items in calls of at most MaxItems.
func markAll(t testing.TB, f *Filter, user string, items []string) {
	t.Helper()
	for len(items) > 0 {
		n := min(len(items), MaxItems)
		require.NoError(t, f.Mark(context.Background(), user, items[:n]))
		items = items[n:]
	}
}

// seenAll checks items in calls of at most MaxItems.
func seenAll(t testing.TB, f *Filter, user string, items []string) []bool {
	t.Helper()
	var out []bool
	for len(items) > 0 {
		n := min(len(items), MaxItems)
		s, err := f.Seen(context.Background(), user, items[:n])
		require.NoError(t, err)
		out = append(out, s...)
		items = items[n:]
	}
	return out
}

// meta is one generation's description as stored.
type meta struct {
	g, m, k, c, n int
}

// generations returns the kept generations of user, oldest first.
func generations(t testing.TB, rdb redis.UniversalClient, prefix, user string) []meta {
	t.Helper()
	v, err := rdb.HGetAll(context.Background(), metaKey(keyspace.New(prefix), user)).Result()
	require.NoError(t, err)
	out := make([]meta, 0, len(v))
	for field, desc := range v {
		var gm meta
		var err error
		gm.g, err = strconv.Atoi(field)
		require.NoError(t, err, "field %q", field)
		_, err = fmt.Sscanf(desc, "%d %d %d %d", &gm.m, &gm.k, &gm.c, &gm.n)
		require.NoError(t, err, "generation %s: %q", field, desc)
		out = append(out, gm)
	}
	slices.SortFunc(out, func(a, b meta) int { return a.g - b.g })
	return out
}

// numbers returns the generation numbers of gens.
func numbers(gens []meta) []int {
	out := make([]int, len(gens))
	for i, g := range gens {
		out[i] = g.g
	}
	return out
}

// sizeOf returns the size generation i gets under the plan for capacity,
// p and g generations.
func sizeOf(t testing.TB, capacity int, p float64, g, i int) size {
	t.Helper()
	pl, err := newPlan(capacity, p, g)
	require.NoError(t, err)
	return pl.sizes[min(i, len(pl.sizes)-1)]
}

func TestMarkThenFilter(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	f := New(r.Client, Config{Prefix: r.Prefix, Registerer: prometheus.NewRegistry()})

	t.Run("marked items are seen and others are not", func(t *testing.T) {
		require.NoError(t, f.Mark(ctx, "alice", []string{"n1", "n3"}))
		got, err := f.Seen(ctx, "alice", []string{"n1", "n2", "n3", "n4"})
		require.NoError(t, err)
		assert.Equal(t, []bool{true, false, true, false}, got)
	})
	t.Run("unseen keeps order and duplicates", func(t *testing.T) {
		got, err := f.Unseen(ctx, "alice", []string{"n4", "n1", "n2", "n4", "n3"})
		require.NoError(t, err)
		assert.Equal(t, []string{"n4", "n2", "n4"}, got)
	})
	t.Run("another user has seen nothing", func(t *testing.T) {
		got, err := f.Unseen(ctx, "bob", []string{"n1", "n3"})
		require.NoError(t, err)
		assert.Equal(t, []string{"n1", "n3"}, got)
	})
	t.Run("marking again changes nothing", func(t *testing.T) {
		before := generations(t, r.Client, r.Prefix, "alice")
		require.NoError(t, f.Mark(ctx, "alice", []string{"n1", "n3", "n1"}))
		assert.Equal(t, before, generations(t, r.Client, r.Prefix, "alice"))
	})
	t.Run("no items is no call", func(t *testing.T) {
		require.NoError(t, f.Mark(ctx, "carol", nil))
		got, err := f.Unseen(ctx, "carol", nil)
		require.NoError(t, err)
		assert.Empty(t, got)
		n, err := r.Client.Exists(ctx, userKeys(keyspace.New(r.Prefix), "carol", f.slots)...).Result()
		require.NoError(t, err)
		assert.Zero(t, n)
	})
	t.Run("a new filter is one small generation that stores its size, capacity and count", func(t *testing.T) {
		s := sizeOf(t, DefaultCapacity, DefaultFPRate, DefaultGenerations, 0)
		assert.Equal(t, []meta{{g: 0, m: int(s.m), k: int(s.k), c: FirstCapacity, n: 2}}, generations(t, r.Client, r.Prefix, "alice"))
		assert.Less(t, int(s.m)/8, 300, "bytes of the first bitmap")
	})
}

func TestBadInputIsRefused(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	f := New(r.Client, Config{Prefix: r.Prefix})
	long := string(make([]byte, MaxItemLen+1))
	tests := []struct {
		name  string
		user  string
		items []string
		want  error
	}{
		{"too many items", "alice", ids("x", 0, MaxItems+1), ErrTooManyItems},
		{"too long item", "alice", []string{"ok", long}, ErrBadItem},
		{"empty item", "alice", []string{""}, ErrBadItem},
		{"bad user", "a}b", []string{"x"}, names.ErrBadName},
		{"empty user", "", []string{"x"}, names.ErrBadName},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			assert.ErrorIs(t, f.Mark(ctx, tt.user, tt.items), tt.want)
			_, err := f.Seen(ctx, tt.user, tt.items)
			assert.ErrorIs(t, err, tt.want)
			_, err = f.Unseen(ctx, tt.user, tt.items)
			assert.ErrorIs(t, err, tt.want)
		})
	}
	t.Run("the longest item and the most items are taken", func(t *testing.T) {
		items := append(ids("x", 0, MaxItems-1), string(make([]byte, MaxItemLen)))
		require.NoError(t, f.Mark(ctx, "alice", items))
		got, err := f.Unseen(ctx, "alice", items)
		require.NoError(t, err)
		assert.Empty(t, got)
	})
}

func TestNoFalseNegatives(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	const capacity = 300
	cfg := Config{Prefix: r.Prefix, Capacity: fixed(capacity), FPRate: fixed(0.05)}
	bitwise, whole := New(r.Client, cfg), New(r.Client, cfg)
	bitwise.readWhole, whole.readWhole = 0, 1<<30
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))

	// history holds every item marked, most recent last; the current and the
	// previous generation together always hold at least the last `capacity`
	// distinct items.
	var history []string
	for round := range 60 {
		batch := make([]string, 1+rng.IntN(60))
		for i := range batch {
			if len(history) > 0 && rng.IntN(4) == 0 {
				batch[i] = history[rng.IntN(len(history))] // marked again
			} else {
				batch[i] = fmt.Sprintf("it-%d-%d", round, i)
			}
		}
		require.NoError(t, []*Filter{bitwise, whole}[rng.IntN(2)].Mark(ctx, "alice", batch))
		history = append(history, batch...)

		recent := lastDistinct(history, capacity)
		for _, f := range []*Filter{bitwise, whole} {
			got, err := f.Unseen(ctx, "alice", recent)
			require.NoError(t, err)
			require.Empty(t, got, "round %d: recently marked items answered unseen", round)
		}
	}
	gens := generations(t, r.Client, r.Prefix, "alice")
	assert.Greater(t, gens[len(gens)-1].g, 3, "the test rotated generations")
	assert.Positive(t, gens[0].g, "and dropped old ones: %+v", gens)
}

// lastDistinct returns the last n distinct items of history.
func lastDistinct(history []string, n int) []string {
	seen := map[string]bool{}
	var out []string
	for i := len(history) - 1; i >= 0 && len(out) < n; i-- {
		if !seen[history[i]] {
			seen[history[i]] = true
			out = append(out, history[i])
		}
	}
	return out
}

func TestFalsePositiveRate(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	const (
		capacity = 10000
		target   = 0.01
		probes   = 100000
	)
	f := New(r.Client, Config{Prefix: r.Prefix, Capacity: fixed(capacity), FPRate: fixed(target)})
	unmarked := ids("never", 0, probes)
	rate := func() float64 {
		held := 0
		for _, s := range seenAll(t, f, "alice", unmarked) {
			if s {
				held++
			}
		}
		return float64(held) / probes
	}

	for _, n := range []int{100, 1000} {
		markAll(t, f, "alice", ids("item", 0, n))
		got := rate()
		t.Logf("false positives after %d items: %.5f (target %.4f), generations %+v", n, got, target, generations(t, r.Client, r.Prefix, "alice"))
		assert.LessOrEqual(t, got, target, "growing generations stay below the target")
	}

	markAll(t, f, "alice", ids("item", 1000, capacity-1000))
	t.Run("at capacity the rate is within the target", func(t *testing.T) {
		got := rate()
		t.Logf("false positives at capacity: %.5f (target %.4f), generations %+v", got, target, generations(t, r.Client, r.Prefix, "alice"))
		assert.LessOrEqual(t, got, 1.2*target)
	})

	markAll(t, f, "alice", ids("item", capacity, 2*capacity))
	t.Run("after 3x capacity with rotation it still is", func(t *testing.T) {
		gens := generations(t, r.Client, r.Prefix, "alice")
		require.Len(t, gens, DefaultGenerations, "only full-size generations are kept: %+v", gens)
		for _, g := range gens {
			require.Equal(t, capacity, g.c, "full-size generations %+v", gens)
		}
		got := rate()
		t.Logf("false positives after 3x capacity: %.5f (target %.4f), generations %+v", got, target, gens)
		assert.LessOrEqual(t, got, 1.2*target)
		recent := seenAll(t, f, "alice", ids("item", 2*capacity, capacity))
		assert.NotContains(t, recent, false, "the last capacity items are all seen")
	})
}

func TestConcurrentMarksFromThreeNodes(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, r *redistest.Redis, capacity, perNode, batch int) [3]*Filter {
		var nodes [3]*Filter
		for i := range nodes {
			nodes[i] = New(r.NewClient(t), Config{Prefix: r.Prefix, Capacity: fixed(capacity)})
		}
		var wg sync.WaitGroup
		errs := make(chan error, len(nodes))
		for i, f := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				items := ids("node"+strconv.Itoa(i), 0, perNode)
				for from := 0; from < perNode; from += batch {
					if err := f.Mark(context.Background(), "alice", items[from:from+batch]); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		return nodes
	}

	t.Run("no mark is lost", func(t *testing.T) {
		r := redistest.Real(t)
		const perNode = 2000
		nodes := run(t, r, 100000, perNode, 50)
		for i := range nodes {
			for j, f := range nodes {
				got := seenAll(t, f, "alice", ids("node"+strconv.Itoa(i), 0, perNode))
				assert.NotContains(t, got, false, "node %d sees the marks of node %d", j, i)
			}
		}
		gens := generations(t, r.Client, r.Prefix, "alice")
		counted := 0
		for i, g := range gens {
			assert.Equal(t, i, g.g, "no generation dropped below capacity: %+v", gens)
			counted += g.n
		}
		// the count skips items whose bits were all set already (a false
		// positive of the item), well below 1%.
		assert.InDelta(t, 3*perNode, counted, 0.01*3*perNode, "count %+v", gens)
	})
	t.Run("rotation under concurrent marks keeps generations consistent", func(t *testing.T) {
		r := redistest.Real(t)
		const capacity, perNode = 500, 1000
		nodes := run(t, r, capacity, perNode-50, 50)
		// each node's last batch after every node's bulk: the last marks
		// (150, under capacity) are what the kept generations must hold,
		// whichever node the scheduler let finish first
		var wg sync.WaitGroup
		for i, f := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				assert.NoError(t, f.Mark(context.Background(), "alice", ids("node"+strconv.Itoa(i), perNode-50, 50)))
			}()
		}
		wg.Wait()
		gens := generations(t, r.Client, r.Prefix, "alice")
		require.Len(t, gens, DefaultGenerations, "%+v", gens)
		prev, cur := gens[0], gens[1]
		assert.Equal(t, cur.g-1, prev.g, "consecutive generations %+v", gens)
		assert.Equal(t, capacity, prev.c)
		assert.Equal(t, capacity, prev.n, "the previous generation was full")
		assert.LessOrEqual(t, cur.n, capacity)
		for i := range nodes {
			got := seenAll(t, nodes[0], "alice", ids("node"+strconv.Itoa(i), perNode-50, 50))
			assert.NotContains(t, got, false, "node %d's last batch is seen", i)
		}
	})
}
