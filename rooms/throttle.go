package rooms

import (
	"sync"
	"time"
)

// refreshes remembers, per history ("lobby/seq"), when this node last
// refreshed its TTL, so that a refresh runs at most once per period: a
// PEXPIRE on every Renew tick or every send bought nothing against a TTL
// of a day. Marks older than two periods are swept once the map holds
// more than 4,096, at most once per period.
type refreshes struct {
	mu    sync.Mutex
	at    map[string]time.Time
	swept time.Time
}

// due reports whether k is due a refresh at now (not refreshed within
// every, or marked at a later time than now: a clock that went back) and,
// if so, marks it refreshed.
func (r *refreshes) due(now time.Time, k string, every time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.at == nil {
		r.at = map[string]time.Time{}
	}
	if len(r.at) > 4096 && now.Sub(r.swept) > every {
		for k, at := range r.at {
			if now.Sub(at) > 2*every {
				delete(r.at, k)
			}
		}
		r.swept = now
	}
	if at, ok := r.at[k]; ok && now.Sub(at) >= 0 && now.Sub(at) < every {
		return false
	}
	r.at[k] = now
	return true
}

// forget drops k's mark: its next refresh is due at once.
func (r *refreshes) forget(k string) {
	r.mu.Lock()
	delete(r.at, k)
	r.mu.Unlock()
}
