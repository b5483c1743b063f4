package dirty

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/names"
)

func TestAcrossNodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		r    func(testing.TB) *redistest.Redis
	}{
		{"single server", redistest.New},
		{"cluster", redistest.Cluster},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testFlows(t, tc.r(t))
		})
	}
}

func testFlows(t *testing.T, r *redistest.Redis) {
	ctx := context.Background()
	n := nodes(t, r, 3, Config{})
	reg := prometheus.NewRegistry()
	n[0].Tracker = New(n[0].rdb, Config{Prefix: r.Prefix, Node: "node-0", Logger: quiet, Registerer: reg})
	require.NoError(t, n[0].Start(ctx, n[0].bus))

	t.Run("a new session starts with every section dirty, then is clean", func(t *testing.T) {
		created, err := n[0].Open(ctx, "s-new", "alice")
		require.NoError(t, err)
		assert.True(t, created)
		m, err := n[1].Take(ctx, "s-new")
		require.NoError(t, err)
		assert.Equal(t, AllSections, m)
		m, err = n[2].Take(ctx, "s-new")
		require.NoError(t, err)
		assert.Equal(t, Mask(0), m)
	})

	t.Run("opening a live session again renews it and marks nothing", func(t *testing.T) {
		created, err := n[1].Open(ctx, "s-new", "alice")
		require.NoError(t, err)
		assert.False(t, created)
		m, err := n[2].Take(ctx, "s-new")
		require.NoError(t, err)
		assert.Equal(t, Mask(0), m)
	})

	for s := Rooms; s < numSections; s++ {
		t.Run(SectionName(s)+" marked via another node is exactly that bit, once", func(t *testing.T) {
			m, err := n[0].Take(ctx, "s-new")
			require.NoError(t, err)
			require.Equal(t, Mask(0), m)
			require.NoError(t, n[int(s)%3].MarkSessions(ctx, []string{"s-new"}, Of(s)))
			m, err = n[(int(s)+1)%3].Take(ctx, "s-new")
			require.NoError(t, err)
			assert.Equal(t, Of(s), m)
			assert.Equal(t, []string{SectionName(s)}, m.Sections())
			m, err = n[(int(s)+2)%3].Take(ctx, "s-new")
			require.NoError(t, err)
			assert.Equal(t, Mask(0), m)
		})
	}

	t.Run("marks accumulate until taken", func(t *testing.T) {
		require.NoError(t, n[0].MarkSessions(ctx, []string{"s-new"}, Of(Messages)))
		require.NoError(t, n[1].MarkUsers(ctx, []string{"alice"}, Of(Wallet)))
		require.NoError(t, n[2].MarkAll(ctx, Of(Settings)))
		m, err := n[0].Take(ctx, "s-new")
		require.NoError(t, err)
		assert.Equal(t, Of(Messages, Wallet, Settings), m)
	})

	t.Run("a session nobody opened is not marked", func(t *testing.T) {
		require.NoError(t, n[0].MarkSessions(ctx, []string{"s-ghost"}, AllSections))
		assert.Equal(t, int64(0), r.Client.Exists(ctx, n[0].k.mask("s-ghost")).Val())
		m, err := n[1].Take(ctx, "s-ghost")
		require.NoError(t, err)
		assert.Equal(t, Mask(0), m)
	})

	t.Run("every session of a user is marked", func(t *testing.T) {
		for i, s := range []string{"b1", "b2", "b3"} {
			_, err := n[i].Open(ctx, s, "bob")
			require.NoError(t, err)
			_, err = n[i].Take(ctx, s)
			require.NoError(t, err)
		}
		require.NoError(t, n[2].MarkUsers(ctx, []string{"bob", "nobody"}, Of(Rooms)))
		for i, s := range []string{"b1", "b2", "b3"} {
			m, err := n[(i+1)%3].Take(ctx, s)
			require.NoError(t, err)
			assert.Equal(t, Of(Rooms), m, s)
		}
		m, err := n[0].Take(ctx, "s-new")
		require.NoError(t, err)
		assert.Equal(t, Mask(0), m, "alice's session is untouched")
	})

	t.Run("followers of a topic are marked", func(t *testing.T) {
		require.NoError(t, n[0].Follow(ctx, "lb:daily", "bob"))
		require.NoError(t, n[1].MarkFollowers(ctx, "lb:daily", Of(Leaderboards)))
		for _, s := range []string{"b1", "b2", "b3"} {
			m, err := n[2].Take(ctx, s)
			require.NoError(t, err)
			assert.Equal(t, Of(Leaderboards), m, s)
		}
		require.NoError(t, n[1].MarkFollowers(ctx, "lb:nobody", Of(Leaderboards)))
	})

	t.Run("a long poll wakes on a mark made via another node", func(t *testing.T) {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		res := goWait(wctx, n[0].Tracker, "s-new", 25*time.Second)
		registered(t, r, n[0].k, "s-new")
		require.NoError(t, n[1].MarkSessions(ctx, []string{"s-new"}, Of(Notices)))
		got := within(t, res, 2*time.Second, "the wake-up, long before the 25s wait")
		require.NoError(t, got.err)
		assert.Equal(t, Of(Notices), got.m)
	})

	t.Run("a long poll with nothing dirty returns clean at its max", func(t *testing.T) {
		got := within(t, goWait(ctx, n[2].Tracker, "s-new", 200*time.Millisecond), 5*time.Second, "the timeout")
		require.NoError(t, got.err)
		assert.Equal(t, Mask(0), got.m)
	})

	t.Run("the cursor is shared by every node", func(t *testing.T) {
		require.NoError(t, n[0].SetCursor(ctx, "s-new", map[string]string{"general-1": "17-0", "arena-2": "9-3"}))
		cur, err := n[1].Cursor(ctx, "s-new", []string{"general-1", "arena-2", "other-1"})
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"general-1": "17-0", "arena-2": "9-3"}, cur)
		require.NoError(t, n[2].SetCursor(ctx, "s-new", map[string]string{"general-1": "18-0"}))
		cur, err = n[0].Cursor(ctx, "s-new", []string{"general-1"})
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"general-1": "18-0"}, cur)
	})

	t.Run("a session's rooms are its cursor's rooms, until dropped", func(t *testing.T) {
		cur, err := n[2].Cursors(ctx, "s-new")
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"general-1": "18-0", "arena-2": "9-3"}, cur)
		require.NoError(t, n[1].DropCursor(ctx, "s-new", "arena-2"))
		cur, err = n[0].Cursors(ctx, "s-new")
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"general-1": "18-0"}, cur)
	})

	t.Run("a user's followed topics are listed", func(t *testing.T) {
		require.NoError(t, n[2].Follow(ctx, "lb:alltime", "bob"))
		topics, err := n[0].Following(ctx, "bob")
		require.NoError(t, err)
		assert.Equal(t, []string{"lb:alltime", "lb:daily"}, topics)
		topics, err = n[0].Following(ctx, "nobody")
		require.NoError(t, err)
		assert.Empty(t, topics)
	})

	t.Run("metrics count polls and marks", func(t *testing.T) {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		got := map[string]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				name := mf.GetName()
				for _, l := range m.GetLabel() {
					name += "/" + l.GetValue()
				}
				got[name] = m.GetCounter().GetValue()
			}
		}
		assert.Equal(t, 2.0, got["chatd_dirty_sessions_opened_total"], "s-new and b1")
		assert.Positive(t, got["chatd_dirty_marks_total"])
		assert.Positive(t, got["chatd_dirty_polls_total/dirty"])
		assert.Positive(t, got["chatd_dirty_polls_total/clean"])
	})
}

