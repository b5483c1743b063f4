package matchmaking

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/lock"
)

// holderOf returns the index of the node running queue's matcher, or -1.
func holderOf(ns []*node, queue string) int {
	for i, n := range ns {
		for _, q := range n.mm.Holding() {
			if q == queue {
				return i
			}
		}
	}
	return -1
}

// TestThousandTicketsOverThreeNodes: 1,000 tickets with random skills,
// regions and parties are submitted through three nodes, each with its own
// Redis client and lock client; half-way the node running the matcher is
// killed (its context canceled, nothing released). Every ticket ends matched
// exactly once or expired, every match respects the queue's rules, and
// another node took over within the lease.
func TestThousandTicketsOverThreeNodes(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, r *redistest.Redis) {
		const (
			tickets = 1000
			lease   = 600 * time.Millisecond
			every   = 100 * time.Millisecond
		)
		raw := `{"arena":{"min":2,"max":4,"window":20,"widen_per_second":400,"max_wait_seconds":3,"max_party":2}}`
		rec := newRecorder()
		cfg := MatchersConfig{Lease: lease, Tick: 20 * time.Millisecond, TryEvery: every, MaxMatches: 16}
		d := newDefs(raw)
		ns := make([]*node, 3)
		for i := range ns {
			ns[i] = newNode(t, r, setup{defs: d, rec: rec, mcfg: cfg})
			ns[i].start(t)
		}
		waitFor(t, 5*time.Second, "a node takes the queue", func() bool { return holderOf(ns, "arena") >= 0 })
		q, err := ns[0].svc.Queue("arena")
		require.NoError(t, err)

		ctx := context.Background()
		rng := rand.New(rand.NewPCG(1, 2))
		submitted := map[string]Ticket{}
		live := []*node{ns[0], ns[1], ns[2]}
		var takeover time.Duration
		for i := range tickets {
			tk := Ticket{User: fmt.Sprintf("u%d", i), Skill: float64(rng.IntN(400000)) / 100,
				Attributes: map[string]string{"region": []string{"eu", "us"}[rng.IntN(2)]}}
			if rng.IntN(5) == 0 {
				tk.Party = []string{fmt.Sprintf("p%d", i)}
			}
			n := live[i%len(live)]
			id, err := n.svc.Submit(ctx, "arena", tk)
			require.NoError(t, err)
			tk.ID = id
			submitted[id] = tk
			if i == tickets/2 {
				// Kill the holder: its matcher stops where it is, its lock
				// stays until the lease runs out.
				h := holderOf(ns, "arena")
				require.GreaterOrEqual(t, h, 0)
				killed := time.Now()
				ns[h].cancel()
				live = nil
				for j, n := range ns {
					if j != h {
						live = append(live, n)
					}
				}
				waitFor(t, 10*time.Second, "another node takes over", func() bool {
					h2 := holderOf(ns, "arena")
					return h2 >= 0 && h2 != h
				})
				takeover = time.Since(killed)
			}
			time.Sleep(time.Millisecond)
		}
		t.Logf("%s: takeover after the kill took %v (lease %v, tries every %v)", r.Kind, takeover.Round(time.Millisecond), lease, every)
		assert.Less(t, takeover, lease+every+time.Second, "within the lease, plus one try and slack for a loaded machine")

		ended := func() bool {
			ms, xs, _ := rec.snapshot()
			n := len(xs)
			for _, m := range ms {
				n += len(m.Tickets)
			}
			return n >= tickets
		}
		for !ended() {
			select {
			case <-rec.changed:
			case <-time.After(20 * time.Second):
				t.Fatal("tickets still unaccounted for after 20 s without news")
			}
		}

		ms, xs, calls := rec.snapshot()
		in := map[string]string{} // ticket -> match
		players := 0
		for id, m := range ms {
			require.NotContains(t, id, "!differs", "a repeated announcement carried another match")
			assert.GreaterOrEqual(t, len(m.Players), q.MinSize, id)
			assert.LessOrEqual(t, len(m.Players), q.MaxSize, id)
			oldest := m.Tickets[0]
			w := q.WindowAt(m.Created.Sub(oldest.Created))
			for _, tk := range m.Tickets {
				prev, dup := in[tk.ID]
				assert.False(t, dup, "ticket %s is in %s and %s", tk.ID, prev, id)
				in[tk.ID] = id
				sub, ok := submitted[tk.ID]
				require.True(t, ok, "match %s holds a ticket nobody submitted", id)
				assert.Equal(t, sub.Players(), tk.Players(), "the party stays together")
				assert.Equal(t, sub.Skill, tk.Skill)
				assert.Equal(t, sub.Attributes, m.Attributes, "attributes respected")
				assert.False(t, tk.Created.Before(oldest.Created), "the first ticket is the oldest")
				assert.LessOrEqual(t, abs(tk.Skill-oldest.Skill), w+1e-9, "%s: within the window the oldest ticket had reached", id)
			}
			players += len(m.Players)
		}
		for id := range xs {
			_, matched := in[id]
			assert.False(t, matched, "ticket %s expired and matched", id)
			_, ok := submitted[id]
			assert.True(t, ok)
		}
		assert.Equal(t, tickets, len(in)+len(xs), "every ticket matched once or expired: none lost")
		t.Logf("%s: %d matches (%d players), %d expired, %d OnMatched calls", r.Kind, len(ms), players, len(xs), calls)

		// Redis agrees: every ticket's status, and nothing left queued.
		for id := range submitted {
			st, err := ns[1].svc.Status(ctx, "arena", id)
			require.NoError(t, err)
			if m, ok := in[id]; ok {
				require.Equal(t, Matched, st.State, id)
				require.NotNil(t, st.Match)
				assert.Equal(t, m, st.Match.ID)
			} else {
				assert.Equal(t, Expired, st.State, id)
			}
		}
		k := ns[0].svc.keys("arena")
		for _, key := range []string{k.pool(), k.age(), k.users()} {
			assert.Zero(t, r.Client.Exists(ctx, key).Val(), "%s is empty", key)
		}
		waitFor(t, 5*time.Second, "the outbox is acknowledged", func() bool { return r.Client.ZCard(ctx, k.outbox()).Val() == 0 })
	})
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// TestPausedHolderIsFenced: the holder chose a match and then paused (the
// seam blocks it between choosing and the fenced script, and it stops
// refreshing, as a SIGSTOPped process would) past its lease; another node
// took the lock and formed the match. When the paused one resumes, its
// formation is refused by the fence and no ticket is matched twice.
func TestPausedHolderIsFenced(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, r *redistest.Redis) {
		ctx := context.Background()
		rec := newRecorder()
		cfg := MatchersConfig{Lease: 400 * time.Millisecond, Tick: 10 * time.Millisecond, TryEvery: 50 * time.Millisecond}
		d := newDefs(duelDefs)
		a := newNode(t, r, setup{defs: d, rec: rec, mcfg: cfg})
		b := newNode(t, r, setup{defs: d, rec: rec, mcfg: cfg})

		paused, resume := make(chan int64), make(chan struct{})
		var once sync.Once
		a.mm.beforeForm = func(_ context.Context, _ string, l *lock.Lock) {
			once.Do(func() {
				paused <- l.Fence()
				<-resume
			})
		}
		a.start(t)
		waitFor(t, 5*time.Second, "a takes the queue", func() bool { return len(a.mm.Holding()) == 1 })
		t1 := submit(t, a.svc, "duel", Ticket{User: "t1", Skill: 10})
		t2 := submit(t, a.svc, "duel", Ticket{User: "t2", Skill: 20})
		staleFence := <-paused

		b.start(t)
		waitFor(t, 10*time.Second, "b forms the match", func() bool { ms, _, _ := rec.snapshot(); return len(ms) == 1 })
		ms, _, _ := rec.snapshot()
		var m Match
		for _, m = range ms {
		}
		assert.Greater(t, m.Fence, staleFence, "formed under b's newer fence")
		assert.Equal(t, int64(2), m.Seq, "a had reserved number 1 before it paused")

		close(resume)
		waitFor(t, 5*time.Second, "a's formation is refused", func() bool {
			return testkit.Value(t, a.svc.m.fenceRejected, "duel") == 1
		})
		waitFor(t, 5*time.Second, "a gives the queue up", func() bool { return len(a.mm.Holding()) == 0 })
		assert.Equal(t, []string{"duel"}, b.mm.Holding())
		assert.Zero(t, testkit.Value(t, a.svc.m.matches, "duel"), "a formed nothing")

		ms, _, calls := rec.snapshot()
		assert.Len(t, ms, 1, "one match")
		assert.Equal(t, 1, calls, "announced once")
		for _, id := range []string{t1, t2} {
			got := matchOfTicket(t, a.svc, "duel", id)
			require.NotNil(t, got)
			assert.Equal(t, m.ID, got.ID)
		}
		assert.Zero(t, r.Client.Exists(ctx, a.svc.keys("duel").match(1)).Val(), "the stale holder's record was never written")
	})
}

