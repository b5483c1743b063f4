package realtime

import (
	"context"
	"errors"
	"time"

	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/identity"
	"github.com/chatd/chatd/presence"
	"github.com/chatd/chatd/rooms"
)

// The seat and presence loops of the chat use case: what keeps a
// connection's seats and its user's presence while it is open, and takes
// a seat lost by lease back while the connection still shows the room.

// nameKeeper renews a guest's claim of its name while a connection is
// open (package identity): Admit renews it, or takes it back if it is free
// (a Redis that lost its data), or refuses a holder that signed out or
// whose name another guest took.
type nameKeeper interface {
	Admit(ctx context.Context, name, holder string, expires time.Time) error
}

var _ nameKeeper = (*identity.Registry)(nil)

func (ch *Chat) lease() time.Duration {
	return time.Duration(ch.settings.Int(settingLease)) * time.Second
}

// start starts the chat loops in g: seat renewal every third of the
// lease, presence every third of its TTL.
func (ch *Chat) start(g *group, keeper nameKeeper) {
	g.Go(func(ctx context.Context) {
		every(ctx, ch.now, func() time.Duration { return ch.lease() / 3 }, ch.renewSeats)
	})
	g.Go(func(ctx context.Context) {
		every(ctx, ch.now, func() time.Duration { return ch.presence.TTL() / 3 }, func(ctx context.Context) { ch.touchPresence(ctx, keeper) })
	})
}

// renewSeats renews the leases of every attachment of this node's clients
// in one pipelined round trip; an attachment that is gone is taken back if
// it can be, or its client is told (not_seated, naming the room).
func (ch *Chat) renewSeats(ctx context.Context) {
	atts := ch.hub.localSeats()
	if len(atts) == 0 {
		return
	}
	lost, err := ch.rooms.Renew(ctx, atts)
	if err != nil {
		ch.log.Debug("renew seats", "err", err)
		return
	}
	for _, a := range lost {
		for _, c := range ch.hub.UserClients(a.User) {
			if c.id != a.ID {
				continue
			}
			if _, err := ch.rooms.Reclaim(ctx, a.Room, a.User, rooms.Attach{ID: c.id}); err == nil {
				continue
			}
			ch.hub.removeFromRoom(a.Room, c)
			c.dropFeed(a.Room)
			c.SendError("not_seated", "your seat in "+a.Room+" expired and was taken; join the lobby again", a.Room, "")
		}
	}
}

// renewREST renews the seats of a polling session's rooms and its user's
// presence (a REST user in no room is online too). A seat that lapsed (the
// session did not poll within the lease) is dropped from the session's rooms
// and its rooms bit set, so this very poll tells the client to join again.
func (ch *Chat) renewREST(ctx context.Context, p Principal) {
	cur, err := ch.cursors.Cursors(ctx, p.Session)
	if err != nil {
		ch.log.Debug("read REST rooms", "err", err)
		return
	}
	atts := make([]rooms.Attachment, 0, len(cur))
	id := restAttach(p.Session).ID
	for room := range cur {
		atts = append(atts, rooms.Attachment{Room: room, User: p.User, ID: id})
	}
	held := make([]string, 0, len(cur))
	if len(atts) > 0 {
		lost, err := ch.rooms.Renew(ctx, atts)
		if err != nil {
			ch.log.Debug("renew REST seats", "err", err)
			lost = nil
		}
		gone := map[string]bool{}
		for _, a := range lost {
			gone[a.Room] = true
			if err := ch.cursors.DropCursor(ctx, p.Session, a.Room); err != nil {
				ch.log.Debug("drop lapsed REST room", "err", err)
			}
		}
		if len(gone) > 0 {
			if err := ch.cursors.MarkSessions(ctx, []string{p.Session}, dirty.Of(dirty.Rooms)); err != nil {
				ch.log.Debug("mark lapsed REST room", "err", err)
			}
		}
		for _, a := range atts {
			if !gone[a.Room] {
				held = append(held, a.Room)
			}
		}
	}
	ch.rest.sessions.put(p.User, p.Session, held, ch.now())
	ch.touchUser(ctx, p.User)
}

// touchPresence renews the presence of every user with a client or a
// recently polling REST session on this node, and the names of the guests
// with an open connection (an open WebSocket is activity).
func (ch *Chat) touchPresence(ctx context.Context, keeper nameKeeper) {
	byUser := map[string]map[string]struct{}{}
	add := func(user string, rs []string) {
		m := byUser[user]
		if m == nil {
			m = map[string]struct{}{}
			byUser[user] = m
		}
		for _, r := range rs {
			m[r] = struct{}{}
		}
	}
	conns := map[string][]presence.Conn{}
	for _, c := range ch.hub.Clients() {
		add(c.p.User, c.roomList())
		conns[c.p.User] = append(conns[c.p.User], connOf(c))
		if c.p.Holder != "" && keeper != nil {
			err := keeper.Admit(ctx, c.p.User, c.p.Holder, c.p.Expires)
			if errors.Is(err, identity.ErrNotHolder) || errors.Is(err, identity.ErrSignedOut) {
				c.Close(CloseSessionEnded, clipRunes(errcode.Message(err), 120))
			}
		}
	}
	for user, rs := range ch.rest.sessions.all(ch.now(), ch.lease()) {
		add(user, rs)
	}
	users := make([]presence.UserState, 0, len(byUser))
	for u, rs := range byUser {
		st := userState(u, rs)
		st.Conns = conns[u]
		users = append(users, st)
	}
	if len(users) == 0 {
		return
	}
	if err := ch.presence.Touch(ctx, ch.node, users); err != nil {
		ch.log.Debug("presence touch", "err", err)
	}
}

// touchUser writes this node's presence claim for user now: the rooms of
// its local clients and REST sessions, or offline when it has none here.
func (ch *Chat) touchUser(ctx context.Context, user string) {
	set := map[string]struct{}{}
	cs := ch.hub.UserClients(user)
	for _, c := range cs {
		for _, r := range c.roomList() {
			set[r] = struct{}{}
		}
	}
	restRooms, restHere := ch.rest.sessions.of(user, ch.now(), ch.lease())
	for _, r := range restRooms {
		set[r] = struct{}{}
	}
	if len(cs) == 0 && !restHere {
		if err := ch.presence.Offline(ctx, user, ch.node); err != nil {
			ch.log.Debug("presence offline", "user", user, "err", err)
		}
		return
	}
	st := userState(user, set)
	for _, c := range cs {
		st.Conns = append(st.Conns, connOf(c))
	}
	if err := ch.presence.Touch(ctx, ch.node, []presence.UserState{st}); err != nil {
		ch.log.Debug("presence touch", "user", user, "err", err)
	}
}

// connOf is c as the presence lists it.
func connOf(c *Client) presence.Conn { return presence.Conn{ID: c.id, Session: c.p.Session} }

// userState is user's presence with the set of rooms.
func userState(user string, set map[string]struct{}) presence.UserState {
	st := presence.UserState{User: user, Rooms: make([]string, 0, len(set))}
	for r := range set {
		st.Rooms = append(st.Rooms, r)
	}
	return st
}
