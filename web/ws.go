package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/protocol"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/realtime/chat"
	"github.com/chatd/chatd/realtime/sessions"
)

// WebSocket limits and timings.
const (
	maxFrame = protocol.MaxFrame // frames over 64 KiB close the connection with 1009
	pongWait = 60 * time.Second  // no frame or pong for this long drops the client
)

// streamAPI serves the realtime connections, WebSocket (GET /ws) and
// event stream (GET /api/v1/events): it admits them (admit), hands each to
// Chat as a realtime.Transport, and reads a WebSocket's frames into Chat
// and Matchmaking calls.
type streamAPI struct {
	chat           *chat.Chat
	rest           *chat.REST // the event stream
	sessions       *sessions.Sessions
	match          *matchAPI  // the queue and dequeue frames
	rpc            *rpcAPI    // the rpc frame
	direct         *directAPI // the dm_* frames
	tokens         *tokens
	ip             proxies
	allowedOrigins []string // Config.AllowedOrigins
	now            func() time.Time
	m              *httpMetrics
	log            *slog.Logger
}

// wsUpgrade refuses a bad Origin (403) or token (401) before the upgrade.
func (h *streamAPI) wsUpgrade(c *fiber.Ctx) error {
	if !websocket.IsWebSocketUpgrade(c) {
		return &APIError{Status: http.StatusUpgradeRequired, Code: string(errcode.BadRequest), Message: "this endpoint speaks WebSocket only"}
	}
	// the request's own Host header, not c.Hostname(), which would trust a
	// client-sent X-Forwarded-Host
	if !h.originAllowed(c.Get(fiber.HeaderOrigin), string(c.Request().Host())) {
		h.m.wsRefused.WithLabelValues("origin").Inc()
		return errf(errcode.Forbidden, "this Origin may not open a WebSocket here")
	}
	a, reason, err := h.admit(c, c.Query("token"), "open the WebSocket with ?token=<session token> (from POST /api/v1/session)", nil)
	if err != nil {
		h.m.wsRefused.WithLabelValues(reason).Inc()
		return err
	}
	c.Locals(localAdmitted, a)
	c.Locals(localBatch, c.Query("batch") == "1")
	c.Locals(localRequest, c.Context())
	trimForUpgrade(c)
	if err := c.Next(); err != nil {
		// the upgrade failed: serveWS never runs to take the lease over
		h.release(a)
		return err
	}
	return nil
}

const (
	localAdmitted = "admitted"
	localBatch    = "batch"
	localRequest  = "request" // the *fasthttp.RequestCtx, for releaseRequest
)

// trimForUpgrade drops from the request what nothing reads after wsUpgrade:
// the query (the token, read), the cookies and every header the handshake
// does not read. contrib/websocket copies the query, cookies and headers
// of the request into maps of its Conn, kept for the connection's life,
// though serveWS reads only the locals: dropped here, an idle connection
// holds none of them (about 0.8 KiB of a browser's request; see
// BENCHMARKS.md, RSS per idle connection). fasthttp's own copy of the
// request is released by releaseRequest once the connection is upgraded.
func trimForUpgrade(c *fiber.Ctx) {
	r := c.Request()
	r.URI().QueryArgs().Reset()
	r.Header.DelAllCookies()
	var drop []string
	r.Header.VisitAll(func(k, _ []byte) {
		if !handshakeHeader(string(k)) {
			drop = append(drop, string(k))
		}
	})
	for _, k := range drop {
		r.Header.Del(k)
	}
}

// releaseRequest drops the buffers of a hijacked connection's request and
// response. fasthttp keeps the RequestCtx of a hijacked connection until
// the hijack handler returns (hijackConnHandler releases it then), and with
// it the parsed request — header, URI, query — and the 101 response, in
// buffers sized for them (about 2.5 KiB of a chatd client's request, half
// the live heap of an idle connection that is not chatd's own). Nothing
// reads them once the hijack handler runs: fasthttp flushed the response
// before starting it, and contrib/websocket copied what it keeps. Empty
// ones take their place (a zero Request and Response are what a new
// RequestCtx holds), so the release at the end resets empty values.
func releaseRequest(rc *fasthttp.RequestCtx) {
	rc.Request = fasthttp.Request{}
	rc.Response = fasthttp.Response{}
}

