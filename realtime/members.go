package realtime

import (
	"context"
	"errors"
	"time"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/names"
	"github.com/chatd/chatd/rooms"
)

// The core's API for the use cases above it (realtime/chat first): how a
// client is registered and unregistered, enters and leaves a room's feed,
// queues its says and is refused. The rules of what a frame does are the
// use cases'; what a client is, and how it goes live in a room without a
// gap or a duplicate, is the core's, written once here.

// ClientOptions are a new client's own values.
type ClientOptions struct {
	// ID is the client's attachment id: unique per node run. Required.
	ID string
	// Lease is its per-address connection lease id ("" = none).
	Lease string
}

// Register builds a client of p writing through t and makes it one of
// the node's clients, unless p's user has max clients here already (max
// <= 0: no bound): then it returns ErrTooManyConnections. It starts the
// read of the user's block set (Config.Blocks), which Enter waits for.
func (h *Hub) Register(t Transport, p Principal, o ClientOptions, max int) (*Client, error) {
	c := newClient(h.d.env, t, p, o.ID)
	c.lease = o.Lease
	if h.d.blocks != nil {
		c.bl.ready = make(chan struct{})
	}
	if !h.addUser(c, max) {
		c.ping.Stop()
		return nil, ErrTooManyConnections
	}
	h.d.m.open.Inc()
	// registered first: a change's event from now on reaches c, and wins
	// over this read if it comes while the read runs (blocks.go)
	if c.bl.ready != nil && !h.d.run(func(ctx context.Context) { h.loadBlocks(ctx, names.Canonical(p.User), []*Client{c}) }) {
		c.blocksReady() // the node stops: nothing will be delivered
	}
	return c, nil
}

// Unregister takes c out of the node's clients; it reports false when c
// was not (or no longer) registered. It leaves c's rooms to the caller
// (Leave), which decides what each room's seat becomes.
func (h *Hub) Unregister(c *Client) bool {
	if !h.removeUser(c) {
		return false
	}
	h.d.m.open.Dec()
	return true
}

// Leave takes c out of room on this node: no more of the room's events
// reach it, and its feed of the room is forgotten.
func (h *Hub) Leave(room string, c *Client) {
	h.removeFromRoom(room, c)
	c.dropFeed(room)
}

// Enter makes c a live member of room: it subscribes c, calls live once
// the point it went live is fixed (the caller says "joined" there), then
// replays history from after ("" = the latest JoinHistory), page by page
// as c reads, and goes live: no gap, no duplicate. Without after, every
// message after where c went live reaches it however late the history is
// read; floor, when set (a message id, or StreamStart), is an earlier
// point every message after which c is owed as well. A position the
// history no longer holds is told to c (resume_gap) and replaced by the
// latest messages. Messages of users c's user blocks are left out, live
// and replayed alike (blocks.go); Enter first waits for c's block set to
// be read. It reports already (and calls nothing) when c is in room; on
// an error c is not in room.
func (h *Hub) Enter(ctx context.Context, c *Client, room, after, floor string, live func()) (already bool, err error) {
	if err := c.waitBlocks(ctx); err != nil {
		return false, err
	}
	c.fmu.Lock()
	if c.feeds[room] != nil {
		c.fmu.Unlock()
		return true, nil
	}
	f := NewFeed(after, c.deliverMessage)
	c.feeds[room] = f
	c.fmu.Unlock()
	since, err := h.addToRoom(ctx, room, c, f)
	if err != nil {
		c.dropFeed(room)
		return false, err
	}
	if after == "" && floor != "" && floor < since {
		since = floor
	}
	f.LiveAfter(since) // whenever the read below runs, nothing after since is skipped
	live()
	read := h.d.read(room)
	err = f.CatchUp(ctx, read, JoinHistory, ResumeMax, c.waitDrained)
	if errors.Is(err, rooms.ErrResumeGap) {
		if after == "" {
			// a join whose own start was trimmed before it could read
			h.d.m.gapsUnfilled.Inc()
			h.d.log.Warn("join could not read from where it went live: client told", "room", room, "user", c.p.User)
		}
		c.SendError(errcode.ResumeGap, "the message to resume after is no longer in the history; showing the latest messages", room, "")
		f.Rewind()
		err = f.CatchUp(ctx, read, JoinHistory, ResumeMax, c.waitDrained)
	}
	if err != nil {
		h.Leave(room, c)
		return false, err
	}
	return false, nil
}

