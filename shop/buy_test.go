package shop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

func TestFortyBuyersTenSwords(t *testing.T) {
	t.Parallel()
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			raceForTen(t, redistest.New(t), p.buy)
		})
	}
}

func TestClusterPurchases(t *testing.T) {
	t.Parallel()
	for _, p := range paths {
		t.Run(p.name+" race", func(t *testing.T) {
			t.Parallel()
			raceForTen(t, redistest.Cluster(t), p.buy)
		})
		t.Run(p.name+" idempotent", func(t *testing.T) {
			t.Parallel()
			sameKeyAtOnce(t, redistest.Cluster(t), p.buy)
		})
	}
	t.Run("grant, stock, wallet and items", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		s := nodes(t, redistest.Cluster(t), 1, Config{Shop: "eu"})[0]
		require.NoError(t, s.Stock(ctx, "sword", 2, 5))
		grant(t, s, "alice", 12)
		_, err := s.Buy(ctx, "alice", "sword", 1, "k")
		require.NoError(t, err)
		w, err := s.Wallet(ctx, "alice")
		require.NoError(t, err)
		assert.Equal(t, Wallet{Balance: 7, Items: map[string]int64{"sword": 1}}, w)
		items, err := s.Items(ctx)
		require.NoError(t, err)
		assert.Equal(t, []Item{{"sword", 1, 5}}, items)
	})
}

// raceForTen has 40 buyers on 3 nodes race for 10 swords, one each, and
// checks that exactly 10 win, 30 are told sold_out, the stock never goes
// below 0 and no coin is made or lost.
//
// On the WATCH path no buyer can run out of retries: an EXEC fails only when
// another buyer's EXEC changed the sword first, which happens 10 times in all.
func raceForTen(t *testing.T, r *redistest.Redis, buy buyFunc) {
	const (
		buyers  = 40
		swords  = 10
		price   = 100
		granted = 250
	)
	ctx := context.Background()
	shops := nodes(t, r, 3, Config{})
	require.NoError(t, shops[0].Stock(ctx, "sword", swords, price))
	for i := range buyers {
		grant(t, shops[i%3], buyerName(i), granted)
	}

	// A sampler reads the stock throughout the race.
	stop := make(chan struct{})
	sampled := make(chan int64, 1)
	sampler := r.NewClient(t)
	go func() {
		least := int64(swords)
		for {
			select {
			case <-stop:
				sampled <- least
				return
			default:
			}
			n, err := sampler.HGet(ctx, shops[0].keys.item("sword"), "stock").Int64()
			if err == nil {
				least = min(least, n)
			}
		}
	}()

	var won, soldOut atomic.Int32
	other := make(chan error, buyers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range buyers {
		wg.Go(func() {
			<-start
			_, err := buy(shops[i%3], ctx, buyerName(i), "sword", 1, "")
			switch {
			case err == nil:
				won.Add(1)
			case errors.Is(err, ErrSoldOut):
				soldOut.Add(1)
			default:
				other <- err
			}
		})
	}
	close(start)
	wg.Wait()
	close(stop)
	close(other)
	for err := range other {
		assert.NoError(t, err)
	}
	assert.Equal(t, int32(swords), won.Load(), "winners")
	assert.Equal(t, int32(buyers-swords), soldOut.Load(), "sold out")
	assert.GreaterOrEqual(t, <-sampled, int64(0), "stock seen during the race")

	items, err := shops[1].Items(ctx)
	require.NoError(t, err)
	assert.Equal(t, []Item{{"sword", 0, price}}, items)
	var balances, owned int64
	for i := range buyers {
		w, err := shops[2].Wallet(ctx, buyerName(i))
		require.NoError(t, err)
		balances += w.Balance
		owned += w.Items["sword"]
		assert.Contains(t, []int64{0, 1}, w.Items["sword"], "one sword each at most")
	}
	assert.Equal(t, int64(swords), owned, "swords owned")
	assert.Equal(t, int64(buyers*granted), balances+owned*price, "balances + spent = granted")
	n, err := shops[0].Purchases(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(swords), n, "purchase counter")
}

func buyerName(i int) string { return fmt.Sprintf("buyer-%02d", i) }

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			r := redistest.New(t)
			ctx := context.Background()
			ss := nodes(t, r, 2, Config{IdempotencyTTL: time.Hour})
			require.NoError(t, ss[0].Stock(ctx, "sword", 100, 10))
			grant(t, ss[0], "alice", 1000)

			t.Run("a retry with the same key buys once and answers the same", func(t *testing.T) {
				first, err := p.buy(ss[0], ctx, "alice", "sword", 2, "k1")
				require.NoError(t, err)
				grant(t, ss[0], "alice", 5) // the wallet moves on; the answer does not
				again, err := p.buy(ss[1], ctx, "alice", "sword", 2, "k1")
				require.NoError(t, err)
				assert.Equal(t, first, again)
				assert.Equal(t, Wallet{Balance: 980, Items: map[string]int64{"sword": 2}}, again)
				w, err := ss[1].Wallet(ctx, "alice")
				require.NoError(t, err)
				assert.Equal(t, Wallet{Balance: 985, Items: map[string]int64{"sword": 2}}, w)
				n, err := ss[0].Purchases(ctx)
				require.NoError(t, err)
				assert.Equal(t, int64(1), n)
			})

			t.Run("the record lives for IdempotencyTTL", func(t *testing.T) {
				ttl, err := r.Client.PTTL(ctx, ss[0].keys.idem("alice", "k1")).Result()
				require.NoError(t, err)
				assert.Greater(t, ttl, time.Duration(0))
				assert.LessOrEqual(t, ttl, time.Hour)
			})

			t.Run("the other path replays the record too", func(t *testing.T) {
				other := (*Shop).Buy
				if p.name == "watch" {
					other = (*Shop).BuyLua
				}
				w, err := other(ss[0], ctx, "alice", "sword", 2, "k1")
				require.NoError(t, err)
				assert.Equal(t, Wallet{Balance: 980, Items: map[string]int64{"sword": 2}}, w)
			})

			t.Run("the same key for another purchase is refused", func(t *testing.T) {
				_, err := p.buy(ss[0], ctx, "alice", "sword", 3, "k1")
				assert.ErrorIs(t, err, ErrIdempotencyMismatch)
				_, err = p.buy(ss[0], ctx, "alice", "axe", 2, "k1")
				assert.ErrorIs(t, err, ErrIdempotencyMismatch)
			})

			t.Run("keys are per user", func(t *testing.T) {
				grant(t, ss[0], "bob", 10)
				w, err := p.buy(ss[1], ctx, "bob", "sword", 1, "k1")
				require.NoError(t, err)
				assert.Equal(t, Wallet{Balance: 0, Items: map[string]int64{"sword": 1}}, w)
			})

			t.Run("a refusal is the first answer too", func(t *testing.T) {
				_, err := p.buy(ss[0], ctx, "bob", "sword", 1, "k2")
				require.ErrorIs(t, err, ErrInsufficientFunds)
				grant(t, ss[0], "bob", 10)
				_, err = p.buy(ss[1], ctx, "bob", "sword", 1, "k2")
				assert.ErrorIs(t, err, ErrInsufficientFunds, "same key: the stored refusal")
				_, err = p.buy(ss[1], ctx, "bob", "sword", 1, "k3")
				assert.NoError(t, err, "a new key is a new purchase")
			})

			t.Run("two requests with one key at once buy once", func(t *testing.T) {
				sameKeyAtOnce(t, r, p.buy)
			})

			if p.name == "watch" {
				t.Run("two requests that both read before either EXECs buy once", func(t *testing.T) {
					bothReadFirst(t, r)
				})
			}
		})
	}
}

