package realtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"hash/maphash"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/internal/bus"
	"github.com/chatd/chatd/names"
	"github.com/chatd/chatd/rooms"
)

// Hub is the node's one registry of local clients, by room and by user,
// behind sharded locks, and the bridge from each room with a local member
// to its Redis channel. It holds no pointer back to the node or the
// transport: what it needs it gets at construction (hubDeps).
//
// A room's channel is subscribed while the node has at least one local
// member there. Every message that arrives passes the room's Feed (in
// channel order, once each) and is handed to each member's own feed, which
// queues it. After the bus reconnects, the room's feed holds live messages,
// reads the stream after the last id it delivered and then goes live: the
// same catch-up a client does when it joins or resumes.
type Hub struct {
	d     hubDeps
	seed  maphash.Seed
	rooms [64]roomShard
	users [64]userShard
	count atomic.Int64 // clients registered: read on every upgrade, so not summed over the shards
	fan   fanOut
}

// fanOut runs the rooms' fan-out on GOMAXPROCS workers instead of the bus
// goroutine: one goroutine fanning out every room of the node was a fifth
// of a saturated node's CPU on one core (issue #42). A room always goes to
// the same worker, in the order the bus received its channel's messages
// and resubscriptions, so a room's feed sees exactly what it saw on the
// bus goroutine; rooms on different workers run in parallel. A queue
// holds fanQueue jobs; when it is full the bus waits, as it waited for the
// fan-out before. The workers are started with the first message, in the
// node's goroutines (hubDeps.run), and stop with them.
type fanOut struct {
	once sync.Once
	qs   []chan fanJob // nil: no workers (the node stopped first); the bus goroutine fans out
	stop chan struct{} // closed when the node's goroutines stop
}

const fanQueue = 1024

// fanJob is one message of a room's channel, or its resubscription.
type fanJob struct {
	r     *hubRoom
	p     []byte
	resub bool
}

func (j fanJob) run() {
	if j.resub {
		j.r.resubscribed()
		return
	}
	j.r.receive(j.p)
}

// fanWorker returns the hash that picks room's fan-out worker (modulo their
// number).
func (h *Hub) fanWorker(room string) uint64 { return maphash.String(h.seed, "fan:"+room) }

// dispatch hands j to its room's worker (on the bus goroutine).
func (h *Hub) dispatch(j fanJob) {
	h.fan.once.Do(h.startFanOut)
	if h.fan.qs == nil {
		j.run()
		return
	}
	select {
	case h.fan.qs[j.r.worker%uint64(len(h.fan.qs))] <- j:
	case <-h.fan.stop: // the node stopped: nobody is left to deliver to
	}
}

func (h *Hub) startFanOut() {
	stop := make(chan struct{})
	if !h.d.run(func(ctx context.Context) { <-ctx.Done(); close(stop) }) {
		return
	}
	n := max(runtime.GOMAXPROCS(0), 1)
	qs := make([]chan fanJob, n)
	for i := range qs {
		q := make(chan fanJob, fanQueue)
		qs[i] = q
		h.d.run(func(context.Context) {
			for {
				select {
				case j := <-q:
					j.run()
				case <-stop:
					return
				}
			}
		})
	}
	h.fan.qs, h.fan.stop = qs, stop
}

type roomShard struct {
	mu    sync.Mutex
	rooms map[string]*hubRoom
}

type userShard struct {
	mu    sync.Mutex
	users map[string]map[*Client]struct{}
}

// hubRoom is one room with local members.
type hubRoom struct {
	id     string
	hub    *Hub
	feed   *Feed  // the node's position in the room's stream
	worker uint64 // which fan-out worker takes its messages (modulo their number)

	ready chan struct{} // closed once subscribed (or failed: err set)
	err   error
	sub   *bus.Subscription
	start string // the newest message id once subscribed (StreamStart: none); set before ready closes

	mu      sync.Mutex        // guards members; deliveries hold it (they run under feed.mu)
	members map[*Client]*Feed // each member's own feed of the room
	gone    bool              // removed from the hub; a new hubRoom takes over
}

