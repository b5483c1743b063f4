package rooms

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/internal/redistest"
)

// TestIdempotentSays runs on redis-server and on the embedded default: the
// send script claims keys (SET NX GET) and counts in Lua on both.
func TestIdempotentSays(t *testing.T) {
	t.Parallel()
	for name, backend := range map[string]func(testing.TB) *redistest.Redis{"redis-server": redistest.New, "embedded": redistest.InProcess} {
		for _, records := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/claim records %v", name, records), func(t *testing.T) {
				t.Parallel()
				testIdempotentSays(t, backend(t), records)
			})
		}
	}
}

// testIdempotentSays runs with the send records in the lobby (records
// false: every node's way before FeatureClaimRecords) or in the keys'
// claims (SetClaimRecords).
func testIdempotentSays(t *testing.T, r *redistest.Redis, records bool) {
	ctx := context.Background()
	clock := newClock()
	s := nodes(t, r, 1, Config{Capacity: fixed(2), Now: clock.Now, IdempotencyTTL: time.Minute})[0]
	s.Messages.SetClaimRecords(records)
	for _, u := range []string{"alice", "bob", "carol"} { // carol in room 2
		_, err := s.Seats.Join(ctx, "i", u, ws1)
		require.NoError(t, err)
	}
	events := subscribe(t, r.NewClient(t), s.Messages.Channel("i-1"))
	opt := SendOptions{Rate: 1, Burst: 1} // one token: a second say now would be refused
	send := func(req SendRequest) SendReply {
		t.Helper()
		return s.Messages.SendMany(ctx, []SendRequest{req}, opt)[0]
	}
	first := send(SendRequest{Room: "i-1", User: "alice", Text: "hello", Key: "sess1:c-1"})
	require.NoError(t, first.Err)
	require.False(t, first.Duplicate)
	nextEvent(t, events)
	msgs, _, err := s.Messages.Counters(ctx)
	require.NoError(t, err)

	t.Run("the same say again answers the first message and changes nothing", func(t *testing.T) {
		clock.Add(time.Millisecond) // a later call: another ts, were it sent
		again := send(SendRequest{Room: "i-1", User: "alice", Text: "hello", Key: "sess1:c-1"})
		require.NoError(t, again.Err, "no rate token was needed")
		assert.True(t, again.Duplicate)
		assert.Equal(t, first.Message, again.Message, "same id and ts")
		h, err := s.Messages.History(ctx, "i-1", "", 10)
		require.NoError(t, err)
		assert.Equal(t, []Message{first.Message}, h)
		n, _, err := s.Messages.Counters(ctx)
		require.NoError(t, err)
		assert.Equal(t, msgs, n, "not counted")
		require.NoError(t, r.Client.Publish(ctx, s.Messages.Channel("i-1"), "marker").Err())
		assert.Equal(t, "marker", (<-events).Payload, "nothing published")
		assert.Zero(t, r.Client.Exists(ctx, rateKey(s.Seats.ks, "i", "alice")).Val()-1, "the bucket is the first say's")
	})

	t.Run("a key reused for another text or room is refused and sends nothing", func(t *testing.T) {
		for _, req := range []SendRequest{
			{Room: "i-1", User: "alice", Text: "other", Key: "sess1:c-1"},
			{Room: "i-2", User: "alice", Text: "hello", Key: "sess1:c-1"},
		} {
			out := send(req)
			require.ErrorIs(t, out.Err, ErrIdempotencyMismatch, "%+v", req)
			assert.Equal(t, errcode.BadRequest, errcode.Of(out.Err))
			assert.Equal(t, "Idempotency key reused for another message", errcode.Message(out.Err))
		}
		h, err := s.Messages.History(ctx, "i-1", "", 10)
		require.NoError(t, err)
		assert.Len(t, h, 1)
	})

	t.Run("a refused say binds its key all the same", func(t *testing.T) {
		// bob has no seat in room 2: refused. The key is his first say's,
		// so the same key for room 1 is a mismatch, not a new say.
		out := send(SendRequest{Room: "i-2", User: "bob", Text: "wrong room", Key: "sess2:r"})
		require.ErrorIs(t, out.Err, ErrNotSeated)
		out = send(SendRequest{Room: "i-1", User: "bob", Text: "right room", Key: "sess2:r"})
		require.ErrorIs(t, out.Err, ErrIdempotencyMismatch)
		// Sent again as it was, it is checked again (and refused again).
		out = send(SendRequest{Room: "i-2", User: "bob", Text: "wrong room", Key: "sess2:r"})
		require.ErrorIs(t, out.Err, ErrNotSeated)
	})

	t.Run("a key reused in another lobby is refused and sends nothing", func(t *testing.T) {
		// The send record lives in the lobby's slot; the claim in the
		// user's catches the key in any lobby.
		_, err := s.Seats.Join(ctx, "j", "alice", ws1)
		require.NoError(t, err)
		out := send(SendRequest{Room: "j-1", User: "alice", Text: "hello", Key: "sess1:c-1"})
		require.ErrorIs(t, out.Err, ErrIdempotencyMismatch)
		assert.Equal(t, errcode.BadRequest, errcode.Of(out.Err))
		h, err := s.Messages.History(ctx, "j-1", "", 10)
		require.NoError(t, err)
		assert.Empty(t, h)
		ttl := r.Client.PTTL(ctx, claimKey(s.Seats.ks, "alice", "sess1:c-1")).Val()
		assert.Greater(t, ttl, 50*time.Second, "the claim lives as long as the send record")
		assert.LessOrEqual(t, ttl, time.Minute)
		// A new key in that lobby is a new say.
		out = send(SendRequest{Room: "j-1", User: "alice", Text: "hello", Key: "sess1:c-9"})
		require.NoError(t, out.Err)
	})

	t.Run("keys are the sender's: another user's same key is another say", func(t *testing.T) {
		out := s.Messages.SendMany(ctx, []SendRequest{{Room: "i-1", User: "bob", Text: "hello", Key: "sess1:c-1"}}, SendOptions{})[0]
		require.NoError(t, out.Err)
		assert.False(t, out.Duplicate)
		assert.NotEqual(t, first.Message.ID, out.Message.ID)
		nextEvent(t, events)
	})

	t.Run("a say applied before its seat went is still answered", func(t *testing.T) {
		require.NoError(t, s.Seats.Leave(ctx, "i-1", "bob"))
		nextEvent(t, events)
		out := s.Messages.SendMany(ctx, []SendRequest{{Room: "i-1", User: "bob", Text: "hello", Key: "sess1:c-1"}}, SendOptions{})[0]
		require.NoError(t, out.Err)
		assert.True(t, out.Duplicate)
		out = s.Messages.SendMany(ctx, []SendRequest{{Room: "i-1", User: "bob", Text: "new", Key: "sess1:c-2"}}, SendOptions{})[0]
		assert.ErrorIs(t, out.Err, ErrNotSeated)
	})

	t.Run("one call sending a key twice sends it once", func(t *testing.T) {
		clock.Add(time.Second)
		out := s.Messages.SendMany(ctx, []SendRequest{
			{Room: "i-1", User: "alice", Text: "twice", Key: "sess1:c-3"},
			{Room: "i-1", User: "alice", Text: "twice", Key: "sess1:c-3"},
		}, SendOptions{})
		require.NoError(t, out[0].Err)
		require.NoError(t, out[1].Err)
		assert.False(t, out[0].Duplicate)
		assert.True(t, out[1].Duplicate)
		assert.Equal(t, out[0].Message, out[1].Message)
		nextEvent(t, events)
	})

	t.Run("a say v0.1.0 recorded, without a claim, is answered from its record", func(t *testing.T) {
		// v0.1.0 kept a keyed say's record in the lobby and claimed
		// nothing in the user's slot: a retry that reaches a node of this
		// version during a rolling upgrade finds the record, though the
		// claim is free.
		sum := sha256.Sum256([]byte("from v0.1.0"))
		hash := hex.EncodeToString(sum[:8])
		const id, ts = "1796114764962-3", int64(1796114764962)
		rec := "c0/1 1 " + hash + " " + id + " " + strconv.FormatInt(ts, 10)
		require.NoError(t, r.Client.Set(ctx, saidKey(s.Seats.ks, "i", "alice", "sess0:old"), rec, time.Minute).Err())
		out := send(SendRequest{Room: "i-1", User: "alice", Text: "from v0.1.0", Key: "sess0:old"})
		require.NoError(t, out.Err)
		assert.True(t, out.Duplicate)
		assert.Equal(t, "1796114764962-000003", out.Message.ID)
		assert.Equal(t, time.UnixMilli(ts).UTC(), out.Message.TS)
		out = send(SendRequest{Room: "i-1", User: "alice", Text: "another text", Key: "sess0:old"})
		assert.ErrorIs(t, out.Err, ErrIdempotencyMismatch)
	})

	t.Run("the record expires after the TTL", func(t *testing.T) {
		said, claim := saidKey(s.Seats.ks, "i", "alice", "sess1:c-1"), claimKey(s.Seats.ks, "alice", "sess1:c-1")
		record := said
		if records {
			record = claim
			assert.Zero(t, r.Client.Exists(ctx, said).Val(), "one key a say: no record in the lobby")
		}
		assert.Len(t, strings.Fields(r.Client.Get(ctx, record).Val()), 5, "the record: %s", record)
		ttl := r.Client.PTTL(ctx, record).Val()
		assert.Greater(t, ttl, 50*time.Second)
		assert.LessOrEqual(t, ttl, time.Minute)
	})

	t.Run("a node that keeps records elsewhere answers the retry too", func(t *testing.T) {
		// During a rolling upgrade the setting flips when the registry
		// changes: records written either way are read either way.
		s.Messages.SetClaimRecords(!records)
		defer s.Messages.SetClaimRecords(records)
		again := send(SendRequest{Room: "i-1", User: "alice", Text: "hello", Key: "sess1:c-1"})
		require.NoError(t, again.Err)
		assert.True(t, again.Duplicate)
		assert.Equal(t, first.Message, again.Message)
	})

	t.Run("bad keys are refused, saying what is wrong", func(t *testing.T) {
		for _, tc := range []struct{ key, says string }{
			{strings.Repeat("k", MaxIdempotencyKey+1), "129 bytes, more than 128"},
			{"a b", "byte 0x20 at 1"},
			{"a{b}", "byte 0x7b at 1"},
			{"é", "byte 0xc3 at 0"},
		} {
			out := send(SendRequest{Room: "i-1", User: "alice", Text: "x", Key: tc.key})
			require.ErrorIs(t, out.Err, ErrBadIdempotencyKey, tc.key)
			assert.Contains(t, out.Err.Error(), tc.says)
			assert.Equal(t, errcode.BadRequest, errcode.Of(out.Err))
		}
		out := s.Messages.SendMany(ctx, []SendRequest{{Room: "i-1", User: "alice", Text: "x", Key: strings.Repeat("aZ9-_.:=+/@~", 11)[:MaxIdempotencyKey]}}, SendOptions{})[0]
		assert.NoError(t, out.Err)
		nextEvent(t, events)
	})
}

