package identity

import (
	"container/list"
	"time"
)

// memory is what a Registry remembers locally, both maps bounded, guarded
// by Registry.mu:
//
//   - admits: the holders this node saw hold a name (a Claim, or an Admit
//     that Redis confirmed), least recently confirmed evicted first. It is
//     the Admit throttle cache (an entry confirmed less than TTL/4 ago, in
//     the current epoch, answers Admit without Redis), the list of claims
//     to give back after a resubscription (claim_restore.lua), and who to
//     call Config.OnEnded for when another holder claims the name.
//   - revoked: the holders this node signed out or heard of signing out,
//     until their tokens expire, oldest evicted first: Admit refuses them
//     without asking Redis, and they are written back after a
//     resubscription (revoked_add.lua).
type memory struct {
	maxAdmits, maxRevoked int

	admits map[string]map[string]*list.Element // canonical user -> holder -> *admit
	lru    *list.List                          // of *admit, most recently confirmed first

	revoked map[claimant]*list.Element // -> *revocation
	fifo    *list.List                 // of *revocation, oldest first

	// epoch counts resubscriptions: an admit confirmed in an older epoch
	// is not served from the cache (events may have been missed).
	epoch uint64
	// gen counts events and resubscriptions: an Admit whose round trip
	// saw gen move does not fill the cache (an event about its user may
	// have arrived while the script ran, and dropped what it would add).
	gen uint64

	lastSweep time.Time
}

// claimant is one holder of one name (canonical).
type claimant struct{ user, holder string }

// admit is one holder this node saw hold a name.
type admit struct {
	claimant
	display   string    // the name as the token carries it
	confirmed time.Time // when Redis last confirmed the claim to this node
	cacheable bool      // confirmed with no event or resubscription during the call
	epoch     uint64    // the epoch it was confirmed in
	expires   time.Time // the token's expiry; zero = unknown
}

// revocation is one signed-out holder, until its token expires.
type revocation struct {
	claimant
	until time.Time
}

func newMemory(maxAdmits, maxRevoked int) *memory {
	return &memory{
		maxAdmits:  maxAdmits,
		maxRevoked: maxRevoked,
		admits:     map[string]map[string]*list.Element{},
		lru:        list.New(),
		revoked:    map[claimant]*list.Element{},
		fifo:       list.New(),
	}
}

// isRevoked reports whether c is revoked at now (and forgets an ended
// revocation).
func (m *memory) isRevoked(c claimant, now time.Time) bool {
	e, ok := m.revoked[c]
	if !ok {
		return false
	}
	if now.Before(e.Value.(*revocation).until) {
		return true
	}
	m.fifo.Remove(e)
	delete(m.revoked, c)
	return false
}

// revoke remembers c as revoked until until (the later one if it was
// already), drops its admit, and reports how many older revocations it
// evicted to stay within the bound.
func (m *memory) revoke(c claimant, until, now time.Time) (evicted int) {
	m.drop(c)
	if !now.Before(until) {
		return 0
	}
	if e, ok := m.revoked[c]; ok {
		if r := e.Value.(*revocation); until.After(r.until) {
			r.until = until
		}
		return 0
	}
	for len(m.revoked) >= m.maxRevoked {
		front := m.fifo.Front()
		m.fifo.Remove(front)
		delete(m.revoked, front.Value.(*revocation).claimant)
		evicted++
	}
	m.revoked[c] = m.fifo.PushBack(&revocation{claimant: c, until: until})
	return evicted
}

// cached reports whether the admit of c may answer Admit without Redis at
// now for a token expiring at expires (zero: unknown): confirmed less than
// quarter ago, in the current epoch, with no event during its call, and
// before the expiry of both the token presented and the ones seen.
func (m *memory) cached(c claimant, now, expires time.Time, quarter time.Duration) bool {
	if !expires.IsZero() && !now.Before(expires) {
		return false
	}
	e, ok := m.admits[c.user][c.holder]
	if !ok {
		return false
	}
	a := e.Value.(*admit)
	age := now.Sub(a.confirmed)
	return a.cacheable && a.epoch == m.epoch && age >= 0 && age < quarter &&
		(a.expires.IsZero() || now.Before(a.expires))
}

