package matchmaking

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/redisx"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/lock"
)

// rounds counts a node's matcher rounds, so a test can wait until the
// matcher has looked at the queue after a change.
type rounds struct{ n atomic.Int64 }

func (r *rounds) hook(string) { r.n.Add(1) }

// after waits until at least k more rounds have run.
func (r *rounds) after(t *testing.T, k int64) {
	t.Helper()
	want := r.n.Load() + k
	waitFor(t, 10*time.Second, "matcher rounds", func() bool { return r.n.Load() >= want })
}

func fastMatchers() MatchersConfig {
	return MatchersConfig{Lease: time.Second, Tick: 10 * time.Millisecond, TryEvery: 50 * time.Millisecond}
}

// one starts a single node with a fake clock and a round counter.
func one(t *testing.T, r *redistest.Redis, raw string) (*node, *testkit.Clock, *recorder, *rounds) {
	t.Helper()
	clock, rec, rs := newClock(), newRecorder(), &rounds{}
	n := newNode(t, r, setup{defs: newDefs(raw), clock: clock.Now, rec: rec, mcfg: fastMatchers()})
	n.mm.afterRound = rs.hook
	n.start(t)
	waitFor(t, 5*time.Second, "the node takes the queue", func() bool { return len(n.mm.Holding()) > 0 })
	return n, clock, rec, rs
}

func matchOfTicket(t *testing.T, s *Service, queue, id string) *Match {
	t.Helper()
	st, err := s.Status(context.Background(), queue, id)
	require.NoError(t, err)
	if st.State != Matched {
		return nil
	}
	require.NotNil(t, st.Match)
	return st.Match
}

func TestWindowAndWidening(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, r *redistest.Redis) {
		n, clock, rec, rs := one(t, r, `{"duel":{"min":2,"max":2,"window":100,"widen_per_second":10,"max_wait_seconds":600}}`)
		s := n.svc

		a := submit(t, s, "duel", Ticket{User: "a", Skill: 0})
		clock.Add(time.Millisecond)
		b := submit(t, s, "duel", Ticket{User: "b", Skill: 100.5})
		rs.after(t, 3)
		assert.Nil(t, matchOfTicket(t, s, "duel", a), "b is just outside a's window of 100 (+0.01 for the 1 ms a waited)")

		clock.Add(time.Millisecond)
		c := submit(t, s, "duel", Ticket{User: "c", Skill: -100})
		waitFor(t, 5*time.Second, "a and c match", func() bool { return matchOfTicket(t, s, "duel", a) != nil })
		m := matchOfTicket(t, s, "duel", a)
		assert.Equal(t, []string{a, c}, []string{m.Tickets[0].ID, m.Tickets[1].ID}, "the oldest first; -100 is exactly on the edge of a's window")
		assert.Equal(t, []string{"a", "c"}, m.Players)
		assert.Equal(t, "duel-1", m.ID)

		t.Run("waiting widens the window", func(t *testing.T) {
			d := submit(t, s, "duel", Ticket{User: "d", Skill: 300.5})
			clock.Add(5 * time.Second)
			rs.after(t, 3)
			assert.Nil(t, matchOfTicket(t, s, "duel", b), "after 5 s b's window is 150, d is 200 away")
			clock.Add(5 * time.Second)
			waitFor(t, 5*time.Second, "b and d match", func() bool { return matchOfTicket(t, s, "duel", b) != nil })
			m := matchOfTicket(t, s, "duel", b)
			assert.Equal(t, []string{b, d}, []string{m.Tickets[0].ID, m.Tickets[1].ID})
			assert.Equal(t, clock.Now(), m.Created)
			assert.Equal(t, 300.5, m.Tickets[1].Skill, "skills are kept exactly")
		})
		// A match's status reads matched as soon as its script ran; its
		// counters and its announcement follow on the matcher's goroutine.
		rec.waitMatches(t, 2)
		ms, _, calls := rec.snapshot()
		assert.Len(t, ms, 2)
		assert.Equal(t, 2, calls, "each match announced once")
		assert.Equal(t, 2.0, testkit.Value(t, s.m.matches, "duel"))
		assert.Equal(t, 4.0, testkit.Value(t, s.m.tickets, "duel", "matched"))
	})
}

