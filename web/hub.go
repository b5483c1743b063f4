package web

import (
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"
	"sync"
	"time"

	"github.com/chatd/chatd/internal/bus"
	"github.com/chatd/chatd/rooms"
)

// hub holds this node's WebSocket clients by room, behind sharded locks,
// and bridges each room with a local member to its Redis channel.
//
// A room's channel is subscribed while the node has at least one local
// member there. Every message that arrives goes through the room's
// delivery lock, in channel order, to each member's bounded send queue; a
// full queue disconnects that member only (client.enqueue). After the bus
// reconnects, the room reads its stream after the last id it delivered and
// delivers what it missed, holding live messages back meanwhile, so members
// see every message once and in order.
type hub struct {
	s      *Server
	shards [64]hubShard
}

type hubShard struct {
	mu    sync.Mutex
	rooms map[string]*hubRoom
}

// hubRoom is one room with local members.
type hubRoom struct {
	id string
	h  *hub

	ready chan struct{} // closed once subscribed (or failed: err set)
	err   error
	sub   *bus.Subscription

	mu      sync.Mutex // orders deliveries; guards the fields below
	members map[*client]struct{}
	lastID  string   // last message id delivered on this node; "" = none yet
	filling bool     // a gap fill is running: live messages wait in pending
	again   bool     // resubscribed again during the fill: read once more
	pending [][]byte // live payloads held back during a gap fill
	gone    bool     // removed from the hub; a new hubRoom takes over
}

func newHub(s *Server) *hub {
	h := &hub{s: s}
	for i := range h.shards {
		h.shards[i].rooms = map[string]*hubRoom{}
	}
	return h
}

func (h *hub) shard(room string) *hubShard {
	f := fnv.New32a()
	_, _ = f.Write([]byte(room))
	return &h.shards[f.Sum32()%uint32(len(h.shards))]
}

// add makes c a local member of room, subscribing the room's channel first
// if c is the node's first member there. When add returns nil, every
// message published from now on reaches c.
func (h *hub) add(ctx context.Context, room string, c *client) error {
	for {
		sh := h.shard(room)
		sh.mu.Lock()
		r := sh.rooms[room]
		first := r == nil
		if first {
			r = &hubRoom{id: room, h: h, ready: make(chan struct{}), members: map[*client]struct{}{}}
			sh.rooms[room] = r
		}
		r.mu.Lock()
		r.members[c] = struct{}{}
		r.mu.Unlock()
		sh.mu.Unlock()

		if first {
			r.subscribe(ctx)
		}
		select {
		case <-r.ready:
		case <-ctx.Done():
			h.remove(room, c)
			return ctx.Err()
		}
		if r.err != nil {
			h.remove(room, c)
			return r.err
		}
		r.mu.Lock()
		gone := r.gone
		r.mu.Unlock()
		if !gone {
			return nil
		}
		// the room was torn down while we waited: join its successor
	}
}

// subscribe subscribes the room's channel and learns the id of the newest
// message, from which a gap fill would start.
func (r *hubRoom) subscribe(ctx context.Context) {
	defer close(r.ready)
	s := r.h.s
	sub, err := s.bus.Subscribe(ctx, s.rooms.Channel(r.id), bus.HandlerFuncs{
		OnReceive:      func(_ string, p []byte) { r.receive(p) },
		OnResubscribed: r.resubscribed,
	})
	if err != nil {
		r.err = err
		r.h.drop(r)
		return
	}
	r.sub = sub
	last, err := s.rooms.History(ctx, r.id, "", 1)
	if err == nil && len(last) == 1 {
		r.mu.Lock()
		if r.lastID == "" {
			r.lastID = last[0].ID
		}
		r.mu.Unlock()
	}
}

// remove takes c out of room; the node unsubscribes with its last member.
// It reports whether c's user has another local connection in the room.
func (h *hub) remove(room string, c *client) (userStillHere bool) {
	sh := h.shard(room)
	sh.mu.Lock()
	r := sh.rooms[room]
	if r == nil {
		sh.mu.Unlock()
		return false
	}
	r.mu.Lock()
	delete(r.members, c)
	empty := len(r.members) == 0
	for m := range r.members {
		if m.user == c.user {
			userStillHere = true
			break
		}
	}
	if empty {
		r.gone = true
		delete(sh.rooms, room)
	}
	r.mu.Unlock()
	sh.mu.Unlock()
	if empty {
		go func() {
			<-r.ready
			if r.sub != nil {
				_ = r.sub.Close(context.Background())
			}
		}()
	}
	return userStillHere
}

