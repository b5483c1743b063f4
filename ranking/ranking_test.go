package ranking

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/names"
)

func newService(t *testing.T, r *redistest.Redis, cfg Config) *Service {
	t.Helper()
	cfg.Prefix = r.Prefix
	return New(r.Client, cfg)
}

// sc is a Score from its decimal text, for tests.
func sc(t testing.TB, text string) Score {
	t.Helper()
	s, err := ParseScore(text)
	require.NoError(t, err)
	return s
}

func post(t *testing.T, s *Service, board, player, score string, mode Mode) Entry {
	t.Helper()
	e, err := s.Post(context.Background(), board, player, sc(t, score), mode)
	require.NoError(t, err)
	return e
}

func players(es []Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Player
	}
	return out
}

func TestModes(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	s := newService(t, r, Config{})
	ctx := context.Background()

	t.Run("best keeps the higher score and is the default", func(t *testing.T) {
		assert.Equal(t, Entry{"a", sc(t, "10"), 0}, post(t, s, "best", "a", "10", ""))
		assert.Equal(t, Entry{"a", sc(t, "10"), 0}, post(t, s, "best", "a", "3", Best))
		assert.Equal(t, Entry{"a", sc(t, "12.5"), 0}, post(t, s, "best", "a", "12.5", Best))
		assert.Equal(t, Entry{"a", sc(t, "12.5"), 0}, post(t, s, "best", "a", "-100", ""))
	})
	t.Run("incr on a new player starts from 0", func(t *testing.T) {
		assert.Equal(t, Entry{"a", sc(t, "2.5"), 0}, post(t, s, "incr", "a", "2.5", Incr))
		assert.Equal(t, Entry{"a", sc(t, "1.25"), 0}, post(t, s, "incr", "a", "-1.25", Incr))
		assert.Equal(t, Entry{"b", sc(t, "0"), 1}, post(t, s, "incr", "b", "0", Incr))
	})
	t.Run("set replaces the score, up or down", func(t *testing.T) {
		post(t, s, "set", "a", "10", Set)
		assert.Equal(t, Entry{"a", sc(t, "-3"), 0}, post(t, s, "set", "a", "-3", Set))
		assert.Equal(t, Entry{"b", sc(t, "1"), 0}, post(t, s, "set", "b", "1", Set))
		got, err := s.Get(ctx, "set", "a")
		require.NoError(t, err)
		assert.Equal(t, Entry{"a", sc(t, "-3"), 1}, got)
	})
	t.Run("incr carries across the script's base-1e9 limbs exactly", func(t *testing.T) {
		steps := []struct{ delta, want string }{
			{"999999.999", "999999.999"},
			{"0.001", "1000000"},
			{"-0.002", "999999.998"},
			{"-999999.999", "-0.001"},
			{"0.001", "0"},
			{"-1000000000000000", "-1000000000000000"},
			{"999999999999999.999", "-0.001"},
			{"1000000000000000", "999999999999999.999"},
			{"0.001", "1000000000000000"},
		}
		for _, st := range steps {
			e := post(t, s, "carry", "a", st.delta, Incr)
			assert.Equal(t, st.want, e.Score.String(), "after incr %s", st.delta)
		}
	})
	t.Run("an incr past the domain is refused and changes nothing", func(t *testing.T) {
		post(t, s, "overflow", "a", "1000000000000000", Set)
		_, err := s.Post(ctx, "overflow", "a", sc(t, "0.001"), Incr)
		assert.ErrorIs(t, err, ErrBadScore)
		post(t, s, "overflow", "b", "-1000000000000000", Set)
		_, err = s.Post(ctx, "overflow", "b", sc(t, "-0.001"), Incr)
		assert.ErrorIs(t, err, ErrBadScore)
		top, err := s.Top(ctx, "overflow", 10)
		require.NoError(t, err)
		assert.Equal(t, []Entry{{"a", MaxScore, 0}, {"b", MinScore, 1}}, top)
	})
	t.Run("a board whose sequence ran out refuses changes but answers unchanged posts", func(t *testing.T) {
		post(t, s, "full", "a", "5", Best)
		require.NoError(t, r.Client.Set(ctx, seqKey(s.sp, "full"), maxSeq, 0).Err())
		_, err := s.Post(ctx, "full", "a", sc(t, "6"), Best)
		assert.ErrorIs(t, err, ErrBoardFull)
		assert.False(t, IsBadInput(err))
		assert.Equal(t, Entry{"a", sc(t, "5"), 0}, post(t, s, "full", "a", "4", Best))
	})
}

