package shop

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Values of Config.Durability.
const (
	// DurabilityNone acks a write once the master applied it.
	DurabilityNone = "none"
	// DurabilityReplica acks a write once a replica holds it too (WAIT).
	DurabilityReplica = "replica"
)

// DefaultDurabilityTimeout is how long a write waits for a replica's
// acknowledgement when Config.DurabilityTimeout is 0.
const DefaultDurabilityTimeout = time.Second

// Why a wallet write waits for a replica, and how.
//
// Redis replicates asynchronously: a master acks a write before any
// replica has it, and a failover in between (the master dies, a replica is
// promoted) loses it, although the buyer was told "bought". For coins and
// items that is a purchase paid for and gone, or a grant an admin saw
// succeed and the player never got. [WAIT] 1 blocks until at least one
// replica acknowledged every write made so far on the same connection, so
// it must follow the writes on theirs: a purchase's and a grant's already
// run on one connection (their WATCH), a restock and BuyLua are given one
// (pinned). A WAIT that times out does not undo anything: the write stays
// applied, and the caller gets ErrNotReplicated with it.
//
// An answer replayed from an idempotency record must not be acked on
// weaker grounds than the first: the usual retry of a purchase answered
// ErrNotReplicated is that very replay. WAIT is documented to cover the
// writes of its own connection, and a replay writes nothing. Redis 7.0.15
// happens to do more: after any command a connection's WAIT covers every
// write made so far, by anyone (measured with redis-cli, the only replica
// stopped, another connection's write unacknowledged: a WAIT sent first
// on a fresh connection answered 1 at once; one sent after a PING
// waited and answered 0). go-redis opens each connection with HELLO, so
// its WAITs wait there. A replay under DurabilityReplica does not rely on
// that: it rewrites its record unchanged (SET KEEPTTL XX: same value,
// same expiry) before its WAIT, and since replication is in order, a
// replica that holds the rewrite holds the first write too.

// durable reports whether writes wait for a replica now.
func (s *Shop) durable() bool {
	return s.cfg.Durability != nil && s.cfg.Durability() == DurabilityReplica
}

// replicated sends WAIT 1 on tx's connection, after its writes: nil when a
// replica acknowledged them within Config.DurabilityTimeout, else an error
// wrapping ErrNotReplicated.
func (s *Shop) replicated(ctx context.Context, tx *redis.Tx) error {
	n, err := tx.Wait(ctx, 1, s.cfg.DurabilityTimeout).Result()
	switch {
	case err != nil:
		s.metrics.notReplicated.Inc()
		return fmt.Errorf("%w: WAIT: %v", ErrNotReplicated, err)
	case n < 1:
		s.metrics.notReplicated.Inc()
		return fmt.Errorf("%w: no replica acknowledged within %v", ErrNotReplicated, s.cfg.DurabilityTimeout)
	}
	return nil
}

// replayed is replicated for an answer replayed from the record at key
// (raw, its value): the record is rewritten unchanged first, so that the
// WAIT covers the first write (see above). A record gone meanwhile (XX
// finds nothing: it expired) is a replay all the same.
func (s *Shop) replayed(ctx context.Context, tx *redis.Tx, key, raw string) error {
	if err := tx.SetArgs(ctx, key, raw, redis.SetArgs{KeepTTL: true, Mode: "XX"}).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	return s.replicated(ctx, tx)
}

// pinned runs fn on one connection of the master that holds key, for
// writes that a WAIT sent by fn on the same connection must cover. (A
// WATCH picks the connection, on a Cluster the key's master's, and is
// dropped at once: nothing fn does can make it fail.)
func (s *Shop) pinned(ctx context.Context, key string, fn func(tx *redis.Tx) error) error {
	return s.rdb.Watch(ctx, func(tx *redis.Tx) error {
		if err := tx.Unwatch(ctx).Err(); err != nil {
			return err
		}
		return fn(tx)
	}, key)
}