// TestKeyedSaysSurviveAClientRetry reproduces a say Redis applies twice: the
// server stops (SIGSTOP) while a pipeline of 50 says is on the wire, the
// client's read times out after 1 s and it sends the pipeline again on a
// new connection (MaxRetries 1); when the server wakes, it runs both. With
// idempotency keys each say is stored once, and the retry's answers are the
// first run's messages. Without keys the call's own keys do the same
// ("without keys, the retry still stores every say once"): before them the
// history held each say twice.
func TestKeyedSaysSurviveAClientRetry(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: r.Addrs[0], MaxRetries: 1, ReadTimeout: time.Second,
		MinRetryBackoff: 10 * time.Millisecond, MaxRetryBackoff: 10 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	s, err := New(rdb, Config{Prefix: r.Prefix})
	require.NoError(t, err)
	_, err = s.Seats.Join(ctx, "retry", "alice", ws1)
	require.NoError(t, err)
	_, err = s.say(ctx, "retry-1", "alice", "warm-up") // the scripts are loaded
	require.NoError(t, err)

	says := func(tag string, keyed bool) []SendRequest {
		reqs := make([]SendRequest, 50)
		for i := range reqs {
			reqs[i] = SendRequest{Room: "retry-1", User: "alice", Text: fmt.Sprintf("%s %d", tag, i)}
			if keyed {
				reqs[i].Key = fmt.Sprintf("s1:%s-%d", tag, i)
			}
		}
		return reqs
	}
	// stalled sends reqs while the server is stopped for 1.5 s: longer than
	// the read timeout, shorter than the retry's. It checks that Redis ran
	// more commands than one run of the held-up pipeline has (INFO
	// commandstats): its scripts, or the keyed says' claims, ran twice.
	stalled := func(reqs []SendRequest) []SendReply {
		runs := func() int { return scriptCalls(t, r.Server.Addr) }
		if reqs[0].Key != "" {
			runs = func() int { return cmdCalls(t, r.Server.Addr, "get") }
		}
		before := runs()
		r.Server.Pause(t)
		done := make(chan []SendReply)
		go func() { done <- s.Messages.SendMany(ctx, reqs, SendOptions{}) }()
		time.Sleep(1500 * time.Millisecond)
		r.Server.Resume(t)
		out := <-done
		// The lobby's send scripts (on a Redis that is not a Cluster they
		// count the says too: no counter script).
		once := (len(reqs) + maxScriptSays - 1) / maxScriptSays
		if reqs[0].Key != "" {
			// The claims and the records in the lobby, a GET each in the
			// send script (no bucket here): a second run reads them again
			// (and writes nothing).
			once = 2 * len(reqs)
		}
		require.Greater(t, runs()-before, once, "Redis ran the pipeline again")
		return out
	}
	stored := func(tag string) map[string]int {
		h, err := s.Messages.History(ctx, "retry-1", "", MaxHistoryLimit)
		require.NoError(t, err)
		n := map[string]int{}
		for _, m := range h {
			if strings.HasPrefix(m.Text, tag+" ") {
				n[m.Text]++
			}
		}
		return n
	}
	counted := func() int64 {
		n, _, err := s.Messages.Counters(ctx)
		require.NoError(t, err)
		return n
	}

	t.Run("without keys, the retry still stores every say once", func(t *testing.T) {
		before := counted()
		out := stalled(says("plain", false))
		ids := map[string]bool{}
		for _, o := range out {
			require.NoError(t, o.Err)
			assert.False(t, o.Duplicate, "the call's own answer")
			ids[o.Message.ID] = true
		}
		n := stored("plain")
		require.Len(t, n, 50)
		for text, c := range n {
			assert.Equal(t, 1, c, "%q stored once: the retry found the call's record", text)
		}
		assert.Len(t, ids, 50)
		assert.Equal(t, before+50, counted(), "the counter counts says, once per call")

		t.Run("and the same says in another call are new says", func(t *testing.T) {
			again := s.Messages.SendMany(ctx, says("plain", false), SendOptions{})
			for _, o := range again {
				require.NoError(t, o.Err)
				assert.False(t, o.Duplicate)
				assert.False(t, ids[o.Message.ID])
			}
			for text, c := range stored("plain") {
				assert.Equal(t, 2, c, text)
			}
		})
	})

	t.Run("with keys, each say is stored once and the retry answers the first run's messages", func(t *testing.T) {
		before := counted()
		reqs := says("keyed", true)
		out := stalled(reqs)
		ids := map[string]bool{}
		for i, o := range out {
			require.NoError(t, o.Err)
			assert.False(t, o.Duplicate, "the call's first answer for say %d", i)
			ids[o.Message.ID] = true
		}
		assert.Len(t, ids, 50)
		n := stored("keyed")
		require.Len(t, n, 50)
		for text, c := range n {
			assert.Equal(t, 1, c, "%q stored once", text)
		}
		h, err := s.Messages.History(ctx, "retry-1", "", MaxHistoryLimit)
		require.NoError(t, err)
		for _, m := range h {
			if strings.HasPrefix(m.Text, "keyed ") {
				assert.True(t, ids[m.ID], "the answer of %q is the stored message", m.Text)
			}
		}
		assert.Equal(t, before+50, counted(), "counted once")

		t.Run("and sending them again answers the same ids and writes nothing", func(t *testing.T) {
			len0 := r.Client.XLen(ctx, historyKey(s.Seats.ks, "retry", 1)).Val()
			again := s.Messages.SendMany(ctx, reqs, SendOptions{})
			for i, o := range again {
				require.NoError(t, o.Err)
				assert.True(t, o.Duplicate)
				assert.Equal(t, out[i].Message, o.Message)
			}
			assert.Equal(t, len0, r.Client.XLen(ctx, historyKey(s.Seats.ks, "retry", 1)).Val())
			assert.Equal(t, before+50, counted())
		})
	})
}
