package dirty

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// markCounter is a go-redis hook counting the mark scripts a client runs
// (EVALSHA of session_mark) and every command it sends.
type markCounter struct{ marks, cmds atomic.Int64 }

func (h *markCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *markCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}

func (h *markCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.count(cmds...)
		return next(ctx, cmds)
	}
}

func (h *markCounter) count(cmds ...redis.Cmder) {
	for _, c := range cmds {
		h.cmds.Add(1)
		if args := c.Args(); len(args) > 1 && (c.Name() == "evalsha" || c.Name() == "eval") {
			if sha, _ := args[1].(string); sha == markScript.Hash() || sha == markSrc {
				h.marks.Add(1)
			}
		}
	}
}

// TestSessionsPerUserCapped: 2,000 Opens of one user leave 10 sessions in the
// user's index and in the live set, so a message to a room of that user
// marks 10 sessions, not 2,000. The same load under a cap of a million (the
// behaviour before the cap) is measured alongside and logged.
func TestSessionsPerUserCapped(t *testing.T) {
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
			after := marksPerMessage(t, r, r.Prefix+":capped", 0, 100)
			assert.LessOrEqual(t, after, 10.0, "marks per message with the default cap")
			before := marksPerMessage(t, r, r.Prefix+":uncapped", 1_000_000, 10)
			assert.Equal(t, 2000.0, before, "without a cap every session is marked")
			t.Logf("marks per message to a room of a user with 2,000 sessions opened: %.0f uncapped, %.0f capped at %d", before, after, DefaultMaxSessionsPerUser)
		})
	}
}

// marksPerMessage opens 2,000 sessions of one user under the given cap,
// checks what the indexes hold, then marks the room "members" (that user
// and two others) msgs times and returns the mark scripts run per message.
func marksPerMessage(t *testing.T, r *redistest.Redis, prefix string, maxSessions, msgs int) float64 {
	t.Helper()
	ctx := context.Background()
	clk := newClock()
	rdb := r.NewClient(t)
	tr := New(rdb, Config{Prefix: prefix, MaxSessionsPerUser: maxSessions, Now: clk.Now, Logger: quiet})
	const opened = 2000
	for i := range opened {
		clk.Add(time.Millisecond) // a strict order of renewal
		_, err := tr.Open(ctx, fmt.Sprintf("many-%04d", i), "many")
		require.NoError(t, err)
	}
	for _, u := range []string{"amy", "ben"} {
		_, err := tr.Open(ctx, "s-"+u, u)
		require.NoError(t, err)
	}
	index, err := rdb.ZRange(ctx, tr.k.userSessions("many"), 0, -1).Result()
	require.NoError(t, err)
	live, err := rdb.ZCard(ctx, tr.k.liveSessions()).Result()
	require.NoError(t, err)
	if maxSessions == 0 {
		var want []string
		for i := opened - DefaultMaxSessionsPerUser; i < opened; i++ {
			want = append(want, fmt.Sprintf("many-%04d", i))
		}
		assert.Equal(t, want, index, "the index keeps the 10 sessions opened last")
		assert.Equal(t, int64(DefaultMaxSessionsPerUser+2), live, "dropped sessions left the live set too")
		ttl, err := rdb.PTTL(ctx, tr.k.owner("many-0000")).Result()
		require.NoError(t, err)
		assert.Greater(t, ttl, time.Duration(0), "a dropped session's own keys stay, expiring by TTL")
	} else {
		assert.Len(t, index, opened)
		assert.Equal(t, int64(opened+2), live)
	}

	// One mark first, so that a shard that never ran the mark script loads
	// it (NOSCRIPT, load, resend) before the count starts.
	require.NoError(t, tr.MarkUsers(ctx, []string{"amy", "many", "ben"}, Of(Messages)))
	h := &markCounter{}
	rdb.AddHook(h)
	for range msgs {
		require.NoError(t, tr.MarkUsers(ctx, []string{"amy", "many", "ben"}, Of(Messages)))
	}
	perMsg := float64(h.marks.Load()-2*int64(msgs)) / float64(msgs) // amy's and ben's
	t.Logf("%s: %d commands for %d messages", prefix, h.cmds.Load(), msgs)
	return perMsg
}

// TestSessionsCapKeepsTheNewest: a session renewed keeps its place; the one
// renewed longest ago goes; a session a node opened with a clock behind the
// others is not the one dropped by its own Open.
func TestSessionsCapKeepsTheNewest(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	clk := newClock()
	tr := New(r.Client, Config{Prefix: r.Prefix, MaxSessionsPerUser: 3, SessionTTL: 12 * time.Minute, Now: clk.Now, Logger: quiet})
	index := func() []string {
		s, err := r.Client.ZRange(ctx, tr.k.userSessions("kim"), 0, -1).Result()
		require.NoError(t, err)
		slices.Sort(s)
		return s
	}
	for _, s := range []string{"a", "b", "c"} {
		clk.Add(time.Second)
		_, err := tr.Open(ctx, s, "kim")
		require.NoError(t, err)
	}
	clk.Add(3 * time.Minute) // past the renewal throttle (TTL/4)
	_, err := tr.Open(ctx, "a", "kim")
	require.NoError(t, err)
	clk.Add(time.Second)
	_, err = tr.Open(ctx, "d", "kim")
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "c", "d"}, index(), "b, renewed longest ago, went")

	m, err := tr.Take(ctx, "b")
	require.NoError(t, err)
	assert.Equal(t, AllSections, m, "a dropped session still exists until its TTL")
	require.NoError(t, tr.MarkUsers(ctx, []string{"kim"}, Of(Wallet)))
	require.NoError(t, tr.MarkAll(ctx, Of(Settings)))
	m, err = tr.Take(ctx, "b")
	require.NoError(t, err)
	assert.Zero(t, m, "but no mark reaches it")

	behind := New(r.Client, Config{Prefix: r.Prefix, MaxSessionsPerUser: 3, SessionTTL: 12 * time.Minute, Now: func() time.Time { return clk.Now().Add(-time.Minute) }, Logger: quiet})
	_, err = behind.Open(ctx, "e", "kim")
	require.NoError(t, err)
	got := index()
	assert.Contains(t, got, "e", "an Open never drops its own session")
	assert.Len(t, got, 3)
}

