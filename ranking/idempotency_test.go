package ranking

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/redisx"
)

func TestIdempotentPosts(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	var changes atomic.Int64
	s := newService(t, r, Config{OnChange: func(context.Context, string, Entry) { changes.Add(1) }})
	postKey := func(board, player, score string, mode Mode, opts PostOptions) (PostResult, error) {
		return s.PostWith(ctx, board, player, sc(t, score), mode, opts)
	}

	t.Run("a post sent twice with one key is applied once", func(t *testing.T) {
		post(t, s, "b", "al", "1", Set)
		first, err := postKey("b", "al", "1", Incr, PostOptions{Key: "k1"})
		require.NoError(t, err)
		assert.Equal(t, PostResult{Entry: Entry{"al", sc(t, "2"), 0}, Changed: true}, first)
		post(t, s, "b", "bo", "5", Set) // the board moves on: al is second now
		again, err := postKey("b", "al", "1", Incr, PostOptions{Key: "k1"})
		require.NoError(t, err)
		assert.Equal(t, PostResult{Entry: Entry{"al", sc(t, "2"), 0}, Changed: true, Duplicate: true}, again,
			"the first post's answer, as it was")
		got, err := s.Get(ctx, "b", "al")
		require.NoError(t, err)
		assert.Equal(t, Entry{"al", sc(t, "2"), 1}, got, "1 + 1, once")
		// The duplicate is marked again: it may be go-redis's retry of
		// the first call, whose answer (and so its marks) was lost.
		assert.EqualValues(t, 4, changes.Load(), "OnChange for the duplicate of a change")
	})
	t.Run("the player in another case is the same post", func(t *testing.T) {
		again, err := postKey("b", "AL", "1", Incr, PostOptions{Key: "k1"})
		require.NoError(t, err)
		assert.True(t, again.Duplicate)
	})
	t.Run("the key reused for another post is refused and writes nothing", func(t *testing.T) {
		for _, p := range []struct {
			player, score string
			mode          Mode
		}{{"bo", "1", Incr}, {"al", "2", Incr}, {"al", "1", Set}} {
			_, err := postKey("b", p.player, p.score, p.mode, PostOptions{Key: "k1"})
			assert.ErrorIs(t, err, ErrIdempotencyMismatch, p)
			assert.Equal(t, errcode.BadRequest, errcode.Of(err))
			assert.True(t, IsBadInput(err))
		}
		got, err := s.Get(ctx, "b", "bo")
		require.NoError(t, err)
		assert.Equal(t, sc(t, "5"), got.Score)
	})
	t.Run("scopes keep two clients' keys apart", func(t *testing.T) {
		a, err := postKey("b", "al", "1", Incr, PostOptions{Key: "1", Scope: "alice"})
		require.NoError(t, err)
		b, err := postKey("b", "bo", "1", Incr, PostOptions{Key: "1", Scope: "bob"})
		require.NoError(t, err)
		assert.False(t, a.Duplicate || b.Duplicate)
		assert.Equal(t, sc(t, "3"), a.Entry.Score)
		assert.Equal(t, sc(t, "6"), b.Entry.Score)
	})
	t.Run("the answer is kept for IdempotencyTTL in the board's slot", func(t *testing.T) {
		k := idemKey(s.sp, "b", "", "k1")
		assert.Contains(t, k, "{lb:b}")
		d, err := r.Client.PTTL(ctx, k).Result()
		require.NoError(t, err)
		assert.Greater(t, d, IdempotencyTTL-time.Minute)
		assert.LessOrEqual(t, d, IdempotencyTTL)
	})
	t.Run("a refused post keeps no answer: its retry is tried again", func(t *testing.T) {
		post(t, s, "top", "x", "1000000000000000", Set)
		_, err := postKey("top", "x", "0.001", Incr, PostOptions{Key: "k2"})
		require.ErrorIs(t, err, ErrBadScore)
		n, err := r.Client.Exists(ctx, idemKey(s.sp, "top", "", "k2")).Result()
		require.NoError(t, err)
		assert.Zero(t, n)
	})
	t.Run("bad keys and scopes are refused before Redis", func(t *testing.T) {
		for _, o := range []PostOptions{
			{Key: strings.Repeat("k", MaxIdempotencyKey+1)}, {Key: "a b"}, {Key: "é"}, {Key: "\x00"},
			{Key: "k", Scope: "a:b"}, {Scope: "alice"},
		} {
			_, err := postKey("b", "al", "1", Incr, o)
			assert.ErrorIs(t, err, ErrBadIdempotencyKey, o)
			assert.True(t, IsBadInput(err))
		}
		_, err := postKey("b", "al", "1", Incr, PostOptions{Key: strings.Repeat("~", MaxIdempotencyKey)})
		assert.NoError(t, err)
	})
}

