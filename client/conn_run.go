package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/chatd/chatd/protocol"
)

// The life of a Conn: one socket at a time, read by the run goroutine and
// written by a writer goroutine of the socket. All state (rooms, calls
// waiting, the socket's queues) is under Conn.mu; the reader applies a
// frame's events under the lock and hands the application's events to the
// event queue after releasing it.

// maxServerMessage bounds one server frame (a batched frame holds up to
// 64 KiB, a single event may be larger).
const maxServerMessage = 16 << 20

// stableAfter is how long a connection must have lasted for its loss to
// count as the first failure again (backoff from the start).
const stableAfter = 30 * time.Second

// socket is one WebSocket connection of a Conn.
type socket struct {
	cn     *Conn
	ws     *websocket.Conn
	url    string // the base URL it went to
	hello  protocol.Hello
	first  []decoded // events that came in hello's frame, after it
	opened time.Time

	// under cn.mu:
	joinq      []*op             // join and resume calls awaiting joined, in send order
	pingq      []*op             // calls awaiting a pong, in send order
	joinedRefs map[string]string // refs of calls answered with joined → room
	sendq      [][]byte
	forced     error // why the Conn dropped this socket itself

	wake      chan struct{} // cap 1: sendq has frames
	dead      chan struct{} // closed when the socket is done
	closeOnce sync.Once
}

// enqueue queues a frame for the writer. Under cn.mu.
func (s *socket) enqueue(p []byte) {
	s.sendq = append(s.sendq, p)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// send queues o's frame and notes what answers it. Under cn.mu.
func (s *socket) send(o *op) {
	switch o.kind {
	case opJoin, opResume:
		s.enqueue(o.frame)
		s.joinq = append(s.joinq, o)
	case opLeave, opRead:
		// Nothing comes back when these succeed; a ping after them is
		// answered after them (frames take effect in the order sent), so
		// its pong says they are done, and an error with their ref before
		// it says they failed.
		s.enqueue(o.frame)
		s.enqueue(pingFrame)
		s.pingq = append(s.pingq, o)
	case opPing:
		o.sentAt = time.Now()
		s.enqueue(pingFrame)
		s.pingq = append(s.pingq, o)
	default:
		s.enqueue(o.frame)
	}
}

// writer writes queued frames until the socket is done.
func (s *socket) writer(timeout time.Duration) {
	for {
		select {
		case <-s.wake:
		case <-s.dead:
			return
		}
		s.cn.mu.Lock()
		batch := s.sendq
		s.sendq = nil
		s.cn.mu.Unlock()
		for _, p := range batch {
			_ = s.ws.SetWriteDeadline(time.Now().Add(timeout))
			if err := s.ws.WriteMessage(websocket.TextMessage, p); err != nil {
				_ = s.ws.Close() // the reader fails and reconnects
				return
			}
		}
	}
}

// closeNormal sends a normal close and closes the socket.
func (s *socket) closeNormal(timeout time.Duration) {
	s.closeOnce.Do(func() {
		msg := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")
		_ = s.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(timeout))
		_ = s.ws.Close()
	})
}

// force drops the socket for err (a reconnect mends it). Under cn.mu.
func (s *socket) force(err error) {
	if s.forced == nil {
		s.forced = err
	}
	_ = s.ws.Close() // no close frame: that would write under the lock
}

// wsURL is the WebSocket URL of base for token.
func wsURL(base, token string, batch bool) string {
	u := "ws" + strings.TrimPrefix(base, "http") + "/ws?token=" + url.QueryEscape(token)
	if batch {
		u += "&batch=1"
	}
	return u
}