// drop removes a room whose subscription failed.
func (h *hub) drop(r *hubRoom) {
	sh := h.shard(r.id)
	sh.mu.Lock()
	if sh.rooms[r.id] == r {
		delete(sh.rooms, r.id)
	}
	sh.mu.Unlock()
	r.mu.Lock()
	r.gone = true
	r.mu.Unlock()
}

// frameHead is the part of a room event the hub reads.
type frameHead struct {
	Type    string `json:"type"`
	Message struct {
		ID string `json:"id"`
	} `json:"message"`
}

// receive delivers one payload of the room's channel to the local members.
func (r *hubRoom) receive(p []byte) {
	var head frameHead
	if err := json.Unmarshal(p, &head); err != nil || head.Type == "" {
		r.h.s.m.badEvents.Inc()
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if head.Type == "message" {
		if r.filling {
			r.pending = append(r.pending, p)
			return
		}
		if head.Message.ID <= r.lastID {
			return // already delivered by a gap fill
		}
		r.lastID = head.Message.ID
	}
	r.broadcastLocked(head.Type, head.Message.ID, p)
}

func (r *hubRoom) broadcastLocked(typ, id string, p []byte) {
	for c := range r.members {
		c.deliver(r.id, typ, id, p)
	}
	r.h.s.m.delivered.Add(float64(len(r.members)))
}

// resubscribed runs on the bus goroutine when the room's channel was
// subscribed again after a reconnect: from here on, live messages are held
// back until the gap fill has delivered what was missed. Marking this
// before the bus dispatches the next message is what keeps a live message
// from moving lastID past the missed ones.
func (r *hubRoom) resubscribed() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gone {
		return
	}
	if r.filling {
		r.again = true // a fill is running; its read may predate this outage
		return
	}
	r.filling = true
	go r.gapFill()
}

// gapFill reads the room's stream after the last delivered id and delivers
// what was missed, then the live messages held back meanwhile, each message
// once and in order. It reads again while reconnects keep happening.
func (r *hubRoom) gapFill() {
	s := r.h.s
	for {
		r.mu.Lock()
		after := r.lastID
		r.again = false
		r.mu.Unlock()

		missed := r.readAfter(after)
		s.m.gapFills.Inc()

		r.mu.Lock()
		s.log.Debug("gap fill", "room", r.id, "after", after, "read", len(missed), "pending", len(r.pending))
		for _, m := range missed {
			if m.ID <= r.lastID {
				continue
			}
			p, err := json.Marshal(rooms.Event{Type: rooms.EventMessage, Message: &m})
			if err != nil {
				continue
			}
			r.lastID = m.ID
			s.m.gapFilled.Inc()
			r.broadcastLocked("message", m.ID, p)
		}
		if r.again && !r.gone {
			r.mu.Unlock()
			continue
		}
		r.filling = false
		pending := r.pending
		r.pending = nil
		for _, p := range pending {
			var head frameHead
			_ = json.Unmarshal(p, &head)
			if head.Message.ID <= r.lastID {
				continue
			}
			r.lastID = head.Message.ID
			r.broadcastLocked("message", head.Message.ID, p)
		}
		r.mu.Unlock()
		return
	}
}

// readAfter reads the room's history after id, retrying while Redis comes
// back. When the id is gone (trimmed, or Redis lost its data) it reads the
// latest messages instead.
func (r *hubRoom) readAfter(after string) []rooms.Message {
	s := r.h.s
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		missed, err := s.rooms.History(ctx, r.id, after, rooms.MaxHistoryLimit)
		if errors.Is(err, rooms.ErrResumeGap) {
			missed, err = s.rooms.History(ctx, r.id, "", rooms.MaxHistoryLimit)
		}
		cancel()
		if err == nil {
			return missed
		}
		if attempt >= 50 {
			s.log.Warn("gap fill gave up", "room", r.id, "err", err)
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// seats returns the (room, user) seats held by this node's clients.
func (h *hub) seats() []rooms.Seat {
	seen := map[rooms.Seat]struct{}{}
	var out []rooms.Seat
	for i := range h.shards {
		sh := &h.shards[i]
		sh.mu.Lock()
		for id, r := range sh.rooms {
			r.mu.Lock()
			for c := range r.members {
				st := rooms.Seat{Room: id, User: c.user}
				if _, ok := seen[st]; !ok {
					seen[st] = struct{}{}
					out = append(out, st)
				}
			}
			r.mu.Unlock()
		}
		sh.mu.Unlock()
	}
	return out
}

// members returns the local clients of room.
func (h *hub) members(room string) []*client {
	sh := h.shard(room)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	r := sh.rooms[room]
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*client, 0, len(r.members))
	for c := range r.members {
		out = append(out, c)
	}
	return out
}
