package realtime

import (
	"context"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/chatd/chatd/moderation"
	"github.com/chatd/chatd/names"
)

// modStore is what the moderation use case needs of package moderation.
type modStore interface {
	Check(ctx context.Context, user string) (moderation.Status, error)
	Mute(ctx context.Context, user string, d time.Duration, reason string) (time.Time, error)
	Ban(ctx context.Context, user string, d time.Duration, reason string) (time.Time, error)
	Unmute(ctx context.Context, user string) error
	Unban(ctx context.Context, user string) error
	Kick(ctx context.Context, user, reason string) error
	List(ctx context.Context) (mutes, bans []moderation.Entry, err error)
	Channel() string
}

var _ modStore = (*moderation.Service)(nil)

// Moderation is the moderation use case (admin): kick, mute, ban and their
// lifting, with the side effects they own: this node's cached status of the
// user is dropped at once, and every node — this one included — acts on
// the event the moderation package publishes (a kick closes the user's
// connections with 4001, a ban with 4003, everywhere).
type Moderation struct {
	store modStore
	guard *modGuard
}

// Kick closes every connection of user, on every node.
func (m *Moderation) Kick(ctx context.Context, user, reason string) error {
	if err := names.User(user); err != nil {
		return err
	}
	return m.store.Kick(ctx, user, reason)
}

// Mute refuses user's says for d.
func (m *Moderation) Mute(ctx context.Context, user string, d time.Duration, reason string) (time.Time, error) {
	if err := names.User(user); err != nil {
		return time.Time{}, err
	}
	until, err := m.store.Mute(ctx, user, d, reason)
	m.guard.drop(user)
	return until, err
}

// Ban refuses every request of user for d and closes its connections.
func (m *Moderation) Ban(ctx context.Context, user string, d time.Duration, reason string) (time.Time, error) {
	if err := names.User(user); err != nil {
		return time.Time{}, err
	}
	until, err := m.store.Ban(ctx, user, d, reason)
	m.guard.drop(user)
	return until, err
}

// Unmute lifts a mute.
func (m *Moderation) Unmute(ctx context.Context, user string) error {
	err := m.store.Unmute(ctx, user)
	m.guard.drop(user)
	return err
}

// Unban lifts a ban.
func (m *Moderation) Unban(ctx context.Context, user string) error {
	err := m.store.Unban(ctx, user)
	m.guard.drop(user)
	return err
}

// List returns the mutes and bans in force.
func (m *Moderation) List(ctx context.Context) (mutes, bans []moderation.Entry, err error) {
	return m.store.List(ctx)
}

// modGuard answers "is this user muted or banned" for every say and
// request, from a cache of each user's status kept for up to modFresh, so
// the check costs no Redis round trip. Every node hears every mute, ban,
// unmute and unban on the moderation channel and updates its entry at
// once; after a bus reconnect (events may have been missed) the cache is
// dropped. So a node acts on a change within one pub/sub hop, or within
// modFresh at worst.
type modGuard struct {
	store modStore
	chat  *Chat
	now   func() time.Time

	mu sync.Mutex
	m  map[string]modEntry
}

type modEntry struct {
	st      moderation.Status
	checked time.Time
}

const (
	modFresh   = 30 * time.Second
	modMaxSize = 100_000
)

// status returns user's moderation status, from the cache when fresh.
func (g *modGuard) status(ctx context.Context, user string) (moderation.Status, error) {
	user = names.Canonical(user)
	now := g.now()
	g.mu.Lock()
	e, ok := g.m[user]
	g.mu.Unlock()
	if ok && now.Sub(e.checked) < modFresh {
		return e.st, nil
	}
	st, err := g.store.Check(ctx, user)
	if err != nil {
		return moderation.Status{}, err
	}
	g.mu.Lock()
	if g.m == nil || len(g.m) >= modMaxSize {
		g.m = map[string]modEntry{} // bounded: start over
	}
	g.m[user] = modEntry{st, now}
	g.mu.Unlock()
	return st, nil
}

func (g *modGuard) drop(user string) {
	g.mu.Lock()
	delete(g.m, names.Canonical(user))
	g.mu.Unlock()
}

func (g *modGuard) reset() {
	g.mu.Lock()
	g.m = nil
	g.mu.Unlock()
}

// checkBanned returns a *BannedError while user is banned.
func (g *modGuard) checkBanned(ctx context.Context, user string) error {
	st, err := g.status(ctx, user)
	if err != nil {
		return err
	}
	if st.Banned && g.now().Before(st.BanUntil) {
		return &BannedError{Until: st.BanUntil}
	}
	return nil
}

// checkMuted returns a *MutedError while user is muted.
func (g *modGuard) checkMuted(ctx context.Context, user string) error {
	st, err := g.status(ctx, user)
	if err != nil {
		return err
	}
	if st.Muted && g.now().Before(st.MuteUntil) {
		return &MutedError{Until: st.MuteUntil}
	}
	return nil
}

// receive acts on a moderation event from any node: the cached status is
// dropped (the change is in Redis already), and a kick or a ban closes the
// user's clients on this node at once.
func (g *modGuard) receive(_ string, p []byte) {
	ev, err := moderation.DecodeEvent(p)
	if err != nil {
		return
	}
	g.drop(ev.User)
	code := 0
	switch ev.Type {
	case "kick":
		code = CloseKicked
	case "ban":
		code = CloseBanned
	default:
		return
	}
	reason := ev.Reason
	if reason == "" {
		reason = ev.Type
	}
	g.chat.closeUser(ev.User, "", code, clipRunes(reason, 120))
}

// clipRunes cuts s to at most n bytes on a rune boundary.
func clipRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
