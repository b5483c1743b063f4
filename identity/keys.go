package identity

import "github.com/chatd/chatd/internal/keyspace"

// The claim of a guest name lives in the user's unit {user:NAME}, next to
// the user's other keys (rate bucket, seen-filter, presence), so a user's
// keys share one Redis Cluster slot and claims spread over the shards.

// claimKey holds the id of the one session that holds the name.
func claimKey(s keyspace.Space, name string) string {
	return s.Key("user", name, "claim") // STRING session id, PX ttl
}
