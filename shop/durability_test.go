package shop

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testkit"
)

// TestDurabilityReplica: under DurabilityReplica every purchase, grant and
// restock is acked only once a replica holds it (one WAIT on the write's
// connection); with the replica stopped each answers ErrNotReplicated,
// applied all the same, and a retry with its key, from another node too,
// is not acked before a replica holds the first write, and never buys or
// grants twice.
func TestDurabilityReplica(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	rep := redistest.StartReplica(t, r.Server)
	ctx := context.Background()
	mode := DurabilityReplica
	cfg := Config{Durability: func() string { return mode }, DurabilityTimeout: 300 * time.Millisecond}
	ns := nodes(t, r, 2, cfg)
	a, b := ns[0], ns[1]
	rc := rep.Client(t)
	waits := func() int64 { return r.Server.CommandCalls(t, "wait") }

	t.Run("each write is acked after one WAIT, and the replica holds it then", func(t *testing.T) {
		before := waits()
		require.NoError(t, a.Stock(ctx, "sword", 10, 7))
		assert.Equal(t, "10", rc.HGet(ctx, a.keys.item("sword"), "stock").Val())
		bal, err := a.GrantWith(ctx, "alice", 100, "g1")
		require.NoError(t, err)
		assert.EqualValues(t, 100, bal)
		assert.Equal(t, "100", rc.Get(ctx, a.keys.balance("alice")).Val())
		_, err = a.Grant(ctx, "bob", 100)
		require.NoError(t, err)
		assert.Equal(t, "100", rc.Get(ctx, a.keys.balance("bob")).Val())
		for i, p := range paths {
			w, err := p.buy(a, ctx, "alice", "sword", 1, "buy-"+p.name)
			require.NoError(t, err, p.name)
			assert.EqualValues(t, 100-7*(i+1), w.Balance, p.name)
			assert.Equal(t, strconv.Itoa(100-7*(i+1)), rc.Get(ctx, a.keys.balance("alice")).Val(), p.name)
			assert.Equal(t, strconv.Itoa(i+1), rc.HGet(ctx, a.keys.inventory("alice"), "sword").Val(), p.name)
		}
		assert.EqualValues(t, 5, waits()-before, "one WAIT a write")

		before = waits()
		_, err = a.Buy(ctx, "alice", "nothing", 1, "")
		assert.ErrorIs(t, err, ErrUnknownItem)
		assert.Zero(t, waits()-before, "a refusal writes nothing, and waits for nothing")
	})

	t.Run("durability none sends no WAIT", func(t *testing.T) {
		mode = DurabilityNone
		defer func() { mode = DurabilityReplica }()
		before := waits()
		require.NoError(t, a.Stock(ctx, "shield", 10, 1))
		_, err := a.Grant(ctx, "carol", 10)
		require.NoError(t, err)
		for _, p := range paths {
			_, err := p.buy(a, ctx, "carol", "shield", 1, "")
			require.NoError(t, err, p.name)
		}
		assert.Zero(t, waits()-before)
	})

	t.Run("a stopped replica: not durable, applied once, and a retry is acked only once the replica has it", func(t *testing.T) {
		require.NoError(t, a.Stock(ctx, "bow", 10, 5))
		_, err := a.Grant(ctx, "dave", 50)
		require.NoError(t, err)
		purchases, err := a.Purchases(ctx)
		require.NoError(t, err)
		// b's connection writes, and a replica acknowledges that: a WAIT
		// on it, with nothing written since, answers at once.
		_, err = b.Grant(ctx, "erin", 1)
		require.NoError(t, err)
		rep.Pause(t)

		bal, err := a.GrantWith(ctx, "dave", 50, "g2")
		assert.ErrorIs(t, err, ErrNotReplicated)
		assert.Equal(t, errcode.NotDurable, errcode.Of(err))
		assert.EqualValues(t, 100, bal, "granted all the same, and its balance returned")
		for _, p := range paths {
			w, err := p.buy(a, ctx, "dave", "bow", 1, "k-"+p.name)
			require.ErrorIs(t, err, ErrNotReplicated, p.name)
			assert.Equal(t, errcode.NotDurable, errcode.Of(err), p.name)
			require.NotNil(t, w.Items, p.name)
			// b is another node: its connection's last write is one the
			// replica holds, and a WAIT there would answer at once but for
			// the replay's rewrite.
			again, err := p.buy(b, ctx, "dave", "bow", 1, "k-"+p.name)
			assert.ErrorIs(t, err, ErrNotReplicated, "%s: a replay is not acked while no replica holds the purchase", p.name)
			assert.Equal(t, w, again, p.name)
		}
		_, err = b.GrantWith(ctx, "dave", 50, "g2")
		assert.ErrorIs(t, err, ErrNotReplicated, "a grant's replay likewise")
		_, err = a.Buy(ctx, "dave", "bow", 1000, "too-many")
		assert.ErrorIs(t, err, ErrSoldOut, "a refusal is answered as such: its record needs no replica")

		// the grant, each path's purchase and its replay, the grant's replay
		// (the two nodes count in one registry)
		assert.EqualValues(t, 6, testkit.Value(t, a.metrics.notReplicated))
		rep.Resume(t)
		for i, p := range paths {
			w, err := p.buy(b, ctx, "dave", "bow", 1, "k-"+p.name)
			require.NoError(t, err, "%s: the replica has caught up", p.name)
			assert.EqualValues(t, i+1, w.Items["bow"], "%s: the first answer", p.name)
		}
		bal, err = b.GrantWith(ctx, "dave", 50, "g2")
		require.NoError(t, err)
		assert.EqualValues(t, 100, bal)

		w, err := a.Wallet(ctx, "dave")
		require.NoError(t, err)
		assert.Equal(t, Wallet{Balance: 100 - 2*5, Items: map[string]int64{"bow": 2}}, w, "one grant, two purchases: nothing twice")
		n, err := a.Purchases(ctx)
		require.NoError(t, err)
		assert.Equal(t, purchases+2, n)
		assert.Equal(t, strconv.Itoa(100-2*5), rc.Get(ctx, a.keys.balance("dave")).Val(), "the replica holds them")
	})
}
