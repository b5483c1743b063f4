package web

import (
	"context"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/names"
	"github.com/chatd/chatd/presence"
	"github.com/chatd/chatd/rooms"
	"github.com/chatd/chatd/settings"
)

// conns is the node's registry of open WebSocket clients, by user.
type conns struct {
	mu       sync.Mutex
	byUser   map[string]map[*client]struct{}
	reserved map[string]int // upgrades admitted but not yet registered
}

func newConns() *conns {
	return &conns{byUser: map[string]map[*client]struct{}{}, reserved: map[string]int{}}
}

// reserve admits one more connection for user unless it has max already.
func (cs *conns) reserve(user string, max int) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if max > 0 && len(cs.byUser[user])+cs.reserved[user] >= max {
		return false
	}
	cs.reserved[user]++
	return true
}

// unreserve gives back a reservation whose upgrade failed.
func (cs *conns) unreserve(user string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.reserved[user] > 0 {
		cs.reserved[user]--
		if cs.reserved[user] == 0 {
			delete(cs.reserved, user)
		}
	}
}

func (cs *conns) add(c *client) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.reserved[c.user] > 0 {
		cs.reserved[c.user]--
		if cs.reserved[c.user] == 0 {
			delete(cs.reserved, c.user)
		}
	}
	m := cs.byUser[c.user]
	if m == nil {
		m = map[*client]struct{}{}
		cs.byUser[c.user] = m
	}
	m[c] = struct{}{}
}

func (cs *conns) remove(c *client) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	delete(cs.byUser[c.user], c)
	if len(cs.byUser[c.user]) == 0 {
		delete(cs.byUser, c.user)
	}
}

// of returns user's open clients on this node.
func (cs *conns) of(user string) []*client {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	out := make([]*client, 0, len(cs.byUser[user]))
	for c := range cs.byUser[user] {
		out = append(out, c)
	}
	return out
}

// all returns every open client.
func (cs *conns) all() []*client {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var out []*client
	for _, m := range cs.byUser {
		for c := range m {
			out = append(out, c)
		}
	}
	return out
}

func (cs *conns) count() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	n := 0
	for _, m := range cs.byUser {
		n += len(m)
	}
	return n
}

// broadcast queues p for every open client of this node.
func (cs *conns) broadcast(p []byte) {
	for _, c := range cs.all() {
		c.enqueue(p)
	}
}

// say checks a chat message against the live settings and the user's rate
// limit, then sends it: the path of WebSocket say and REST posts alike.
func (s *Server) say(ctx context.Context, user, room, text string) (rooms.Message, error) {
	if text == "" {
		return rooms.Message{}, errf(400, "bad_request", `"text" is empty`)
	}
	if !utf8.ValidString(text) {
		return rooms.Message{}, errf(400, "bad_request", `"text" is not valid UTF-8`)
	}
	if max := s.settings.Int(settings.MessageMaxLength); utf8.RuneCountInString(text) > max {
		return rooms.Message{}, errf(400, "too_long", "the message is longer than %d characters", max)
	}
	if err := names.Room(room); err != nil {
		return rooms.Message{}, err // a bad name costs no rate-limit token
	}
	ok, retry, err := s.limiter.Allow(ctx, user)
	if err != nil {
		return rooms.Message{}, err
	}
	if !ok {
		return rooms.Message{}, errf(429, "rate_limited", "you are sending too fast; wait %.1f s", retry.Seconds())
	}
	msg, err := s.rooms.Send(ctx, room, user, text)
	if err != nil {
		return rooms.Message{}, err
	}
	// REST members poll for it; one pipelined mark for the whole room.
	s.goRun(func() { s.markRoom(room, dirty.Of(dirty.Messages)) })
	return msg, nil
}

// markRoom sets bits in the dirty masks of the room's members' REST
// sessions, coalesced per room (see coalesce): a busy room costs a few
// marks per second, not one per message.
func (s *Server) markRoom(room string, bits dirty.Mask) {
	s.coalesce(room, bits, func(ctx context.Context, bits dirty.Mask) {
		r, err := s.rooms.Room(ctx, room)
		if err != nil {
			return
		}
		if err := s.dirty.MarkUsers(ctx, r.Members, bits); err != nil {
			s.log.Debug("mark room members dirty", "room", room, "err", err)
		}
	})
}

// pendingMark is a mark in flight, and the bits asked for meanwhile.
type pendingMark struct{ again dirty.Mask }

