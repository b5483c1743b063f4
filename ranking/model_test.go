package ranking

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// model is the in-memory leaderboard the service must agree with: a score
// and the change number at which the player reached it, per player.
type model struct {
	seq     int64
	players map[string]modelEntry
}

type modelEntry struct {
	score Score
	seq   int64
}

func (m *model) post(player string, score Score, mode Mode) (Entry, error) {
	old, ok := m.players[player]
	next, changed := score, true
	if ok {
		switch mode {
		case Best, "":
			changed = score > old.score
		case Set:
			changed = score != old.score
		case Incr:
			next, changed = old.score+score, score != 0
		}
	}
	if changed {
		if !next.valid() {
			return Entry{}, ErrBadScore
		}
		m.seq++
		m.players[player] = modelEntry{next, m.seq}
	}
	return m.get(player), nil
}

// sorted lists the board best first: higher score, then earlier seq.
func (m *model) sorted() []Entry {
	type row struct {
		p string
		e modelEntry
	}
	rows := make([]row, 0, len(m.players))
	for p, e := range m.players {
		rows = append(rows, row{p, e})
	}
	slices.SortFunc(rows, func(a, b row) int {
		if a.e.score != b.e.score {
			if a.e.score > b.e.score {
				return -1
			}
			return 1
		}
		return int(a.e.seq - b.e.seq)
	})
	out := make([]Entry, len(rows))
	for i, r := range rows {
		out[i] = Entry{r.p, r.e.score, int64(i)}
	}
	return out
}

func (m *model) get(player string) Entry {
	for _, e := range m.sorted() {
		if e.Player == player {
			return e
		}
	}
	return Entry{Player: player, Rank: -1}
}

func (m *model) around(player string, radius int) []Entry {
	all := m.sorted()
	e := m.get(player)
	if e.Rank < 0 {
		return nil
	}
	lo, hi := max(0, int(e.Rank)-radius), min(len(all), int(e.Rank)+radius+1)
	return all[lo:hi]
}

func (m *model) rangeOf(min, max *Score, limit int) []Entry {
	out := []Entry{}
	for _, e := range m.sorted() {
		if (min == nil || e.Score >= *min) && (max == nil || e.Score <= *max) && len(out) < limit {
			out = append(out, e)
		}
	}
	return out
}

// modelSeed is the seed of the randomised runs: CHATD_RANKING_SEED replays
// one, otherwise a new one each run (logged).
func modelSeed(t *testing.T) uint64 {
	if s := os.Getenv("CHATD_RANKING_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		return seed
	}
	return uint64(time.Now().UnixNano())
}

// runModel does steps random operations in every mode against s and the
// model, and after each step compares top, a rank, around, a range and a
// batch of ranks.
func runModel(t *testing.T, s *Service, board string, steps int) {
	seed := modelSeed(t)
	t.Logf("seed %d (replay with CHATD_RANKING_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	ctx := context.Background()
	m := &model{players: map[string]modelEntry{}}

	pool := make([]string, 40)
	for i := range pool {
		pool[i] = fmt.Sprintf("p%02d", i)
	}
	player := func() string { return pool[rng.IntN(len(pool))] }
	// Few distinct values so that ties are the rule, plus the edges of the
	// domain and of the script's base-1e9 limbs.
	values := []Score{0, 1, -1, 500, 1000, 1500, 2000, -2000, 3000, 999_999_999, 1_000_000_000, -1_000_000_000,
		MaxScore, MinScore, MaxScore - 1, MinScore + 1, 999_999_999_999_999_999}
	score := func() Score {
		if rng.IntN(10) < 8 {
			return values[rng.IntN(9)]
		}
		return values[rng.IntN(len(values))]
	}
	modes := []Mode{Best, Incr, Set, ""}
	bound := func() *Score {
		if rng.IntN(4) == 0 {
			return nil
		}
		v := score()
		return &v
	}

	for step := 0; step < steps; step++ {
		where := func(what string) string { return fmt.Sprintf("step %d (seed %d): %s", step, seed, what) }
		p, v, mode := player(), score(), modes[rng.IntN(len(modes))]
		want, wantErr := m.post(p, v, mode)
		got, err := s.Post(ctx, board, p, v, mode)
		if wantErr != nil {
			require.ErrorIs(t, err, wantErr, where(fmt.Sprintf("post %s %s %s", p, mode, v)))
		} else {
			require.NoError(t, err, where("post"))
			require.Equal(t, want, got, where(fmt.Sprintf("post %s %s %s", p, mode, v)))
		}

		limit := 1 + rng.IntN(len(pool)+5)
		top, err := s.Top(ctx, board, limit)
		require.NoError(t, err)
		all := m.sorted()
		require.Equal(t, all[:min(limit, len(all))], top, where(fmt.Sprintf("top %d", limit)))

		q := player()
		e, err := s.Get(ctx, board, q)
		if w := m.get(q); w.Rank < 0 {
			require.ErrorIs(t, err, ErrUnknownPlayer, where("get "+q))
		} else {
			require.NoError(t, err)
			require.Equal(t, w, e, where("get "+q))
		}

		radius := rng.IntN(6)
		around, err := s.Around(ctx, board, q, radius)
		if w := m.around(q, radius); w == nil {
			require.ErrorIs(t, err, ErrUnknownPlayer, where("around "+q))
		} else {
			require.NoError(t, err)
			require.Equal(t, w, around, where(fmt.Sprintf("around %s %d", q, radius)))
		}

		lo, hi, rlimit := bound(), bound(), 1+rng.IntN(len(pool))
		rng2, err := s.Range(ctx, board, lo, hi, rlimit)
		require.NoError(t, err)
		require.Equal(t, m.rangeOf(lo, hi, rlimit), rng2, where(fmt.Sprintf("range %v..%v limit %d", lo, hi, rlimit)))

		batch := make([]string, rng.IntN(12))
		wantBatch := make([]Entry, len(batch))
		for i := range batch {
			batch[i] = player()
			if rng.IntN(8) == 0 {
				batch[i] = "ghost"
			}
			wantBatch[i] = m.get(batch[i])
		}
		ranks, err := s.Ranks(ctx, board, batch)
		require.NoError(t, err)
		require.Equal(t, wantBatch, ranks, where(fmt.Sprintf("ranks %v", batch)))
	}
	all, err := s.Top(ctx, board, MaxLimit)
	require.NoError(t, err)
	require.Equal(t, m.sorted(), all, "the whole board at the end")
}

func TestModel(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	runModel(t, New(r.Client, Config{Prefix: r.Prefix}), "model", 2500)
}

func TestModelCluster(t *testing.T) {
	t.Parallel()
	r := redistest.Cluster(t)
	runModel(t, New(r.Client, Config{Prefix: r.Prefix}), "model", 400)
}