// event is a room event as it goes to members: its message id ("" for
// events that are not messages) and its encoded frame, shared by all.
type event struct {
	id    string
	frame []byte
	from  string // the typing user: not relayed back to that user
}

// hubDeps is what the Hub needs of the node: the bus, the rooms' channels
// and histories, and the node's owned goroutines.
type hubDeps struct {
	subscribe func(ctx context.Context, channel string, h bus.Handler) (*bus.Subscription, error)
	channel   func(room string) string
	read      func(room string) ReadFunc
	run       func(fn func(ctx context.Context)) bool
	env       *clientEnv  // what the clients it builds share (Register)
	blocks    BlockLister // reads a user's block set (blocks.go); nil: no blocks
	m         *metrics
	log       *slog.Logger
}

func newHub(d hubDeps) *Hub {
	h := &Hub{d: d, seed: maphash.MakeSeed()}
	for i := range h.rooms {
		h.rooms[i].rooms = map[string]*hubRoom{}
		h.users[i].users = map[string]map[*Client]struct{}{}
	}
	return h
}

func (h *Hub) roomShard(room string) *roomShard {
	return &h.rooms[maphash.String(h.seed, room)%uint64(len(h.rooms))]
}

// Users are registered under their canonical name (names.Canonical), so
// that an event naming "bob" reaches "Bob"'s connections.
func (h *Hub) userShard(user string) *userShard {
	return &h.users[maphash.String(h.seed, user)%uint64(len(h.users))]
}

// addUser registers c under its user unless the user has max clients here
// already (max <= 0: no bound).
func (h *Hub) addUser(c *Client, max int) bool {
	key := names.Canonical(c.p.User)
	sh := h.userShard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	m := sh.users[key]
	if max > 0 && len(m) >= max {
		return false
	}
	if m == nil {
		m = map[*Client]struct{}{}
		sh.users[key] = m
	}
	m[c] = struct{}{}
	h.count.Add(1)
	return true
}

// removeUser unregisters c; it reports false when c was not registered.
func (h *Hub) removeUser(c *Client) bool {
	key := names.Canonical(c.p.User)
	sh := h.userShard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.users[key][c]; !ok {
		return false
	}
	h.count.Add(-1)
	delete(sh.users[key], c)
	if len(sh.users[key]) == 0 {
		delete(sh.users, key)
	}
	return true
}

// UserClients returns user's clients on this node.
func (h *Hub) UserClients(user string) []*Client {
	key := names.Canonical(user)
	sh := h.userShard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	out := make([]*Client, 0, len(sh.users[key]))
	for c := range sh.users[key] {
		out = append(out, c)
	}
	return out
}

// Clients returns every client on this node.
func (h *Hub) Clients() []*Client {
	var out []*Client
	for i := range h.users {
		sh := &h.users[i]
		sh.mu.Lock()
		for _, m := range sh.users {
			for c := range m {
				out = append(out, c)
			}
		}
		sh.mu.Unlock()
	}
	return out
}

// Broadcast queues frame for every client of this node.
func (h *Hub) Broadcast(frame []byte) {
	for _, c := range h.Clients() {
		c.Send(frame)
	}
}

// Count returns the number of clients on this node.
func (h *Hub) Count() int { return int(h.count.Load()) }

// addToRoom makes c a local member of room, subscribing the room's channel
// first if c is the node's first member there. When it returns nil, every
// message after the id it returns (StreamStart: every message) reaches c's
// feed of the room: c's catch-up must not move past one of them
// (Feed.LiveAfter).
func (h *Hub) addToRoom(ctx context.Context, room string, c *Client, f *Feed) (string, error) {
	for {
		sh := h.roomShard(room)
		sh.mu.Lock()
		r := sh.rooms[room]
		first := r == nil
		if first {
			r = &hubRoom{id: room, hub: h, ready: make(chan struct{}), members: map[*Client]*Feed{},
				worker: h.fanWorker(room)}
			r.feed = NewFeed("", r.broadcast)
			sh.rooms[room] = r
		}
		// Under the room feed's lock no delivery runs: every message it
		// delivers after its position reaches the new member too.
		var since string
		r.feed.atPosition(func(last string) {
			since = last
			r.mu.Lock()
			r.members[c] = f
			r.mu.Unlock()
		})
		sh.mu.Unlock()

		if first {
			r.subscribe(ctx)
		}
		select {
		case <-r.ready:
		case <-ctx.Done():
			h.removeFromRoom(room, c)
			return "", ctx.Err()
		}
		if r.err != nil {
			h.removeFromRoom(room, c)
			return "", r.err
		}
		r.mu.Lock()
		gone := r.gone
		r.mu.Unlock()
		if !gone {
			if since == "" {
				// added before the room feed went live: it delivers
				// everything after its start
				since = r.start
			}
			return since, nil
		}
		// the room was torn down while we waited: join its successor
	}
}

