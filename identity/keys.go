package identity

import "github.com/chatd/chatd/internal/keyspace"

// The claim of a guest name lives in the user's unit {user:NAME}, next to
// the user's other keys (rate bucket, seen-filter, presence), so a user's
// keys share one Redis Cluster slot and claims spread over the shards.

// claimKey holds the id of the one session that holds the name.
func claimKey(s keyspace.Space, name string) string {
	return s.Key("user", name, "claim") // STRING session id, PX ttl
}

// connsKey holds the WebSocket leases of one client address; addr is what
// RateKey returns ("ip4-7f000001", "ip6-20010db800000000"), so the unit is
// {ip:ip4-7f000001} and an IPv6 /64 is one address.
func connsKey(s keyspace.Space, addr string) string {
	return s.Key("ip", addr, "conns") // ZSET conn id -> lease end ms, PX lease
}