// TestCrashBetweenScriptAndHookLosesNothing: the holder forms a match and
// dies before its hook call was acknowledged; the next holder finds the
// match in the outbox and announces it.
func TestCrashBetweenScriptAndHookLosesNothing(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	rec := newRecorder()
	cfg := MatchersConfig{Lease: 300 * time.Millisecond, Tick: 10 * time.Millisecond, TryEvery: 50 * time.Millisecond}
	d := newDefs(duelDefs)
	acfg := cfg
	var a *node
	acfg.OnMatched = func(ctx context.Context, m Match) error {
		a.cancel() // the node dies inside the hook
		return ctx.Err()
	}
	a = newNode(t, r, setup{defs: d, rec: rec, mcfg: acfg})
	b := newNode(t, r, setup{defs: d, rec: rec, mcfg: cfg})
	a.start(t)
	waitFor(t, 5*time.Second, "a takes the queue", func() bool { return len(a.mm.Holding()) == 1 })
	submit(t, a.svc, "duel", Ticket{User: "x"})
	submit(t, a.svc, "duel", Ticket{User: "y"})
	waitFor(t, 5*time.Second, "a dies", func() bool { return len(a.mm.Holding()) == 0 })
	assert.Equal(t, 1.0, testkit.Value(t, a.svc.m.matches, "duel"), "a formed the match")
	b.start(t)
	waitFor(t, 10*time.Second, "b announces a's match", func() bool { ms, _, _ := rec.snapshot(); return len(ms) == 1 })
	ms, _, _ := rec.snapshot()
	assert.Contains(t, ms, "duel-1")
	assert.ElementsMatch(t, []string{"x", "y"}, ms["duel-1"].Players)
	assert.Zero(t, testkit.Value(t, b.svc.m.matches, "duel"), "b formed nothing, it only announced")
}

