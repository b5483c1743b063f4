package web

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/protocol"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/realtime/chat"
)

// GET /api/v1/events is the realtime stream over Server-Sent Events, for
// networks that break WebSocket upgrades: the same events as the
// WebSocket, one `data:` JSON object each; every message event carries an
// `id:` that is the stream's position in every room it sits in
// (chat.Position), so the browser's automatic reconnect resumes all of
// them with Last-Event-ID — no gap, no duplicate. The session sends over
// plain HTTP on any node (POST …/messages, …/read, joins and leaves): no
// sticky sessions. Heartbeats are comments every 25 s. A drain ends the
// stream with a `reconnect` event; a kick, a ban or an ended
// session with a `close` event naming the code (the client must not
// reconnect after 4000 or 4003).

// streamEvents opens a stream. The token comes in the Authorization header
// or, for EventSource (which sends no headers of its own), in ?token=.
func (h *streamAPI) streamEvents(c *fiber.Ctx) error {
	raw := bearer(c)
	if raw == "" {
		raw = c.Query("token")
	}
	var after chat.Position
	a, _, err := h.admit(c, raw, "open the stream with Authorization: Bearer <token> or ?token=<token> (from POST /api/v1/session)", func() error {
		last := c.Get("Last-Event-ID")
		if last == "" {
			last = c.Query("last_event_id")
		}
		var err error
		if after, err = chat.ParsePosition(last); err != nil {
			return errf(errcode.BadRequest, "Last-Event-ID is not a stream position: %v", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, "text/event-stream; charset=utf-8")
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	// The connection ends with the stream: watch reads it meanwhile, and
	// must not take the bytes of a next request.
	c.Context().SetConnectionClose()
	raw2 := c.Context().Conn()
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		t := &sseConn{raw: raw2, w: w, pos: chat.Position{}, done: make(chan struct{})}
		for r, id := range after {
			t.pos[r] = id
		}
		// the comment opens the stream at once (proxies, EventSource's open event)
		if t.writeRaw([]byte(": chatd\nretry: 2000\n\n")) != nil {
			h.release(a)
			return
		}
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cl := h.open(a, t, func() (*realtime.Client, error) { return h.rest.Stream(sctx, a.p, a.lease, t, after) })
		cancel()
		if cl == nil {
			return
		}
		go t.watch(cl)
		h.finish(cl)
	})
	return nil
}

// sseConn is a stream's realtime.Transport: it writes events as SSE
// records straight onto the connection, everything queued in one write
// with one deadline, as wsConn does for frames.
type sseConn struct {
	raw net.Conn
	w   *bufio.Writer

	mu     sync.Mutex
	pos    chat.Position // the stream's position, sent as the id of each message event
	closed bool
	done   chan struct{}
}

var (
	messageHead = []byte(`{"type":"message","message":{"id":"`)
	roomField   = []byte(`"room":"`)
)

// messageOf returns the room and id of a message event, by scanning its
// head (the send script writes it so: id first, then room).
func messageOf(e []byte) (room, id string, ok bool) {
	if !bytes.HasPrefix(e, messageHead) {
		return "", "", false
	}
	rest := e[len(messageHead):]
	i := bytes.IndexByte(rest, '"')
	if i <= 0 {
		return "", "", false
	}
	id = string(rest[:i])
	j := bytes.Index(rest, roomField)
	if j < 0 {
		return "", "", false
	}
	rest = rest[j+len(roomField):]
	k := bytes.IndexByte(rest, '"')
	if k <= 0 {
		return "", "", false
	}
	return string(rest[:k]), id, true
}

var leftType = []byte(`"type":"left"`)

// leftOf returns the room of a left event.
func leftOf(e []byte) (room string, ok bool) {
	if !bytes.Contains(e, leftType) {
		return "", false
	}
	var ev protocol.Left
	if json.Unmarshal(e, &ev) != nil || ev.Type != protocol.TypeLeft || ev.Room == "" {
		return "", false
	}
	return ev.Room, true
}

// Write sends events as SSE records in one write.
func (t *sseConn) Write(events [][]byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return net.ErrClosed
	}
	var b []byte
	for _, e := range events {
		id := ""
		if room, msg, ok := messageOf(e); ok {
			t.pos[room] = msg
			id = t.pos.String()
		} else if room, ok := leftOf(e); ok {
			// the position names the rooms the stream is in: it would
			// otherwise grow with every room ever left, past what a
			// Last-Event-ID may hold
			delete(t.pos, room)
		}
		b = protocol.AppendRecord(b, "", id, e) // one JSON object: no newline inside
	}
	return t.flushLocked(b)
}

// Ping writes a heartbeat comment.
func (t *sseConn) Ping() error { return t.writeRaw([]byte(": ping\n\n")) }

func (t *sseConn) writeRaw(p []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return net.ErrClosed
	}
	return t.flushLocked(p)
}

func (t *sseConn) flushLocked(p []byte) error {
	if err := t.raw.SetWriteDeadline(time.Now().Add(writeWait)); err != nil {
		return err
	}
	if _, err := t.w.Write(p); err != nil {
		return err
	}
	return t.w.Flush()
}

// Close ends the stream with an event saying why: `reconnect` for a drain
// (1012) or a slow reader (1013), `close` with the code for the rest.
func (t *sseConn) Close(code int, reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	if code != realtime.CloseAbnormal {
		reason = strings.ToValidUTF8(reason, "")
		var ev protocol.ServerEvent = protocol.StreamClose{Code: code, Reason: reason}
		if code == realtime.CloseServiceReboot || code == realtime.CloseTryLater {
			ev = protocol.StreamReconnect{Code: code, Reason: reason}
		}
		data, _ := protocol.Encode(ev) // an int and a valid UTF-8 string: cannot fail
		_ = t.flushLocked(protocol.AppendRecord(nil, ev.EventType(), "", data))
	}
	t.closed = true
	close(t.done)
}

// watch reads the connection until the peer hangs up, then closes the
// client: otherwise nothing notices a gone peer before a write fails — a
// heartbeat or two later — and its seats, its connection lease and its
// queue stay meanwhile. The peer sends nothing on a stream; what it sends
// is dropped. watch ends when the connection closes, which it does when
// the stream ends (Connection: close).
func (t *sseConn) watch(cl *realtime.Client) {
	_ = t.raw.SetReadDeadline(time.Time{}) // the server's read timeout is for requests
	buf := make([]byte, 512)
	for {
		if _, err := t.raw.Read(buf); err != nil {
			cl.Close(realtime.CloseAbnormal, "")
			return
		}
	}
}

// Abort cuts a write in progress short: the stream is dropped for not
// reading.
func (t *sseConn) Abort() { _ = t.raw.SetWriteDeadline(time.Now()) }
