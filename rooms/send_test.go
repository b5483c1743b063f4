package rooms

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

func TestSayRateLimit(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	clock := newClock()
	s := nodes(t, r, 1, Config{Now: clock.Now})[0]
	for _, lobby := range []string{"g", "h"} {
		_, err := s.Seats.Join(ctx, lobby, "alice", ws1)
		require.NoError(t, err)
	}
	opt := SendOptions{Rate: 2, Burst: 3}
	_, err := s.say(ctx, "g-1", "alice", "warm-up") // the script is loaded: one round trip from here on
	require.NoError(t, err)
	cnt := &counter{}
	s.Seats.rdb.AddHook(cnt)

	t.Run("a burst goes through, each say one round trip", func(t *testing.T) {
		for range 3 {
			_, err := s.Messages.Send(ctx, "g-1", "alice", "hi", opt)
			require.NoError(t, err)
		}
		assert.EqualValues(t, 3, cnt.pipes.Load(), "one pipeline per say")
		assert.Zero(t, cnt.cmds.Load())
	})

	t.Run("the next say is refused with the delay to the next token", func(t *testing.T) {
		before, err := s.Messages.History(ctx, "g-1", "", MaxHistoryLimit)
		require.NoError(t, err)
		msgs, _, err := s.Messages.Counters(ctx)
		require.NoError(t, err)
		_, err = s.Messages.Send(ctx, "g-1", "alice", "too fast", opt)
		require.ErrorIs(t, err, ErrRateLimited)
		var rl *RateLimitError
		require.True(t, errors.As(err, &rl))
		assert.Equal(t, 500*time.Millisecond, rl.RetryAfter)
		after, err := s.Messages.History(ctx, "g-1", "", MaxHistoryLimit)
		require.NoError(t, err)
		assert.Equal(t, before, after, "a refused say stores nothing")
		msgs2, _, err := s.Messages.Counters(ctx)
		require.NoError(t, err)
		assert.Equal(t, msgs, msgs2, "nor counts")
	})

	t.Run("the bucket is per lobby", func(t *testing.T) {
		_, err := s.Messages.Send(ctx, "h-1", "alice", "elsewhere", opt)
		assert.NoError(t, err)
	})

	t.Run("a token comes back at the rate", func(t *testing.T) {
		clock.Add(400 * time.Millisecond)
		_, err := s.Messages.Send(ctx, "g-1", "alice", "still too fast", opt)
		var rl *RateLimitError
		require.True(t, errors.As(err, &rl))
		assert.Equal(t, 100*time.Millisecond, rl.RetryAfter)
		clock.Add(100 * time.Millisecond)
		_, err = s.Messages.Send(ctx, "g-1", "alice", "now", opt)
		assert.NoError(t, err)
	})

	t.Run("the bucket key expires when it would be full again", func(t *testing.T) {
		ttl := r.Client.PTTL(ctx, rateKey(s.Seats.ks, "g", "alice")).Val()
		assert.Greater(t, ttl, time.Duration(0))
		assert.LessOrEqual(t, ttl, 1500*time.Millisecond, "3 tokens at 2/s")
	})

	t.Run("no limit without a rate; a refused say for want of a seat costs no token", func(t *testing.T) {
		for range 10 {
			_, err := s.Messages.Send(ctx, "g-1", "alice", "unlimited", SendOptions{})
			require.NoError(t, err)
		}
		for range 5 {
			_, err := s.Messages.Send(ctx, "g-1", "bob", "no seat", SendOptions{Rate: 1, Burst: 1})
			require.ErrorIs(t, err, ErrNotSeated)
		}
		_, err := s.Seats.Join(ctx, "g", "bob", ws1)
		require.NoError(t, err)
		_, err = s.Messages.Send(ctx, "g-1", "bob", "first", SendOptions{Rate: 1, Burst: 1})
		assert.NoError(t, err)
	})
}

func TestNormalizeID(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"1796114764962-1", "1796114764962-000001"},
		{"1796114764962-000001", "1796114764962-000001"},
		{"1-0", "0000000000001-000000"},
	} {
		got, err := NormalizeID(tt.in)
		require.NoError(t, err)
		assert.Equal(t, tt.want, got)
	}
	for _, bad := range []string{"", "x", "1-", "-1", "1-2-3", "1_2"} {
		_, err := NormalizeID(bad)
		assert.ErrorIs(t, err, ErrBadID, "%q", bad)
	}
}