// handshakeHeader reports whether the WebSocket handshake
// (fasthttp/websocket's FastHTTPUpgrader, after wsUpgrade) reads header k.
func handshakeHeader(k string) bool {
	switch strings.ToLower(k) {
	case "host", "connection", "upgrade", "origin",
		"sec-websocket-key", "sec-websocket-version", "sec-websocket-protocol", "sec-websocket-extensions":
		return true
	}
	return false
}

// originAllowed: no Origin (not a browser) is allowed; otherwise the Origin
// must be in the allow-list, or, without one, name the request's own host.
func (h *streamAPI) originAllowed(origin, host string) bool {
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if len(h.allowedOrigins) > 0 {
		for _, o := range h.allowedOrigins {
			if strings.EqualFold(o, u.Scheme+"://"+u.Host) {
				return true
			}
		}
		return false
	}
	return strings.EqualFold(u.Host, host)
}

// serveWS is the life of one WebSocket connection; the contrib handler must
// block until the connection is done, so this is the read pump. The write
// pump is the realtime client's writer, through a wsConn.
func (h *streamAPI) serveWS(conn *websocket.Conn) {
	a, _ := conn.Locals(localAdmitted).(admitted)
	batch, _ := conn.Locals(localBatch).(bool)
	if rc, ok := conn.Locals(localRequest).(*fasthttp.RequestCtx); ok {
		releaseRequest(rc)
	}
	w := &wsConn{conn: conn, raw: conn.NetConn(), batch: batch}
	defer w.release()
	c := h.open(a, w, func() (c *realtime.Client, err error) {
		onFreshStack(func() { c, err = h.chat.Connect(a.p, a.lease, w) })
		return c, err
	})
	if c == nil {
		return
	}
	defer func() {
		c.Close(realtime.CloseNormal, "")
		h.finish(c)
	}()

	// Every deadline extension checks first that the client is not closing:
	// Close sets the read deadline to now to wake this reader (Waker).
	closing := func() bool {
		select {
		case <-c.Done():
			return true
		default:
			return false
		}
	}
	extend := func() error {
		if closing() {
			return nil
		}
		err := conn.SetReadDeadline(time.Now().Add(pongWait))
		if closing() { // Close ran meanwhile: its wake-up must stand
			_ = conn.SetReadDeadline(time.Now())
		}
		return err
	}
	_ = extend()
	conn.SetPongHandler(func(string) error { return extend() })
	// Answer pings and close frames through wsConn's lock, never with the
	// library's own writes (see wsConn).
	conn.SetPingHandler(func(data string) error {
		_ = extend()
		return w.control(websocket.PongMessage, []byte(data))
	})
	conn.SetCloseHandler(func(code int, _ string) error {
		if code == websocket.CloseNoStatusReceived {
			code = websocket.CloseNormalClosure
		}
		c.Close(code, "")
		return nil
	})
	// The client wakes this reader when it closes from elsewhere (a slow
	// client, a kick, the drain): wsConn is a realtime.Waker.

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	buf := make([]byte, 0, 512)
	for {
		typ, r, err := conn.NextReader()
		if err != nil {
			return
		}
		buf, err = readLimited(r, buf[:0], maxFrame)
		if errors.Is(err, errFrameTooBig) {
			h.m.wsRefused.WithLabelValues("too_big").Inc()
			c.Close(realtime.CloseTooBig, "frame larger than 64 KiB")
			return
		}
		if err != nil {
			return
		}
		_ = extend()
		if closing() {
			return // closing: frames read meanwhile are not handled
		}
		onFreshStack(func() { h.readFrame(ctx, c, typ, buf) })
		if len(buf) > 4<<10 {
			buf = make([]byte, 0, 512) // don't keep a large buffer while idle
		}
	}
}

// readFrame decodes one frame the reader read and runs it.
func (h *streamAPI) readFrame(ctx context.Context, c *realtime.Client, typ int, buf []byte) {
	if typ != websocket.TextMessage {
		if err := c.AllowFrame("other", h.now()); err != nil {
			h.chat.Refuse(c, err, "", "")
			return
		}
		h.chat.Refuse(c, errf(errcode.BadJSON, "send text frames holding one JSON object"), "", "")
		return
	}
	f, err := protocol.Decode(buf)
	if err != nil {
		if lerr := c.AllowFrame("other", h.now()); lerr != nil {
			err = lerr
		}
		h.chat.Refuse(c, err, f.Room, f.Ref)
		return
	}
	// every frame type has a rate per connection (realtime.FrameRates): a
	// flood of any of them is refused before it costs Redis, and closes
	// the connection like a say flood
	if err := h.chat.AllowFrame(c, f.Type); err != nil {
		h.chat.Refuse(c, err, f.Room, f.Ref)
		return
	}
	h.handleFrame(ctx, c, f)
}

