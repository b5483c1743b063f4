package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/protocol"
)

// ConnOptions configure a Conn; the zero value is a good default.
type ConnOptions struct {
	// Unbatched opens /ws without batch=1, so that every frame holds one
	// event. Batched frames cost the server and the client less; the SDK
	// reads both.
	Unbatched bool
	// EventBuffer is the capacity of the Events channel; 0 means 256.
	EventBuffer int
	// MaxQueued is how many events may wait for the application (beyond
	// the channel) before the Conn stops reading from the server; 0 means
	// 100,000.
	MaxQueued int
	// ReconnectAfterKick makes a kick (4001) reconnect like a lost
	// connection; by default it ends the Conn with ErrKicked.
	ReconnectAfterKick bool
	// Header is sent with every upgrade request (an Origin, say).
	Header http.Header
	// ReadTimeout drops a connection on which nothing (event or ping)
	// arrived for this long, and reconnects: a node that hangs. 0 means
	// 60 s (the server pings every 25 s).
	ReadTimeout time.Duration
	// WriteTimeout bounds one frame's write; 0 means 10 s.
	WriteTimeout time.Duration
}

func (o ConnOptions) withDefaults() ConnOptions {
	if o.EventBuffer <= 0 {
		o.EventBuffer = 256
	}
	if o.MaxQueued <= 0 {
		o.MaxQueued = 100_000
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = 60 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	return o
}

// Conn is the realtime WebSocket connection of a session that survives
// the loss of its node: it reconnects by itself (to the next node URL),
// resumes every room from the last message it queued for the application
// and drops at the seam the messages it had, so the application sees every
// message of its rooms once, in order. Calls that need an answer (Join,
// Say, Leave, MarkRead, Ping) wait for it across reconnects: a call made
// while the Conn reconnects is sent once it is back. Safe for concurrent
// use.
type Conn struct {
	cl        *Client
	opts      ConnOptions
	refPrefix string
	refN      atomic.Uint64
	q         *eventQueue

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	stop   chan struct{} // closed by Close: the dispatcher stops
	done   chan struct{} // closed when the Conn has ended
	wg     sync.WaitGroup

	mu     sync.Mutex
	sock   *socket               // the open connection; nil while reconnecting
	rooms  map[string]*roomState // rooms followed, by id
	dms    map[string]*dmState   // direct conversations seen, by id (direct.go)
	outbox []*op                 // calls without an answer yet, in send order
	byRef  map[string]*op
	err    error // why the Conn ended (nil after Close)
	ended  bool
	node   string
	stats  ConnStats
}

// ConnStats are a Conn's counters.
type ConnStats struct {
	Connects   int // connections opened (the first included)
	Duplicates int // messages dropped at a resume seam as already queued
	BadEvents  int // events that could not be decoded
}

// roomState is what the Conn knows of a room it follows.
type roomState struct {
	room   Room
	lastID string // the last message id queued for the application
}

type opKind byte

// Op kinds; the letter goes into the op's ref, so that an error for a
// call nobody waits for any more still says what it was.
const (
	opSay    opKind = 's'
	opJoin   opKind = 'j'
	opResume opKind = 'r'
	opLeave  opKind = 'l'
	opRead   opKind = 'm'
	opPing   opKind = 'p'
	opTyping opKind = 't'
	opRPC    opKind = 'c' // rpc.go
	// direct messages (direct.go)
	opDirect       opKind = 'd'
	opDirectResume opKind = 'e'
)

var opNames = map[opKind]string{opSay: "say", opJoin: "join", opResume: "resume", opLeave: "leave", opRead: "read", opPing: "ping", opTyping: "typing", opRPC: "rpc",
	opDirect: "dm_send", opDirectResume: "dm_resume"}

// op is a call that waits for the server's answer.
type op struct {
	kind     opKind
	ref      string
	room     string // say, resume, leave, read
	lobby    string // join
	after    string // resume
	frame    []byte
	res      chan opResult // cap 1; one result
	resolved bool
	failed   bool      // an error event answered it
	sentAt   time.Time // ping
	internal bool      // a resume of the reconnect logic: nobody waits
}

type opResult struct {
	id   string
	room Room
	rtt  time.Duration
	data json.RawMessage // rpc
	err  error
}

// Connect opens the session's WebSocket and returns once the server said
// hello. It fails at once, with no reconnecting, when the open is refused
// (ErrBadToken, ErrBanned, ErrForbidden, ErrRateLimited); a node that does
// not answer is skipped for the next node URL, each tried once. ctx bounds
// only the opening: the Conn lives until Close or a final close code.
func (c *Client) Connect(ctx context.Context, o ConnOptions) (*Conn, error) {
	cn := newConn(ctx, c, o)
	var (
		s   *socket
		err error
	)
	for range len(c.eps.urls) {
		base := c.eps.current()
		s, err = cn.dial(ctx, base)
		if err == nil || ctx.Err() != nil || dialFinal(err) {
			break
		}
		c.eps.failed(base)
	}
	if err != nil {
		cn.cancel()
		return nil, err
	}
	cn.install(s, false)
	cn.wg.Add(2)
	go func() { defer cn.wg.Done(); cn.q.dispatch(cn.stop) }()
	go func() { defer cn.wg.Done(); cn.run(s) }()
	return cn, nil
}

// newConn makes a Conn whose life context keeps parent's values but not
// its cancellation: the Conn outlives Connect's ctx and ends at Close.
func newConn(parent context.Context, c *Client, o ConnOptions) *Conn {
	o = o.withDefaults()
	var b [4]byte
	_, _ = rand.Read(b[:])
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	return &Conn{
		cl: c, opts: o, refPrefix: hex.EncodeToString(b[:]),
		q:   newEventQueue(o.MaxQueued, o.EventBuffer),
		ctx: ctx, cancel: cancel,
		stop: make(chan struct{}), done: make(chan struct{}),
		rooms: map[string]*roomState{}, byRef: map[string]*op{}, dms: map[string]*dmState{},
	}
}

// Events returns the channel of the Conn's events. It is closed after the
// final DisconnectedEvent, or at Close. Read it promptly: see
// ConnOptions.MaxQueued.
func (cn *Conn) Events() <-chan Event { return cn.q.out }

// Done is closed when the Conn has ended: Close, or a final close code.
func (cn *Conn) Done() <-chan struct{} { return cn.done }

// Err returns why the Conn ended: nil while it runs and after Close; a
// *CloseError (ErrSessionEnded, ErrBanned, ErrKicked) or the *Error that
// refused a reconnect (ErrBadToken, ErrBanned) otherwise.
func (cn *Conn) Err() error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.err
}