func TestShardedPubSubOnACluster(t *testing.T) {
	t.Parallel()
	r := redistest.Cluster(t)
	ctx := context.Background()
	ss := nodes(t, r, 2, Config{ShardedPubSub: true})
	for _, lobby := range []string{"a", "b", "c", "d", "e", "f"} { // spread over the masters
		room, err := ss[0].Seats.Join(ctx, lobby, "alice", ws1)
		require.NoError(t, err)
		// SSUBSCRIBE goes to the master that owns the channel's slot — the
		// lobby's — which is where the script's SPUBLISH runs.
		ps := r.NewClient(t).(*redis.ClusterClient).SSubscribe(ctx, ss[1].Messages.Channel(room.ID))
		_, err = ps.Receive(ctx)
		require.NoError(t, err)
		events := ps.Channel()

		res, err := ss[1].Messages.Send(ctx, room.ID, "alice", "hello "+room.ID, SendOptions{Rate: 10, Burst: 10})
		require.NoError(t, err)
		e := nextEvent(t, events)
		assert.Equal(t, res.Message, *e.Message)
		_, err = ss[1].Seats.Join(ctx, lobby, "bob", ws1)
		require.NoError(t, err)
		assert.Equal(t, Event{Type: EventPresence, Room: room.ID, User: "bob", State: StateJoined}, nextEvent(t, events))
		freed, err := ss[0].Seats.Detach(ctx, room.ID, "bob", ws1.ID)
		require.NoError(t, err)
		assert.True(t, freed)
		assert.Equal(t, Event{Type: EventPresence, Room: room.ID, User: "bob", State: StateLeft}, nextEvent(t, events))
		require.NoError(t, ps.Close())
	}
}

func TestSystemSend(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	s := nodes(t, r, 1, Config{})[0]
	_, err := s.Seats.Join(ctx, "sys", "alice", ws1)
	require.NoError(t, err)
	events := subscribe(t, s.Seats.rdb, s.Messages.Channel("sys-1"))

	t.Run("the system speaks in a room nobody of it is seated in, as @system, without a bucket", func(t *testing.T) {
		for i := range 5 { // a bucket of 1 at 0.001/s would refuse the second
			res, err := s.Messages.Send(ctx, "sys-1", "", "maintenance soon", SendOptions{System: true, Rate: 0.001, Burst: 1})
			require.NoError(t, err, "say %d", i)
			assert.Equal(t, SystemSender, res.Message.From)
			ev := nextEvent(t, events)
			require.NotNil(t, ev.Message)
			assert.Equal(t, res.Message.ID, ev.Message.ID, "members hear it")
			assert.Equal(t, SystemSender, ev.Message.From)
		}
		h, err := s.Messages.History(ctx, "sys-1", "", 10)
		require.NoError(t, err)
		require.Len(t, h, 5)
		assert.Equal(t, SystemSender, h[0].From, "it is in the history")
	})

	t.Run("a user without a seat is still refused", func(t *testing.T) {
		_, err := s.Messages.Send(ctx, "sys-1", "bob", "hi", SendOptions{})
		assert.ErrorIs(t, err, ErrNotSeated)
	})

	t.Run("the room must exist", func(t *testing.T) {
		_, err := s.Messages.Send(ctx, "sys-9", "", "hello?", SendOptions{System: true})
		assert.ErrorIs(t, err, ErrUnknownRoom)
	})
}

