package seen

import (
	"strconv"

	"github.com/chatd/chatd/internal/keyspace"
)

// Every key of one user's filter carries the hash tag {user:U}, so the
// generations of one user live in one Cluster slot and one script reads and
// writes them all. Generation number g lives in slot g mod Generations.

// bitsKey is the bitmap of generation slot `slot` of user's filter.
func bitsKey(s keyspace.Space, user string, slot int) string {
	return s.Key("user", user, "seen", strconv.Itoa(slot)) // string (bitmap of m bits)
}

// metaKey is the description of generation slot `slot` of user's filter:
// g (generation number), m (bits), k (hashes), c (capacity), n (items counted).
func metaKey(s keyspace.Space, user string, slot int) string {
	return s.Key("user", user, "seen", strconv.Itoa(slot), "meta") // hash
}

// userKeys returns the KEYS of both scripts: bits and meta of each slot in
// turn (KEYS[2s-1], KEYS[2s] in Lua for slot s-1).
func userKeys(s keyspace.Space, user string, generations int) []string {
	keys := make([]string, 0, 2*generations)
	for slot := 0; slot < generations; slot++ {
		keys = append(keys, bitsKey(s, user, slot), metaKey(s, user, slot))
	}
	return keys
}