// TestStopHandsOver: Stop releases the queue's lock, so another node takes
// over without waiting out the lease; a queue removed from the setting is
// given up the same way.
func TestStopHandsOver(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	cfg := MatchersConfig{Lease: time.Hour, Tick: 10 * time.Millisecond, TryEvery: 50 * time.Millisecond}
	d := newDefs(`{"duel":{"min":2,"max":2,"window":1},"team":{"min":4,"max":4,"window":1}}`)
	a := newNode(t, r, setup{defs: d, mcfg: cfg})
	a.start(t)
	waitFor(t, 5*time.Second, "a takes both queues", func() bool { return len(a.mm.Holding()) == 2 })
	assert.Equal(t, 1.0, testkit.Value(t, a.svc.m.holding, "duel"))

	d.set(`{"duel":{"min":2,"max":2,"window":1}}`)
	waitFor(t, 5*time.Second, "a gives team up", func() bool { return len(a.mm.Holding()) == 1 })
	lockKey, _ := a.locks.Keys(lockName("team"))
	assert.Zero(t, r.Client.Exists(ctx, lockKey).Val(), "team's lock is released")
	_, err := a.svc.Submit(ctx, "team", Ticket{User: "u"})
	assert.ErrorIs(t, err, ErrUnknownQueue)

	b := newNode(t, r, setup{defs: d, mcfg: cfg})
	b.start(t)
	time.Sleep(200 * time.Millisecond)
	assert.Empty(t, b.mm.Holding(), "a still holds duel (a lease of an hour)")
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, a.mm.Stop(sctx))
	waitFor(t, 5*time.Second, "b takes duel over at once", func() bool { return len(b.mm.Holding()) == 1 })
	assert.Empty(t, a.mm.Holding())
	assert.ErrorIs(t, a.mm.Start(ctx), ErrStarted)
}
