package shop

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/names"
)

// Counters are deployment-wide INCR counters (messages, rooms, …) that every
// node bumps and GET /api/v1/stats reads. Each counter is its own key in its
// own slot, {counter:NAME}, so a counter never forces other keys onto its
// slot and a cluster spreads them. The shop's purchase counter is not one of
// them: it is bumped inside the purchase transaction and so lives in the
// shop's slot (Shop.Purchases).
type Counters struct {
	rdb redis.UniversalClient
	ks  keyspace.Space
}

// NewCounters returns the counters under prefix ("" = keyspace.DefaultPrefix).
func NewCounters(rdb redis.UniversalClient, prefix string) *Counters {
	return &Counters{rdb: rdb, ks: keyspace.New(prefix)}
}

// Incr adds one to counter name and returns its new value. INCR is atomic on
// the server, so concurrent nodes need no lock and lose no count.
// Errors: names.ErrBadName (name must be a valid item-style name).
func (c *Counters) Incr(ctx context.Context, name string) (int64, error) {
	if err := names.Item(name); err != nil {
		return 0, fmt.Errorf("shop: counter: %w", err)
	}
	n, err := c.rdb.Incr(ctx, counterKey(c.ks, name)).Result()
	if err != nil {
		return 0, fmt.Errorf("shop: counter %s: %w", name, err)
	}
	return n, nil
}

// Get returns the values of the named counters in one pipeline (on a
// cluster, one round trip per master holding one); a counter never bumped
// is 0. Errors: names.ErrBadName.
func (c *Counters) Get(ctx context.Context, counters ...string) (map[string]int64, error) {
	out := make(map[string]int64, len(counters))
	if len(counters) == 0 {
		return out, nil
	}
	for _, name := range counters {
		if err := names.Item(name); err != nil {
			return nil, fmt.Errorf("shop: counter: %w", err)
		}
	}
	cmds := make([]*redis.StringCmd, len(counters))
	_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, name := range counters {
			cmds[i] = p.Get(ctx, counterKey(c.ks, name))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("shop: counters: %w", err)
	}
	for i, name := range counters {
		n, err := cmds[i].Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("shop: counter %s: %w", name, err)
		}
		out[name] = n
	}
	return out, nil
}