func TestNegativeSkillsAndTheClosestFirst(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	n, clock, _, _ := one(t, r, `{"trio":{"min":3,"max":3,"window":50,"max_wait_seconds":600}}`)
	s := n.svc
	// Submitted together (one fake instant): a is the seed (ties go by
	// entry, and the lowest skill sorts first in a bucket).
	ids := map[string]string{}
	for _, tk := range []Ticket{{User: "p", Skill: -1000}, {User: "q", Skill: -990}, {User: "r", Skill: -1040}, {User: "x", Skill: -951}} {
		ids[tk.User] = submit(t, s, "trio", tk)
	}
	_ = clock
	waitFor(t, 5*time.Second, "a match", func() bool { return matchOfTicket(t, s, "trio", ids["p"]) != nil })
	m := matchOfTicket(t, s, "trio", ids["r"])
	require.NotNil(t, m, "the oldest (by entry: -1040 first) seeds the match")
	assert.ElementsMatch(t, []string{"r", "p", "q"}, m.Players, "the closest two to -1040 within 50: -1000 and -990 (x at -951 is 89 away)")
}

func TestPartiesStayTogether(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, r *redistest.Redis) {
		n, clock, _, rs := one(t, r, `{"team":{"min":4,"max":4,"window":1000,"max_wait_seconds":600,"max_party":3}}`)
		s := n.svc
		ctx := context.Background()
		next := func(tk Ticket) string { clock.Add(time.Millisecond); return submit(t, s, "team", tk) }

		trio := next(Ticket{User: "a", Party: []string{"c", "b"}, Skill: 100})
		pair := next(Ticket{User: "e", Party: []string{"f"}, Skill: 101})
		d := next(Ticket{User: "d", Skill: 150})
		waitFor(t, 5*time.Second, "the trio matches", func() bool { return matchOfTicket(t, s, "team", trio) != nil })
		m := matchOfTicket(t, s, "team", trio)
		assert.Equal(t, []string{"a", "b", "c", "d"}, m.Players, "the pair (closer) would make 5: the single d completes the trio")
		assert.Equal(t, []string{"b", "c"}, m.Tickets[0].Party)
		assert.Equal(t, d, m.Tickets[1].ID)

		rs.after(t, 3)
		assert.Nil(t, matchOfTicket(t, s, "team", pair), "a pair and nobody else is 2 of 4")
		_, err := s.Submit(ctx, "team", Ticket{User: "f"})
		assert.ErrorIs(t, err, ErrTicketOpen, "f is queued in e's party")
		g := next(Ticket{User: "g", Skill: 90})
		h := next(Ticket{User: "h", Skill: 95})
		waitFor(t, 5*time.Second, "the pair matches", func() bool { return matchOfTicket(t, s, "team", pair) != nil })
		m = matchOfTicket(t, s, "team", pair)
		assert.Equal(t, []string{"e", "f", "h", "g"}, m.Players, "closest first: h (6 away), then g (11)")
		assert.Equal(t, []string{pair, h, g}, []string{m.Tickets[0].ID, m.Tickets[1].ID, m.Tickets[2].ID})
	})
}

