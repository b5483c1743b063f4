package match

import (
	"hash/maphash"
	"sync"
	"time"
)

// recent remembers the payloads of the matchmaking channel this node
// delivered lately, by a 64-bit hash, so that a payload published twice
// reaches each connection once. It is published twice in ordinary
// operation: go-redis sends Notify's pipeline again when its answer is late
// (the first copy may have run), and a matcher's hook runs again when its
// holder died before its ack. Each event carries its ticket and time, so
// two payloads alike are one notice. The per-user lists (Events, the poll's
// match section) are deduplicated in Redis already; this is the live path.
type recent struct {
	mu    sync.Mutex
	seed  maphash.Seed
	seen  map[uint64]struct{}
	order []seenAt // oldest first
}

type seenAt struct {
	h  uint64
	at time.Time
}

// recentKeep and recentMax bound what recent remembers: a retry comes
// within redisx.CallBound, a hook's rerun within a matcher's lease.
const (
	recentKeep = time.Minute
	recentMax  = 4096
)

func newRecent() *recent {
	return &recent{seed: maphash.MakeSeed(), seen: map[uint64]struct{}{}}
}

// first reports whether p was not delivered within recentKeep before now,
// and remembers it.
func (r *recent) first(p []byte, now time.Time) bool {
	h := maphash.Bytes(r.seed, p)
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.order) > 0 && (len(r.order) >= recentMax || now.Sub(r.order[0].at) > recentKeep) {
		delete(r.seen, r.order[0].h)
		r.order = r.order[1:]
	}
	if _, ok := r.seen[h]; ok {
		return false
	}
	r.seen[h] = struct{}{}
	r.order = append(r.order, seenAt{h, now})
	return true
}