func TestTies(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	s := newService(t, r, Config{})
	ctx := context.Background()

	t.Run("who reached a score first ranks higher, whatever the names", func(t *testing.T) {
		for _, p := range []string{"zoe", "mia", "aaron", "Bob", "_x"} {
			post(t, s, "ties", p, "100", Best)
		}
		top, err := s.Top(ctx, "ties", 10)
		require.NoError(t, err)
		assert.Equal(t, []string{"zoe", "mia", "aaron", "Bob", "_x"}, players(top))
	})
	t.Run("a post that leaves the score unchanged keeps its time", func(t *testing.T) {
		post(t, s, "ties", "zoe", "50", Best)       // lower best
		post(t, s, "ties", "zoe", "100", Best)      // equal best
		post(t, s, "ties", "zoe", "100", Set)       // equal set
		post(t, s, "ties", "zoe", "0", Incr)        // incr by 0
		post(t, s, "ties", "mia", "100.000", Set)   // equal, spelled otherwise
		e := post(t, s, "ties", "zoe", "100", Best) // still first
		assert.Equal(t, int64(0), e.Rank)
	})
	t.Run("leaving a score and coming back counts as reaching it anew", func(t *testing.T) {
		post(t, s, "ties", "zoe", "101", Set)
		e := post(t, s, "ties", "zoe", "100", Set)
		assert.Equal(t, int64(4), e.Rank)
		e = post(t, s, "ties", "aaron", "99.999", Incr) // 199.999
		assert.Equal(t, int64(0), e.Rank)
		top, err := s.Top(ctx, "ties", 10)
		require.NoError(t, err)
		assert.Equal(t, []string{"aaron", "mia", "Bob", "_x", "zoe"}, players(top))
	})
	t.Run("scores a double cannot tell apart still order exactly", func(t *testing.T) {
		// 999999999999999.998 and .999 are the same float64.
		post(t, s, "fine", "low", "999999999999999.998", Set)
		post(t, s, "fine", "high", "999999999999999.999", Set)
		post(t, s, "fine", "low2", "999999999999999.998", Set)
		post(t, s, "fine", "neg", "-999999999999999.999", Set)
		post(t, s, "fine", "min", "-1000000000000000", Set)
		post(t, s, "fine", "max", "1000000000000000", Set)
		top, err := s.Top(ctx, "fine", 10)
		require.NoError(t, err)
		assert.Equal(t, []Entry{
			{"max", MaxScore, 0}, {"high", sc(t, "999999999999999.999"), 1},
			{"low", sc(t, "999999999999999.998"), 2}, {"low2", sc(t, "999999999999999.998"), 3},
			{"neg", sc(t, "-999999999999999.999"), 4}, {"min", MinScore, 5},
		}, top)
	})
}

func TestScriptEncodingMatchesGo(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	s := newService(t, r, Config{})
	ctx := context.Background()
	for i, text := range []string{"0", "0.001", "-0.001", "12.5", "-12.5", "999999.999", "1000000", "-1000000",
		"-999999.999", "1000000000000000", "-1000000000000000", "123456789012.345", "-123456789012.345"} {
		score := sc(t, text)
		player := fmt.Sprintf("p%d", i)
		_, err := s.Post(ctx, "enc", player, score, Set)
		require.NoError(t, err)
		prefix, err := r.Client.HGet(ctx, playersKey(s.sp, "enc"), player).Result()
		require.NoError(t, err)
		assert.Equal(t, revOf(score), prefix[:revWidth], text)
		assert.Equal(t, fmt.Sprintf(":%015d", i+1), prefix[revWidth:], text)
	}
}