// onFreshStack runs fn on a goroutine of its own and waits for it. A
// connection's reader lives as long as the connection, and Go keeps a
// goroutine's grown stack until a collection finds it mostly unused: with
// joins, JSON decoding and Redis calls run on the reader, every idle
// WebSocket held an 8 KiB stack (go_memstats_stack_inuse_bytes over 5,000
// idle connections: 8.9 KiB each). Run on a goroutine that ends, that
// depth is given back at once, and the reader keeps only what reading a
// frame needs. A panic in fn is raised again on the caller, with fn's
// stack, for the handler's own recovery.
func onFreshStack(fn func()) {
	var fault any
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				fault = fmt.Sprintf("%v\n\n%s", r, debug.Stack())
			}
		}()
		fn()
	}()
	<-done
	if fault != nil {
		panic(fault)
	}
}

var errFrameTooBig = errors.New("frame too big")

// readLimited reads r into buf up to max bytes; more is errFrameTooBig.
func readLimited(r io.Reader, buf []byte, max int) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			if len(buf) > max {
				return buf, errFrameTooBig
			}
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > max {
			return buf, errFrameTooBig
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// handleFrame runs one frame. A say is queued on the client's say worker
// (its ack or error follows; when the client has too many says queued,
// this waits, and so does the reader); every other frame waits for the says
// before it, so a client's frames take effect in the order sent. Errors go
// back as error events naming the frame's room and ref; the connection
// stays open.
func (h *streamAPI) handleFrame(ctx context.Context, c *realtime.Client, f protocol.Frame) {
	if f.Type == protocol.TypeSay {
		if err := h.chat.Say(c, f.Room, f.Text, f.Ref); err != nil {
			h.chat.Refuse(c, err, f.Room, f.Ref)
		}
		return
	}
	h.chat.Flush(c)
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var err error
	switch f.Type {
	case protocol.TypePing:
		c.SendEvent(protocol.Pong{})
	case protocol.TypeJoin:
		err = h.chat.Join(fctx, c, f.Lobby)
	case protocol.TypeLeave:
		err = h.chat.Leave(fctx, c, f.Room)
	case protocol.TypeResume:
		err = h.chat.Resume(fctx, c, f.Room, f.After)
	case protocol.TypeTyping:
		err = h.chat.Typing(fctx, c, f.Room)
	case protocol.TypeRead:
		err = h.chat.Read(fctx, c.Principal(), f.Room, f.ID)
	case protocol.TypeQueue:
		err = h.match.queueFrame(fctx, c, f)
	case protocol.TypeDequeue:
		err = h.match.dequeueFrame(fctx, c, f)
	case protocol.TypeInvite: // one case per type: deploy's docs test reads them
		err = h.match.partyFrame(fctx, c, f)
	case protocol.TypeAccept:
		err = h.match.partyFrame(fctx, c, f)
	case protocol.TypeDecline:
		err = h.match.partyFrame(fctx, c, f)
	case protocol.TypeRPC:
		err = h.rpc.frame(fctx, c, f)
	case protocol.TypeDMOpen, protocol.TypeDMSend, protocol.TypeDMTyping, protocol.TypeDMRead, protocol.TypeDMResume:
		err = h.direct.frame(fctx, c, f)
	default:
		err = errf(errcode.UnknownType, "unknown frame type %q; use join, say, leave, resume, typing, read, queue, dequeue, invite, accept, decline, rpc, dm_open, dm_send, dm_typing, dm_read, dm_resume or ping", clipText(f.Type, 40))
	}
	if err != nil {
		h.chat.Refuse(c, err, f.Room, f.Ref)
	}
}

// clipText cuts s to at most n bytes on a rune boundary, marking a cut
// with "…".
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// recoverWS logs a panic in a WebSocket handler and closes that connection
// with 1011; the process keeps serving.
func (h *streamAPI) recoverWS(conn *websocket.Conn) {
	if r := recover(); r != nil {
		h.m.panics.Inc()
		h.log.Error("panic in websocket handler", "panic", r, "stack", string(debug.Stack()))
		_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseInternalServerErr, "internal error"), time.Now().Add(time.Second))
	}
}
