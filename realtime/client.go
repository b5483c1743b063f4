package realtime

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/protocol"
)

// Transport is what a Client writes through: the WebSocket connection in
// package web, a test's in-memory transport. Only the Client's writer
// calls it, one call at a time.
type Transport interface {
	// Write sends events (each one JSON object) to the peer, in order, in
	// as few writes as it can, with one deadline for the whole batch.
	Write(events [][]byte) error
	// Ping sends a keep-alive ping.
	Ping() error
	// Close sends a close frame with code and reason (best effort) and
	// closes the connection. code 0 closes without a close frame.
	Close(code int, reason string)
}

// Aborter is a Transport that can cut a write in progress short (from any
// goroutine): used when a client is dropped for not reading.
type Aborter interface{ Abort() }

// Waker is a Transport whose reader can be woken (from any goroutine) when
// the client closes from elsewhere — a slow client, a kick, the drain — so
// no goroutine per connection has to wait for that.
type Waker interface{ Wake() }

// isTimeout reports whether err is a write deadline passing.
func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}

// Close codes the core uses (RFC 6455 and chatd's own, docs/PROTOCOL.md).
const (
	CloseNormal        = 1000
	ClosePolicy        = 1008 // too many refused frames
	CloseTooBig        = 1009
	CloseServiceReboot = 1012 // the node is draining: reconnect elsewhere
	CloseTryLater      = 1013 // the client did not read its messages
	CloseAbnormal      = 0    // the connection broke: no close frame
	// CloseSessionEnded closes a client whose guest session ended (signed
	// out, or its name lapsed and was claimed by someone else).
	CloseSessionEnded = 4000
	CloseKicked       = 4001
	CloseBanned       = 4003
)

// Flow-control limits of a client's send queue. A client is too slow when
// its queue holds more than softQueueBytes and its writer has made no
// progress for stallTimeout, or when the queue passes HardQueueBytes at
// all. A large replay or a pub/sub backlog alone never closes a client
// that reads: replays go page by page after the writer drains
// (waitDrained), and a backlog is written as fast as the peer reads.
const (
	softQueueBytes = 1 << 20
	HardQueueBytes = 16 << 20
	stallTimeout   = 5 * time.Second
	drainedBytes   = 64 << 10
)

// PingEvery is how often a client's writer pings: below the balancer's
// read timeout (75 s in deploy/nginx.conf).
const PingEvery = 25 * time.Second

// Refusal window: a client with AbuseLimit frames refused as rate limited
// within AbuseWindow is closed (1008). Other frames in between do not reset
// the count (a ping every 19th frame used to).
const (
	AbuseLimit  = 20
	AbuseWindow = 10 * time.Second
)

// Bounds of a client's queued says: when full, the reader waits (TCP
// backpressure on the peer), so a client cannot make the node hold
// unbounded work while Redis is slow.
const (
	MaxQueuedSays     = 128
	maxQueuedSayBytes = 512 << 10
)

// clientEnv is what every client of a node shares.
type clientEnv struct {
	m     *metrics
	clock *coarseClock
	now   func() time.Time // the node's clock (refusal windows)
	log   *slog.Logger
	run   func(fn func(ctx context.Context)) bool // the node's owned goroutines
}

// Client is one realtime connection of a user: its send queue, its
// per-room feeds, its queued says and its refusal count. It holds no rule
// of its own (the Chat service decides what a frame does) and writes
// through its Transport from a writer goroutine that exists only while
// there is something to write, so an idle connection costs no goroutine
// and no queue memory.
type Client struct {
	env   *clientEnv
	t     Transport
	p     Principal
	id    string // attachment id of this connection: unique per node run
	lease string // the per-address connection lease id ("" = none)

	qmu       sync.Mutex
	queue     *sendQueue // what Send appends to; nil while nothing is queued and no writer runs
	spare     *sendQueue // the batch the writer wrote last, emptied: the next queue
	queued    int        // bytes in queue
	since     time.Time  // when the writer last made progress or the queue became non-empty
	writing   bool       // a writer goroutine is running
	pingDue   bool
	closing   bool
	closeCode int
	closeText string
	progress  chan struct{} // cap 1: the writer wrote a batch
	done      chan struct{} // closed when the client starts closing
	finished  chan struct{} // closed when the transport was closed
	ping      *time.Timer

	fmu   sync.Mutex
	feeds map[string]*Feed // room → this client's feed of it

	amu      sync.Mutex
	refusals []time.Time             // the latest rate-limited refusals, at most AbuseLimit
	frames   map[string]*frameBucket // frame type → its bucket (AllowFrame)

	says sayQueue

	blocks atomic.Pointer[Blocks] // the user's blocks (blocks.go); nil: none
	bl     clientBlocks

	onClose func() // run once when the client starts closing
}

// User returns the client's user name.
func (c *Client) User() string { return c.p.User }

// Principal returns who the client acts as.
func (c *Client) Principal() Principal { return c.p }

