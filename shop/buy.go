package shop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/names"
)

// record is the outcome of one purchase, stored as JSON under its
// idempotency key by both purchase paths (the Lua script writes the same
// shape by hand).
type record struct {
	Item   string  `json:"item"`
	Qty    int64   `json:"qty"`
	Error  string  `json:"error,omitempty"` // sold_out, insufficient_funds, unknown_item
	Wallet *Wallet `json:"wallet,omitempty"`
	// what a refusal saw, for its message: the stock, or the balance and
	// the cost of the purchase
	Stock   int64 `json:"stock,omitempty"`
	Balance int64 `json:"balance,omitempty"`
	Cost    int64 `json:"cost,omitempty"`
}

// Buy buys qty units of item for user with an optimistic transaction: WATCH
// the item, the buyer's balance and inventory (and idempotency record), read
// them in one pipeline, check, then MULTI: take the stock, debit the coins,
// add the items, INCR the purchase counter, store the answer; EXEC. If a
// watched key changed in between, EXEC does nothing and Buy retries with
// jittered backoff, at most Config.MaxRetries times.
//
// With a non-empty idemKey, the first answer for (user, idemKey) — the
// wallet or a refusal — is stored in the same EXEC for
// Config.IdempotencyTTL, and a later Buy with that key returns it without
// buying again, even when both run at once.
//
// It returns the wallet after the purchase. Errors: names.ErrBadName,
// ErrBadValue (qty outside 1..MaxQty), ErrBadIdempotencyKey,
// ErrUnknownItem, ErrSoldOut, ErrInsufficientFunds, ErrIdempotencyMismatch
// (idemKey was used for another item or qty), ErrConflict, and
// ErrNotReplicated (see Config.Durability) with the wallet after the
// purchase, which was made.
func (s *Shop) Buy(ctx context.Context, user, item string, qty int64, idemKey string) (Wallet, error) {
	if err := checkBuy(user, item, qty, idemKey); err != nil {
		return Wallet{}, err
	}
	k := s.keys
	itemKey, balKey, invKey, idemKey2 := k.item(item), k.balance(user), k.inventory(user), ""
	watched := []string{itemKey, balKey, invKey}
	if idemKey != "" {
		idemKey2 = k.idem(user, idemKey)
		watched = append(watched, idemKey2)
	}
	var rec record
	var fresh bool
	err := s.transact(ctx, func(tx *redis.Tx) error {
		var (
			fields *redis.SliceCmd
			bal    *redis.StringCmd
			inv    *redis.MapStringStringCmd
			prior  *redis.StringCmd
		)
		_, err := tx.Pipelined(ctx, func(p redis.Pipeliner) error {
			fields = p.HMGet(ctx, itemKey, "stock", "price")
			bal = p.Get(ctx, balKey)
			inv = p.HGetAll(ctx, invKey)
			if idemKey2 != "" {
				prior = p.Get(ctx, idemKey2)
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		if prior != nil && prior.Err() == nil {
			fresh, rec = false, record{} // no field left from an aborted attempt
			if err := json.Unmarshal([]byte(prior.Val()), &rec); err != nil {
				return err
			}
			if rec.Error == "" && rec.Item == item && rec.Qty == qty && s.durable() {
				return s.replayed(ctx, tx, idemKey2, prior.Val())
			}
			return nil
		}
		wallet, err := walletOf(bal, inv)
		if err != nil {
			return err
		}
		fresh = true
		rec, err = decide(item, qty, fields.Val(), wallet)
		if err != nil {
			return err
		}
		if rec.Error != "" && idemKey2 == "" {
			return nil // a refusal with no answer to keep writes nothing
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			if rec.Error == "" {
				p.HIncrBy(ctx, itemKey, "stock", -qty)
				p.DecrBy(ctx, balKey, wallet.Balance-rec.Wallet.Balance)
				p.HIncrBy(ctx, invKey, item, qty)
				p.Incr(ctx, k.purchases())
			}
			if idemKey2 != "" {
				raw, err := json.Marshal(rec)
				if err != nil {
					return err
				}
				p.Set(ctx, idemKey2, raw, s.cfg.IdempotencyTTL)
			}
			return nil
		})
		// A refusal's record needs no replica: lost, the retry decides
		// again and buys nothing the buyer was told of.
		if err == nil && rec.Error == "" && s.durable() {
			return s.replicated(ctx, tx)
		}
		return err
	}, watched...)
	return s.finish(ctx, "watch", user, item, qty, rec, fresh, err)
}

// decide checks one purchase against the item's HMGET stock, price and the
// buyer's wallet, and returns its outcome with the wallet after it.
func decide(item string, qty int64, fields []any, w Wallet) (record, error) {
	rec := record{Item: item, Qty: qty}
	s, ok1 := fields[0].(string)
	p, ok2 := fields[1].(string)
	if !ok1 || !ok2 {
		rec.Error = codeUnknownItem
		return rec, nil
	}
	stock, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return rec, fmt.Errorf("stock of %s: %w", item, err)
	}
	price, err := strconv.ParseInt(p, 10, 64)
	if err != nil {
		return rec, fmt.Errorf("price of %s: %w", item, err)
	}
	cost := qty * price // ≤ MaxQty × MaxPrice = 1e18 < 2^63
	switch {
	case stock < qty:
		rec.Error, rec.Stock = codeSoldOut, stock
	case w.Balance < cost:
		rec.Error, rec.Balance, rec.Cost = codeInsufficient, w.Balance, cost
	default:
		w.Balance -= cost
		w.Items[item] += qty
		rec.Wallet = &w
	}
	return rec, nil
}

// finish turns a purchase's outcome into Buy's answer, counts it and tells
// the wallet hook about a fresh purchase.
func (s *Shop) finish(ctx context.Context, path, user, item string, qty int64, rec record, fresh bool, err error) (Wallet, error) {
	if err == nil && (rec.Item != item || rec.Qty != qty) {
		err = ErrIdempotencyMismatch
	}
	if err == nil && rec.Error != "" {
		err = refusal(rec)
	}
	if err == nil && rec.Wallet == nil {
		err = errors.New("stored purchase has neither wallet nor error")
	}
	s.metrics.count(path, fresh, err)
	// Not replicated is bought all the same (a replica's WAIT follows only
	// a purchase made): the wallet is told, and returned with the error.
	if err != nil && !(errors.Is(err, ErrNotReplicated) && rec.Wallet != nil) {
		return Wallet{}, fmt.Errorf("shop: buy %d %s for %s: %w", qty, item, user, err)
	}
	if fresh {
		s.changed(ctx, user)
	}
	if rec.Wallet.Items == nil {
		rec.Wallet.Items = map[string]int64{}
	}
	if err != nil {
		err = fmt.Errorf("shop: buy %d %s for %s: %w", qty, item, user, err)
	}
	return *rec.Wallet, err
}

// checkBuy validates a purchase's client-sent values.
func checkBuy(user, item string, qty int64, idemKey string) error {
	if err := names.User(user); err != nil {
		return fmt.Errorf("shop: buy: %w", err)
	}
	if err := names.Item(item); err != nil {
		return fmt.Errorf("shop: buy: %w", err)
	}
	if qty <= 0 || qty > MaxQty {
		return fmt.Errorf("shop: buy %s: %w: qty must be an integer from 1 to %d; got %d", item, ErrBadValue, MaxQty, qty)
	}
	if err := checkKey(idemKey); err != nil {
		return fmt.Errorf("shop: buy %s: %w", item, err)
	}
	return nil
}

// checkKey checks an idempotency key: "" (none), or 1 to MaxIdempotencyKey
// printable ASCII bytes without spaces.
func checkKey(key string) error {
	if len(key) > MaxIdempotencyKey {
		return fmt.Errorf("idempotency key longer than %d bytes: %w", MaxIdempotencyKey, ErrBadIdempotencyKey)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("idempotency key holds byte %#x: %w", c, ErrBadIdempotencyKey)
		}
	}
	return nil
}

// transact runs fn under WATCH keys until its EXEC commits, fn returns
// another outcome, or Config.MaxRetries retries failed (ErrConflict).
func (s *Shop) transact(ctx context.Context, fn func(*redis.Tx) error, keys ...string) error {
	for attempt := 0; ; attempt++ {
		err := s.rdb.Watch(ctx, fn, keys...)
		if !errors.Is(err, redis.TxFailedErr) {
			return err
		}
		if attempt >= s.cfg.MaxRetries {
			return ErrConflict
		}
		s.retries.Add(1)
		s.metrics.retries.Inc()
		t := time.NewTimer(s.backoff(attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// backoff is the random wait before retry attempt+1: uniform in
// [0, min(MaxBackoff, MinBackoff·2^attempt)) ("full jitter"), so buyers that
// collided once spread out instead of colliding again in lockstep.
func (s *Shop) backoff(attempt int) time.Duration {
	ceil := s.cfg.MinBackoff
	for i := 0; i < attempt && ceil < s.cfg.MaxBackoff; i++ {
		ceil *= 2
	}
	return rand.N(min(ceil, s.cfg.MaxBackoff)) + 1
}
