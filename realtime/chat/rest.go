package chat

import (
	"context"
	"sync"
	"time"

	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/names"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/rooms"
)

// restState is what this node knows of the REST sessions that polled it:
// their rooms (so its presence claim for a user covers them) and when their
// seats were last renewed (so a clean poll stays one Redis command). Chat
// and Polls share it.
type restState struct {
	sessions restSessions
	renewed  renewals
}

// restSessions remembers the REST sessions that polled this node within a
// lease, with their rooms, so that this node's presence claim for a user
// covers them too (a closing WebSocket of the same user does not make
// her look offline).
type restSessions struct {
	mu sync.Mutex
	m  map[string]map[string]restSeen // user → session → rooms
}

type restSeen struct {
	rooms []string
	at    time.Time
	guest bool
}

func (r *restSessions) put(user, session string, rs []string, at time.Time, guest bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]map[string]restSeen{}
	}
	if at.IsZero() {
		return
	}
	m := r.m[user]
	if m == nil {
		m = map[string]restSeen{}
		r.m[user] = m
	}
	m[session] = restSeen{rs, at, guest}
}

// restUser is what the live REST sessions of one user here hold: their
// rooms, and whether one is a guest's.
type restUser struct {
	rooms []string
	guest bool
}

// of returns what user's live REST sessions here hold, and whether it has
// any, from one look: whether the user is a guest is part of the same
// snapshot as its rooms, so a presence write never marks it by a later look.
func (r *restSessions) of(user string, now time.Time, lease time.Duration) (restUser, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out restUser
	live := false
	for sid, s := range r.m[user] {
		if now.Sub(s.at) > lease {
			delete(r.m[user], sid)
			continue
		}
		live = true
		out.rooms = append(out.rooms, s.rooms...)
		out.guest = out.guest || s.guest
	}
	if len(r.m[user]) == 0 {
		delete(r.m, user)
	}
	return out, live
}

// all returns what every user with a live REST session here holds,
// forgetting the lapsed ones.
func (r *restSessions) all(now time.Time, lease time.Duration) map[string]restUser {
	r.mu.Lock()
	users := make([]string, 0, len(r.m))
	for u := range r.m {
		users = append(users, u)
	}
	r.mu.Unlock()
	out := map[string]restUser{}
	for _, u := range users {
		if ru, ok := r.of(u, now, lease); ok {
			out[u] = ru
		}
	}
	return out
}

// renewals throttles the seat and presence renewals polls trigger: a
// session's seats are renewed by this node at most once per third of the
// lease, so a clean poll stays one Redis command. It keeps when each session
// was last renewed, not when the next renewal is due, so that a shorter
// lease (seat.lease_seconds lowered) applies to the very next poll.
type renewals struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func (r *renewals) forget(sid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.last, sid)
}

func (r *renewals) due(sid string, now time.Time, every time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last = map[string]time.Time{}
	}
	if last, ok := r.last[sid]; ok && !now.Before(last) && now.Sub(last) < every {
		return false
	}
	if len(r.last) > 100_000 {
		// an entry at least `every` old is due anyway: dropping it changes nothing
		for k, t := range r.last {
			if now.Sub(t) >= every {
				delete(r.last, k)
			}
		}
	}
	r.last[sid] = now
	return true
}

// TypingREST relays a typing indicator of a REST session's user: the
// session must be in the room (its poll cursor holds it).
func (rt *REST) TypingREST(ctx context.Context, p realtime.Principal, room string) error {
	ch := rt.ch
	if err := names.Room(room); err != nil {
		return err
	}
	if !rt.restInRoom(ctx, p, room) {
		return rooms.ErrNotSeated
	}
	return ch.typingOf(ctx, p.User, room)
}

// JoinREST seats p's user in lobby for a REST session: the session becomes
// an attachment of the seat and the room joins its poll cursor, starting
// after the room's newest message, so the next poll of "messages" returns
// what is sent from now on.
func (rt *REST) JoinREST(ctx context.Context, p realtime.Principal, lobby string) (rooms.Room, error) {
	ch := rt.ch
	room, err := ch.join(ctx, p, lobby, restAttach(p.Session))
	if err != nil {
		return rooms.Room{}, err
	}
	rt.restEnter(ctx, p, room.ID)
	rt.sessionChanged(ctx, p)
	return room, nil
}

// JoinRoomREST takes p's user into one given room for a REST session (the
// REST resume, and the way into a match's private room): the seat is kept
// or taken back (rooms.Seats.Reclaim) with the session attached, and the room
// joins the session's poll as JoinREST does.
func (rt *REST) JoinRoomREST(ctx context.Context, p realtime.Principal, room string) (rooms.Room, error) {
	ch := rt.ch
	r, err := ch.claimRoom(ctx, room, p.User, restAttach(p.Session))
	if err != nil {
		return rooms.Room{}, err
	}
	ch.marks.Room(r.ID, dirty.Of(dirty.Rooms))
	rt.restEnter(ctx, p, r.ID)
	rt.sessionChanged(ctx, p)
	return r, nil
}

func (rt *REST) restEnter(ctx context.Context, p realtime.Principal, room string) {
	ch := rt.ch
	if _, err := ch.cursors.Open(ctx, p.Session, p.User); err != nil {
		ch.log.Debug("open session", "err", err)
		return
	}
	cur, err := ch.cursors.Cursor(ctx, p.Session, []string{room})
	if err == nil && cur[room] != "" {
		return // already in the room: keep its place
	}
	last := "0"
	if msgs, err := ch.messages.History(ctx, room, "", 1); err == nil && len(msgs) == 1 {
		last = msgs[0].ID
	}
	if err := ch.cursors.SetCursor(ctx, p.Session, map[string]string{room: last}); err != nil {
		ch.log.Debug("set cursor", "err", err)
	}
	ch.rest.renewed.forget(p.Session)
}

// restInRoom reports whether a REST session is in room (by its cursor).
func (rt *REST) restInRoom(ctx context.Context, p realtime.Principal, room string) bool {
	ch := rt.ch
	cur, err := ch.cursors.Cursor(ctx, p.Session, []string{room})
	return err == nil && cur[room] != ""
}

// LeaveREST frees p's user's seat in room (an explicit leave) and drops
// the room from the session's poll.
func (rt *REST) LeaveREST(ctx context.Context, p realtime.Principal, room string) error {
	ch := rt.ch
	if err := ch.leave(ctx, p, room); err != nil {
		return err
	}
	if err := ch.cursors.DropCursor(ctx, p.Session, room); err != nil {
		ch.log.Debug("drop cursor", "err", err)
	}
	ch.leftRoom(p.User, room, nil)
	rt.sessionChanged(ctx, p)
	return nil
}
