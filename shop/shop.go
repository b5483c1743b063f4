package shop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/names"
)

// Limits on the numbers clients send. Balances and counts stay at or below
// 2^53-1, the largest integer a JSON number keeps exactly in JavaScript (and
// in Redis' Lua, whose numbers are doubles); every product below stays far
// inside int64.
const (
	MaxQty            = 1_000_000         // units per purchase
	MaxPrice          = 1_000_000_000_000 // coins per unit
	MaxStock          = 1<<53 - 1         // units in stock
	MaxBalance        = 1<<53 - 1         // coins in one wallet; a grant beyond is refused
	MaxIdempotencyKey = 128               // bytes of an Idempotency-Key
)

// Config configures a Shop. The zero value is usable.
type Config struct {
	// Prefix is the key prefix; "" = keyspace.DefaultPrefix.
	Prefix string
	// Shop names the hash-tag unit {shop:NAME} holding all of this shop's
	// keys (one Redis Cluster slot); "" = "main". Deployments that outgrow
	// one slot run several shops (per region, per game) under different
	// names. It must be a valid item name; New panics otherwise.
	Shop string
	// MaxRetries bounds how often a transaction whose watched keys changed
	// is retried before ErrConflict; 0 = 20, negative = no retry.
	MaxRetries int
	// MinBackoff is the ceiling of the first retry's random wait, doubled per
	// retry up to MaxBackoff ("full jitter"); 0 = 2ms.
	MinBackoff time.Duration
	// MaxBackoff caps a retry's random wait; 0 = 200ms. (BenchmarkRetryPolicy:
	// shorter waits make hammering buyers collide again and lose more.)
	MaxBackoff time.Duration
	// IdempotencyTTL is how long the first answer to a purchase with an
	// Idempotency-Key is kept; 0 = 24h.
	IdempotencyTTL time.Duration
	// OnWalletChange, if set, is called after a grant or a purchase changed
	// user's wallet (not after a replayed answer or a refusal), on the
	// caller's goroutine: wire the dirty/ wallet bit here. nil = no call.
	OnWalletChange func(ctx context.Context, user string)
	// Durability, when set, is read at each purchase, grant and restock:
	// DurabilityReplica acks one only once a replica holds it too (WAIT 1
	// on the write's connection, for DurabilityTimeout), else it returns
	// an error wrapping ErrNotReplicated, the write applied all the same;
	// any other value (DurabilityNone), or nil, acks once the master
	// applied it. chatd reads the live setting shop.durability.
	Durability func() string
	// DurabilityTimeout is how long a write waits for a replica under
	// DurabilityReplica; 0 = DefaultDurabilityTimeout.
	DurabilityTimeout time.Duration
	// Registerer receives the shop's metrics; nil = not registered.
	Registerer prometheus.Registerer
}

// Shop sells items for coins. It is safe for concurrent use; every node
// builds its own over its own client and they share the state in Redis.
type Shop struct {
	rdb     redis.UniversalClient
	keys    keys
	cfg     Config
	metrics *metrics
	retries atomic.Int64 // transaction retries since New, for benchmarks
}

// New returns a Shop over rdb. It panics if cfg.Shop is not a valid name.
func New(rdb redis.UniversalClient, cfg Config) *Shop {
	if cfg.Shop == "" {
		cfg.Shop = "main"
	}
	if err := names.Item(cfg.Shop); err != nil {
		panic(fmt.Sprintf("shop: Config.Shop: %v", err))
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 20
	}
	if cfg.MaxRetries < 0 {
		cfg.MaxRetries = 0
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 2 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 200 * time.Millisecond
	}
	cfg.MaxBackoff = max(cfg.MaxBackoff, cfg.MinBackoff)
	if cfg.IdempotencyTTL <= 0 {
		cfg.IdempotencyTTL = 24 * time.Hour
	}
	if cfg.DurabilityTimeout <= 0 {
		cfg.DurabilityTimeout = DefaultDurabilityTimeout
	}
	return &Shop{
		rdb:     rdb,
		keys:    keys{ks: keyspace.New(cfg.Prefix), shop: cfg.Shop},
		cfg:     cfg,
		metrics: newMetrics(cfg.Registerer),
	}
}

// Item is one stocked item, as listed for UIs.
type Item struct {
	Name  string `json:"item"`
	Stock int64  `json:"stock"`
	Price int64  `json:"price"`
}