// TestSweepTrimsTheLiveSet: the live set holds only sessions opened or
// renewed within SessionTTL once Sweep (or MarkAll) has run.
func TestSweepTrimsTheLiveSet(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	clk := newClock()
	const ttl = 10 * time.Minute
	tr := New(r.Client, Config{Prefix: r.Prefix, SessionTTL: ttl, Now: clk.Now, Logger: quiet})
	open := func(prefix string, n int) {
		for i := range n {
			_, err := tr.Open(ctx, fmt.Sprintf("%s-%d", prefix, i), fmt.Sprintf("u%d", i))
			require.NoError(t, err)
		}
	}
	card := func() int64 {
		n, err := r.Client.ZCard(ctx, tr.k.liveSessions()).Result()
		require.NoError(t, err)
		return n
	}
	open("old", 50)
	clk.Add(ttl - time.Second)
	open("mid", 20)
	removed, err := tr.Sweep(ctx)
	require.NoError(t, err)
	assert.Zero(t, removed, "nothing is idle a whole TTL yet")
	clk.Add(time.Second)
	open("new", 5)
	removed, err = tr.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 50, removed)
	assert.Equal(t, int64(25), card(), "the 20 idle < TTL and the 5 new")

	clk.Add(ttl)
	require.NoError(t, tr.MarkAll(ctx, Of(Settings)))
	assert.Zero(t, card(), "MarkAll after every session expired trims them all")
	removed, err = tr.Sweep(ctx)
	require.NoError(t, err)
	assert.Zero(t, removed)
}

// TestFollowsCapped: following past MaxFollows drops the topic followed
// longest ago from the user's follows and the user from its followers;
// every followers set carries a TTL that Follow refreshes.
func TestFollowsCapped(t *testing.T) {
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
			clk := newClock()
			const followTTL = time.Hour
			tr := New(r.NewClient(t), Config{Prefix: r.Prefix, MaxFollows: 5, FollowTTL: followTTL, Now: clk.Now, Logger: quiet})
			topic := func(i int) string { return fmt.Sprintf("lb:t%d", i) }
			for i := range 5 {
				clk.Add(time.Second)
				require.NoError(t, tr.Follow(ctx, topic(i), "fay"))
				require.NoError(t, tr.Follow(ctx, topic(i), "gus"))
			}
			clk.Add(time.Second)
			require.NoError(t, tr.Follow(ctx, topic(0), "fay")) // t0 is now fay's newest
			clk.Add(time.Second)
			require.NoError(t, tr.Follow(ctx, topic(5), "fay"))

			got, err := tr.Following(ctx, "fay")
			require.NoError(t, err)
			assert.Equal(t, []string{topic(0), topic(2), topic(3), topic(4), topic(5)}, got, "t1, followed longest ago, went")
			followers, err := r.Client.SMembers(ctx, tr.k.followers(topic(1))).Result()
			require.NoError(t, err)
			assert.Equal(t, []string{"gus"}, followers, "fay left t1's followers")
			isMember, err := r.Client.SIsMember(ctx, tr.k.followers(topic(0)), "fay").Result()
			require.NoError(t, err)
			assert.True(t, isMember)

			for i := range 6 {
				ttl, err := r.Client.PTTL(ctx, tr.k.followers(topic(i))).Result()
				require.NoError(t, err)
				assert.Greater(t, ttl, followTTL-time.Minute, topic(i))
				assert.LessOrEqual(t, ttl, followTTL, topic(i))
			}
			ttl, err := r.Client.PTTL(ctx, tr.k.follows("fay")).Result()
			require.NoError(t, err)
			assert.Greater(t, ttl, followTTL-time.Minute)

			for i := 6; i < 200; i++ {
				require.NoError(t, tr.Follow(ctx, topic(i), "fay"))
			}
			n, err := r.Client.ZCard(ctx, tr.k.follows("fay")).Result()
			require.NoError(t, err)
			assert.Equal(t, int64(5), n, "200 follows, 5 kept")
			var with int
			for i := range 200 {
				ok, err := r.Client.SIsMember(ctx, tr.k.followers(topic(i)), "fay").Result()
				require.NoError(t, err)
				if ok {
					with++
				}
			}
			assert.Equal(t, 5, with, "fay is a follower of exactly the 5 topics kept")

			clk.Add(followTTL + time.Second)
			require.NoError(t, tr.Follow(ctx, "lb:late", "fay"))
			got, err = tr.Following(ctx, "fay")
			require.NoError(t, err)
			assert.Equal(t, []string{"lb:late"}, got)
			n, err = r.Client.ZCard(ctx, tr.k.follows("fay")).Result()
			require.NoError(t, err)
			assert.Equal(t, int64(1), n, "lapsed follows are trimmed by the next Follow")
		})
	}
}

func TestCapDefaults(t *testing.T) {
	tr := New(nil, Config{Logger: quiet})
	assert.Equal(t, DefaultMaxSessionsPerUser, tr.maxSess)
	assert.Equal(t, DefaultMaxFollows, tr.maxFol)
	tr = New(nil, Config{MaxSessionsPerUser: 3, MaxFollows: 7, Logger: quiet})
	assert.Equal(t, 3, tr.maxSess)
	assert.Equal(t, 7, tr.maxFol)
}
