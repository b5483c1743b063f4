package ranking

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/names"
)

// trips is a go-redis hook recording every command a client sends, grouped
// by round trip (a pipeline is one).
type trips struct {
	mu    sync.Mutex
	sends [][]string
}

func (h *trips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *trips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.add(cmd)
		return next(ctx, cmd)
	}
}

func (h *trips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.add(cmds...)
		return next(ctx, cmds)
	}
}

func (h *trips) add(cmds ...redis.Cmder) {
	var names []string
	for _, c := range cmds {
		names = append(names, c.Name())
	}
	h.mu.Lock()
	h.sends = append(h.sends, names)
	h.mu.Unlock()
}

func (h *trips) take() [][]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.sends
	h.sends = nil
	return out
}

// boardKeys are the three keys of a board unit.
func boardKeys(s *Service, id string) []string {
	return []string{boardKey(s.sp, id), playersKey(s.sp, id), seqKey(s.sp, id)}
}

func pttls(t *testing.T, rdb redis.Cmdable, keys []string) []time.Duration {
	t.Helper()
	out := make([]time.Duration, len(keys))
	for i, k := range keys {
		d, err := rdb.PTTL(context.Background(), k).Result()
		require.NoError(t, err)
		out[i] = d
	}
	return out
}

func TestGetMany(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		r    func(testing.TB) *redistest.Redis
	}{
		{"single server", redistest.Real},
		{"cluster", redistest.Cluster},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := tc.r(t)
			ctx := context.Background()
			rdb := r.NewClient(t)
			s := New(rdb, Config{Prefix: r.Prefix})
			boards := []string{"chess", "go", "darts@daily", "golf@weekly", "quiz"}
			for _, b := range boards[:4] {
				post(t, s, b, "zed", "10", Best)
				post(t, s, b, "amy", "20", Best)
			}
			post(t, s, "quiz", "amy", "1", Best) // zed is not on quiz
			post(t, s, "go", "zed", "30", Best)  // zed leads go

			want := map[string]Entry{}
			for _, b := range boards[:4] {
				e, err := s.Get(ctx, b, "zed")
				require.NoError(t, err)
				want[b] = e
			}
			require.Equal(t, int64(0), want["go"].Rank)

			asked := append(append([]string{}, boards...), "nowhere", "chess")
			got, err := s.GetMany(ctx, asked, "zed")
			require.NoError(t, err)
			assert.Equal(t, want, got, "missing board and missing player are absent; chess twice once")

			h := &trips{}
			rdb.AddHook(h)
			_, err = s.GetMany(ctx, asked, "zed")
			require.NoError(t, err)
			sends := h.take()
			if r.Kind != redistest.Clusters {
				require.Len(t, sends, 1, "one round trip: %v", sends)
				assert.Equal(t, []string{"evalsha", "evalsha", "evalsha", "evalsha", "evalsha", "evalsha"}, sends[0], "one script per distinct board")
			} else {
				var n int
				for _, cmds := range sends {
					n += len(cmds)
				}
				assert.Equal(t, 6, n, "one script per distinct board, one pipeline split by shard: %v", sends)
			}

			empty, err := s.GetMany(ctx, nil, "zed")
			require.NoError(t, err)
			assert.Empty(t, empty)
			assert.Empty(t, h.take(), "nothing asked, nothing sent")
		})
	}
}

func TestGetManyErrors(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	ctx := context.Background()
	s := New(r.Client, Config{Prefix: r.Prefix})
	post(t, s, "chess", "amy", "5", Best)

	_, err := s.GetMany(ctx, []string{"chess", "bad board"}, "amy")
	assert.ErrorIs(t, err, names.ErrBadName)
	_, err = s.GetMany(ctx, []string{"chess"}, "")
	assert.ErrorIs(t, err, names.ErrBadName)
	_, err = s.GetMany(ctx, make([]string, MaxBatch+1), "amy")
	assert.ErrorIs(t, err, ErrBatchTooLarge)

	require.NoError(t, r.Client.ScriptFlush(ctx).Err())
	got, err := s.GetMany(ctx, []string{"chess"}, "amy")
	require.NoError(t, err, "a flushed script cache is loaded again")
	assert.Equal(t, map[string]Entry{"chess": {"amy", sc(t, "5"), 0}}, got)
}