// Node returns the id of the node the Conn is connected to ("" while it
// reconnects).
func (cn *Conn) Node() string {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.node
}

// Stats returns the Conn's counters.
func (cn *Conn) Stats() ConnStats {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.stats
}

// Rooms returns the ids of the rooms the Conn follows, sorted.
func (cn *Conn) Rooms() []string {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	ids := make([]string, 0, len(cn.rooms))
	for id := range cn.rooms {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// LastID returns the id of the last message of room queued for the
// application ("" if none): where a resume of room starts.
func (cn *Conn) LastID(room string) string {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if st := cn.rooms[room]; st != nil {
		return st.lastID
	}
	return ""
}

// Join takes a seat in lobby and returns its room once the server said
// joined; the room's latest 50 messages follow as MessageEvents, then its
// live ones. Joining a lobby the user is in answers the same room.
func (cn *Conn) Join(ctx context.Context, lobby string) (Room, error) {
	r, err := cn.call(ctx, &op{kind: opJoin, lobby: lobby}, protocol.Join{Lobby: lobby})
	return r.room, err
}

// Resume follows room from after message id after (padded or not; ""
// gives the latest 50, like a join): for an application that kept a room
// and its last message id across a restart of its own. The Conn resumes
// its rooms after a reconnect by itself. ErrRoomFull, ErrSeatedElsewhere;
// a ResumeGapEvent when after is gone.
func (cn *Conn) Resume(ctx context.Context, room, after string) (Room, error) {
	r, err := cn.call(ctx, &op{kind: opResume, room: room, after: after}, protocol.Resume{Room: room, After: after})
	return r.room, err
}

// Say sends text to room and returns the message id once it is stored
// (the server's ack). Errors are *Error values: ErrNotSeated (not in the
// room), ErrMuted, ErrTooLong, ErrRateLimited, ErrTooLarge (over the
// frame limit, refused before sending).
//
// Every say carries a ref unique to this Conn. A say not acknowledged
// when the connection drops is sent again after the reconnect with the
// same ref; a server that deduplicates refs within a session answers it
// with the first message's id. (A server that does not stores it again if
// the first copy had been stored.) A Say whose ctx ends may have been
// stored or not.
func (cn *Conn) Say(ctx context.Context, room, text string) (string, error) {
	r, err := cn.call(ctx, &op{kind: opSay, room: room}, protocol.Say{Room: room, Text: text})
	return r.id, err
}

// Leave frees the user's seat in room (for all its connections and
// sessions) and stops following it; it returns once the server did it.
func (cn *Conn) Leave(ctx context.Context, room string) error {
	_, err := cn.call(ctx, &op{kind: opLeave, room: room}, protocol.Leave{Room: room})
	return err
}

// MarkRead records that the user read room up to message id (never
// backwards); it returns once the server did it.
func (cn *Conn) MarkRead(ctx context.Context, room, id string) error {
	_, err := cn.call(ctx, &op{kind: opRead, room: room}, protocol.Read{Room: room, ID: id})
	return err
}

// Ping sends a ping frame and returns the round trip to its pong.
func (cn *Conn) Ping(ctx context.Context) (time.Duration, error) {
	r, err := cn.call(ctx, &op{kind: opPing}, protocol.Ping{})
	return r.rtt, err
}

// Typing tells room's other members the user is typing. Nothing comes
// back; a refusal (ErrNotSeated) arrives as an ErrorEvent. While the Conn
// reconnects the frame is dropped.
func (cn *Conn) Typing(ctx context.Context, room string) error {
	return cn.fire(ctx, protocol.Typing{Room: room, Ref: cn.newRef(opTyping)})
}

func (cn *Conn) newRef(k opKind) string {
	return cn.refPrefix + "." + string(rune(k)) + strconv.FormatUint(cn.refN.Add(1), 36)
}

// call sends o's frame (now, or after the reconnect in progress) and waits
// for its answer.
func (cn *Conn) call(ctx context.Context, o *op, f protocol.ClientFrame) (opResult, error) {
	if err := ctx.Err(); err != nil {
		return opResult{}, err
	}
	if o.kind != opPing {
		o.ref = cn.newRef(o.kind)
		f = f.WithRef(o.ref)
	}
	p, err := encodeFrame(f)
	if err != nil {
		return opResult{}, err
	}
	o.frame, o.res = p, make(chan opResult, 1)
	cn.mu.Lock()
	if err := cn.endedErrLocked(); err != nil {
		cn.mu.Unlock()
		return opResult{}, err
	}
	cn.outbox = append(cn.outbox, o)
	if o.ref != "" {
		cn.byRef[o.ref] = o
	}
	if cn.sock != nil {
		cn.sock.send(o)
	}
	cn.mu.Unlock()
	select {
	case r := <-o.res:
		return r, r.err
	case <-ctx.Done():
		cn.mu.Lock()
		cn.resolveLocked(o, opResult{err: ctx.Err()})
		cn.mu.Unlock()
		r := <-o.res // the first result wins: ours, or one that came meanwhile
		return r, r.err
	}
}

// resolveLocked answers o once and forgets it. The socket's queues may
// still hold o: its joined or pong still comes and is matched to it.
func (cn *Conn) resolveLocked(o *op, r opResult) {
	if o.resolved {
		return
	}
	o.resolved = true
	if i := slices.Index(cn.outbox, o); i >= 0 {
		cn.outbox = slices.Delete(cn.outbox, i, i+1)
	}
	if o.ref != "" {
		delete(cn.byRef, o.ref)
	}
	if o.res != nil {
		o.res <- r
	}
}

func (cn *Conn) endedErrLocked() error {
	if !cn.ended {
		return nil
	}
	if cn.err != nil {
		return cn.err
	}
	return ErrClosed
}

// Close closes the connection (1000) and stops reconnecting; calls
// waiting for an answer fail with ErrClosed and Events is closed (events
// not taken yet are dropped). It waits for the Conn's goroutines.
func (cn *Conn) Close() error {
	cn.mu.Lock()
	first := !cn.ended
	if first {
		cn.ended = true
		cn.failAllLocked(ErrClosed)
	}
	s := cn.sock
	cn.mu.Unlock()
	if first {
		close(cn.stop)
		cn.q.drop()
		cn.cancel()
		if s != nil {
			s.closeNormal(cn.opts.WriteTimeout)
		}
	}
	cn.wg.Wait()
	return nil
}

// end ends the Conn for err (a final close or refusal), once.
func (cn *Conn) end(err error) {
	cn.mu.Lock()
	if !cn.ended {
		cn.ended, cn.err = true, err
		cn.failAllLocked(err)
	}
	cn.mu.Unlock()
	cn.cancel()
}

func (cn *Conn) failAllLocked(err error) {
	for _, o := range slices.Clone(cn.outbox) {
		cn.resolveLocked(o, opResult{err: err})
	}
}

// errFor is the error of a call refused by an error event.
func errFor(ev protocol.ErrorEvent, kind opKind) *Error {
	return &Error{Code: ev.Code, Message: ev.Message, Room: ev.Room, Op: opNames[kind]}
}

// isTransient reports whether an error answer may go away by itself.
func isTransient(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code {
	case errcode.RedisUnavailable, errcode.Busy, errcode.Internal, errcode.Timeout,
		errcode.RateLimited, errcode.RedisOOM, errcode.RedisBusy:
		return true
	}
	return false
}