func TestReads(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	s := newService(t, r, Config{})
	ctx := context.Background()
	// p0 100, p1 90, ..., p9 10; t1 and t2 tie p4 at 60 after it.
	for i := 0; i < 10; i++ {
		post(t, s, "b", fmt.Sprintf("p%d", i), fmt.Sprint(100-10*i), Best)
	}
	post(t, s, "b", "t1", "60", Best)
	post(t, s, "b", "t2", "60", Best)
	order := []string{"p0", "p1", "p2", "p3", "p4", "t1", "t2", "p5", "p6", "p7", "p8", "p9"}

	t.Run("top is best first and clipped by limit", func(t *testing.T) {
		top, err := s.Top(ctx, "b", 3)
		require.NoError(t, err)
		assert.Equal(t, []Entry{{"p0", sc(t, "100"), 0}, {"p1", sc(t, "90"), 1}, {"p2", sc(t, "80"), 2}}, top)
		all, err := s.Top(ctx, "b", MaxLimit)
		require.NoError(t, err)
		assert.Equal(t, order, players(all))
	})
	t.Run("an empty board has an empty top", func(t *testing.T) {
		top, err := s.Top(ctx, "nothing", 10)
		require.NoError(t, err)
		assert.Empty(t, top)
		n, err := s.Len(ctx, "nothing")
		require.NoError(t, err)
		assert.Zero(t, n)
	})
	t.Run("get answers the entry or ErrUnknownPlayer", func(t *testing.T) {
		e, err := s.Get(ctx, "b", "t2")
		require.NoError(t, err)
		assert.Equal(t, Entry{"t2", sc(t, "60"), 6}, e)
		_, err = s.Get(ctx, "b", "nobody")
		assert.ErrorIs(t, err, ErrUnknownPlayer)
	})
	t.Run("around is clipped at both ends", func(t *testing.T) {
		es, err := s.Around(ctx, "b", "t1", 2)
		require.NoError(t, err)
		assert.Equal(t, []string{"p3", "p4", "t1", "t2", "p5"}, players(es))
		assert.Equal(t, int64(3), es[0].Rank)
		es, err = s.Around(ctx, "b", "p0", 2)
		require.NoError(t, err)
		assert.Equal(t, []string{"p0", "p1", "p2"}, players(es))
		es, err = s.Around(ctx, "b", "p9", 3)
		require.NoError(t, err)
		assert.Equal(t, []Entry{{"p6", sc(t, "40"), 8}, {"p7", sc(t, "30"), 9}, {"p8", sc(t, "20"), 10}, {"p9", sc(t, "10"), 11}}, es)
		es, err = s.Around(ctx, "b", "p5", 0)
		require.NoError(t, err)
		assert.Equal(t, []Entry{{"p5", sc(t, "50"), 7}}, es)
		_, err = s.Around(ctx, "b", "nobody", 3)
		assert.ErrorIs(t, err, ErrUnknownPlayer)
	})
	t.Run("range includes both bounds, best first, with ranks", func(t *testing.T) {
		lo, hi := sc(t, "50"), sc(t, "80")
		es, err := s.Range(ctx, "b", &lo, &hi, 100)
		require.NoError(t, err)
		assert.Equal(t, []string{"p2", "p3", "p4", "t1", "t2", "p5"}, players(es))
		assert.Equal(t, int64(2), es[0].Rank)
		assert.Equal(t, int64(7), es[5].Rank)
	})
	t.Run("range bounds are optional and limit counts from the best", func(t *testing.T) {
		lo := sc(t, "60")
		es, err := s.Range(ctx, "b", &lo, nil, 100)
		require.NoError(t, err)
		assert.Equal(t, order[:7], players(es))
		hi := sc(t, "60")
		es, err = s.Range(ctx, "b", nil, &hi, 2)
		require.NoError(t, err)
		assert.Equal(t, []Entry{{"p4", sc(t, "60"), 4}, {"t1", sc(t, "60"), 5}}, es)
		es, err = s.Range(ctx, "b", nil, nil, MaxLimit)
		require.NoError(t, err)
		assert.Equal(t, order, players(es))
	})
	t.Run("an empty or reversed range is empty", func(t *testing.T) {
		lo, hi := sc(t, "61"), sc(t, "69.999")
		es, err := s.Range(ctx, "b", &lo, &hi, 10)
		require.NoError(t, err)
		assert.Empty(t, es)
		es, err = s.Range(ctx, "b", &hi, &lo, 10)
		require.NoError(t, err)
		assert.Empty(t, es)
	})
	t.Run("ranks answer in the order asked, -1 for unknown, duplicates twice", func(t *testing.T) {
		es, err := s.Ranks(ctx, "b", []string{"p9", "ghost", "t1", "p0", "t1"})
		require.NoError(t, err)
		assert.Equal(t, []Entry{{"p9", sc(t, "10"), 11}, {"ghost", 0, -1}, {"t1", sc(t, "60"), 5}, {"p0", sc(t, "100"), 0}, {"t1", sc(t, "60"), 5}}, es)
		es, err = s.Ranks(ctx, "b", nil)
		require.NoError(t, err)
		assert.Empty(t, es)
		es, err = s.Ranks(ctx, "nothing", []string{"a"})
		require.NoError(t, err)
		assert.Equal(t, []Entry{{"a", 0, -1}}, es)
	})
	t.Run("len counts the players", func(t *testing.T) {
		n, err := s.Len(ctx, "b")
		require.NoError(t, err)
		assert.Equal(t, int64(12), n)
	})
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	s := newService(t, r, Config{})
	ctx := context.Background()
	one := sc(t, "1")
	tooBig := MaxScore + 1
	tooSmall := MinScore - 1
	many := make([]string, MaxBatch+1)
	for i := range many {
		many[i] = fmt.Sprintf("p%d", i)
	}
	full := many[:MaxBatch]

	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"bad board name", func() error { _, err := s.Post(ctx, "a b", "p", one, Best); return err }, names.ErrBadName},
		{"unknown period", func() error { _, err := s.Top(ctx, "b@monthly", 10); return err }, names.ErrBadName},
		{"brace in board", func() error { _, err := s.Top(ctx, "b}{x", 10); return err }, names.ErrBadName},
		{"bad player name", func() error { _, err := s.Post(ctx, "b", "p.q", one, Best); return err }, names.ErrBadName},
		{"empty player", func() error { _, err := s.Get(ctx, "b", ""); return err }, names.ErrBadName},
		{"bad player in batch", func() error { _, err := s.Ranks(ctx, "b", []string{"ok", "n o"}); return err }, names.ErrBadName},
		{"bad player around", func() error { _, err := s.Around(ctx, "b", "*", 1); return err }, names.ErrBadName},
		{"unknown mode", func() error { _, err := s.Post(ctx, "b", "p", one, "max"); return err }, ErrBadMode},
		{"score above 1e15", func() error { _, err := s.Post(ctx, "b", "p", tooBig, Best); return err }, ErrBadScore},
		{"score below -1e15", func() error { _, err := s.Post(ctx, "b", "p", tooSmall, Incr); return err }, ErrBadScore},
		{"range bound out of domain", func() error { _, err := s.Range(ctx, "b", &tooSmall, nil, 10); return err }, ErrBadScore},
		{"limit 0", func() error { _, err := s.Top(ctx, "b", 0); return err }, ErrBadLimit},
		{"limit above max", func() error { _, err := s.Top(ctx, "b", MaxLimit+1); return err }, ErrBadLimit},
		{"range limit 0", func() error { _, err := s.Range(ctx, "b", nil, nil, 0); return err }, ErrBadLimit},
		{"negative radius", func() error { _, err := s.Around(ctx, "b", "p", -1); return err }, ErrBadRadius},
		{"radius above max", func() error { _, err := s.Around(ctx, "b", "p", MaxRadius+1); return err }, ErrBadRadius},
		{"batch above max", func() error { _, err := s.Ranks(ctx, "b", many); return err }, ErrBatchTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			err := tt.call()
			assert.ErrorIs(t, err, tt.want)
			assert.True(t, IsBadInput(err), "IsBadInput(%v)", err)
		})
	}
	t.Run("refused posts wrote nothing", func(t *testing.T) {
		n, err := r.Client.Exists(ctx, boardKey(s.sp, "b"), playersKey(s.sp, "b"), seqKey(s.sp, "b")).Result()
		require.NoError(t, err)
		assert.Zero(t, n)
	})
	t.Run("a full batch is answered", func(t *testing.T) {
		es, err := s.Ranks(ctx, "b", full)
		require.NoError(t, err)
		assert.Len(t, es, MaxBatch)
	})
	t.Run("unknown player is not bad input", func(t *testing.T) {
		_, err := s.Get(ctx, "b", "nobody")
		assert.ErrorIs(t, err, ErrUnknownPlayer)
		assert.False(t, IsBadInput(err))
	})
}