func TestIdleBoards(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()

	t.Run("an idle board's keys all expire together", func(t *testing.T) {
		s := New(r.Client, Config{Prefix: r.Prefix + ":short", IdleTTL: 500 * time.Millisecond})
		post(t, s, "brief", "amy", "1", Best)
		post(t, s, "brief", "ben", "2", Best)
		for i, d := range pttls(t, r.Client, boardKeys(s, "brief")) {
			assert.Greater(t, d, time.Duration(0), boardKeys(s, "brief")[i])
			assert.LessOrEqual(t, d, 500*time.Millisecond)
		}
		ok, err := s.Exists(ctx, "brief")
		require.NoError(t, err)
		assert.True(t, ok)
		require.Eventually(t, func() bool {
			return r.Client.Exists(ctx, boardKeys(s, "brief")...).Val() == 0
		}, 15*time.Second, 20*time.Millisecond, "every key of the board is gone")
		ok, err = s.Exists(ctx, "brief")
		require.NoError(t, err)
		assert.False(t, ok)
		e := post(t, s, "brief", "ben", "1", Incr)
		assert.Equal(t, Entry{"ben", sc(t, "1"), 0}, e, "a new board starts from nothing")
	})

	t.Run("every post refreshes the idle TTL of all keys, changed or not", func(t *testing.T) {
		s := New(r.Client, Config{Prefix: r.Prefix + ":refresh", IdleTTL: time.Hour})
		post(t, s, "kept", "amy", "5", Best)
		keys := boardKeys(s, "kept")
		for _, k := range keys {
			require.NoError(t, r.Client.PExpire(ctx, k, 10*time.Second).Err()) // as if 59m50s had passed
		}
		post(t, s, "kept", "amy", "1", Best) // a lower best changes nothing
		for i, d := range pttls(t, r.Client, keys) {
			assert.Greater(t, d, 59*time.Minute, keys[i])
			assert.LessOrEqual(t, d, time.Hour, keys[i])
		}
	})

	t.Run("permanent boards have no TTL", func(t *testing.T) {
		var mu sync.Mutex
		permanent := map[string]bool{"hall": true}
		s := New(r.Client, Config{Prefix: r.Prefix + ":perm", Permanent: func(b string) bool {
			mu.Lock()
			defer mu.Unlock()
			return permanent[b]
		}})
		post(t, s, "hall", "amy", "1", Best)
		post(t, s, "user-made", "amy", "1", Best)
		for i, d := range pttls(t, r.Client, boardKeys(s, "hall")) {
			assert.Equal(t, time.Duration(-1), d, boardKeys(s, "hall")[i])
		}
		for _, d := range pttls(t, r.Client, boardKeys(s, "user-made")) {
			assert.Greater(t, d, DefaultIdleTTL-time.Minute)
		}
		mu.Lock()
		permanent["user-made"] = true
		mu.Unlock()
		post(t, s, "user-made", "amy", "1", Best) // unchanged, yet made permanent
		for i, d := range pttls(t, r.Client, boardKeys(s, "user-made")) {
			assert.Equal(t, time.Duration(-1), d, "declared permanent later: %s", boardKeys(s, "user-made")[i])
		}
		post(t, s, "hall@daily", "amy", "1", Best)
		for _, d := range pttls(t, r.Client, boardKeys(s, s.period("hall@daily").id)) {
			assert.Greater(t, d, time.Duration(0), "a periodic board ends with its period, whatever Permanent says")
		}
	})

	t.Run("a negative IdleTTL keeps every all-time board", func(t *testing.T) {
		s := New(r.Client, Config{Prefix: r.Prefix + ":never", IdleTTL: -1})
		post(t, s, "old", "amy", "1", Best)
		for _, d := range pttls(t, r.Client, boardKeys(s, "old")) {
			assert.Equal(t, time.Duration(-1), d)
		}
	})

	t.Run("Exists", func(t *testing.T) {
		s := New(r.Client, Config{Prefix: r.Prefix + ":exists"})
		for _, b := range []string{"fresh", "fresh@daily"} {
			ok, err := s.Exists(ctx, b)
			require.NoError(t, err)
			assert.False(t, ok, b)
			post(t, s, b, "amy", "1", Best)
			ok, err = s.Exists(ctx, b)
			require.NoError(t, err)
			assert.True(t, ok, b)
		}
		_, err := s.Exists(ctx, strings.Repeat("x", 1000))
		assert.ErrorIs(t, err, names.ErrBadName)
	})
}
