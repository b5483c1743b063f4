package matchmaking

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// TestAFailingMatcherShowsOnTheWaitingTickets: when every round of a
// queue's matcher fails (here the outbox holds a value of the wrong type,
// so each pick fails with WRONGTYPE — as every pick failed on the embedded
// Redis when the script used struct), the waiting tickets say so
// (Status.TroubleSince) instead of waiting silently; the trouble clears
// once rounds succeed again.
func TestAFailingMatcherShowsOnTheWaitingTickets(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, r *redistest.Redis) {
		n, _, _, rs := one(t, r, `{"duel":{"min":2,"max":2,"window":10,"max_wait_seconds":600}}`)
		s := n.svc
		ctx := context.Background()
		a := submit(t, s, "duel", Ticket{User: "a", Skill: 0})
		rs.after(t, 2)
		st, err := s.Status(ctx, "duel", a)
		require.NoError(t, err)
		assert.True(t, st.TroubleSince.IsZero(), "no trouble while rounds succeed")

		outbox := s.keys("duel").outbox()
		require.NoError(t, r.Client.Set(ctx, outbox, "not a zset", 0).Err())
		waitFor(t, 10*time.Second, "the waiting ticket shows the trouble", func() bool {
			st, err := s.Status(ctx, "duel", a)
			require.NoError(t, err)
			return !st.TroubleSince.IsZero()
		})

		require.NoError(t, r.Client.Del(ctx, outbox).Err())
		waitFor(t, 10*time.Second, "the trouble clears", func() bool {
			st, err := s.Status(ctx, "duel", a)
			require.NoError(t, err)
			return st.TroubleSince.IsZero()
		})
	})
}