func TestAttributesMustBeEqual(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, r *redistest.Redis) {
		n, clock, _, rs := one(t, r, `{"duel":{"min":2,"max":2,"window":10,"max_wait_seconds":600}}`)
		s := n.svc
		next := func(u string, attrs map[string]string) string {
			clock.Add(time.Millisecond)
			return submit(t, s, "duel", Ticket{User: u, Skill: 100, Attributes: attrs})
		}
		eu1 := next("eu1", map[string]string{"region": "eu", "mode": "ranked"})
		us1 := next("us1", map[string]string{"region": "us", "mode": "ranked"})
		bare := next("bare", nil)
		eu2 := next("eu2", map[string]string{"mode": "ranked", "region": "eu"})
		casual := next("casual", map[string]string{"region": "us", "mode": "casual"})
		us2 := next("us2", map[string]string{"region": "us", "mode": "ranked"})
		waitFor(t, 5*time.Second, "two matches", func() bool {
			return matchOfTicket(t, s, "duel", eu1) != nil && matchOfTicket(t, s, "duel", us1) != nil
		})
		m := matchOfTicket(t, s, "duel", eu1)
		assert.Equal(t, []string{eu1, eu2}, []string{m.Tickets[0].ID, m.Tickets[1].ID})
		assert.Equal(t, map[string]string{"region": "eu", "mode": "ranked"}, m.Attributes)
		m = matchOfTicket(t, s, "duel", us1)
		assert.Equal(t, []string{us1, us2}, []string{m.Tickets[0].ID, m.Tickets[1].ID})
		rs.after(t, 3)
		assert.Nil(t, matchOfTicket(t, s, "duel", bare))
		assert.Nil(t, matchOfTicket(t, s, "duel", casual))
		d, err := s.Depth(context.Background(), "duel")
		require.NoError(t, err)
		assert.Equal(t, int64(2), d.Tickets)
	})
}

func TestExpiryIsReported(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, r *redistest.Redis) {
		n, clock, rec, _ := one(t, r, `{"duel":{"min":2,"max":2,"window":10,"max_wait_seconds":60}}`)
		s := n.svc
		ctx := context.Background()
		id := submit(t, s, "duel", Ticket{User: "lonely", Party: nil, Skill: 5})
		clock.Add(59 * time.Second)
		late := submit(t, s, "duel", Ticket{User: "late", Skill: 500})
		clock.Add(time.Second)
		waitFor(t, 5*time.Second, "OnExpired", func() bool { _, xs, _ := rec.snapshot(); return len(xs) == 1 })
		_, xs, _ := rec.snapshot()
		assert.Equal(t, "lonely", xs[id].User)
		assert.Equal(t, clock.Now().Add(-time.Minute), xs[id].Created)

		st, err := s.Status(ctx, "duel", id)
		require.NoError(t, err)
		assert.Equal(t, Expired, st.State)
		assert.Equal(t, clock.Now(), st.Ended)
		st, err = s.Status(ctx, "duel", late)
		require.NoError(t, err)
		assert.Equal(t, Waiting, st.State, "1 s younger: still waiting")
		ttl := r.Client.PTTL(ctx, s.keys("duel").ticket(id)).Val()
		assert.True(t, ttl > 0 && ttl <= time.Minute, "the status is kept for the status TTL: %v", ttl)
		assert.Equal(t, 1.0, testkit.Value(t, s.m.tickets, "duel", "expired"))
		assert.Equal(t, 1.0, testkit.Value(t, s.m.announce, "duel", "expired", "ok"))
		_, err = s.Submit(ctx, "duel", Ticket{User: "lonely", Skill: 5})
		assert.NoError(t, err, "an expired ticket is no longer open")
		cancelled, err := s.Cancel(ctx, "duel", id)
		require.NoError(t, err)
		assert.Equal(t, Expired, cancelled.State, "too late to cancel: the status says how it ended")
	})
}

func TestFailedHookIsRetried(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	clock, rec := newClock(), newRecorder()
	var fails atomic.Int64
	cfg := fastMatchers()
	cfg.OnMatched = func(ctx context.Context, m Match) error {
		if fails.Add(1) == 1 {
			return errors.New("the room service is down")
		}
		return rec.onMatched(ctx, m)
	}
	n := newNode(t, r, setup{defs: newDefs(duelDefs), clock: clock.Now, rec: rec, mcfg: cfg})
	n.start(t)
	submit(t, n.svc, "duel", Ticket{User: "a"})
	submit(t, n.svc, "duel", Ticket{User: "b"})
	waitFor(t, 10*time.Second, "the match is announced", func() bool { ms, _, _ := rec.snapshot(); return len(ms) == 1 })
	assert.Equal(t, int64(2), fails.Load(), "failed once, then retried")
	assert.Equal(t, 1.0, testkit.Value(t, n.svc.m.announce, "duel", "matched", "failed"))
	waitFor(t, 5*time.Second, "the outbox is acknowledged", func() bool {
		return r.Client.ZCard(context.Background(), n.svc.keys("duel").outbox()).Val() == 0
	})
}

