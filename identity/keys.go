package identity

import "github.com/chatd/chatd/internal/keyspace"

// The claim of a guest name and its revoked holders live in the user's unit
// {user:NAME}, NAME being the canonical form (names.Canonical), next to the
// user's other keys (rate bucket, seen-filter, presence), so a user's keys
// share one Redis Cluster slot, the scripts touch both in one slot, and
// claims spread over the shards.

// claimKey holds the id of the one holder of the name; user is canonical.
func claimKey(s keyspace.Space, user string) string {
	return s.Key("user", user, "claim") // STRING holder id, PX ttl
}

// revokedKey holds the signed-out holders of the name until their tokens
// expire; user is canonical.
func revokedKey(s keyspace.Space, user string) string {
	return s.Key("user", user, "revoked") // ZSET holder -> token expiry ms, PEXPIREAT the latest
}

// eventsChannel carries every sign-out and fresh claim to every node.
func eventsChannel(s keyspace.Space) string {
	return s.Global("identity", "events") // CHANNEL JSON Event
}

// connsKey holds the WebSocket leases of one client address; addr is what
// RateKey returns ("ip4-7f000001", "ip6-20010db800000000"), so the unit is
// {ip:ip4-7f000001} and an IPv6 /64 is one address.
func connsKey(s keyspace.Space, addr string) string {
	return s.Key("ip", addr, "conns") // ZSET conn id -> lease end ms, PX lease
}

// connsMarkKey holds what the last full count of addr's leases found
// (conns_admit.lua): "<until ms> <live runs>", in the same unit as
// connsKey. While the live runs are the same and until has not come,
// every lease in connsKey counts, and an admission needs no full count.
func connsMarkKey(s keyspace.Space, addr string) string {
	return s.Key("ip", addr, "connsmark") // STRING, PX keep
}