func TestManySessions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		r    func(testing.TB) *redistest.Redis
	}{
		{"single server", redistest.New},
		{"cluster", redistest.Cluster},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testManySessions(t, tc.r(t))
		})
	}
}

func testManySessions(t *testing.T, r *redistest.Redis) {
	ctx := context.Background()
	n := nodes(t, r, 3, Config{Batch: 250})
	users, perUser := 1000, 3
	if r.Kind == redistest.Embedded {
		users = 100 // miniredis scans every TTL key on each command
	}
	sessions := func(u int) []string {
		out := make([]string, perUser)
		for i := range out {
			out[i] = fmt.Sprintf("s%d.%d", u, i)
		}
		return out
	}
	for u := 0; u < users; u++ {
		for _, s := range sessions(u) {
			_, err := n[u%3].Open(ctx, s, fmt.Sprintf("u%d", u))
			require.NoError(t, err)
		}
	}
	takeAll := func(t *testing.T) (dirty map[string]Mask) {
		dirty = map[string]Mask{}
		for u := 0; u < users; u++ {
			for _, s := range sessions(u) {
				m, err := n[(u+1)%3].Take(ctx, s)
				require.NoError(t, err)
				if m != 0 {
					dirty[s] = m
				}
			}
		}
		return dirty
	}
	require.Len(t, takeAll(t), users*perUser, "every new session starts dirty")

	t.Run("marking half the users marks exactly their sessions", func(t *testing.T) {
		var picked []string
		want := map[string]Mask{}
		for u := 0; u < users; u += 2 {
			picked = append(picked, fmt.Sprintf("u%d", u))
			for _, s := range sessions(u) {
				want[s] = Of(Messages, Rooms)
			}
		}
		require.NoError(t, n[1].MarkUsers(ctx, picked, Of(Messages, Rooms)))
		assert.Equal(t, want, takeAll(t))
	})

	t.Run("marking all marks every session", func(t *testing.T) {
		require.NoError(t, n[2].MarkAll(ctx, Of(Settings)))
		got := takeAll(t)
		assert.Len(t, got, users*perUser)
		for s, m := range got {
			require.Equal(t, Of(Settings), m, s)
		}
	})
}

