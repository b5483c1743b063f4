package realtime

import (
	"context"
	"encoding/json"

	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/notices"
	"github.com/chatd/chatd/presence"
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

var (
	_ settingsStore = (*settings.Store)(nil)
	_ counters      = (*rooms.Messages)(nil)
	_ registry      = (*presence.Presence)(nil)
)

// Admin is the operator's use case: the live settings (a write marks every
// REST session's settings bit, once, on the node that took it), notices,
// message removal, the reads of the admin console (stats, nodes, rooms by
// population, user search, the audit log) and its actions (a message from
// the system, disconnecting a user or a connection on every node).
type Admin struct {
	settings  settingsStore
	counters  counters
	registry  registry
	purchases purchases
	notices   *noticeBoard
	marks     *marker
	rooms     adminRooms
	messages  adminMessages
	lobbies   lobbyLister
	people    adminPresence
	audit     auditLog
	chat      *Chat // the say rules, the local clients, the publisher
	match     *Matchmaking
}

// Queues returns every matchmaking queue with its depth and oldest wait
// (the admin console). It returns Redis errors.
func (a *Admin) Queues(ctx context.Context) ([]QueueInfo, error) { return a.match.Queues(ctx) }

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
	a.marks.all(dirty.Of(dirty.Settings))
	return v, nil
}

// ResetSetting puts a setting back to its default.
func (a *Admin) ResetSetting(ctx context.Context, key string) (int64, error) {
	v, err := a.settings.Reset(ctx, key)
	if err != nil {
		return 0, err
	}
	a.marks.all(dirty.Of(dirty.Settings))
	return v, nil
}

// PostNotice posts a notice, shown once to every user.
func (a *Admin) PostNotice(ctx context.Context, text string) (notices.Notice, error) {
	return a.notices.post(ctx, text)
}

// RemoveMessage removes a message from a room's history (and tells the
// room's members).
func (a *Admin) RemoveMessage(ctx context.Context, room, id string) error {
	return a.counters.Remove(ctx, room, id)
}
