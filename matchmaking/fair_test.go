package matchmaking

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// TestUnmatchableTicketsDoNotStarveTheQueue: 128 tickets that can never
// match (skills a million apart) wait before two compatible ones; the two
// match at once. The matcher once seeded only the oldest 128 tickets of a
// queue, so the two waited until the blockers expired (59 s in #38).
func TestUnmatchableTicketsDoNotStarveTheQueue(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, r *redistest.Redis) {
		n, clock, _, _ := one(t, r, `{"duel":{"min":2,"max":2,"window":10,"max_wait_seconds":600}}`)
		s := n.svc
		for i := range 128 {
			submit(t, s, "duel", Ticket{User: fmt.Sprintf("blocker%d", i), Skill: float64(i) * 1e6})
			clock.Add(time.Millisecond)
		}
		a := submit(t, s, "duel", Ticket{User: "a", Skill: -5e8})
		clock.Add(time.Millisecond)
		start := time.Now()
		b := submit(t, s, "duel", Ticket{User: "b", Skill: -5e8 + 3})
		waitFor(t, 5*time.Second, "a and b match", func() bool { return matchOfTicket(t, s, "duel", b) != nil })
		m := matchOfTicket(t, s, "duel", b)
		assert.Equal(t, []string{a, b}, []string{m.Tickets[0].ID, m.Tickets[1].ID}, "the oldest first, though b's window chose a")
		t.Logf("matched %v after b", time.Since(start))
		d, err := s.Depth(t.Context(), "duel")
		require.NoError(t, err)
		assert.EqualValues(t, 128, d.Tickets, "the blockers wait on")
	})
}

// TestTheSweepFindsPairsThatWideningMadeCompatible: two tickets that are
// neither among the oldest seeds nor new any more become compatible as
// their windows widen; the sweep over the pool finds them.
func TestTheSweepFindsPairsThatWideningMadeCompatible(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, r *redistest.Redis) {
		clock, rec, rs := newClock(), newRecorder(), &rounds{}
		cfg := fastMatchers()
		cfg.Seeds, cfg.FreshSeeds, cfg.SweepSeeds, cfg.MaxMatches = 4, 4, 4, 4
		n := newNode(t, r, setup{defs: newDefs(`{"duel":{"min":2,"max":2,"window":10,"widen_per_second":10,"max_wait_seconds":600}}`),
			clock: clock.Now, rec: rec, mcfg: cfg})
		n.mm.afterRound = rs.hook
		n.start(t)
		waitFor(t, 5*time.Second, "the node takes the queue", func() bool { return len(n.mm.Holding()) > 0 })
		s := n.svc
		for i := range 20 {
			submit(t, s, "duel", Ticket{User: fmt.Sprintf("blocker%d", i), Skill: float64(i+1) * 1e6})
			clock.Add(time.Millisecond)
		}
		a := submit(t, s, "duel", Ticket{User: "a", Skill: 0})
		b := submit(t, s, "duel", Ticket{User: "b", Skill: -100})
		waitFor(t, 10*time.Second, "every fresh ticket seeded", func() bool {
			l, err := r.Client.LLen(t.Context(), s.keys("duel").fresh()).Result()
			require.NoError(t, err)
			return l == 0
		})
		rs.after(t, 3)
		require.Nil(t, matchOfTicket(t, s, "duel", a), "100 apart, windows of 10")
		clock.Add(10 * time.Second) // windows of 110
		waitFor(t, 10*time.Second, "the sweep matches a and b", func() bool { return matchOfTicket(t, s, "duel", a) != nil })
		m := matchOfTicket(t, s, "duel", a)
		assert.ElementsMatch(t, []string{a, b}, []string{m.Tickets[0].ID, m.Tickets[1].ID})
	})
}
