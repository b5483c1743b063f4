package moderation

import (
	"context"
	"sync"
	"time"

	"github.com/chatd/chatd/names"
)

// checker is what a Guard needs of the Service.
type checker interface {
	Check(ctx context.Context, user string) (Status, error)
}

var _ checker = (*Service)(nil)

// GuardConfig configures a Guard.
type GuardConfig struct {
	// Now is the clock; nil = time.Now.
	Now func() time.Time
	// OnEvent is called for every event the Guard receives, after it has
	// dropped the user's cached status (a "kick" or a "ban" is where a
	// node closes the user's connections); nil = none. It runs on the
	// receiving goroutine and must not block.
	OnEvent func(Event)
}

// Guard answers "is this user muted or banned" for every say and request,
// from a cache of each user's Status kept for up to GuardFresh, so the
// check costs no Redis round trip. Every node hears every event on Channel
// (Receive) and drops the user's entry at once; after a reconnect of its
// subscription (events may have been missed) the cache is dropped (Reset).
// So a node acts on a change within one pub/sub hop, or within GuardFresh
// at worst. The naive check — Check on every say — costs a round trip per
// message; a cache without the events lets a ban wait for its expiry.
type Guard struct {
	store   checker
	now     func() time.Time
	onEvent func(Event)

	mu sync.Mutex
	m  map[string]guardEntry
}

type guardEntry struct {
	st      Status
	checked time.Time
}

// Bounds of a Guard's cache.
const (
	// GuardFresh is how long a cached status is used.
	GuardFresh = 30 * time.Second
	// guardMaxSize is how many users a Guard remembers before it starts
	// over.
	guardMaxSize = 100_000
)

// NewGuard returns a Guard over s's statuses; subscribe its Receive and
// Reset to s.Channel().
func NewGuard(s *Service, cfg GuardConfig) *Guard {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Guard{store: s, now: cfg.Now, onEvent: cfg.OnEvent}
}

// Status returns user's moderation status (any case), from the cache when
// fresh. It returns Redis errors.
func (g *Guard) Status(ctx context.Context, user string) (Status, error) {
	user = names.Canonical(user)
	now := g.now()
	g.mu.Lock()
	e, ok := g.m[user]
	g.mu.Unlock()
	if ok && now.Sub(e.checked) < GuardFresh {
		return e.st, nil
	}
	st, err := g.store.Check(ctx, user)
	if err != nil {
		return Status{}, err
	}
	g.mu.Lock()
	if g.m == nil || len(g.m) >= guardMaxSize {
		g.m = map[string]guardEntry{} // bounded: start over
	}
	g.m[user] = guardEntry{st, now}
	g.mu.Unlock()
	return st, nil
}

// Drop forgets user's cached status (after a change this node made).
func (g *Guard) Drop(user string) {
	g.mu.Lock()
	delete(g.m, names.Canonical(user))
	g.mu.Unlock()
}

// Reset forgets every cached status (after the subscription to Channel
// reconnected: events may have been missed).
func (g *Guard) Reset() {
	g.mu.Lock()
	g.m = nil
	g.mu.Unlock()
}

// Receive acts on an event from Channel, published by any node: the
// user's cached status is dropped (the change is in Redis already), then
// OnEvent is called. A message that is not an event is ignored.
func (g *Guard) Receive(_ string, p []byte) {
	ev, err := DecodeEvent(p)
	if err != nil {
		return
	}
	g.Drop(ev.User)
	if g.onEvent != nil {
		g.onEvent(ev)
	}
}