// TestSessionExpiry: a session nobody opens again leaves nothing behind —
// each of its keys carries the session TTL — and once gone it is neither
// marked nor remembered. The TTL is seconds long, so the setup (four round
// trips) finishes well inside it on a loaded machine: each key is checked to
// exist with a TTL at most SessionTTL before the wait for it to vanish.
func TestSessionExpiry(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	const ttl = 3 * time.Second
	n := nodes(t, r, 2, Config{SessionTTL: ttl})
	_, err := n[0].Open(ctx, "short", "carol")
	require.NoError(t, err)
	_, err = n[0].Take(ctx, "short")
	require.NoError(t, err)
	require.NoError(t, n[0].SetCursor(ctx, "short", map[string]string{"general-1": "5-0"}))
	require.NoError(t, n[0].Follow(ctx, "board", "carol"))

	sessionKeys := []string{n[0].k.owner("short"), n[0].k.cursor("short"), n[0].k.userSessions("carol")}
	for _, key := range sessionKeys {
		left, err := r.Client.PTTL(ctx, key).Result()
		require.NoError(t, err)
		require.Greater(t, left, time.Duration(0), "%s exists and expires", key)
		require.LessOrEqual(t, left, ttl, "%s expires within the session TTL", key)
	}
	require.Eventually(t, func() bool {
		return r.Client.Exists(ctx, sessionKeys...).Val() == 0
	}, ttl+20*time.Second, 20*time.Millisecond, "every session key has gone after its TTL")

	t.Run("an expired session is not marked", func(t *testing.T) {
		require.NoError(t, n[1].MarkSessions(ctx, []string{"short"}, Of(Wallet)))
		require.NoError(t, n[1].MarkUsers(ctx, []string{"carol"}, Of(Wallet)))
		require.NoError(t, n[1].MarkAll(ctx, Of(Wallet)))
		require.NoError(t, n[1].MarkFollowers(ctx, "board", Of(Wallet)))
		assert.Equal(t, int64(0), r.Client.Exists(ctx, n[1].k.mask("short")).Val())
		n, err := r.Client.ZCard(ctx, n[1].k.liveSessions()).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "MarkAll trimmed it from the live set")
	})

	t.Run("an expired session opens again all dirty, with no cursor", func(t *testing.T) {
		created, err := n[1].Open(ctx, "short", "carol")
		require.NoError(t, err)
		assert.True(t, created)
		m, err := n[0].Take(ctx, "short")
		require.NoError(t, err)
		assert.Equal(t, AllSections, m)
		cur, err := n[0].Cursor(ctx, "short", []string{"general-1"})
		require.NoError(t, err)
		assert.Empty(t, cur)
	})
}

func TestOpenRenewsAtMostEveryQuarterTTL(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	clk := newClock()
	tr := New(r.Client, Config{Prefix: r.Prefix, SessionTTL: 12 * time.Minute, Now: clk.Now, Logger: quiet})
	score := func() float64 { return r.Client.ZScore(ctx, tr.k.liveSessions(), "s").Val() }

	created, err := tr.Open(ctx, "s", "dave")
	require.NoError(t, err)
	require.True(t, created)
	first := score()

	clk.Add(time.Minute)
	_, err = tr.Open(ctx, "s", "dave")
	require.NoError(t, err)
	assert.Equal(t, first, score(), "a renewal within TTL/12 skips Redis")

	clk.Add(2 * time.Minute)
	_, err = tr.Open(ctx, "s", "dave")
	require.NoError(t, err)
	assert.Equal(t, float64(clk.Now().Add(12*time.Minute).UnixMilli()), score(), "renewed after TTL/4 at most")

}