// GapUnfilled counts a gap in a room's messages a reader was told of and
// could not fill (a poll's cursor trimmed past): the metric the core's own
// gaps count in.
func (h *Hub) GapUnfilled() { h.d.m.gapsUnfilled.Inc() }

// MaxSayBatch bounds the says of one client sent in one batch.
const MaxSayBatch = 64

// QueueSay queues s: when the client has MaxQueuedSays says (or
// maxQueuedSayBytes) waiting, QueueSay waits for room — the reader stops
// reading, and TCP pushes back on the peer. One worker per client, on the
// node's goroutines, hands the queue to send in arrival order, at most
// MaxSayBatch at a time, until it is empty. It returns ErrClientClosed
// when the client closed meanwhile (queued says are then dropped, never
// sent), ErrDraining when the node stopped.
func (c *Client) QueueSay(s Say, send func(ctx context.Context, batch []Say)) error {
	q := &c.says
	q.mu.Lock()
	defer q.mu.Unlock()
	for !q.dropped && len(q.pending) > 0 &&
		(len(q.pending) >= MaxQueuedSays || q.bytes+len(s.Text) > maxQueuedSayBytes) {
		c.env.m.sayWaits.Inc()
		q.space.Wait()
	}
	if q.dropped {
		return ErrClientClosed
	}
	q.pending = append(q.pending, s)
	q.bytes += len(s.Text)
	if !q.running {
		q.running = true
		if !c.env.run(func(ctx context.Context) { c.sayWorker(ctx, send) }) {
			q.running, q.pending, q.bytes = false, nil, 0
			return ErrDraining
		}
	}
	return nil
}

// FlushSays waits until the client's queued says are answered (or
// dropped).
func (c *Client) FlushSays() {
	q := &c.says
	q.mu.Lock()
	for q.running && !q.dropped {
		q.space.Wait()
	}
	q.mu.Unlock()
}

func (c *Client) sayWorker(ctx context.Context, send func(ctx context.Context, batch []Say)) {
	q := &c.says
	for {
		q.mu.Lock()
		if q.dropped || len(q.pending) == 0 {
			q.running = false
			q.space.Broadcast()
			q.mu.Unlock()
			return
		}
		k := min(len(q.pending), MaxSayBatch)
		batch := append([]Say(nil), q.pending[:k]...)
		q.pending = q.pending[k:]
		for _, r := range batch {
			q.bytes -= len(r.Text)
		}
		q.space.Broadcast()
		q.mu.Unlock()
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		send(sctx, batch)
		cancel()
	}
}

// Refuse sends err to the client as an error event naming the room and ref
// of the frame that caused it. A client with AbuseLimit frames refused as
// rate limited within AbuseWindow is closed (1008), whatever it sent in
// between.
func (c *Client) Refuse(err error, room, ref string) {
	if names.Room(room) != nil {
		room = "" // name only a room that can exist (the message quotes what was sent)
	}
	code := errcode.Of(err)
	if code == errcode.Internal || errcode.Unavailable(err) {
		c.env.log.Warn("websocket frame failed", "user", c.p.User, "room", room, "code", code, "err", err)
	}
	c.SendError(code, errcode.Message(err), room, ref)
	if code == errcode.RateLimited && c.refused(c.env.now()) {
		c.env.m.floodCloses.Inc()
		c.Close(ClosePolicy, "too many refused frames")
	}
}