// confirm records that Redis confirmed c's claim at now. cacheable is
// false when gen moved during the call. It reports how many admits it
// evicted to stay within the bound.
func (m *memory) confirm(c claimant, display string, now, expires time.Time, cacheable bool) (evicted int) {
	if byHolder, ok := m.admits[c.user]; ok {
		if e, ok := byHolder[c.holder]; ok {
			a := e.Value.(*admit)
			a.display, a.confirmed, a.cacheable, a.epoch = display, now, cacheable, m.epoch
			if expires.After(a.expires) {
				a.expires = expires
			}
			m.lru.MoveToFront(e)
			return 0
		}
	}
	for m.lru.Len() >= m.maxAdmits {
		m.drop(m.lru.Back().Value.(*admit).claimant)
		evicted++
	}
	byHolder := m.admits[c.user]
	if byHolder == nil {
		byHolder = map[string]*list.Element{}
		m.admits[c.user] = byHolder
	}
	byHolder[c.holder] = m.lru.PushFront(&admit{claimant: c, display: display, confirmed: now,
		cacheable: cacheable, epoch: m.epoch, expires: expires})
	return evicted
}

// drop forgets the admit of c.
func (m *memory) drop(c claimant) {
	byHolder := m.admits[c.user]
	e, ok := byHolder[c.holder]
	if !ok {
		return
	}
	m.lru.Remove(e)
	delete(byHolder, c.holder)
	if len(byHolder) == 0 {
		delete(m.admits, c.user)
	}
}

// dropOthers forgets the admits of user's holders other than holder and
// returns them: their claims ended when holder claimed the name.
func (m *memory) dropOthers(user, holder string) []claimant {
	var out []claimant
	for h := range m.admits[user] {
		if h != holder {
			out = append(out, claimant{user, h})
		}
	}
	for _, c := range out {
		m.drop(c)
	}
	return out
}

// sweep forgets, at most once per every, the admits whose claims have run
// out by this node's reckoning (confirmed a ttl ago) or whose tokens
// expired, and the ended revocations, so that both maps hold only what
// can still matter.
func (m *memory) sweep(now time.Time, ttl, every time.Duration) {
	if d := now.Sub(m.lastSweep); d >= 0 && d < every {
		return
	}
	m.lastSweep = now
	for e := m.lru.Back(); e != nil; {
		prev := e.Prev()
		a := e.Value.(*admit)
		if now.Sub(a.confirmed) >= ttl || now.Before(a.confirmed) || (!a.expires.IsZero() && !now.Before(a.expires)) {
			m.drop(a.claimant)
		}
		e = prev
	}
	for e := m.fifo.Front(); e != nil; {
		next := e.Next()
		if r := e.Value.(*revocation); !now.Before(r.until) {
			m.fifo.Remove(e)
			delete(m.revoked, r.claimant)
		}
		e = next
	}
}

// restoreItem is one claim to give back after a resubscription.
type restoreItem struct {
	claimant
	left time.Duration
}

// toRestore lists the admits whose claims may still be live at now, with
// what is left of each: ttl after its last confirmation, and never past
// the token's expiry.
func (m *memory) toRestore(now time.Time, ttl time.Duration) []restoreItem {
	out := make([]restoreItem, 0, m.lru.Len())
	for e := m.lru.Front(); e != nil; e = e.Next() {
		a := e.Value.(*admit)
		left := a.confirmed.Add(ttl).Sub(now)
		if !a.expires.IsZero() {
			left = min(left, a.expires.Sub(now))
		}
		if left >= time.Millisecond && !now.Before(a.confirmed) {
			out = append(out, restoreItem{a.claimant, left})
		}
	}
	return out
}

// toRevoke lists the revocations still in force at now.
func (m *memory) toRevoke(now time.Time) []revocation {
	out := make([]revocation, 0, m.fifo.Len())
	for e := m.fifo.Front(); e != nil; e = e.Next() {
		if r := e.Value.(*revocation); now.Before(r.until) {
			out = append(out, *r)
		}
	}
	return out
}