// TestCancelBetweenChoosingAndForming: a ticket the matcher chose is
// cancelled before the formation script runs; the script skips that match
// whole, the other ticket stays waiting and is matched later.
func TestCancelBetweenChoosingAndForming(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	clock, rec := newClock(), newRecorder()
	n := newNode(t, r, setup{defs: newDefs(duelDefs), clock: clock.Now, rec: rec, mcfg: fastMatchers()})
	var a, b string
	var once atomic.Bool
	n.mm.beforeForm = func(ctx context.Context, _ string, _ *lock.Lock) {
		if once.CompareAndSwap(false, true) {
			st, err := n.svc.Cancel(ctx, "duel", b)
			assert.NoError(t, err)
			assert.Equal(t, Cancelled, st.State)
		}
	}
	a = submit(t, n.svc, "duel", Ticket{User: "a", Skill: 1})
	clock.Add(time.Millisecond)
	b = submit(t, n.svc, "duel", Ticket{User: "b", Skill: 2})
	n.start(t)
	waitFor(t, 5*time.Second, "the formation ran", once.Load)
	clock.Add(time.Millisecond)
	c := submit(t, n.svc, "duel", Ticket{User: "c", Skill: 3})
	waitFor(t, 5*time.Second, "a and c match", func() bool { return matchOfTicket(t, n.svc, "duel", a) != nil })
	m := matchOfTicket(t, n.svc, "duel", a)
	assert.Equal(t, []string{"a", "c"}, m.Players)
	assert.Equal(t, c, m.Tickets[1].ID)
	st, err := n.svc.Status(ctx, "duel", b)
	require.NoError(t, err)
	assert.Equal(t, Cancelled, st.State, "the cancel won: b is in no match")
	rec.waitMatches(t, 1)
	ms, _, _ := rec.snapshot()
	assert.Len(t, ms, 1)
	assert.Equal(t, int64(2), m.Seq, "number 1 was reserved by the skipped match")
}

// TestRetryOfAnEndedSubmission: go-redis sends a script call again when its
// answer does not come in time (a stalled Redis, a node paused while it
// waited for the answer), and the first try may have been applied. When
// the ticket it made has ended meanwhile (matched, cancelled), freeing its
// user, the retry must find that ticket and queue nothing: seen in
// deploy's kill-and-pause run, where such a retry queued a matched ticket
// again and it was matched a second time.
func TestRetryOfAnEndedSubmission(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, r *redistest.Redis) {
		ctx := context.Background()
		n, clock, rec, rs := one(t, r, duelDefs)
		s := n.svc
		q, err := s.Queue("duel")
		require.NoError(t, err)
		try := func(user, id string, skill float64) (fresh bool) {
			t.Helper()
			tk, err := Ticket{User: user, Skill: skill}.check(q)
			require.NoError(t, err)
			got, fresh, err := s.enqueue(ctx, q, tk, id)
			require.NoError(t, err)
			require.Equal(t, id, got)
			return fresh
		}
		const erin, frank, gina = "ERINERINERINERINERINERIN22", "FRANKFRANKFRANKFRANKFRANK2", "GINAGINAGINAGINAGINAGINA22"
		require.True(t, try("erin", erin, 10))
		clock.Add(time.Millisecond)
		require.True(t, try("frank", frank, 11))
		waitFor(t, 5*time.Second, "erin and frank match", func() bool { return matchOfTicket(t, s, "duel", erin) != nil })
		first := matchOfTicket(t, s, "duel", erin)

		clock.Add(time.Second)
		assert.False(t, try("erin", erin, 10), "the retry found the matched ticket")
		require.True(t, try("gina", gina, 12)) // a partner the requeued ticket would match
		rs.after(t, 3)
		st, err := s.Status(ctx, "duel", erin)
		require.NoError(t, err)
		assert.Equal(t, Matched, st.State)
		assert.Equal(t, first, st.Match, "still in its one match")
		st, err = s.Status(ctx, "duel", gina)
		require.NoError(t, err)
		assert.Equal(t, Waiting, st.State, "gina had nobody to match")
		ms, _, _ := rec.snapshot()
		assert.Len(t, ms, 1, "one match formed")

		_, err = s.Cancel(ctx, "duel", gina)
		require.NoError(t, err)
		assert.False(t, try("gina", gina, 12), "the retry found the cancelled ticket")
		st, err = s.Status(ctx, "duel", gina)
		require.NoError(t, err)
		assert.Equal(t, Cancelled, st.State)
		d, err := s.Depth(ctx, "duel")
		require.NoError(t, err)
		assert.Zero(t, d.Tickets, "nothing queued again")
		k := s.keys("duel")
		assert.Zero(t, r.Client.HLen(ctx, k.users()).Val(), "no user held")
		_, err = s.Submit(ctx, "duel", Ticket{User: "erin", Skill: 10})
		assert.NoError(t, err, "erin is free to queue anew")
	})
}