// TestRetryAfterReadTimeoutAppliesOnce reproduces issue #27: a post in
// flight while Redis is stopped (SIGSTOP) for longer than the client's
// ReadTimeout is sent again by go-redis's own retry, and Redis, once it
// runs again, executes both: an incr of 1 on a score of 1 gave 3. A post
// without a key is now keyed by its call (for 10 s), so the retry is a
// duplicate and each post is applied once; with the caller's own key, the
// caller's retry is a duplicate as well.
func TestRetryAfterReadTimeoutAppliesOnce(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: r.Server.Addr, MaxRetries: 1, ReadTimeout: time.Second, PoolSize: 50})
	t.Cleanup(func() { _ = rdb.Close() })
	s := New(rdb, Config{Prefix: r.Prefix})
	const posts = 20

	// run posts +1 for p0..p19 (each at 1) while Redis is stopped for 1.6 s:
	// past the first attempt's 1 s read timeout, within the retry's.
	run := func(board string, keyed bool) (errs int) {
		for i := range posts {
			_, err := s.Post(ctx, board, fmt.Sprintf("p%d", i), 1000, Set)
			require.NoError(t, err)
		}
		// Open connections for every post and its retry, so each copy is
		// sent at once on a connection made before the pause: a
		// connection dialled while Redis is stopped fails in its
		// handshake, before the post is sent, and that post is then
		// (rightly) applied zero times, which this test does not count on.
		held := make([]*redis.Conn, 2*posts)
		for i := range held {
			held[i] = rdb.Conn()
			require.NoError(t, held[i].Ping(ctx).Err())
		}
		for _, c := range held {
			require.NoError(t, c.Close())
		}
		r.Server.Pause(t)
		var wg sync.WaitGroup
		var failed atomic.Int64
		for i := range posts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				opts := PostOptions{}
				if keyed {
					opts.Key = fmt.Sprintf("post-%d", i)
				}
				if _, err := s.PostWith(ctx, board, fmt.Sprintf("p%d", i), 1000, Incr, opts); err != nil {
					failed.Add(1)
					if keyed { // the caller's own retry, with the same key
						_, err = s.PostWith(ctx, board, fmt.Sprintf("p%d", i), 1000, Incr, opts)
						assert.NoError(t, err)
					}
				}
			}()
		}
		time.Sleep(1600 * time.Millisecond)
		r.Server.Resume(t)
		wg.Wait()
		return int(failed.Load())
	}
	scores := func(board string) map[string]int {
		top, err := s.Top(ctx, board, posts)
		require.NoError(t, err)
		out := map[string]int{}
		for _, e := range top {
			out[e.Score.String()]++
		}
		return out
	}

	failed := run("nokey", false)
	unkeyed := scores("nokey")
	t.Logf("without keys: %d posts failed; final scores %v", failed, unkeyed)
	assert.Zero(t, unkeyed["3"], "no post applied twice (1 + 1 + 1)")
	assert.Equal(t, posts, unkeyed["2"], "every post applied once, its retry answered by the first copy")

	failed = run("keyed", true)
	keyed := scores("keyed")
	t.Logf("with keys: %d posts failed (and were retried); final scores %v", failed, keyed)
	assert.Equal(t, map[string]int{"2": posts}, keyed, "every post applied once")
}

func TestPlayersPerBoardCap(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	var cap atomic.Int64
	cap.Store(3)
	s := newService(t, r, Config{MaxPlayers: func() int { return int(cap.Load()) }})
	for _, p := range []string{"a", "b", "c"} {
		post(t, s, "capped", p, "1", Best)
	}
	_, err := s.Post(ctx, "capped", "d", sc(t, "9"), Best)
	require.ErrorIs(t, err, ErrBoardFull)
	assert.Equal(t, errcode.BoardFull, errcode.Of(err))
	assert.Equal(t, "Board capped holds its cap of 3 players; the players on it may still post", errcode.Message(err))
	assert.False(t, IsBadInput(err))
	n, err := s.Len(ctx, "capped")
	require.NoError(t, err)
	assert.EqualValues(t, 3, n, "nobody added")

	assert.Equal(t, Entry{"A", sc(t, "5"), 0}, post(t, s, "capped", "A", "5", Best), "a player on the board still posts, in any case")
	post(t, s, "other", "d", "1", Best) // the cap is per board

	cap.Store(4)
	post(t, s, "capped", "d", "9", Best)
	cap.Store(0)
	post(t, s, "capped", "e", "9", Best)
	n, err = s.Len(ctx, "capped")
	require.NoError(t, err)
	assert.EqualValues(t, 5, n, "a raised or removed cap applies to the next post")
}