// coalesce runs mark(bits) for key unless one is already running on this
// node; then the bits fold into a single rerun after it. Producers call it
// per event; the marks it sends are bounded by how long a mark takes, not
// by how many events there are. Keys are room ids and "lb:<board>" topics,
// which can't collide (room ids hold no ':').
func (s *Server) coalesce(key string, bits dirty.Mask, mark func(context.Context, dirty.Mask)) {
	s.marksMu.Lock()
	if m, ok := s.marks[key]; ok {
		m.again |= bits
		s.marksMu.Unlock()
		return
	}
	s.marks[key] = &pendingMark{}
	s.marksMu.Unlock()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		mark(ctx, bits)
		cancel()
		s.marksMu.Lock()
		m := s.marks[key]
		bits, m.again = m.again, 0
		if bits == 0 {
			delete(s.marks, key)
			s.marksMu.Unlock()
			return
		}
		s.marksMu.Unlock()
	}
}

// startBackground starts the node's periodic work: seat lease renewal,
// presence, node heartbeat, the seat sweeper.
func (s *Server) startBackground(ctx context.Context) {
	s.goRun(func() { s.every(ctx, func() time.Duration { return s.lease() / 3 }, s.renewSeats) })
	s.goRun(func() { s.every(ctx, func() time.Duration { return s.presence.TTL() / 3 }, s.touchPresence) })
	s.goRun(func() { s.every(ctx, func() time.Duration { return 5 * time.Second }, s.heartbeat) })
	s.goRun(func() { _ = s.rooms.RunSweeper(ctx, time.Second) })
}

func (s *Server) lease() time.Duration {
	return time.Duration(s.settings.Int(settings.SeatLeaseSeconds)) * time.Second
}

// every runs fn now and then every interval() until ctx ends.
func (s *Server) every(ctx context.Context, interval func() time.Duration, fn func(context.Context)) {
	for {
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		fn(fctx)
		cancel()
		d := interval()
		if d < 100*time.Millisecond {
			d = 100 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
}

// renewSeats renews the leases of every seat held by this node's clients in
// one pipelined round trip; a lost seat is taken back if it can be, or the
// client is told.
func (s *Server) renewSeats(ctx context.Context) {
	seats := s.hub.seats()
	if len(seats) == 0 {
		return
	}
	lost, err := s.rooms.Renew(ctx, seats)
	if err != nil {
		s.log.Debug("renew seats", "err", err)
		return
	}
	for _, st := range lost {
		if _, err := s.rooms.Reclaim(ctx, st.Room, st.User); err == nil {
			continue
		}
		for _, c := range s.hub.members(st.Room) {
			if c.user != st.User {
				continue
			}
			s.hub.remove(st.Room, c)
			c.forget(st.Room)
			c.sendJSON(map[string]string{"type": "error", "code": "not_seated",
				"message": "your seat in " + st.Room + " expired and was taken; join the lobby again"})
		}
	}
}

func (s *Server) touchPresence(ctx context.Context) {
	var users []presence.UserState
	byUser := map[string]map[string]struct{}{}
	for _, c := range s.conns.all() {
		m := byUser[c.user]
		if m == nil {
			m = map[string]struct{}{}
			byUser[c.user] = m
		}
		for _, r := range c.roomsHeld() {
			m[r] = struct{}{}
		}
	}
	for u, rs := range byUser {
		st := presence.UserState{User: u}
		for r := range rs {
			st.Rooms = append(st.Rooms, r)
		}
		users = append(users, st)
	}
	if len(users) == 0 {
		return
	}
	if err := s.presence.Touch(ctx, s.cfg.Node, users); err != nil {
		s.log.Debug("presence touch", "err", err)
	}
}

func (s *Server) heartbeat(ctx context.Context) {
	err := s.presence.Heartbeat(ctx, presence.Node{ID: s.cfg.Node, Addr: s.cfg.Addr, Connections: s.conns.count(), LastHeartbeat: s.cfg.Now()})
	if err != nil {
		s.log.Debug("node heartbeat", "err", err)
	}
}

// watchSettings pushes every settings change to this node's WebSocket
// clients as a settings event.
func (s *Server) watchSettings() {
	s.settings.Watch("", func(ch settings.Change) {
		s.conns.broadcast(mustJSON(map[string]any{"type": "settings", "key": ch.Key, "value": ch.Value, "version": ch.Version}))
	})
}
