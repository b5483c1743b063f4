package ranking

import "github.com/chatd/chatd/internal/keyspace"

// Keys of one board (or one period of a periodic board). All share the hash
// tag {lb:<id>}, id being the board name, or "name@daily:2026-11-30" /
// "name@weekly:2026-W49" for a period, so the post script may touch them
// together on one Cluster slot.

// boardKey is the board's ordering: members rev:seq:player, all with score 0.
func boardKey(sp keyspace.Space, id string) string { return sp.Key("lb", id, "z") } // ZSET

// playersKey maps a player's canonical name to its member: the rev:seq
// part alone when the member's player is the canonical name, else the
// whole member (see encoding.go).
func playersKey(sp keyspace.Space, id string) string { return sp.Key("lb", id, "h") } // HASH

// seqKey counts the board's score changes; its INCR orders equal scores.
func seqKey(sp keyspace.Space, id string) string { return sp.Key("lb", id, "seq") } // STRING (integer)

// idemKey is the first answer to a post with an idempotency key, for
// IdempotencyTTL: scope is whose key it is ("" for none; it holds no ':'),
// key the key as the client sent it.
func idemKey(sp keyspace.Space, id, scope, key string) string {
	return sp.Key("lb", id, "idem", scope, key) // STRING JSON record, PX IdempotencyTTL
}
