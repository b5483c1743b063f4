package admin

import (
	"cmp"
	"context"
	"slices"

	"github.com/chatd/chatd/audit"
	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/names"
	"github.com/chatd/chatd/presence"
	"github.com/chatd/chatd/rooms"
)

// The admin console's reads and actions beyond stats and settings: rooms
// by population with their members and history, a message from the
// system, disconnecting a user or one connection on every node, user
// search, and the audit log of admin actions.

// auditLog is what the admin use case needs of package audit.
type auditLog interface {
	Record(ctx context.Context, e audit.Entry) error
	List(ctx context.Context, limit int) ([]audit.Entry, error)
}

// adminRooms is what the admin console reads of the seats.
type adminRooms interface {
	Rooms(ctx context.Context, lobby string) ([]rooms.Room, error)
	Room(ctx context.Context, roomID string) (rooms.Room, error)
}

// adminMessages is what the admin console reads and sends of messages.
type adminMessages interface {
	History(ctx context.Context, roomID, after string, limit int) ([]rooms.Message, error)
	Send(ctx context.Context, roomID, user, text string, opt rooms.SendOptions) (rooms.SendResult, error)
}

// lobbyLister lists the lobbies, most populated first.
type lobbyLister interface {
	List(ctx context.Context, limit int) ([]rooms.LobbyInfo, error)
}

// adminPresence is what the admin console needs of presence.
type adminPresence interface {
	Get(ctx context.Context, user string) (presence.Status, error)
	Search(ctx context.Context, prefix string, limit int) ([]string, error)
}

var (
	_ auditLog      = (*audit.Log)(nil)
	_ adminRooms    = (*rooms.Seats)(nil)
	_ adminMessages = (*rooms.Messages)(nil)
	_ lobbyLister   = (*rooms.Lobbies)(nil)
	_ adminPresence = (*presence.Presence)(nil)
)

// Limits of the admin console's reads.
const (
	// DefaultRoomsLimit and MaxRoomsLimit bound RoomsByPopulation.
	DefaultRoomsLimit = 50
	MaxRoomsLimit     = 500
	// roomsScanLobbies is how many of the most populated lobbies
	// RoomsByPopulation reads the rooms of.
	roomsScanLobbies = 100
	// DefaultRoomHistory is how many recent messages RoomDetail returns.
	DefaultRoomHistory = 50
)

// ErrBadConnection is returned by Disconnect for a connection id or a
// node id that is not 1–128 of [A-Za-z0-9_.:-].
var ErrBadConnection = errcode.New(errcode.BadRequest, "realtime: a connection or node id is 1–128 of [A-Za-z0-9_.:-]")