// TestEveryKeyExpiresButTheCounters: after tickets were submitted, matched,
// expired and cancelled, every key of the queue carries a TTL except the
// match counter and the lock's fence (keyspace.Permanent's "counters").
func TestEveryKeyExpiresButTheCounters(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	n, clock, rec, _ := one(t, r, duelDefs)
	submit(t, n.svc, "duel", Ticket{User: "a", Skill: 1})
	submit(t, n.svc, "duel", Ticket{User: "b", Skill: 2})
	lonely := submit(t, n.svc, "duel", Ticket{User: "c", Skill: 900})
	gone := submit(t, n.svc, "duel", Ticket{User: "d", Skill: 5000})
	_, err := n.svc.Cancel(ctx, "duel", gone)
	require.NoError(t, err)
	waitFor(t, 5*time.Second, "a match", func() bool { ms, _, _ := rec.snapshot(); return len(ms) == 1 })
	clock.Add(time.Minute)
	waitFor(t, 5*time.Second, "an expiry", func() bool { _, xs, _ := rec.snapshot(); return len(xs) == 1 })
	_, xs, _ := rec.snapshot()
	require.Contains(t, xs, lonely)
	submit(t, n.svc, "duel", Ticket{User: "e", Skill: 1})

	keys, err := r.Client.Keys(ctx, r.Prefix+":*").Result()
	require.NoError(t, err)
	var permanent []string
	for _, key := range keys {
		// -1: no TTL; -2: the key went (the matcher drains fresh and the
		// outbox) between KEYS and PTTL, which is no permanent key
		if ttl := r.Client.PTTL(ctx, key).Val(); ttl == -1 {
			permanent = append(permanent, key)
		}
	}
	assert.ElementsMatch(t, []string{r.Prefix + ":{mm:duel}:seq", r.Prefix + ":{mm:duel}:fence"}, permanent)
	assert.Greater(t, len(keys), 6, "tickets, the match, the pool and the lock were looked at: %v", keys)
}

// TestSubmissionCallIsBounded: a submission sent twice by the Redis client is
// one ticket, and its call ends redisx.CallBound after it starts whatever the
// caller's context (a REST request's has no deadline), so that no copy is
// sent after the ticket's hash, which tells the script its own retry, may
// have expired.
func TestSubmissionCallIsBounded(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	h := redistest.ResendCommands("evalsha", "eval")
	rdb := h.Client(t, r)
	s := New(rdb, Config{Prefix: r.Prefix, Queues: newDefs(duelDefs).get})
	h.Arm(nil)
	start := time.Now()
	id, err := s.Submit(ctx, "duel", Ticket{User: "hal", Skill: 1})
	require.NoError(t, err)
	end := time.Now()
	_, deadline := h.Resent(t)
	assert.WithinRange(t, deadline, start.Add(redisx.CallBound), end.Add(redisx.CallBound), "the call ends redisx.CallBound after its start")
	st, err := s.Status(ctx, "duel", id)
	require.NoError(t, err)
	assert.Equal(t, Waiting, st.State)
	d, err := s.Depth(ctx, "duel")
	require.NoError(t, err)
	assert.EqualValues(t, 1, d.Tickets, "one ticket for the two copies")
}