// sameKeyAtOnce sends pairs of identical purchases (one key) through two
// nodes at the same moment: each pair must buy once and both must get the
// same answer.
func sameKeyAtOnce(t *testing.T, r *redistest.Redis, buy buyFunc) {
	const rounds = 15
	ctx := context.Background()
	ss := nodes(t, r, 2, Config{Shop: "twins"})
	require.NoError(t, ss[0].Stock(ctx, "gem", rounds, 3))
	grant(t, ss[0], "carol", 3*rounds)
	for i := range rounds {
		var got [2]Wallet
		var errs [2]error
		start := make(chan struct{})
		var wg sync.WaitGroup
		for j := range 2 {
			wg.Go(func() {
				<-start
				got[j], errs[j] = buy(ss[j], ctx, "carol", "gem", 1, fmt.Sprintf("key-%d", i))
			})
		}
		close(start)
		wg.Wait()
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		require.Equal(t, got[0], got[1], "round %d", i)
		require.Equal(t, Wallet{Balance: int64(3 * (rounds - i - 1)), Items: map[string]int64{"gem": int64(i + 1)}}, got[0], "round %d", i)
	}
	n, err := ss[0].Purchases(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(rounds), n)
	items, err := ss[1].Items(ctx)
	require.NoError(t, err)
	assert.Equal(t, []Item{{"gem", 0, 3}}, items)
}

