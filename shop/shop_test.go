package shop

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/names"
)

func TestStockGrantWallet(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	s := nodes(t, r, 1, Config{})[0]

	t.Run("a new user has an empty wallet", func(t *testing.T) {
		w, err := s.Wallet(ctx, "nobody")
		require.NoError(t, err)
		assert.Equal(t, Wallet{Balance: 0, Items: map[string]int64{}}, w)
	})

	t.Run("grants add up", func(t *testing.T) {
		b, err := s.Grant(ctx, "alice", 500)
		require.NoError(t, err)
		assert.Equal(t, int64(500), b)
		b, err = s.Grant(ctx, "alice", 20)
		require.NoError(t, err)
		assert.Equal(t, int64(520), b)
	})

	t.Run("stock sets count and price, items lists them sorted", func(t *testing.T) {
		require.NoError(t, s.Stock(ctx, "sword", 10, 100))
		require.NoError(t, s.Stock(ctx, "axe", 0, 7))
		require.NoError(t, s.Stock(ctx, "sword", 3, 120), "a second Stock sets, not adds")
		items, err := s.Items(ctx)
		require.NoError(t, err)
		assert.Equal(t, []Item{{"axe", 0, 7}, {"sword", 3, 120}}, items)
	})

	t.Run("no items is an empty list", func(t *testing.T) {
		other := New(r.Client, Config{Prefix: r.Prefix, Shop: "empty"})
		items, err := other.Items(ctx)
		require.NoError(t, err)
		assert.Empty(t, items)
	})

	t.Run("purchase shows in wallet, items and counter", func(t *testing.T) {
		w, err := s.Buy(ctx, "alice", "sword", 2, "")
		require.NoError(t, err)
		assert.Equal(t, Wallet{Balance: 280, Items: map[string]int64{"sword": 2}}, w)
		got, err := s.Wallet(ctx, "alice")
		require.NoError(t, err)
		assert.Equal(t, w, got)
		items, err := s.Items(ctx)
		require.NoError(t, err)
		assert.Equal(t, []Item{{"axe", 0, 7}, {"sword", 1, 120}}, items)
		n, err := s.Purchases(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(1), n)
	})
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	s := nodes(t, r, 1, Config{})[0]

	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			user, item := "alice-"+p.name, "sword-"+p.name
			require.NoError(t, s.Stock(ctx, item, 5, 10))
			grant(t, s, user, 30)
			tests := []struct {
				name string
				user string
				item string
				qty  int64
				key  string
				want error
			}{
				{"zero qty is bad_value", user, item, 0, "", ErrBadValue},
				{"negative qty is bad_value", user, item, -1, "", ErrBadValue},
				{"qty above MaxQty is bad_value", user, item, MaxQty + 1, "", ErrBadValue},
				{"unknown item", user, "shield", 1, "", ErrUnknownItem},
				{"bad item name", user, "a}{b", 1, "", names.ErrBadName},
				{"bad user name", "al ice", item, 1, "", names.ErrBadName},
				{"key with a space", user, item, 1, "a b", ErrBadIdempotencyKey},
				{"key with non-ASCII", user, item, 1, "clé", ErrBadIdempotencyKey},
				{"key too long", user, item, 1, strings.Repeat("k", MaxIdempotencyKey+1), ErrBadIdempotencyKey},
				{"more than in stock is sold_out", user, item, 6, "", ErrSoldOut},
				{"more than the balance pays is insufficient_funds", user, item, 4, "", ErrInsufficientFunds},
				{"a refusal with a key is still a refusal", user, item, 4, "k", ErrInsufficientFunds},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					_, err := p.buy(s, ctx, tt.user, tt.item, tt.qty, tt.key)
					assert.ErrorIs(t, err, tt.want)
				})
			}

			t.Run("refusals change nothing", func(t *testing.T) {
				w, err := s.Wallet(ctx, user)
				require.NoError(t, err)
				assert.Equal(t, Wallet{Balance: 30, Items: map[string]int64{}}, w)
				items, err := s.Items(ctx)
				require.NoError(t, err)
				assert.Contains(t, items, Item{item, 5, 10})
				n, err := s.Purchases(ctx)
				require.NoError(t, err)
				assert.Zero(t, n)
			})
		})
	}

	t.Run("stock and grant values out of range", func(t *testing.T) {
		assert.ErrorIs(t, s.Stock(ctx, "sword", -1, 10), ErrBadValue)
		assert.ErrorIs(t, s.Stock(ctx, "sword", MaxStock+1, 10), ErrBadValue)
		assert.ErrorIs(t, s.Stock(ctx, "sword", 1, -1), ErrBadValue)
		assert.ErrorIs(t, s.Stock(ctx, "sword", 1, MaxPrice+1), ErrBadValue)
		assert.ErrorIs(t, s.Stock(ctx, "", 1, 1), names.ErrBadName)
		for _, amount := range []int64{0, -5, MaxBalance + 1} {
			_, err := s.Grant(ctx, "alice", amount)
			assert.ErrorIs(t, err, ErrBadValue, amount)
		}
		_, err := s.Grant(ctx, "a:b", 1)
		assert.ErrorIs(t, err, names.ErrBadName)
		_, err = s.Wallet(ctx, "*")
		assert.ErrorIs(t, err, names.ErrBadName)
	})

	t.Run("a grant past MaxBalance is refused and grants nothing", func(t *testing.T) {
		b, err := s.Grant(ctx, "rich", MaxBalance-1)
		require.NoError(t, err)
		require.Equal(t, int64(MaxBalance-1), b)
		b, err = s.Grant(ctx, "rich", 1)
		require.NoError(t, err, "up to MaxBalance exactly is fine")
		require.Equal(t, int64(MaxBalance), b)
		_, err = s.Grant(ctx, "rich", 1)
		assert.ErrorIs(t, err, ErrBalanceOverflow)
		w, err := s.Wallet(ctx, "rich")
		require.NoError(t, err)
		assert.Equal(t, int64(MaxBalance), w.Balance)
	})
}

