// Package moderation is the moderation use case of the admin API: kick,
// mute, ban and their lifting, over the moderation domain package (which
// owns the keys, the events and the node's cache, moderation.Guard).
//
// It owns one side effect: after a change, this node's cached status of
// the user is dropped at once, so this node's next check reads Redis;
// every node, this one included, then acts on the event the domain
// package publishes (a kick closes the user's connections with 4001, a
// ban with 4003, everywhere: the realtime core wires the Guard's OnEvent
// to its Hub). It needs nothing of the other use cases, and the core
// nothing of it.
package moderation

import (
	"context"
	"time"

	modstore "github.com/chatd/chatd/moderation"
	"github.com/chatd/chatd/names"
)

// Store is what the use case needs of the moderation domain service.
type Store interface {
	Mute(ctx context.Context, user string, d time.Duration, reason string) (time.Time, error)
	Ban(ctx context.Context, user string, d time.Duration, reason string) (time.Time, error)
	Unmute(ctx context.Context, user string) error
	Unban(ctx context.Context, user string) error
	Kick(ctx context.Context, user, reason string) error
	List(ctx context.Context) (mutes, bans []modstore.Entry, err error)
}

// Cache is the node's cache of statuses, of which a change drops the
// user's entry.
type Cache interface {
	Drop(user string)
}

var (
	_ Store = (*modstore.Service)(nil)
	_ Cache = (*modstore.Guard)(nil)
)

// Moderation is the moderation use case (admin).
type Moderation struct {
	store Store
	cache Cache
}

// New returns the use case over store, dropping cache's entries.
func New(store Store, cache Cache) *Moderation { return &Moderation{store: store, cache: cache} }

// Kick closes every connection of user, on every node. It returns
// names.ErrBadName and Redis errors.
func (m *Moderation) Kick(ctx context.Context, user, reason string) error {
	if err := names.User(user); err != nil {
		return err
	}
	return m.store.Kick(ctx, user, reason)
}

// Mute refuses user's says for d. It returns names.ErrBadName, the domain
// package's errors and Redis errors.
func (m *Moderation) Mute(ctx context.Context, user string, d time.Duration, reason string) (time.Time, error) {
	if err := names.User(user); err != nil {
		return time.Time{}, err
	}
	until, err := m.store.Mute(ctx, user, d, reason)
	m.cache.Drop(user)
	return until, err
}

// Ban refuses every request of user for d and closes its connections. It
// returns names.ErrBadName, the domain package's errors and Redis errors.
func (m *Moderation) Ban(ctx context.Context, user string, d time.Duration, reason string) (time.Time, error) {
	if err := names.User(user); err != nil {
		return time.Time{}, err
	}
	until, err := m.store.Ban(ctx, user, d, reason)
	m.cache.Drop(user)
	return until, err
}

// Unmute lifts a mute. It returns Redis errors.
func (m *Moderation) Unmute(ctx context.Context, user string) error {
	err := m.store.Unmute(ctx, user)
	m.cache.Drop(user)
	return err
}

// Unban lifts a ban. It returns Redis errors.
func (m *Moderation) Unban(ctx context.Context, user string) error {
	err := m.store.Unban(ctx, user)
	m.cache.Drop(user)
	return err
}

// List returns the mutes and bans in force. It returns Redis errors.
func (m *Moderation) List(ctx context.Context) (mutes, bans []modstore.Entry, err error) {
	return m.store.List(ctx)
}