// bothReadFirst holds two same-key purchases at their MULTI until both have
// read (and found no stored answer): the first EXEC wins, the second aborts,
// retries and replays the first answer.
func bothReadFirst(t *testing.T, r *redistest.Redis) {
	ctx := context.Background()
	var arrived sync.WaitGroup
	arrived.Add(2)
	ss := make([]*Shop, 2)
	for i := range ss {
		c := r.NewClient(t)
		var once sync.Once
		h := &conflictHook{touch: func(context.Context) error {
			once.Do(func() { arrived.Done(); arrived.Wait() })
			return nil
		}}
		h.n.Store(1)
		c.AddHook(h)
		ss[i] = New(c, Config{Prefix: r.Prefix, Shop: "barrier"})
	}
	admin := New(r.Client, Config{Prefix: r.Prefix, Shop: "barrier"}) // no hook: its MULTIs pass
	require.NoError(t, admin.Stock(ctx, "gem", 5, 2))
	grant(t, admin, "frank", 10)
	var got [2]Wallet
	var errs [2]error
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() { got[i], errs[i] = ss[i].Buy(ctx, "frank", "gem", 1, "same") })
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	assert.Equal(t, Wallet{Balance: 8, Items: map[string]int64{"gem": 1}}, got[0])
	assert.Equal(t, got[0], got[1])
	assert.Equal(t, int64(1), ss[0].retries.Load()+ss[1].retries.Load(), "the loser retried once")
	n, err := ss[0].Purchases(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
}

// conflictHook runs touch (a write from another client to a watched key)
// just before each of the first n MULTI/EXEC blocks, so those EXECs abort as
// if another buyer had won.
type conflictHook struct {
	touch func(ctx context.Context) error
	n     atomic.Int32
	fired func()
}

func (h *conflictHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *conflictHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}
func (h *conflictHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && cmds[0].Name() == "multi" && h.n.Add(-1) >= 0 {
			if err := h.touch(ctx); err != nil {
				return err
			}
			if h.fired != nil {
				h.fired()
			}
		}
		return next(ctx, cmds)
	}
}

func TestConflicts(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	admin := nodes(t, r, 1, Config{})[0]
	require.NoError(t, admin.Stock(ctx, "sword", 100, 10))
	grant(t, admin, "dave", 1000)

	// shopWith returns a Shop whose first n EXECs conflict.
	shopWith := func(t *testing.T, n int32, cfg Config) (*Shop, *conflictHook) {
		c := r.NewClient(t)
		h := &conflictHook{touch: func(ctx context.Context) error {
			return r.Client.HSet(ctx, admin.keys.item("sword"), "price", 10).Err()
		}}
		h.n.Store(n)
		c.AddHook(h)
		cfg.Prefix = r.Prefix
		cfg.MinBackoff = time.Microsecond
		return New(c, cfg), h
	}
	wallet := func(t *testing.T) Wallet {
		w, err := admin.Wallet(ctx, "dave")
		require.NoError(t, err)
		return w
	}

	t.Run("a few conflicts are retried and buy once", func(t *testing.T) {
		s, _ := shopWith(t, 3, Config{})
		before := wallet(t)
		w, err := s.Buy(ctx, "dave", "sword", 1, "")
		require.NoError(t, err)
		assert.Equal(t, before.Balance-10, w.Balance)
		assert.Equal(t, before.Items["sword"]+1, w.Items["sword"])
		assert.Equal(t, int64(3), s.retries.Load())
	})

	t.Run("endless conflicts end in ErrConflict after MaxRetries and buy nothing", func(t *testing.T) {
		s, _ := shopWith(t, 1000, Config{MaxRetries: 4})
		before := wallet(t)
		_, err := s.Buy(ctx, "dave", "sword", 1, "k")
		assert.ErrorIs(t, err, ErrConflict)
		assert.Equal(t, int64(4), s.retries.Load())
		assert.Equal(t, before, wallet(t))
		exists, err := r.Client.Exists(ctx, admin.keys.idem("dave", "k")).Result()
		require.NoError(t, err)
		assert.Zero(t, exists, "a conflict stores no answer: the client may retry")
	})

	t.Run("the Lua path never conflicts", func(t *testing.T) {
		s, _ := shopWith(t, 1000, Config{})
		_, err := s.BuyLua(ctx, "dave", "sword", 1, "")
		assert.NoError(t, err)
	})

	t.Run("grants retry conflicts too", func(t *testing.T) {
		c := r.NewClient(t)
		h := &conflictHook{touch: func(ctx context.Context) error {
			return r.Client.IncrBy(ctx, admin.keys.balance("erin"), 5).Err()
		}}
		h.n.Store(2)
		c.AddHook(h)
		s := New(c, Config{Prefix: r.Prefix, MinBackoff: time.Microsecond})
		b, err := s.Grant(ctx, "erin", 7)
		require.NoError(t, err)
		assert.Equal(t, int64(17), b, "each retry reads the balance again: 5 + 5 + 7")
		assert.Equal(t, int64(2), s.retries.Load())
	})

	t.Run("a cancelled context stops the backoff", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		s, h := shopWith(t, 1000, Config{MinBackoff: time.Hour, MaxBackoff: time.Hour})
		h.fired = cancel
		_, err := s.Buy(cctx, "dave", "sword", 1, "")
		assert.ErrorIs(t, err, context.Canceled)
	})
}
