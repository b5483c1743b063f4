package realtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/chatd/chatd/moderation"
)

// ErrMuted and ErrBanned are matched by *MutedError and *BannedError.
var (
	ErrMuted  = errors.New("realtime: user is muted")
	ErrBanned = errors.New("realtime: user is banned")
)

// MutedError refuses a say of a muted user.
type MutedError struct{ Until time.Time }

func (e *MutedError) Error() string {
	return fmt.Sprintf("you are muted until %s", e.Until.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrMuted) true.
func (e *MutedError) Is(t error) bool { return t == ErrMuted }

// BannedError refuses every request of a banned user.
type BannedError struct{ Until time.Time }

func (e *BannedError) Error() string {
	return fmt.Sprintf("you are banned until %s", e.Until.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrBanned) true.
func (e *BannedError) Is(t error) bool { return t == ErrBanned }

// modCache keeps each user's moderation status on this node for up to
// modFresh, so that checking every say and request costs no Redis round
// trip. Every node hears every mute, ban, unmute and unban on the
// moderation channel and updates its entry at once; after a bus reconnect
// (events may have been missed) the cache is dropped. So a node acts on a
// change within one pub/sub hop, or within modFresh at worst.
type modCache struct {
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
func (n *Node) status(ctx context.Context, user string) (moderation.Status, error) {
	now := time.Now()
	c := &n.modc
	c.mu.Lock()
	e, ok := c.m[user]
	c.mu.Unlock()
	if ok && now.Sub(e.checked) < modFresh {
		return e.st, nil
	}
	st, err := n.mod.Check(ctx, user)
	if err != nil {
		return moderation.Status{}, err
	}
	c.put(user, modEntry{st, now})
	return st, nil
}

func (c *modCache) put(user string, e modEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= modMaxSize {
		c.m = map[string]modEntry{} // bounded: start over
	}
	c.m[user] = e
}

func (c *modCache) drop(user string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, user)
}

func (c *modCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m = nil
}

// CheckBanned returns a *BannedError while user is banned.
func (n *Node) CheckBanned(ctx context.Context, user string) error {
	st, err := n.status(ctx, user)
	if err != nil {
		return err
	}
	if st.Banned && time.Now().Before(st.BanUntil) {
		return &BannedError{Until: st.BanUntil}
	}
	return nil
}

// checkMuted returns a *MutedError while user is muted.
func (n *Node) checkMuted(ctx context.Context, user string) error {
	st, err := n.status(ctx, user)
	if err != nil {
		return err
	}
	if st.Muted && time.Now().Before(st.MuteUntil) {
		return &MutedError{Until: st.MuteUntil}
	}
	return nil
}

// ModerationChanged drops this node's cached status of user after an
// admin action taken here, so the very next request sees it (other nodes
// drop theirs when the moderation event reaches them).
func (n *Node) ModerationChanged(user string) { n.modc.drop(user) }