// dial opens a socket to base and reads its hello.
func (cn *Conn) dial(ctx context.Context, base string) (*socket, error) {
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second, Proxy: http.ProxyFromEnvironment, ReadBufferSize: 16 << 10}
	ws, resp, err := d.DialContext(ctx, wsURL(base, cn.cl.Token(), !cn.opts.Unbatched), cn.opts.Header)
	if err != nil {
		if resp != nil {
			p, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusSwitchingProtocols {
				return nil, decodeError("GET /ws", resp, p)
			}
		}
		return nil, fmt.Errorf("client: websocket %s: %w", base, err)
	}
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	ws.SetReadLimit(maxServerMessage)
	s := &socket{cn: cn, ws: ws, url: base, opened: time.Now(), joinedRefs: map[string]string{},
		wake: make(chan struct{}, 1), dead: make(chan struct{})}
	stop := context.AfterFunc(ctx, func() { _ = ws.Close() })
	defer stop()
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	typ, p, err := ws.ReadMessage()
	if err == nil && typ != websocket.TextMessage {
		err = errors.New("the first frame is not text")
	}
	if err == nil {
		ds := decodeFrame(p)
		var hello protocol.Hello
		ok := len(ds) > 0 && ds[0].err == nil
		if ok {
			hello, ok = ds[0].ev.(protocol.Hello)
		}
		if !ok {
			err = fmt.Errorf("the first event is not hello: %.100q", p)
		} else {
			s.hello, s.first = hello, ds[1:]
		}
	}
	if err != nil {
		_ = ws.Close()
		if ce := closeErrorOf(err); ce != nil {
			return nil, ce // a draining node closes at once with 1012
		}
		return nil, fmt.Errorf("client: websocket %s: hello: %w", base, err)
	}
	ws.SetPingHandler(func(data string) error {
		_ = ws.SetReadDeadline(time.Now().Add(cn.opts.ReadTimeout))
		err := ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(cn.opts.WriteTimeout))
		if errors.Is(err, websocket.ErrCloseSent) {
			return nil
		}
		return err
	})
	return s, nil
}

// closeErrorOf returns the *CloseError of a close frame the server sent,
// or nil.
func closeErrorOf(err error) *CloseError {
	var ce *websocket.CloseError
	if !errors.As(err, &ce) {
		return nil
	}
	r := CloseReason(ce.Code)
	if ce.Code == websocket.CloseNoStatusReceived {
		r = CloseNormal
	}
	return &CloseError{Reason: r, Text: ce.Text}
}

// dialFinal reports whether a failed open means the session cannot
// connect at all: refused with 401 or 403, or closed at once with a final
// code.
func dialFinal(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
	}
	var ce *CloseError
	return errors.As(err, &ce) && ce.Reason.Final()
}

// run is the Conn's life: serve the installed socket s, and when it ends reconnect
// (with backoff, to the next URL) until Close or a final reason.
func (cn *Conn) run(s *socket) {
	defer close(cn.done)
	defer cn.q.finish()
	fails := 0
	for {
		err := cn.serve(s)
		reason, cerr := cn.detach(s, err)
		if cn.ctx.Err() != nil {
			return // Close
		}
		if reason.Final() || (reason == CloseKicked && !cn.opts.ReconnectAfterKick) {
			cn.q.push(DisconnectedEvent{Err: cerr, Reason: reason, Final: true})
			cn.end(cerr)
			return
		}
		if time.Since(s.opened) >= stableAfter {
			fails = 0
		}
		delay := cn.delay(reason, fails)
		cn.q.push(DisconnectedEvent{Err: cerr, Reason: reason, RetryIn: delay})
		cn.cl.log.Info("chatd websocket lost; reconnecting", "url", s.url, "err", cerr, "in", delay)
		cn.cl.eps.failed(s.url)
		if s = cn.redial(delay, &fails); s == nil {
			return
		}
		cn.install(s, true)
	}
}

// redial waits delay, then opens a socket, retrying with backoff; nil when
// the Conn ended meanwhile (Close, or a refusal it ends with).
func (cn *Conn) redial(delay time.Duration, fails *int) *socket {
	for {
		if !sleep(cn.ctx, delay) {
			return nil
		}
		*fails++
		base := cn.cl.eps.current()
		s, err := cn.dial(cn.ctx, base)
		if err == nil {
			return s
		}
		if cn.ctx.Err() != nil {
			return nil
		}
		if dialFinal(err) {
			reason := CloseAbnormal
			if ce, ok := err.(*CloseError); ok {
				reason = ce.Reason
			}
			cn.q.push(DisconnectedEvent{Err: err, Reason: reason, Final: true})
			cn.end(err)
			return nil
		}
		cn.cl.eps.failed(base)
		delay = cn.cl.backoff.Delay(*fails)
		var e *Error
		if errors.As(err, &e) && e.RetryAfter > 0 {
			delay = e.RetryAfter
		}
		cn.cl.log.Debug("chatd websocket: reconnect failed", "url", base, "err", err, "retry_in", delay)
	}
}