// Wallet is a user's coins and items.
type Wallet struct {
	Balance int64            `json:"balance"`
	Items   map[string]int64 `json:"items"`
}

// Stock sets item's available count to stock and its unit price to price,
// creating the item if needed. It sets, not adds: an admin restocking says
// how many are for sale now. A purchase racing with it is retried against
// the new values (the item is watched), so none is lost or doubled.
// Errors: names.ErrBadName, ErrBadValue (stock outside 0..MaxStock, price
// outside 0..MaxPrice), ErrNotReplicated (see Config.Durability).
func (s *Shop) Stock(ctx context.Context, item string, stock, price int64) error {
	if err := names.Item(item); err != nil {
		return fmt.Errorf("shop: stock: %w", err)
	}
	if stock < 0 || stock > MaxStock {
		return fmt.Errorf("shop: stock %s: %w: stock must be an integer from 0 to %d; got %d", item, ErrBadValue, int64(MaxStock), stock)
	}
	if price < 0 || price > MaxPrice {
		return fmt.Errorf("shop: stock %s: %w: price must be an integer from 0 to %d; got %d", item, ErrBadValue, int64(MaxPrice), price)
	}
	write := func(p redis.Pipeliner) error {
		p.HSet(ctx, s.keys.item(item), "stock", stock, "price", price)
		p.SAdd(ctx, s.keys.items(), item)
		return nil
	}
	var err error
	if s.durable() {
		err = s.pinned(ctx, s.keys.item(item), func(tx *redis.Tx) error {
			if _, err := tx.TxPipelined(ctx, write); err != nil {
				return err
			}
			return s.replicated(ctx, tx)
		})
	} else {
		_, err = s.rdb.TxPipelined(ctx, write)
	}
	if err != nil {
		return fmt.Errorf("shop: stock %s: %w", item, err)
	}
	return nil
}

// Grant adds amount coins to user's balance and returns the new balance.
// Errors: names.ErrBadName, ErrBadValue (amount outside 1..MaxBalance),
// ErrBalanceOverflow (the balance would exceed MaxBalance; nothing is
// granted), ErrConflict, ErrNotReplicated (see Config.Durability) with
// the balance after the grant, which was made.
func (s *Shop) Grant(ctx context.Context, user string, amount int64) (int64, error) {
	return s.GrantWith(ctx, user, amount, "")
}

// GrantWith is Grant with an idempotency key (none when ""): the first
// grant of amount to user under key is recorded in the same EXEC, for
// Config.IdempotencyTTL, and a later GrantWith with that key answers the
// balance the first one left and grants nothing, even when both run at
// once. A grant whose answer was lost (a timeout: Redis may have applied
// it) is therefore retried safely with its key; without one a retry may
// grant twice. The key is scoped to user, apart from purchases' keys.
// Errors: Grant's, ErrBadIdempotencyKey, ErrIdempotencyMismatch (key was
// used for another amount).
func (s *Shop) GrantWith(ctx context.Context, user string, amount int64, key string) (int64, error) {
	if err := names.User(user); err != nil {
		return 0, fmt.Errorf("shop: grant: %w", err)
	}
	if amount <= 0 || amount > MaxBalance {
		return 0, fmt.Errorf("shop: grant %s: %w: amount must be an integer from 1 to %d; got %d", user, ErrBadValue, int64(MaxBalance), amount)
	}
	if err := checkKey(key); err != nil {
		return 0, fmt.Errorf("shop: grant %s: %w", user, err)
	}
	bkey := s.keys.balance(user)
	watched := []string{bkey}
	gkey := ""
	if key != "" {
		gkey = s.keys.granted(user, key)
		watched = append(watched, gkey)
	}
	var balance int64
	err := s.transact(ctx, func(tx *redis.Tx) error {
		var bal, prior *redis.StringCmd
		_, err := tx.Pipelined(ctx, func(p redis.Pipeliner) error {
			bal = p.Get(ctx, bkey)
			if gkey != "" {
				prior = p.Get(ctx, gkey)
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		if prior != nil && prior.Err() == nil {
			// "<amount> <balance after>": the first answer
			var was, after int64
			if _, err := fmt.Sscanf(prior.Val(), "%d %d", &was, &after); err != nil {
				return fmt.Errorf("grant record %q: %w", prior.Val(), err)
			}
			if was != amount {
				return fmt.Errorf("%w: key %q granted %d, not %d", ErrIdempotencyMismatch, key, was, amount)
			}
			balance = after
			if s.durable() {
				return s.replayed(ctx, tx, gkey, prior.Val())
			}
			return nil
		}
		cur, err := bal.Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		if cur > MaxBalance-amount {
			return ErrBalanceOverflow
		}
		balance = cur + amount
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.IncrBy(ctx, bkey, amount)
			if gkey != "" {
				p.Set(ctx, gkey, fmt.Sprintf("%d %d", amount, balance), s.cfg.IdempotencyTTL)
			}
			return nil
		})
		if err == nil && s.durable() {
			return s.replicated(ctx, tx)
		}
		return err
	}, watched...)
	if errors.Is(err, ErrNotReplicated) {
		s.changed(ctx, user) // granted all the same
		return balance, fmt.Errorf("shop: grant %s: %w", user, err)
	}
	if err != nil {
		return 0, fmt.Errorf("shop: grant %s: %w", user, err)
	}
	// A repeat marks the wallet again: it may be the retry of a grant whose
	// answer was lost, whose caller never marked it.
	s.changed(ctx, user)
	return balance, nil
}

// Wallet returns user's balance and items, read in one MULTI/EXEC so the two
// agree. A user the shop never saw has an empty wallet.
// Errors: names.ErrBadName.
func (s *Shop) Wallet(ctx context.Context, user string) (Wallet, error) {
	if err := names.User(user); err != nil {
		return Wallet{}, fmt.Errorf("shop: wallet: %w", err)
	}
	var bal *redis.StringCmd
	var inv *redis.MapStringStringCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		bal = p.Get(ctx, s.keys.balance(user))
		inv = p.HGetAll(ctx, s.keys.inventory(user))
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return Wallet{}, fmt.Errorf("shop: wallet %s: %w", user, err)
	}
	w, err := walletOf(bal, inv)
	if err != nil {
		return Wallet{}, fmt.Errorf("shop: wallet %s: %w", user, err)
	}
	return w, nil
}