func TestBadInput(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	tr := New(r.Client, Config{Prefix: r.Prefix, Logger: quiet})
	t.Run("bad ids and names are refused", func(t *testing.T) {
		_, err := tr.Open(ctx, "a{b}", "alice")
		assert.ErrorIs(t, err, ErrBadID)
		_, err = tr.Open(ctx, "s", "a b")
		assert.ErrorIs(t, err, names.ErrBadName)
		_, err = tr.Take(ctx, "")
		assert.ErrorIs(t, err, ErrBadID)
		_, err = tr.Wait(ctx, "", time.Second)
		assert.ErrorIs(t, err, ErrBadID)
		assert.ErrorIs(t, tr.MarkSessions(ctx, []string{"ok", "x y"}, AllSections), ErrBadID)
		assert.ErrorIs(t, tr.MarkUsers(ctx, []string{"*"}, AllSections), names.ErrBadName)
		assert.ErrorIs(t, tr.Follow(ctx, "{t}", "alice"), ErrBadID)
		assert.ErrorIs(t, tr.MarkFollowers(ctx, "", AllSections), ErrBadID)
		_, err = tr.Cursor(ctx, "", nil)
		assert.ErrorIs(t, err, ErrBadID)
		assert.ErrorIs(t, tr.SetCursor(ctx, "", nil), ErrBadID)
	})
	t.Run("a long poll before Start is refused", func(t *testing.T) {
		_, err := tr.Wait(ctx, "s", time.Second)
		assert.ErrorIs(t, err, ErrNotStarted)
	})
	t.Run("a wait of zero is a take", func(t *testing.T) {
		m, err := tr.Wait(ctx, "s", 0)
		require.NoError(t, err)
		assert.Equal(t, Mask(0), m)
	})
}

// recorder is a go-redis hook recording every command a client sends, and
// its round trips: nothing is filtered out.
type recorder struct {
	mu   sync.Mutex
	cmds []string
	rtts int
}

func (h *recorder) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *recorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.add(cmd)
		return next(ctx, cmd)
	}
}

func (h *recorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.add(cmds...)
		return next(ctx, cmds)
	}
}

func (h *recorder) add(cmds ...redis.Cmder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rtts++
	for _, c := range cmds {
		h.cmds = append(h.cmds, c.FullName())
	}
}

// take returns what was sent since the last take, and forgets it.
func (h *recorder) take() (cmds []string, rtts int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cmds, rtts = h.cmds, h.rtts
	h.cmds, h.rtts = nil, 0
	return cmds, rtts
}

// TestCleanPollIsOneCommand: a clean poll (Open, its renewal throttled, then
// Take) sends one command, the wait script's EVALSHA, counting everything
// the client sends; a renewal once due is one round trip. The client's
// connection is opened before the hook, so no handshake is counted — and
// any would fail the test.
func TestCleanPollIsOneCommand(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	rdb := r.NewClient(t)
	ctx := context.Background()
	clk := newClock()
	const ttl = 12 * time.Minute
	tr := New(rdb, Config{Prefix: r.Prefix, SessionTTL: ttl, Now: clk.Now, Logger: quiet})
	_, err := tr.Open(ctx, "clean", "erin")
	require.NoError(t, err)
	_, err = tr.Take(ctx, "clean") // a new session starts all dirty
	require.NoError(t, err)

	rec := &recorder{}
	rdb.AddHook(rec)
	for i := 0; i < 5; i++ {
		clk.Add(10 * time.Second)
		created, err := tr.Open(ctx, "clean", "erin")
		require.NoError(t, err)
		require.False(t, created)
		m, err := tr.Take(ctx, "clean")
		require.NoError(t, err)
		require.Zero(t, m)
		cmds, rtts := rec.take()
		assert.Equal(t, []string{"evalsha"}, cmds, "poll %d", i)
		assert.Equal(t, 1, rtts, "poll %d", i)
	}

	clk.Add(ttl / 4)
	_, err = tr.Open(ctx, "clean", "erin")
	require.NoError(t, err)
	cmds, rtts := rec.take()
	assert.Equal(t, 1, rtts, "a due renewal is one round trip: %v", cmds)
	assert.NotEmpty(t, cmds)
}

// TestAFlushedScriptCacheIsLoadedAgain: after SCRIPT FLUSH (a restart, a
// new Cluster master) every script of the tracker answers NOSCRIPT once;
// open, follow and mark re-send just those scripts (internal/redisx) and
// succeed, and the marks land once.
func TestAFlushedScriptCacheIsLoadedAgain(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{}) // SCRIPT FLUSH is server-wide: not on the server other tests share
	ctx := context.Background()
	tr := New(r.Client, Config{Prefix: r.Prefix, Node: "n", Logger: quiet})
	require.NoError(t, r.Client.ScriptFlush(ctx).Err())
	created, err := tr.Open(ctx, "s-flush", "fay")
	require.NoError(t, err, "open with a flushed cache")
	assert.True(t, created)
	m, err := tr.Take(ctx, "s-flush")
	require.NoError(t, err)
	assert.Equal(t, AllSections, m)

	require.NoError(t, r.Client.ScriptFlush(ctx).Err())
	require.NoError(t, tr.Follow(ctx, "board:x", "fay"), "follow with a flushed cache")
	require.NoError(t, r.Client.ScriptFlush(ctx).Err())
	require.NoError(t, tr.MarkUsers(ctx, []string{"fay"}, Of(Wallet)), "mark with a flushed cache")
	m, err = tr.Take(ctx, "s-flush")
	require.NoError(t, err)
	assert.Equal(t, Of(Wallet), m)
}