func TestLargeNumbersAreExactOnBothPaths(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	s := nodes(t, r, 1, Config{})[0]
	require.NoError(t, s.Stock(ctx, "crown", MaxStock, MaxPrice))
	require.NoError(t, s.Stock(ctx, "pebble", MaxStock, 0))
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			user := "rich-" + p.name
			grant(t, s, user, MaxBalance)
			w, err := p.buy(s, ctx, user, "crown", 3, "")
			require.NoError(t, err)
			assert.Equal(t, int64(MaxBalance-3*MaxPrice), w.Balance)
			w, err = p.buy(s, ctx, user, "pebble", MaxQty, "")
			require.NoError(t, err)
			assert.Equal(t, Wallet{Balance: MaxBalance - 3*MaxPrice, Items: map[string]int64{"crown": 3, "pebble": MaxQty}}, w)
			_, err = p.buy(s, ctx, "poor-"+p.name, "crown", MaxQty, "")
			assert.ErrorIs(t, err, ErrInsufficientFunds, "a cost above 2^53 is refused, not rounded")
			got, err := s.Wallet(ctx, user)
			require.NoError(t, err)
			assert.Equal(t, w, got)
		})
	}
	items, err := s.Items(ctx)
	require.NoError(t, err)
	assert.Equal(t, []Item{{"crown", MaxStock - 6, MaxPrice}, {"pebble", MaxStock - 2*MaxQty, 0}}, items)
}

func TestWalletHookAndMetrics(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	var mu sync.Mutex
	var changed []string
	reg := prometheus.NewRegistry()
	cfg := Config{Registerer: reg, OnWalletChange: func(_ context.Context, user string) {
		mu.Lock()
		defer mu.Unlock()
		changed = append(changed, user)
	}}
	ss := nodes(t, r, 2, cfg) // two shops on one registry share its collectors
	s := ss[0]
	require.NoError(t, s.Stock(ctx, "sword", 1, 10))
	grant(t, s, "alice", 100)
	_, err := s.Buy(ctx, "alice", "sword", 1, "k1")
	require.NoError(t, err)
	_, err = ss[1].Buy(ctx, "alice", "sword", 1, "k1") // replay
	require.NoError(t, err)
	_, err = s.BuyLua(ctx, "alice", "sword", 1, "") // sold out
	require.ErrorIs(t, err, ErrSoldOut)

	assert.Equal(t, []string{"alice", "alice"}, changed, "a grant and one fresh purchase; no replay, no refusal")

	got := map[string]float64{}
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "," + l.GetValue()
			}
			got[name] = m.GetCounter().GetValue()
		}
	}
	assert.Equal(t, map[string]float64{
		"chatd_shop_purchases_total,watch,ok":       1,
		"chatd_shop_purchases_total,watch,replayed": 1,
		"chatd_shop_purchases_total,lua,sold_out":   1,
		"chatd_shop_tx_retries_total":               0,
		"chatd_shop_not_replicated_total":           0,
	}, got)
}
