package realtime

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/identity"
	"github.com/chatd/chatd/presence"
	"github.com/chatd/chatd/rooms"
	"github.com/chatd/chatd/settings"
)

// Connect registers a realtime client of user (session is its token's
// session id, holder its guest holder id or "") writing through t, and sends it hello and the notices it has
// not seen. It returns ErrTooManyConnections when the user has
// MaxConnsPerUser clients on this node already, ErrDraining while the node
// shuts down.
func (n *Node) Connect(user, session, holder, addr, connID string, t Transport) (*Client, error) {
	select {
	case <-n.draining:
		return nil, ErrDraining
	default:
	}
	id := "ws:" + n.cfg.Node + ":" + n.run + ":" + strconv.FormatUint(n.seqN.Add(1), 36)
	c := newClient(n, t, user, session, holder, id)
	c.addr, c.connID = addr, connID
	if !n.hub.addUser(c, n.cfg.MaxConnsPerUser) {
		c.ping.Stop()
		return nil, ErrTooManyConnections
	}
	n.m.open.Inc()
	c.SendJSON(map[string]string{"type": "hello", "user": user, "node": n.cfg.Node, "motd": n.settings.String(settings.MOTD)})
	n.goRun(func(ctx context.Context) { n.touchUser(ctx, user) }) // online at once
	n.goRun(func(ctx context.Context) { n.deliverUnseenNotices(ctx, c) })
	return c, nil
}

// Disconnect forgets a client whose connection ended: it leaves the hub and
// detaches from each room it was in. Only the client's own attachment goes:
// the seat stays while the user has another connection or REST session in
// the room, on this node or any other.
func (n *Node) Disconnect(ctx context.Context, c *Client) {
	c.Close(CloseNormal, "")
	n.hub.removeUser(c)
	n.m.open.Dec()
	for _, room := range c.roomList() {
		n.hub.removeFromRoom(room, c)
		n.detach(ctx, room, c)
	}
	n.touchUser(ctx, c.user)
	n.ReleaseConn(ctx, c.addr, c.connID)
}

func (n *Node) detach(ctx context.Context, room string, c *Client) {
	freed, err := n.rooms.Detach(ctx, room, c.user, c.id)
	if err != nil && !errors.Is(err, rooms.ErrNotSeated) && !errors.Is(err, rooms.ErrUnknownRoom) {
		n.log.Debug("detach", "room", room, "user", c.user, "err", err)
		return
	}
	if freed {
		n.markRoom(room, dirty.Of(dirty.Rooms))
	}
}

// Join seats the client's user in lobby (or answers the room it holds
// there), makes this connection an attachment of the seat, and replays the
// latest messages before going live.
func (c *Client) Join(ctx context.Context, lobby string) error {
	n := c.node
	if err := n.allowNewLobby(ctx, c.user, lobby); err != nil {
		return err
	}
	room, err := n.rooms.Join(ctx, lobby, c.user, rooms.Attach{ID: c.id})
	if err != nil {
		return err
	}
	n.markRoom(room.ID, dirty.Of(dirty.Rooms))
	return c.enter(ctx, room, "")
}

// Resume takes the client back into room after a disconnect: the seat is
// kept or taken back (if it lapsed and a seat is free) with this
// connection attached, and everything after the message id after is
// replayed (up to ResumeMax), page by page as the client reads, then live.
// after may be "" (the latest messages, like a join) or a message id in
// either form. It validates before any side effect.
func (c *Client) Resume(ctx context.Context, room, after string) error {
	if after != "" {
		id, err := rooms.NormalizeID(after)
		if err != nil {
			return err
		}
		after = id
	}
	if _, _, err := rooms.ParseRoom(room); err != nil {
		return err
	}
	n := c.node
	r, err := n.rooms.Reclaim(ctx, room, c.user, rooms.Attach{ID: c.id})
	if err != nil {
		return err
	}
	n.markRoom(room, dirty.Of(dirty.Rooms))
	if c.InRoom(room) {
		if after == "" {
			c.SendJSON(map[string]any{"type": "joined", "room": r})
			return nil
		}
		n.hub.removeFromRoom(room, c)
		c.dropFeed(room)
	}
	return c.enter(ctx, r, after)
}