// RoomsByPopulation returns the rooms with the most seated members first
// (ties by id), at most limit: the rooms of the roomsScanLobbies most
// populated lobbies, so a room of a quieter lobby may be left out when
// there are more lobbies than that. It returns Redis errors.
func (a *Admin) RoomsByPopulation(ctx context.Context, limit int) ([]rooms.Room, error) {
	limit = min(max(limit, 1), MaxRoomsLimit)
	ls, err := a.lobbies.List(ctx, roomsScanLobbies)
	if err != nil {
		return nil, err
	}
	var out []rooms.Room
	for _, l := range ls {
		rs, err := a.rooms.Rooms(ctx, l.Lobby)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	slices.SortFunc(out, func(x, y rooms.Room) int {
		if c := cmp.Compare(len(y.Members), len(x.Members)); c != 0 {
			return c
		}
		return cmp.Compare(x.ID, y.ID)
	})
	if len(out) > limit {
		out = out[:limit]
	}
	if out == nil {
		out = []rooms.Room{}
	}
	return out, nil
}

// RoomDetail is a room as the admin console shows it.
type RoomDetail struct {
	Room rooms.Room
	// Members are the presence of each seated member, in Room.Members order.
	Members []presence.Status
	// Messages are the latest messages, oldest first.
	Messages []rooms.Message
}

// RoomDetail returns a room, the presence of its members and its latest
// history messages (at most history). It returns names.ErrBadName,
// rooms.ErrUnknownRoom and Redis errors.
func (a *Admin) RoomDetail(ctx context.Context, room string, history int) (RoomDetail, error) {
	r, err := a.rooms.Room(ctx, room)
	if err != nil {
		return RoomDetail{}, err
	}
	d := RoomDetail{Room: r, Members: make([]presence.Status, 0, len(r.Members))}
	for _, m := range r.Members {
		st, err := a.people.Get(ctx, m)
		if err != nil {
			return RoomDetail{}, err
		}
		d.Members = append(d.Members, st)
	}
	if d.Messages, err = a.messages.History(ctx, room, "", min(max(history, 1), rooms.MaxHistoryLimit)); err != nil {
		return RoomDetail{}, err
	}
	if d.Messages == nil {
		d.Messages = []rooms.Message{}
	}
	return d, nil
}

// SystemSay sends text into room as the system (from rooms.SystemSender):
// every member on every node gets it as a message, and it stays in the
// history; no seat is needed. The text follows the say rules (not empty,
// UTF-8, at most message.max_length). It returns ErrEmptyText, ErrBadUTF8,
// a *TooLongError, names.ErrBadName, rooms.ErrUnknownRoom and Redis errors.
func (a *Admin) SystemSay(ctx context.Context, room, text string) (rooms.Message, error) {
	if err := a.say.CheckSay(room, text); err != nil {
		return rooms.Message{}, err
	}
	res, err := a.messages.Send(ctx, room, "", text, rooms.SendOptions{System: true})
	if err != nil {
		return rooms.Message{}, err
	}
	if res.HasREST {
		a.marks.Room(room, dirty.Of(dirty.Messages))
	}
	return res.Message, nil
}

// UserDetail is a user as the admin console's search shows it.
type UserDetail struct {
	presence.Status
	// Connections are the user's realtime connections on every node.
	Connections []presence.Conn
	// Sessions are the distinct sessions of those connections, sorted.
	Sessions []string
}

// SearchUsers returns the online users whose name starts with prefix
// (letters in either case), at most limit (1 to presence.MaxSearch), each
// with its presence, connections and sessions. It returns an error
// wrapping names.ErrBadName for a bad prefix, and Redis errors.
func (a *Admin) SearchUsers(ctx context.Context, prefix string, limit int) ([]UserDetail, error) {
	us, err := a.people.Search(ctx, prefix, limit)
	if err != nil {
		return nil, err
	}
	out := make([]UserDetail, 0, len(us))
	for _, u := range us {
		st, err := a.people.Get(ctx, u)
		if err != nil {
			return nil, err
		}
		d := UserDetail{Status: st, Connections: st.Conns, Sessions: []string{}}
		if d.Connections == nil {
			d.Connections = []presence.Conn{}
		}
		for _, c := range st.Conns {
			d.Sessions = append(d.Sessions, c.Session)
		}
		slices.Sort(d.Sessions)
		d.Sessions = slices.Compact(d.Sessions)
		out = append(out, d)
	}
	return out, nil
}

// Disconnect closes user's realtime connections on every node with 4001
// (the reason, clipped to 120 bytes, as the close reason; "disconnected by
// an admin" when empty) — or only connection conn of node when conn is
// given (ids from SearchUsers). Nothing is stored: the user may reconnect
// at once. It returns names.ErrBadName, ErrBadConnection and Redis errors.
func (a *Admin) Disconnect(ctx context.Context, user, node, conn, reason string) error {
	if err := names.User(user); err != nil {
		return err
	}
	if conn != "" && !validID(conn) || node != "" && !validID(node) {
		return ErrBadConnection
	}
	return a.conns.Disconnect(ctx, user, node, conn, reason)
}

// validID reports whether s is 1–128 of [A-Za-z0-9_.:-].
func validID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// Record adds an admin action to the audit log.
func (a *Admin) Record(ctx context.Context, e audit.Entry) error { return a.audit.Record(ctx, e) }

// AuditLog returns the latest admin actions, newest first, at most limit
// (1 to audit.MaxList).
func (a *Admin) AuditLog(ctx context.Context, limit int) ([]audit.Entry, error) {
	return a.audit.List(ctx, limit)
}