// ID returns the client's attachment id.
func (c *Client) ID() string { return c.id }

// Lease is the client's connection lease id (Sessions.AdmitConn; "" =
// none).
func (c *Client) Lease() string { return c.lease }

// Done is closed when the client starts closing.
func (c *Client) Done() <-chan struct{} { return c.done }

// Finished is closed when the transport has been closed.
func (c *Client) Finished() <-chan struct{} { return c.finished }

func newClient(env *clientEnv, t Transport, p Principal, id string) *Client {
	c := &Client{
		env: env, t: t, p: p, id: id,
		progress: make(chan struct{}, 1),
		done:     make(chan struct{}),
		finished: make(chan struct{}),
		feeds:    map[string]*Feed{},
	}
	c.says.space = sync.NewCond(&c.says.mu)
	c.ping = time.AfterFunc(PingEvery, c.pingTick)
	return c
}

func (c *Client) pingTick() {
	c.qmu.Lock()
	if c.closing {
		c.qmu.Unlock()
		return
	}
	c.pingDue = true
	c.kickLocked()
	c.qmu.Unlock()
	c.ping.Reset(PingEvery)
}

// Send queues one encoded event for the client without ever blocking. A
// client whose writer is stalled with a full queue is closed with 1013, so
// a reader that stopped never delays the others.
func (c *Client) Send(frame []byte) {
	if frame == nil {
		return
	}
	c.qmu.Lock()
	if c.closing {
		c.qmu.Unlock()
		return
	}
	now := c.env.clock.Now()
	if c.queue == nil {
		c.queue = queuePool.Get().(*sendQueue)
	}
	if len(c.queue.frames) == 0 {
		c.since = now
	}
	c.queue.frames = append(c.queue.frames, frame)
	c.queued += len(frame)
	if c.queued > HardQueueBytes || (c.queued > softQueueBytes && now.Sub(c.since) > stallTimeout) {
		c.qmu.Unlock()
		c.env.m.slowClients.Inc()
		c.Close(CloseTryLater, "send queue full: you are reading too slowly")
		if a, ok := c.t.(Aborter); ok {
			a.Abort() // unblock a writer stuck on the peer
		}
		return
	}
	c.kickLocked()
	c.qmu.Unlock()
}

// SendEvent encodes ev (protocol.Encode) and queues it. An event sent to
// many clients is encoded once by the caller and queued with Send.
func (c *Client) SendEvent(ev protocol.ServerEvent) {
	b, err := protocol.Encode(ev)
	if err != nil {
		c.env.log.Error("encode event", "type", ev.EventType(), "err", err)
		return
	}
	c.Send(b)
}

// SendError queues an error event; room and ref are left out when empty.
func (c *Client) SendError(code errcode.Code, message, room, ref string) {
	c.SendEvent(protocol.ErrorEvent{Code: code, Message: message, Room: room, Ref: ref})
}

// kickLocked starts the writer unless it runs. qmu is held.
func (c *Client) kickLocked() {
	if !c.writing {
		c.writing = true
		go c.write()
	}
}

// write is the writer: it takes everything queued, writes it in one
// transport call, and repeats until the queue is empty, then exits.
//
// It keeps two queues and swaps them: Send fills one while the other is
// being written, and the written one, emptied, is the next queue, so a busy
// connection does not grow a new slice for every batch. When the writer
// goes idle both go back to queuePool: an idle connection holds none.
func (c *Client) write() {
	for {
		c.qmu.Lock()
		q, ping, closing := c.queue, c.pingDue, c.closing
		var batch [][]byte
		if q != nil {
			batch = q.frames
		}
		c.queue, c.spare, c.queued, c.pingDue = c.spare, nil, 0, false
		if len(batch) == 0 && !ping && !closing {
			c.writing = false
			putQueue(q)
			putQueue(c.queue)
			c.queue = nil
			c.qmu.Unlock()
			return
		}
		c.qmu.Unlock()
		if closing {
			c.finish(batch)
			return
		}
		var err error
		if len(batch) > 0 {
			err = c.t.Write(batch)
		}
		if err == nil && ping {
			err = c.t.Ping()
		}
		if err != nil {
			if isTimeout(err) {
				// the peer did not take a batch within the write deadline
				c.env.m.slowClients.Inc()
				c.Close(CloseTryLater, "send queue full: you are reading too slowly")
			} else {
				c.Close(CloseAbnormal, "")
			}
			c.finish(nil)
			return
		}
		if q != nil {
			clear(batch) // written: drop the references to the frames
			q.frames = batch[:0]
		}
		c.qmu.Lock()
		c.since = c.env.clock.Now()
		if q != nil && cap(q.frames) <= maxPooledQueue {
			c.spare = q
		}
		c.qmu.Unlock()
		select {
		case c.progress <- struct{}{}:
		default:
		}
	}
}

// sendQueue is a client's queue of encoded events, kept in queuePool
// between uses.
type sendQueue struct{ frames [][]byte }