func TestOnChangeAndMetrics(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	reg := prometheus.NewRegistry()
	var mu sync.Mutex
	var changes []string
	cfg := Config{Registerer: reg, OnChange: func(_ context.Context, board string, e Entry) {
		mu.Lock()
		defer mu.Unlock()
		changes = append(changes, fmt.Sprintf("%s/%s=%s#%d", board, e.Player, e.Score, e.Rank))
	}}
	s := newService(t, r, cfg)
	s2 := newService(t, r, cfg) // a second service on one registry shares its metrics
	post(t, s, "b@daily", "a", "5", Best)
	post(t, s2, "b@daily", "a", "4", Best) // unchanged: no hook
	post(t, s, "b@daily", "b", "6", Set)
	post(t, s, "b@daily", "a", "0", Incr) // unchanged: no hook
	_, err := s.Post(context.Background(), "b@daily", "a", 0, "nope")
	require.ErrorIs(t, err, ErrBadMode)

	t.Run("the hook runs once per change, with the board as posted", func(t *testing.T) {
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, []string{"b@daily/a=5#0", "b@daily/b=6#0"}, changes)
	})
	t.Run("posts are counted by mode and result", func(t *testing.T) {
		got := map[string]float64{}
		ops := 0
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				switch mf.GetName() {
				case "chatd_ranking_posts_total":
					labels := map[string]string{}
					for _, l := range m.GetLabel() {
						labels[l.GetName()] = l.GetValue()
					}
					got[labels["mode"]+"/"+labels["result"]] = m.GetCounter().GetValue()
				case "chatd_ranking_op_seconds":
					ops++
					assert.Equal(t, uint64(5), m.GetHistogram().GetSampleCount())
				}
			}
		}
		assert.Equal(t, map[string]float64{
			"best/changed": 1, "best/unchanged": 1, "incr/unchanged": 1, "set/changed": 1, "other/refused": 1,
		}, got)
		assert.Equal(t, 1, ops, "one op label so far: post")
	})
}

func TestThreeNodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		get  func(testing.TB) *redistest.Redis
	}{{"single server", redistest.Real}, {"cluster", redistest.Cluster}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := tc.get(t)
			ctx := context.Background()
			var nodes []*Service
			for i := 0; i < 3; i++ {
				nodes = append(nodes, New(r.NewClient(t), Config{Prefix: r.Prefix}))
			}
			const workers, posts = 6, 50
			var wg sync.WaitGroup
			errs := make(chan error, workers*posts)
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func(n *Service) {
					defer wg.Done()
					for i := 0; i < posts; i++ {
						_, err := n.Post(ctx, "shared", fmt.Sprintf("p%d", i%5), 1500, Incr) // +1.5
						errs <- err
					}
				}(nodes[w%3])
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}

			t.Run("concurrent incrs from every node add up exactly", func(t *testing.T) {
				for _, n := range nodes {
					top, err := n.Top(ctx, "shared", 10)
					require.NoError(t, err)
					require.Len(t, top, 5)
					for i, e := range top {
						assert.Equal(t, "90", e.Score.String(), e.Player) // 6 workers × 10 posts × 1.5
						assert.Equal(t, int64(i), e.Rank)
					}
				}
			})
			t.Run("every node reads the same ranks and neighbours", func(t *testing.T) {
				var want []Entry
				for i, n := range nodes {
					es, err := n.Ranks(ctx, "shared", []string{"p4", "p0", "px", "p2"})
					require.NoError(t, err)
					if i == 0 {
						want = es
					}
					assert.Equal(t, want, es)
					around, err := n.Around(ctx, "shared", "p2", 1)
					require.NoError(t, err)
					assert.Len(t, around, 3)
				}
			})
			t.Run("ties across nodes follow the order of the posts", func(t *testing.T) {
				for i, p := range []string{"z", "y", "x", "w"} {
					_, err := nodes[i%3].Post(ctx, "tie@weekly", p, 7000, Best)
					require.NoError(t, err)
				}
				lo := Score(7000)
				es, err := nodes[2].Range(ctx, "tie@weekly", &lo, &lo, 10)
				require.NoError(t, err)
				assert.Equal(t, []string{"z", "y", "x", "w"}, players(es))
				e, err := nodes[1].Get(ctx, "tie@weekly", "x")
				require.NoError(t, err)
				assert.Equal(t, Entry{"x", 7000, 2}, e)
			})
		})
	}
}

func TestRedisDown(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	s := newService(t, r, Config{})
	ctx := context.Background()
	post(t, s, "b", "a", "1", Best)
	r.Server.Kill(t)
	_, err := s.Post(ctx, "b", "a", 2000, Best)
	require.Error(t, err)
	assert.False(t, IsBadInput(err) || errors.Is(err, ErrUnknownPlayer), "a Redis failure is not the caller's fault: %v", err)
	_, err = s.Top(ctx, "b", 10)
	assert.Error(t, err)
	r.Server.Start(t)
	require.Eventually(t, func() bool {
		_, err := s.Post(ctx, "b", "a", 2000, Best)
		return err == nil
	}, 10*time.Second, 50*time.Millisecond)
	e, err := s.Get(ctx, "b", "a")
	require.NoError(t, err)
	assert.Equal(t, Entry{"a", 2000, 0}, e, "a restart without persistence starts the board anew")
}