// enter subscribes c to the room, says joined, then replays history from
// after ("" = the latest JoinHistory) and goes live: no gap, no duplicate.
func (c *Client) enter(ctx context.Context, room rooms.Room, after string) error {
	n := c.node
	c.fmu.Lock()
	if c.feeds[room.ID] != nil {
		c.fmu.Unlock()
		c.SendJSON(map[string]any{"type": "joined", "room": room})
		return nil // already in: a repeated join answers with the same room
	}
	f := NewFeed(after, func(_ string, frame []byte) { c.Send(frame) })
	c.feeds[room.ID] = f
	c.fmu.Unlock()
	if err := n.hub.addToRoom(ctx, room.ID, c, f); err != nil {
		c.dropFeed(room.ID)
		return err
	}
	// Other nodes learn the user is here before the client hears it joined.
	n.touchUser(ctx, c.user)
	c.SendJSON(map[string]any{"type": "joined", "room": room})
	err := f.CatchUp(ctx, n.reader(room.ID), JoinHistory, ResumeMax, c.waitDrained)
	if isGap(err) {
		c.SendError("resume_gap", "the message to resume after is no longer in the history; showing the latest messages", room.ID, "")
		f.Rewind()
		err = f.CatchUp(ctx, n.reader(room.ID), JoinHistory, ResumeMax, c.waitDrained)
	}
	if err != nil {
		n.hub.removeFromRoom(room.ID, c)
		c.dropFeed(room.ID)
		return err
	}
	return nil
}

func (c *Client) dropFeed(room string) {
	c.fmu.Lock()
	delete(c.feeds, room)
	c.fmu.Unlock()
}

// Leave frees the user's seat in room (an explicit leave ends the seat for
// all the user's connections) and takes the client out of it.
func (c *Client) Leave(ctx context.Context, room string) error {
	if _, _, err := rooms.ParseRoom(room); err != nil {
		return err
	}
	n := c.node
	if err := n.rooms.Leave(ctx, room, c.user); err != nil && !errors.Is(err, rooms.ErrNotSeated) {
		return err
	}
	n.leftRoom(c.user, room, c)
	n.touchUser(ctx, c.user)
	return nil
}

// leftRoom takes every client of user on this node out of room after an
// explicit leave (which ends the seat for all of them); each but the one
// that asked (by) hears "left". REST members are marked.
func (n *Node) leftRoom(user, room string, by *Client) {
	for _, c := range n.hub.UserClients(user) {
		if !c.InRoom(room) {
			continue
		}
		n.hub.removeFromRoom(room, c)
		c.dropFeed(room)
		if c != by {
			c.SendJSON(map[string]string{"type": "left", "room": room})
		}
	}
	n.markRoom(room, dirty.Of(dirty.Rooms))
}

// renewSeats renews the leases of every attachment of this node's clients
// in one pipelined round trip; an attachment that is gone is taken back if
// it can be, or its client is told (not_seated, naming the room).
func (n *Node) renewSeats(ctx context.Context) {
	atts := n.hub.localSeats()
	if len(atts) == 0 {
		return
	}
	lost, err := n.rooms.Renew(ctx, atts)
	if err != nil {
		n.log.Debug("renew seats", "err", err)
		return
	}
	for _, a := range lost {
		for _, c := range n.hub.UserClients(a.User) {
			if c.id != a.ID {
				continue
			}
			if _, err := n.rooms.Reclaim(ctx, a.Room, a.User, rooms.Attach{ID: c.id}); err == nil {
				continue
			}
			n.hub.removeFromRoom(a.Room, c)
			c.dropFeed(a.Room)
			c.SendError("not_seated", "your seat in "+a.Room+" expired and was taken; join the lobby again", a.Room, "")
		}
	}
}

