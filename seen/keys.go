package seen

import (
	"strconv"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/names"
)

// Every key of one user's filter carries the hash tag {user:U}, so the
// generations of one user live in one Cluster slot and one script reads and
// writes them all. Generation number g keeps its bits in slot g mod
// slots(Generations). (The layout before scalable filters, seen:<slot> and
// seen:<slot>:meta, shares no key name with this one; its keys run out with
// their TTL.)

// metaKey describes user's filter: one field per kept generation g, "<g>" =
// "m k c n" (bits, hashes, capacity, items counted).
func metaKey(s keyspace.Space, user string) string {
	return s.Key("user", names.Canonical(user), "seen") // hash
}

// bitsKey is the bitmap of the generation in slot `slot` of user's filter.
func bitsKey(s keyspace.Space, user string, slot int) string {
	return s.Key("user", names.Canonical(user), "seen", "b"+strconv.Itoa(slot)) // string (bitmap of m bits)
}

// userKeys returns the KEYS of both scripts: the description, then the bits
// of each slot (KEYS[1] and KEYS[2+s] in Lua for slot s).
func userKeys(s keyspace.Space, user string, slots int) []string {
	keys := make([]string, 0, 1+slots)
	keys = append(keys, metaKey(s, user))
	for slot := 0; slot < slots; slot++ {
		keys = append(keys, bitsKey(s, user, slot))
	}
	return keys
}
