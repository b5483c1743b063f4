// Package admin is the operator's use case: the live settings, notices,
// message removal, the global figures, the matchmaking queues, and the
// admin console's reads (nodes, rooms by population, user search, the
// audit log) and actions (a message from the system, disconnecting a user
// or one connection on every node).
//
// It is built on the domain packages (settings, rooms, presence, shop,
// notices, audit) and on the realtime core's exported API, each through an
// interface declared here: the core's coalesced marks (a settings write or
// a notice marks every REST session, once, on the node that took it), the
// say rules (SystemSay follows them), the matchmaking queues, and the
// core's Disconnect, which carries the command to every node. It reads no
// other use case's fields, and nothing is wired into it after New.
package admin

import (
	"context"
	"encoding/json"

	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/notices"
	"github.com/chatd/chatd/presence"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/realtime/match"
	"github.com/chatd/chatd/rooms"
	"github.com/chatd/chatd/settings"
)

// settingsStore is what the admin use case needs of the live settings.
type settingsStore interface {
	Values() (version int64, values map[string]any)
	Set(ctx context.Context, key string, raw json.RawMessage) (int64, error)
	Reset(ctx context.Context, key string) (int64, error)
}

// counters are the global counters.
type counters interface {
	Counters(ctx context.Context) (messages, rooms int64, err error)
	Remove(ctx context.Context, roomID, id string) error
}

type registry interface {
	Online(ctx context.Context) (int64, error)
	Nodes(ctx context.Context) ([]presence.Node, error)
}

type purchases interface {
	Purchases(ctx context.Context) (int64, error)
}

// noticeStore posts notices.
type noticeStore interface {
	Post(ctx context.Context, text string) (notices.Notice, error)
}

// marks are the core's coalesced dirty marks of REST sessions.
type marks interface {
	All(bits dirty.Mask)
	Room(room string, bits dirty.Mask)
}

// sayRules checks a message against the say rules (the chat use case's).
type sayRules interface {
	CheckSay(room, text string) error
}

// queues reads the matchmaking queues.
type queues interface {
	Queues(ctx context.Context) ([]match.QueueInfo, error)
}

// disconnecter closes a user's connections, or one of them, on every node.
type disconnecter interface {
	Disconnect(ctx context.Context, user, node, conn, reason string) error
}

var (
	_ settingsStore = (*settings.Store)(nil)
	_ counters      = (*rooms.Messages)(nil)
	_ registry      = (*presence.Presence)(nil)
	_ noticeStore   = (*notices.Board)(nil)
	_ marks         = realtime.Marks{}
	_ queues        = (*match.Matchmaking)(nil)
	_ disconnecter  = (*realtime.Node)(nil)
)

// Config configures an Admin; every field is required.
type Config struct {
	// Settings are the live settings (*settings.Store).
	Settings settingsStore
	// Seats are the rooms' seats, for the console's reads (rooms.Seats).
	Seats adminRooms
	// Messages are the rooms' messages: the counters, removal, history,
	// the system's messages (rooms.Messages).
	Messages interface {
		counters
		adminMessages
	}
	// Lobbies lists the lobbies by population (rooms.Lobbies).
	Lobbies lobbyLister
	// Presence is the node registry and the users' presence
	// (*presence.Presence).
	Presence interface {
		registry
		adminPresence
	}
	Purchases    purchases
	Notices      noticeStore
	Marks        marks
	Audit        auditLog
	SayRules     sayRules
	Queues       queues
	Disconnecter disconnecter
}

// Admin is the operator's use case.
type Admin struct {
	settings  settingsStore
	counters  counters
	registry  registry
	purchases purchases
	notices   noticeStore
	marks     marks
	rooms     adminRooms
	messages  adminMessages
	lobbies   lobbyLister
	people    adminPresence
	audit     auditLog
	say       sayRules
	match     queues
	conns     disconnecter
}

// New returns the admin use case.
func New(cfg Config) *Admin {
	return &Admin{settings: cfg.Settings, counters: cfg.Messages, registry: cfg.Presence, purchases: cfg.Purchases,
		notices: cfg.Notices, marks: cfg.Marks, rooms: cfg.Seats, messages: cfg.Messages, lobbies: cfg.Lobbies,
		people: cfg.Presence, audit: cfg.Audit,
		say: cfg.SayRules, match: cfg.Queues, conns: cfg.Disconnecter}
}

// Queues returns every matchmaking queue with its depth and oldest wait
// (the admin console). It returns Redis errors.
func (a *Admin) Queues(ctx context.Context) ([]match.QueueInfo, error) { return a.match.Queues(ctx) }

// Stats are the global figures of GET /stats.
type Stats struct {
	Messages  int64 `json:"messages_total"`
	Rooms     int64 `json:"rooms_total"`
	Online    int64 `json:"online"`
	Nodes     int   `json:"nodes"`
	Purchases int64 `json:"purchases_total"`
}

// Stats returns the global figures.
func (a *Admin) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	var err error
	if st.Messages, st.Rooms, err = a.counters.Counters(ctx); err != nil {
		return Stats{}, err
	}
	if st.Online, err = a.registry.Online(ctx); err != nil {
		return Stats{}, err
	}
	ns, err := a.registry.Nodes(ctx)
	if err != nil {
		return Stats{}, err
	}
	st.Nodes = len(ns)
	if st.Purchases, err = a.purchases.Purchases(ctx); err != nil {
		return Stats{}, err
	}
	return st, nil
}

// Nodes returns the live nodes of the registry.
func (a *Admin) Nodes(ctx context.Context) ([]presence.Node, error) { return a.registry.Nodes(ctx) }

// Settings returns the settings version and values in force on this node.
func (a *Admin) Settings() (version int64, values map[string]any) { return a.settings.Values() }

// SettingDefs returns the settings registry.
func (a *Admin) SettingDefs() []settings.Def { return settings.Defs() }

// SetSetting writes a setting; every node applies it, every REST session
// learns of it in its next poll.
func (a *Admin) SetSetting(ctx context.Context, key string, value json.RawMessage) (int64, error) {
	v, err := a.settings.Set(ctx, key, value)
	if err != nil {
		return 0, err
	}
	a.marks.All(dirty.Of(dirty.Settings))
	return v, nil
}

// ResetSetting puts a setting back to its default.
func (a *Admin) ResetSetting(ctx context.Context, key string) (int64, error) {
	v, err := a.settings.Reset(ctx, key)
	if err != nil {
		return 0, err
	}
	a.marks.All(dirty.Of(dirty.Settings))
	return v, nil
}

// PostNotice posts a notice, shown once to every user, and marks every
// REST session, once, on this node.
func (a *Admin) PostNotice(ctx context.Context, text string) (notices.Notice, error) {
	n, err := a.notices.Post(ctx, text)
	if err != nil {
		return notices.Notice{}, err
	}
	a.marks.All(dirty.Of(dirty.Notices))
	return n, nil
}

// RemoveMessage removes a message from a room's history (and tells the
// room's members).
func (a *Admin) RemoveMessage(ctx context.Context, room, id string) error {
	return a.counters.Remove(ctx, room, id)
}