// TestSendCommands pins what a say costs Redis (INFO commandstats on a
// private server): no PEXPIRE of the history on every send (refreshed per
// room per node at most once per IdleTTL/48), no room lookup when the
// seat proves the room, the bucket in one SET NX GET (and a SET when it
// was there); and a history that a send creates gets its TTL all the same.
func TestSendCommands(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	ctx := context.Background()
	clock := newClock()
	s := nodes(t, r, 1, Config{Now: clock.Now, IdleTTL: 48 * time.Hour,
		Lease: func() time.Duration { return 24 * time.Hour }})[0]
	room, err := s.Seats.Join(ctx, "cmds", "alice", ws1)
	require.NoError(t, err)
	// A bucket this slow to refill lives 1,000 s (in real time) after a
	// say: every say after the warm-up finds alice's, whatever the
	// machine's speed.
	opt := SendOptions{Rate: 0.001, Burst: 1000}
	_, err = s.Messages.Send(ctx, room.ID, "alice", "warm-up", opt) // the scripts are loaded, the TTL set
	require.NoError(t, err)
	// sendCounted sends reqs in one call, each answered without error and
	// as a duplicate or not (dup), and returns the answers and the
	// commands Redis ran for them.
	sendCounted := func(t *testing.T, reqs []SendRequest, dup bool) ([]SendReply, map[string]int64) {
		t.Helper()
		require.NoError(t, r.Client.ConfigResetStat(ctx).Err())
		outs := s.Messages.SendMany(ctx, reqs, opt)
		for _, out := range outs {
			require.NoError(t, out.Err)
			assert.Equal(t, dup, out.Duplicate)
		}
		return outs, commandStats(t, r.Client)
	}
	hist := historyKey(s.Seats.ks, "cmds", 1)
	ttl0 := r.Client.PTTL(ctx, hist).Val()
	require.Greater(t, ttl0, 47*time.Hour)

	require.NoError(t, r.Client.ConfigResetStat(ctx).Err())
	const n = 10
	for range n {
		clock.Add(time.Second)
		_, err := s.Messages.Send(ctx, room.ID, "alice", "hi", opt)
		require.NoError(t, err)
	}
	calls := commandStats(t, r.Client)
	t.Logf("commands for %d says: %v", n, calls)
	assert.Zero(t, calls["pexpire"], "no TTL refresh within IdleTTL/48")
	assert.Zero(t, calls["hmget"]+calls["hset"], "the bucket is a string")
	assert.Equal(t, int64(2*n), calls["zscore"], "the seat and its lease; the room is proved by the seat")
	assert.Equal(t, int64(n), calls["xadd"])
	assert.Equal(t, int64(n), calls["publish"])

	t.Run("a sender without a bucket takes a token in one command", func(t *testing.T) {
		// A full bucket is no bucket: zoe's first say writes his, less the
		// token, in one SET NX GET; his second finds it, and writes it
		// refilled and less a token (SET NX GET, then SET), as a GET and a
		// SET did before.
		_, err := s.Seats.Join(ctx, "cmds", "zoe", ws1)
		require.NoError(t, err)
		bucket := rateKey(s.Seats.ks, "cmds", "zoe")
		require.Zero(t, r.Client.Exists(ctx, bucket).Val())
		for i, want := range []int64{1, 2} {
			clock.Add(time.Second)
			require.NoError(t, r.Client.ConfigResetStat(ctx).Err())
			_, err := s.Messages.Send(ctx, room.ID, "zoe", "bucket "+strconv.Itoa(i), opt)
			require.NoError(t, err)
			calls := commandStats(t, r.Client)
			assert.Equal(t, int64(1), calls["get"], "the say's record (a say without a key)")
			assert.Equal(t, want+1, calls["set"], "say %d: the bucket's %d, the record", i+1, want)
		}
		v, err := r.Client.Get(ctx, bucket).Result()
		require.NoError(t, err)
		assert.Equal(t, "998.001 "+strconv.FormatInt(clock.Now().UnixMilli(), 10), v, "two tokens taken, a second's refill between them")
	})

	t.Run("a call of keyed says counts them in one INCRBY and asks once for REST users", func(t *testing.T) {
		// The counter takes the call's says in one INCRBY, and the room's
		// REST users are counted once for them all.
		total, _, err := s.Messages.Counters(ctx)
		require.NoError(t, err)
		reqs := make([]SendRequest, 5)
		for i := range reqs {
			reqs[i] = SendRequest{Room: room.ID, User: "alice", Text: "keyed " + strconv.Itoa(i), Key: "sess1:k" + strconv.Itoa(i)}
		}
		clock.Add(time.Second)
		_, calls := sendCounted(t, reqs, false)
		t.Logf("commands for a call of %d keyed says: %v", len(reqs), calls)
		assert.Equal(t, int64(1), calls["evalsha"], "one call")
		assert.Equal(t, int64(2*len(reqs)), calls["get"], "each claim and send record")
		assert.Equal(t, int64(4*len(reqs)), calls["set"], "the bucket's SET NX GET, which finds it, and SET; the claim bound, the record in the lobby")
		assert.Equal(t, int64(1), calls["incrby"])
		assert.Equal(t, int64(1), calls["exists"], "whether the lobby has a REST user, once")
		assert.Zero(t, calls["zcount"], "it has none: no room's are counted")
		after, _, err := s.Messages.Counters(ctx)
		require.NoError(t, err)
		assert.Equal(t, total+int64(len(reqs)), after, "every say counted")

		// The same call again: every say is a duplicate, answered from its
		// record, and nothing is counted.
		_, calls = sendCounted(t, reqs, true)
		assert.Equal(t, int64(2*len(reqs)), calls["get"], "each claim and send record read")
		assert.Zero(t, calls["set"], "nothing written")
		assert.Zero(t, calls["incrby"]+calls["xadd"]+calls["publish"])
		again, _, err := s.Messages.Counters(ctx)
		require.NoError(t, err)
		assert.Equal(t, after, again)
	})

	t.Run("a lobby with a REST user counts each room's once per call", func(t *testing.T) {
		// dave polls over REST in room 1; a lobby without REST users
		// (cmds2) answers HasREST false.
		_, err := s.Seats.Join(ctx, "cmds", "dave", Attach{ID: "rest:dave", REST: true})
		require.NoError(t, err)
		defer func() { _, _ = s.Seats.Detach(ctx, room.ID, "dave", "rest:dave") }()
		_, err = s.Seats.Join(ctx, "cmds2", "erin", ws1)
		require.NoError(t, err)
		reqs := []SendRequest{
			{Room: room.ID, User: "alice", Text: "to dave 1", Key: "sess3:k1"},
			{Room: room.ID, User: "alice", Text: "to dave 2", Key: "sess3:k2"},
		}
		clock.Add(time.Second)
		require.NoError(t, r.Client.ConfigResetStat(ctx).Err())
		for _, out := range s.Messages.SendMany(ctx, reqs, opt) {
			require.NoError(t, out.Err)
			assert.True(t, out.HasREST, "dave polls")
		}
		calls := commandStats(t, r.Client)
		assert.Equal(t, int64(1), calls["exists"])
		assert.Equal(t, int64(1), calls["zcount"], "the room's REST users, once for its two says")

		other, err := s.Messages.Send(ctx, "cmds2-1", "erin", "nobody polls", opt)
		require.NoError(t, err)
		assert.False(t, other.HasREST, "a lobby without REST users")
	})

	t.Run("with claim records a keyed say writes one key, and its retry reads it there", func(t *testing.T) {
		s.Messages.SetClaimRecords(true)
		defer s.Messages.SetClaimRecords(false)
		reqs := make([]SendRequest, 4)
		for i := range reqs {
			reqs[i] = SendRequest{Room: room.ID, User: "alice", Text: "one key " + strconv.Itoa(i), Key: "sess2:k" + strconv.Itoa(i)}
		}
		clock.Add(time.Second)
		// The keys before and after, but the say bucket's, which lives
		// (in real time) until the bucket is full again: whether the call
		// finds it or makes it depends on the machine's speed.
		bucket := rateKey(s.Seats.ks, "cmds", "alice")
		keysNow := func() map[string]bool {
			out := map[string]bool{}
			for _, k := range r.Client.Keys(ctx, "*").Val() {
				if k != bucket {
					out[k] = true
				}
			}
			return out
		}
		before := keysNow()
		first, calls := sendCounted(t, reqs, false)
		t.Logf("commands for a call of %d keyed says, records in claims: %v", len(reqs), calls)
		assert.Equal(t, int64(3*len(reqs)), calls["set"], "the bucket (SET NX GET, SET), the claim with its record")
		assert.Equal(t, int64(2*len(reqs)), calls["get"], "the claim, the lobby's record (v0.1.0 kept it there)")
		var made []string
		for k := range keysNow() {
			if !before[k] {
				made = append(made, k)
			}
		}
		var claims []string
		for _, req := range reqs {
			claims = append(claims, claimKey(s.Seats.ks, "alice", req.Key))
		}
		assert.ElementsMatch(t, claims, made, "one new key a say: its claim")
		for _, req := range reqs {
			assert.Zero(t, r.Client.Exists(ctx, saidKey(s.Seats.ks, "cmds", "alice", req.Key)).Val())
		}

		again, calls := sendCounted(t, reqs, true)
		for i, out := range again {
			assert.Equal(t, first[i].Message, out.Message)
		}
		assert.Equal(t, int64(len(reqs)), calls["get"], "each claim answers")
		assert.Zero(t, calls["set"]+calls["xadd"]+calls["publish"]+calls["incrby"])

		t.Run("and after twice the TTL a free claim is proof enough", func(t *testing.T) {
			// No node can have kept a keyed say's record in the lobby
			// that is still there: the lobby is not read.
			clock.Add(2*DefaultIdempotencyTTL + time.Second)
			for i := range reqs {
				reqs[i].Key = "sess4:k" + strconv.Itoa(i)
			}
			_, calls := sendCounted(t, reqs, false)
			t.Logf("commands for a call of %d keyed says, claim records settled: %v", len(reqs), calls)
			assert.Equal(t, int64(len(reqs)), calls["get"], "the claim")
			assert.Equal(t, int64(3*len(reqs)), calls["set"], "the bucket (SET NX GET, SET), the claim with its record")

			_, calls = sendCounted(t, reqs, true) // answered from the claim
			assert.Equal(t, int64(len(reqs)), calls["get"])
			assert.Zero(t, calls["set"]+calls["xadd"]+calls["publish"])

			// A claim bound without its record (a node with claim records
			// off kept it in the lobby) still sends the script there.
			sum := sha256.Sum256([]byte("bound, recorded in the lobby"))
			hash := hex.EncodeToString(sum[:8])
			const id, ts = "1796114764962-3", int64(1796114764962)
			require.NoError(t, r.Client.Set(ctx, claimKey(s.Seats.ks, "alice", "sess5:x"), room.ID+" "+hash, time.Minute).Err())
			require.NoError(t, r.Client.Set(ctx, saidKey(s.Seats.ks, "cmds", "alice", "sess5:x"),
				"c0/1 1 "+hash+" "+id+" "+strconv.FormatInt(ts, 10), time.Minute).Err())
			out := s.Messages.SendMany(ctx, []SendRequest{{Room: room.ID, User: "alice", Text: "bound, recorded in the lobby", Key: "sess5:x"}}, opt)[0]
			require.NoError(t, out.Err)
			assert.True(t, out.Duplicate)
			assert.Equal(t, "1796114764962-000003", out.Message.ID)

			s.Messages.SetClaimRecords(false)
			s.Messages.SetClaimRecords(true)
			assert.Equal(t, "1", s.Messages.claimMode(clock.Now()), "turned on again: the lobby is read again")
		})
	})

	t.Run("a script stopped by an error counts the says it stored before it", func(t *testing.T) {
		// Redis keeps what a script wrote before an error; the call's one
		// INCRBY still counts it. carol's say bucket has the wrong type, so
		// her say errors after alice's was stored.
		carol, err := s.Seats.Join(ctx, "cmds", "carol", ws1)
		require.NoError(t, err)
		require.Equal(t, room.ID, carol.ID)
		bucket := rateKey(s.Seats.ks, "cmds", "carol")
		require.NoError(t, r.Client.HSet(ctx, bucket, "tokens", 1).Err())
		defer r.Client.Del(ctx, bucket)
		total, _, err := s.Messages.Counters(ctx)
		require.NoError(t, err)
		clock.Add(time.Second)
		outs := s.Messages.SendMany(ctx, []SendRequest{
			{Room: room.ID, User: "alice", Text: "stored before the error"},
			{Room: room.ID, User: "carol", Text: "refused by Redis"},
		}, opt)
		require.Error(t, outs[1].Err)
		var rerr redis.Error
		require.ErrorAs(t, outs[1].Err, &rerr)
		assert.True(t, strings.HasPrefix(rerr.Error(), "WRONGTYPE "), "Redis's own error, its code first: %q", rerr.Error())
		after, _, err := s.Messages.Counters(ctx)
		require.NoError(t, err)
		assert.Equal(t, total+1, after, "alice's say was stored, and is counted")
		h, err := s.Messages.History(ctx, room.ID, "", MaxHistoryLimit)
		require.NoError(t, err)
		assert.Equal(t, "stored before the error", h[len(h)-1].Text)
	})

	t.Run("a history the send creates gets its TTL", func(t *testing.T) {
		require.NoError(t, r.Client.Del(ctx, hist).Err()) // lost, as on a restart without persistence
		_, err := s.Messages.Send(ctx, room.ID, "alice", "again", opt)
		require.NoError(t, err)
		assert.Greater(t, r.Client.PTTL(ctx, hist).Val(), 47*time.Hour)
	})

	t.Run("after IdleTTL/48 a send refreshes the TTL", func(t *testing.T) {
		require.NoError(t, r.Client.PExpire(ctx, hist, time.Hour).Err())
		clock.Add(time.Hour)
		_, err := s.Messages.Send(ctx, room.ID, "alice", "later", opt)
		require.NoError(t, err)
		assert.Greater(t, r.Client.PTTL(ctx, hist).Val(), 47*time.Hour)
	})

	t.Run("a refused say leaves the refresh to the next one", func(t *testing.T) {
		require.NoError(t, r.Client.PExpire(ctx, hist, time.Hour).Err())
		clock.Add(time.Hour)
		_, err := s.Messages.Send(ctx, room.ID, "bob", "no seat", opt)
		require.ErrorIs(t, err, ErrNotSeated)
		_, err = s.Messages.Send(ctx, room.ID, "alice", "seated", opt)
		require.NoError(t, err)
		assert.Greater(t, r.Client.PTTL(ctx, hist).Val(), 47*time.Hour)
	})
}