// subscribe subscribes the room's channel, then learns the newest message
// id, from which a gap fill would start, and lets live messages through.
// When the newest id cannot be read the room fails (Redis is down): a room
// feed without a position could not fill a gap, nor tell a joining member
// where it went live.
func (r *hubRoom) subscribe(ctx context.Context) {
	defer close(r.ready)
	d := r.hub.d
	sub, err := d.subscribe(ctx, d.channel(r.id), bus.HandlerFuncs{
		OnReceive:      func(_ string, p []byte) { r.hub.dispatch(fanJob{r: r, p: p}) },
		OnResubscribed: func() { r.hub.dispatch(fanJob{r: r, resub: true}) },
	})
	if err != nil {
		r.err = err
		r.hub.drop(r)
		return
	}
	r.sub = sub
	// The node's position starts at the newest message: messages before it
	// are each client's own catch-up; messages after it arrive live.
	last, err := d.read(r.id)(ctx, "", 1)
	if err != nil {
		r.err = err
		r.hub.drop(r)
		_ = sub.Close(context.WithoutCancel(ctx))
		return
	}
	r.start = StreamStart
	if len(last) == 1 {
		r.start = last[0].ID
	}
	r.feed.StartAt(r.start)
}

// removeFromRoom takes c out of room; the node unsubscribes with its last
// member.
func (h *Hub) removeFromRoom(room string, c *Client) {
	sh := h.roomShard(room)
	sh.mu.Lock()
	r := sh.rooms[room]
	if r == nil {
		sh.mu.Unlock()
		return
	}
	r.mu.Lock()
	delete(r.members, c)
	empty := len(r.members) == 0
	if empty {
		r.gone = true
		delete(sh.rooms, room)
	}
	r.mu.Unlock()
	sh.mu.Unlock()
	if empty {
		h.d.run(func(ctx context.Context) {
			<-r.ready
			if r.sub != nil {
				_ = r.sub.Close(ctx)
			}
		})
	}
}

// drop removes a room whose subscription failed.
func (h *Hub) drop(r *hubRoom) {
	sh := h.roomShard(r.id)
	sh.mu.Lock()
	if sh.rooms[r.id] == r {
		delete(sh.rooms, r.id)
	}
	sh.mu.Unlock()
	r.mu.Lock()
	r.gone = true
	r.mu.Unlock()
}

// messagePrefix starts every message event the send script publishes.
var messagePrefix = []byte(`{"type":"message","message":{"id":"`)

// parseEvent finds an event's type and message id: by prefix for the
// messages the send script publishes, by decoding for the rest.
func parseEvent(p []byte) (event, bool) {
	if bytes.HasPrefix(p, messagePrefix) {
		rest := p[len(messagePrefix):]
		if i := bytes.IndexByte(rest, '"'); i > 0 {
			return event{id: string(rest[:i]), frame: p}, true
		}
	}
	var head struct {
		Type    string `json:"type"`
		User    string `json:"user"`
		Message struct {
			ID string `json:"id"`
		} `json:"message"`
	}
	if err := json.Unmarshal(p, &head); err != nil || head.Type == "" {
		return event{}, false
	}
	if head.Type == rooms.EventMessage {
		if head.Message.ID == "" {
			return event{}, false
		}
		return event{id: head.Message.ID, frame: p}, true
	}
	if head.Type == "typing" {
		return event{frame: p, from: head.User}, true
	}
	return event{frame: p}, true
}