// queuePool holds the send queues of clients whose writer went idle; a
// queue longer than maxPooledQueue is left to the GC instead.
var queuePool = sync.Pool{New: func() any { return &sendQueue{frames: make([][]byte, 0, 8)} }}

const maxPooledQueue = 1024

func putQueue(q *sendQueue) {
	if q != nil && len(q.frames) == 0 && cap(q.frames) <= maxPooledQueue {
		queuePool.Put(q)
	}
}

// finish flushes what is queued (not for a client closed as too slow) and
// closes the transport. It runs once, on the writer.
func (c *Client) finish(batch [][]byte) {
	if c.closeCode != CloseTryLater && c.closeCode != CloseAbnormal && len(batch) > 0 {
		_ = c.t.Write(batch)
	}
	c.t.Close(c.closeCode, c.closeText)
	c.ping.Stop()
	close(c.finished)
}

// Close starts closing the client with a close code and reason; the writer
// flushes what is queued, sends the close frame and closes the transport.
// Says queued and not yet sent are dropped. Only the first call counts.
func (c *Client) Close(code int, reason string) {
	c.qmu.Lock()
	if c.closing {
		c.qmu.Unlock()
		return
	}
	c.closing, c.closeCode, c.closeText = true, code, reason
	close(c.done)
	if w, ok := c.t.(Waker); ok {
		w.Wake()
	}
	c.says.drop()
	if c.onClose != nil {
		go c.onClose()
	}
	if c.writing {
		c.qmu.Unlock()
		return // the running writer sees closing
	}
	c.writing = true
	c.qmu.Unlock()
	go c.write()
}

// OnClose sets fn to run once, on its own goroutine, when the client
// starts closing — at once if it has started already (the client is in
// the hub: a kick or the drain may have closed it meanwhile).
func (c *Client) OnClose(fn func()) {
	c.qmu.Lock()
	if c.closing {
		c.qmu.Unlock()
		go fn()
		return
	}
	c.onClose = fn
	c.qmu.Unlock()
}

// Closing reports whether the client started closing.
func (c *Client) Closing() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// waitDrained waits until the client's queue holds less than drainedBytes:
// the pace of replays. A client whose writer stalls meanwhile with more than
// softQueueBytes queued is closed as too slow, as Send closes it: a replay
// waiting on a peer that stopped reading must not hold its join (and its
// held live messages) until the frame's deadline.
func (c *Client) waitDrained(ctx context.Context) error {
	for {
		c.qmu.Lock()
		q, closing, since := c.queued, c.closing, c.since
		c.qmu.Unlock()
		if closing {
			return ErrClientClosed
		}
		if q < drainedBytes {
			return nil
		}
		if q > softQueueBytes && c.env.clock.Now().Sub(since) > stallTimeout {
			c.env.m.slowClients.Inc()
			c.Close(CloseTryLater, "send queue full: you are reading too slowly")
			if a, ok := c.t.(Aborter); ok {
				a.Abort()
			}
			return ErrClientClosed
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-c.progress:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
	}
}

// refused counts a refusal for rate limiting at now and reports whether the
// client reached AbuseLimit of them within AbuseWindow.
func (c *Client) refused(now time.Time) bool {
	c.amu.Lock()
	defer c.amu.Unlock()
	c.refusals = append(c.refusals, now)
	if len(c.refusals) > AbuseLimit {
		c.refusals = c.refusals[len(c.refusals)-AbuseLimit:]
	}
	return len(c.refusals) == AbuseLimit && now.Sub(c.refusals[0]) <= AbuseWindow
}

// feed returns the client's feed of room, or nil.
func (c *Client) feed(room string) *Feed {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	return c.feeds[room]
}

// Rooms returns the rooms the client is in.
func (c *Client) Rooms() []string {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	out := make([]string, 0, len(c.feeds))
	for r := range c.feeds {
		out = append(out, r)
	}
	return out
}

// InRoom reports whether the client is in room.
func (c *Client) InRoom(room string) bool { return c.feed(room) != nil }

// dropFeed forgets the client's feed of room.
func (c *Client) dropFeed(room string) {
	c.fmu.Lock()
	delete(c.feeds, room)
	c.fmu.Unlock()
}

// sayQueue holds a client's says between the reader and their worker,
// bounded by MaxQueuedSays and maxQueuedSayBytes.
type sayQueue struct {
	mu      sync.Mutex
	space   *sync.Cond // signalled when says leave the queue or it is dropped
	pending []Say
	bytes   int
	running bool // a worker runs
	dropped bool // the client closed: nothing more is queued or sent
}

// Say is one queued say: its room, its text and the client's ref of it
// ("" = none).
type Say struct {
	Room, Text, Ref string
}

// drop empties the queue for good: the client closed, and says it never
// got an answer for are not sent.
func (q *sayQueue) drop() {
	q.mu.Lock()
	q.pending, q.bytes, q.dropped = nil, 0, true
	q.space.Broadcast()
	q.mu.Unlock()
}