// touchPresence renews the presence of every user with a client or a
// recently polling REST session on this node.
func (n *Node) touchPresence(ctx context.Context) {
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
	for _, c := range n.hub.Clients() {
		add(c.user, c.roomList())
		if c.holder != "" {
			// an open WebSocket is activity: it keeps the guest's name
			if err := n.identity.Touch(ctx, c.user, c.holder); errors.Is(err, identity.ErrNotHolder) {
				c.Close(CloseSessionEnded, "your session ended: sign in again")
			}
		}
	}
	for user, rs := range n.rest.all(n.cfg.Now(), n.lease()) {
		add(user, rs)
	}
	users := make([]presence.UserState, 0, len(byUser))
	for u, rs := range byUser {
		users = append(users, userState(u, rs))
	}
	if len(users) == 0 {
		return
	}
	if err := n.presence.Touch(ctx, n.cfg.Node, users); err != nil {
		n.log.Debug("presence touch", "err", err)
	}
}

// touchUser writes this node's presence claim for user now: the rooms of
// its local clients and REST sessions, or offline when it has none here.
func (n *Node) touchUser(ctx context.Context, user string) {
	set := map[string]struct{}{}
	cs := n.hub.UserClients(user)
	for _, c := range cs {
		for _, r := range c.roomList() {
			set[r] = struct{}{}
		}
	}
	restRooms, restHere := n.rest.of(user, n.cfg.Now(), n.lease())
	for _, r := range restRooms {
		set[r] = struct{}{}
	}
	if len(cs) == 0 && !restHere {
		if err := n.presence.Offline(ctx, user, n.cfg.Node); err != nil {
			n.log.Debug("presence offline", "user", user, "err", err)
		}
		return
	}
	if err := n.presence.Touch(ctx, n.cfg.Node, []presence.UserState{userState(user, set)}); err != nil {
		n.log.Debug("presence touch", "user", user, "err", err)
	}
}

// userState is user's presence with the set of rooms.
func userState(user string, set map[string]struct{}) presence.UserState {
	st := presence.UserState{User: user, Rooms: make([]string, 0, len(set))}
	for r := range set {
		st.Rooms = append(st.Rooms, r)
	}
	return st
}

// SignedOut closes user's clients on this node after the guest signed out
// (holder "" = any); other nodes close theirs when their renewal finds the
// name released.
func (n *Node) SignedOut(user, holder string) {
	for _, c := range n.hub.UserClients(user) {
		if holder == "" || c.holder == holder {
			c.Close(CloseSessionEnded, "signed out")
		}
	}
}

// Typing relays a typing indicator of the client's user to the room's
// other members on every node: never stored, at most one per user and room
// every TypingEvery (more are dropped silently). The client must be in the
// room.
func (c *Client) Typing(ctx context.Context, room string) error {
	if !c.InRoom(room) {
		return rooms.ErrNotSeated
	}
	if !c.node.typing.allow(c.user+"\x00"+room, time.Now()) {
		return nil
	}
	return c.node.rooms.PublishTyping(ctx, room, c.user)
}

// Read records that the client's user has read room up to message id.
func (c *Client) Read(ctx context.Context, room, id string) error {
	return c.node.rooms.MarkRead(ctx, room, c.user, id)
}

// TypingEvery is the least time between two relayed typing events of one
// user in one room.
const TypingEvery = 2 * time.Second

// throttle lets one event per key through every TypingEvery.
type throttle struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func (t *throttle) allow(key string, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last == nil {
		t.last = map[string]time.Time{}
	}
	if last, ok := t.last[key]; ok && now.Sub(last) < TypingEvery {
		return false
	}
	if len(t.last) > 100_000 {
		for k, v := range t.last {
			if now.Sub(v) >= TypingEvery {
				delete(t.last, k)
			}
		}
	}
	t.last[key] = now
	return true
}

// Unread returns, for each room user is seated in (on any node, over
// WebSocket or REST), the messages after the user's last-read id, capped.
func (n *Node) Unread(ctx context.Context, user, session string) (map[string]int, error) {
	set := map[string]struct{}{}
	st, err := n.presence.Get(ctx, user)
	if err != nil {
		return nil, err
	}
	for _, r := range st.Rooms {
		set[r] = struct{}{}
	}
	cur, err := n.dirty.Cursors(ctx, session)
	if err != nil {
		return nil, err
	}
	for r := range cur {
		set[r] = struct{}{}
	}
	list := make([]string, 0, len(set))
	for r := range set {
		list = append(list, r)
	}
	if len(list) == 0 {
		return map[string]int{}, nil
	}
	return n.rooms.Unread(ctx, user, list)
}