// delay is the wait before the first reconnect after reason.
func (cn *Conn) delay(reason CloseReason, fails int) time.Duration {
	b := cn.cl.backoff
	switch reason {
	case CloseDraining:
		if fails == 0 {
			return 0 // the node asked us to go elsewhere: at once
		}
		return b.Delay(fails)
	case CloseTooSlow, CloseInternal, CloseTooBig:
		return b.Delay(fails + 3)
	case CloseFlood:
		return b.Delay(fails + 5)
	}
	return b.Delay(fails)
}

// roomStart is the position before a room's first message: a resume after
// it replays the room from its oldest message (docs/PROTOCOL.md).
const roomStart = "0-0"

// install makes s the Conn's socket: every room followed is resumed after
// its last message (or from the room's start when none came yet), then every call without an answer is sent again, in
// its order (the same frame, with the same ref).
func (cn *Conn) install(s *socket, reconnect bool) {
	cn.mu.Lock()
	if cn.ended {
		cn.mu.Unlock()
		s.closeNormal(cn.opts.WriteTimeout)
		return
	}
	cn.sock, cn.node = s, s.hello.Node
	cn.stats.Connects++
	ids := make([]string, 0, len(cn.rooms))
	for id := range cn.rooms {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		after := cn.rooms[id].lastID
		if after == "" {
			// in the room, nothing received yet: everything sent since is
			// ours (a resume without after would be a join: the latest 50)
			after = roomStart
		}
		o := &op{kind: opResume, room: id, after: after, internal: true, ref: cn.newRef(opResume)}
		o.frame, _ = encodeFrame(protocol.Resume{Room: id, After: after, Ref: o.ref})
		cn.byRef[o.ref] = o
		s.send(o)
	}
	cn.resumeDirect(s)
	for _, o := range slices.Clone(cn.outbox) {
		if o.kind == opRPC && reconnect {
			cn.resolveLocked(o, opResult{err: errRPCLost})
			continue
		}
		s.send(o)
	}
	cn.mu.Unlock()
	cn.q.push(ConnectedEvent{URL: s.url, Node: s.hello.Node, Motd: s.hello.Motd, Data: s.hello.Data, Reconnect: reconnect})
}

// serve reads s until it fails.
func (cn *Conn) serve(s *socket) error {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.writer(cn.opts.WriteTimeout) }()
	defer func() {
		_ = s.ws.Close()
		close(s.dead)
		wg.Wait()
	}()
	if cn.ctx.Err() != nil {
		return cn.ctx.Err()
	}
	cn.handle(s, s.first)
	buf := make([]byte, 0, 4096)
	for {
		_ = s.ws.SetReadDeadline(time.Now().Add(cn.opts.ReadTimeout))
		typ, r, err := s.ws.NextReader()
		if err != nil {
			return err
		}
		if buf, err = readAll(r, buf[:0]); err != nil {
			return err
		}
		if typ != websocket.TextMessage {
			cn.handle(s, []decoded{{err: errors.New("a binary frame"), line: buf}})
			continue
		}
		cn.handle(s, decodeFrame(buf))
		if cap(buf) > 256<<10 {
			buf = make([]byte, 0, 4096) // don't keep a large buffer
		}
	}
}

// readAll appends r to buf.
func readAll(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// detach forgets s after it failed with err and returns why it ended.
func (cn *Conn) detach(s *socket, err error) (CloseReason, error) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.sock == s {
		cn.sock, cn.node = nil, ""
	}
	for ref, o := range cn.byRef {
		if o.internal { // resumes are made afresh for the next socket
			o.resolved = true
			delete(cn.byRef, ref)
		}
	}
	if s.forced != nil {
		return CloseAbnormal, s.forced
	}
	if ce := closeErrorOf(err); ce != nil {
		return ce.Reason, ce
	}
	text := "connection lost"
	if err != nil {
		text = err.Error()
	}
	return CloseAbnormal, &CloseError{Reason: CloseAbnormal, Text: text}
}