// TestPlayersAreCanonical: issue #28 (6) for boards. On the code before
// this change "Misc1" and "misc1" were two entries.
func TestPlayersAreCanonical(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	s := newService(t, r, Config{})
	post(t, s, "c", "zed", "50", Best)
	post(t, s, "c", "Misc1", "10", Best)
	post(t, s, "c", "misc1", "20", Best)
	top, err := s.Top(ctx, "c", 10)
	require.NoError(t, err)
	assert.Equal(t, []Entry{{"zed", sc(t, "50"), 0}, {"misc1", sc(t, "20"), 1}}, top, "one entry, shown as last posted")

	t.Run("a post in another case that leaves the score renames the entry in place", func(t *testing.T) {
		post(t, s, "c", "later", "20", Best) // ties misc1, after it
		e := post(t, s, "c", "MISC1", "5", Best)
		assert.Equal(t, Entry{"MISC1", sc(t, "20"), 1}, e, "same score, same rank: its time is kept")
		top, err := s.Top(ctx, "c", 10)
		require.NoError(t, err)
		assert.Equal(t, []string{"zed", "MISC1", "later"}, players(top))
	})
	t.Run("every read finds it in any case and shows it as last posted", func(t *testing.T) {
		for _, q := range []string{"misc1", "Misc1", "MISC1"} {
			e, err := s.Get(ctx, "c", q)
			require.NoError(t, err)
			assert.Equal(t, Entry{"MISC1", sc(t, "20"), 1}, e, q)
			around, err := s.Around(ctx, "c", q, 0)
			require.NoError(t, err)
			assert.Equal(t, []Entry{e}, around)
			many, err := s.GetMany(ctx, []string{"c"}, q)
			require.NoError(t, err)
			assert.Equal(t, map[string]Entry{"c": e}, many)
		}
		es, err := s.Ranks(ctx, "c", []string{"mIsC1", "Nobody"})
		require.NoError(t, err)
		assert.Equal(t, []Entry{{"MISC1", sc(t, "20"), 1}, {"Nobody", 0, -1}}, es)
	})
	t.Run("a player stored before names were canonical is moved on its next post", func(t *testing.T) {
		// As the code before this change wrote "Bob" on 7.
		pre := revOf(sc(t, "7")) + ":" + fmt.Sprintf("%015d", 900)
		require.NoError(t, r.Client.HSet(ctx, playersKey(s.sp, "c"), "Bob", pre).Err())
		require.NoError(t, r.Client.ZAdd(ctx, boardKey(s.sp, "c"), redis.Z{Member: pre + ":Bob"}).Err())
		e := post(t, s, "c", "Bob", "1", Best)
		assert.Equal(t, Entry{"Bob", sc(t, "7"), 3}, e)
		fields, err := r.Client.HKeys(ctx, playersKey(s.sp, "c")).Result()
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"zed", "misc1", "later", "bob"}, fields)
		n, err := s.Len(ctx, "c")
		require.NoError(t, err)
		assert.EqualValues(t, 4, n, "one entry, not two")
	})
}

func TestErrorCodes(t *testing.T) {
	for err, code := range map[error]errcode.Code{
		ErrBadScore: errcode.BadValue, ErrBadMode: errcode.BadValue, ErrBadLimit: errcode.BadRequest,
		ErrBadRadius: errcode.BadRequest, ErrBatchTooLarge: errcode.TooLarge, ErrUnknownPlayer: errcode.UnknownPlayer,
		ErrBoardFull: errcode.BoardFull, ErrBadIdempotencyKey: errcode.BadRequest, ErrIdempotencyMismatch: errcode.BadRequest,
	} {
		assert.Equal(t, code, errcode.Of(fmt.Errorf("ranking: x: %w", err)), err.Error())
	}
}

// TestPostCallIsBounded: a post's script call ends within
// redisx.CallBound whatever its caller's context (a REST request's has
// none), so that go-redis sends no copy of it after a pause longer than
// redisx.CallRecordTTL, the life of the key a post without one is given:
// that copy would find no record and add an incr a second time. Sent twice,
// the post is applied once.
func TestPostCallIsBounded(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	h := redistest.ResendCommands("evalsha", "eval")
	rdb := h.Client(t, r)
	s := New(rdb, Config{Prefix: r.Prefix})
	h.Arm(nil)
	start := time.Now()
	_, err := s.Post(ctx, "bounded", "hal", sc(t, "5"), Incr)
	require.NoError(t, err)
	end := time.Now()
	_, deadline := h.Resent(t)
	assert.WithinRange(t, deadline, start.Add(redisx.CallBound), end.Add(redisx.CallBound), "the call ends redisx.CallBound after its start")
	e, err := s.Get(ctx, "bounded", "hal")
	require.NoError(t, err)
	assert.Equal(t, "5", e.Score.String(), "two copies, one incr")
}