// walletOf decodes a balance GET and an inventory HGETALL.
func walletOf(bal *redis.StringCmd, inv *redis.MapStringStringCmd) (Wallet, error) {
	w := Wallet{Items: map[string]int64{}}
	if err := bal.Err(); err != nil && !errors.Is(err, redis.Nil) {
		return w, err
	}
	if bal.Err() == nil {
		n, err := bal.Int64()
		if err != nil {
			return w, err
		}
		w.Balance = n
	}
	m, err := inv.Result()
	if err != nil {
		return w, err
	}
	for item, v := range m {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return w, fmt.Errorf("inventory %s: %w", item, err)
		}
		w.Items[item] = n
	}
	return w, nil
}

// Items lists every stocked item, sorted by name, sold-out ones included.
// It takes two round trips (SMEMBERS, then one pipeline of HMGETs).
func (s *Shop) Items(ctx context.Context) ([]Item, error) {
	list, err := s.rdb.SMembers(ctx, s.keys.items()).Result()
	if err != nil {
		return nil, fmt.Errorf("shop: items: %w", err)
	}
	slices.Sort(list)
	cmds := make([]*redis.SliceCmd, len(list))
	if len(list) > 0 {
		_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, name := range list {
				cmds[i] = p.HMGet(ctx, s.keys.item(name), "stock", "price")
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("shop: items: %w", err)
		}
	}
	items := make([]Item, 0, len(list))
	for i, name := range list {
		v := cmds[i].Val()
		stock, ok1 := v[0].(string)
		price, ok2 := v[1].(string)
		if !ok1 || !ok2 {
			continue // listed but its hash is gone (e.g. evicted): not for sale
		}
		it := Item{Name: name}
		if it.Stock, err = strconv.ParseInt(stock, 10, 64); err == nil {
			it.Price, err = strconv.ParseInt(price, 10, 64)
		}
		if err != nil {
			return nil, fmt.Errorf("shop: items: %s: %w", name, err)
		}
		items = append(items, it)
	}
	return items, nil
}

// Purchases returns how many purchases succeeded in this shop, from its INCR
// counter (0 before the first).
func (s *Shop) Purchases(ctx context.Context) (int64, error) {
	n, err := s.rdb.Get(ctx, s.keys.purchases()).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("shop: purchases: %w", err)
	}
	return n, nil
}

// changed reports a changed wallet to the configured hook.
func (s *Shop) changed(ctx context.Context, user string) {
	if s.cfg.OnWalletChange != nil {
		s.cfg.OnWalletChange(ctx, user)
	}
}