// receive takes one payload of the room's channel (on its fan-out worker).
func (r *hubRoom) receive(p []byte) {
	ev, ok := parseEvent(p)
	if !ok {
		r.hub.d.m.badEvents.Inc()
		return
	}
	if ev.id != "" {
		r.feed.Live(ev.id, ev.frame)
		return
	}
	r.fanout(ev)
}

// broadcast is the room feed's deliver: a message, in order, once.
func (r *hubRoom) broadcast(id string, frame []byte) { r.fanout(event{id: id, frame: frame}) }

func (r *hubRoom) fanout(ev event) {
	r.mu.Lock()
	for c, f := range r.members {
		switch {
		case ev.id != "":
			f.Live(ev.id, ev.frame) // once each, in order
		case ev.from != "" && (c.p.User == ev.from || c.hides(ev.from)):
			// a typing event is not relayed back to its user, nor to
			// a user who blocks its user
		default:
			c.Send(ev.frame)
		}
	}
	n := len(r.members)
	r.mu.Unlock()
	r.hub.d.m.delivered.Add(float64(n))
}

// resubscribed runs on the room's fan-out worker when its channel was
// subscribed again after a reconnect: from here on live messages are held
// until the gap fill has delivered what was missed. Holding before the
// worker takes the room's next message (the bus queued both in order) is
// what keeps a live message from moving the position past the missed ones.
func (r *hubRoom) resubscribed() {
	r.mu.Lock()
	gone := r.gone
	r.mu.Unlock()
	if gone || !r.feed.Hold() {
		return // a fill is running; it reads to the end of the stream
	}
	r.hub.d.run(r.gapFill)
}

// gapFill reads the room's stream after the last delivered id, retrying
// while Redis comes back, and delivers what was missed. A gap it cannot
// fill — the position was trimmed from the history or Redis lost the
// stream, or Redis stayed away — is never skipped silently: it is logged,
// counted (chatd_room_gaps_unfilled_total) and every member is told with a
// resume_gap error event naming the room before the latest messages follow.
func (r *hubRoom) gapFill(ctx context.Context) {
	d := r.hub.d
	read := d.read(r.id)
	for attempt := 0; ; attempt++ {
		d.m.gapFills.Inc()
		from := r.feed.Last()
		d.log.Info("room gap fill", "room", r.id, "after", from, "attempt", attempt)
		err := r.feed.CatchUp(ctx, read, rooms.MaxHistoryLimit, 0, nil)
		if errors.Is(err, rooms.ErrResumeGap) {
			// the position was trimmed or Redis lost the stream: the
			// latest window is all there is
			r.unfilled(from, err)
			r.feed.Rewind()
			continue
		}
		if err == nil || ctx.Err() != nil {
			return
		}
		if attempt >= 50 {
			r.unfilled(from, err)
			r.feed.GoLive()
			return
		}
		sleep(ctx, 200*time.Millisecond)
	}
}

// unfilled reports a gap of the room after the id from that no read could
// fill: to the log, the metric, and each member (resume_gap).
func (r *hubRoom) unfilled(from string, err error) {
	d := r.hub.d
	d.m.gapsUnfilled.Inc()
	d.log.Warn("room gap could not be filled: members told", "room", r.id, "after", from, "err", err)
	r.mu.Lock()
	members := make([]*Client, 0, len(r.members))
	for c := range r.members {
		members = append(members, c)
	}
	r.mu.Unlock()
	for _, c := range members {
		c.SendError(errcode.ResumeGap, "messages of this room were missed and are no longer in the history; the latest follow", r.id, "")
	}
}

// LocalSeats returns the attachments of this node's clients: what their
// seats' renewal renews.
func (h *Hub) LocalSeats() []rooms.Attachment {
	var out []rooms.Attachment
	for i := range h.rooms {
		sh := &h.rooms[i]
		sh.mu.Lock()
		for id, r := range sh.rooms {
			r.mu.Lock()
			for c := range r.members {
				out = append(out, rooms.Attachment{Room: id, User: c.p.User, ID: c.id})
			}
			r.mu.Unlock()
		}
		sh.mu.Unlock()
	}
	return out
}
