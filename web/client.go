package web

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gofiber/contrib/websocket"

	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/rooms"
)

// WebSocket limits and timings.
const (
	maxFrame      = 64 << 10         // frames over 64 KiB close the connection with 1009
	sendQueue     = 256              // frames queued per client before it is dropped (1013)
	writeWait     = 10 * time.Second // a write that takes longer drops the client
	pongWait      = 60 * time.Second // no frame or pong for this long drops the client
	pingEvery     = 25 * time.Second // server pings; well below the balancer's read timeout (75 s in deploy/nginx.conf)
	joinHistory   = 50               // messages sent after a join
	abuseLimit    = 20               // rate-limited frames in a row before close 1008
	closeTryLater = 1013             // RFC 6455: try again later

	closeServiceRestart = 1012 // RFC 6455: service restart; reconnect
)

// client is one WebSocket connection: one reader (the handler goroutine),
// one writer goroutine, and a bounded send queue between them. Nothing
// writes to the connection but the writer.
type client struct {
	s    *Server
	conn *websocket.Conn
	user string
	sid  string

	qmu       sync.Mutex
	queue     [][]byte      // frames waiting for the writer; nil while idle
	wake      chan struct{} // cap 1: the queue has frames
	done      chan struct{} // closed when the client is closing
	closeOnce sync.Once
	closeCode int
	closeText string

	mu    sync.Mutex
	rooms map[string]*clientRoom

	abuse int // consecutive rate-limited frames
}

// clientRoom is a client's state in one room: the last message id it was
// sent, and, while it catches up from history, the live messages held back.
type clientRoom struct {
	lastID   string
	catching bool
	held     []heldFrame
}

type heldFrame struct {
	id string
	p  []byte
}

// deliver queues a room event for c: messages once each, in id order;
// while c catches up on the room, live messages are held back.
func (c *client) deliver(room, typ, id string, p []byte) {
	c.mu.Lock()
	cr := c.rooms[room]
	if cr == nil {
		c.mu.Unlock()
		return
	}
	if typ == "message" {
		if cr.catching {
			cr.held = append(cr.held, heldFrame{id, p})
			c.mu.Unlock()
			return
		}
		if id <= cr.lastID {
			c.mu.Unlock()
			return
		}
		cr.lastID = id
	}
	c.mu.Unlock()
	c.enqueue(p)
}

// enqueue puts a frame on the send queue without ever blocking: a client
// with sendQueue frames waiting is closed with 1013, so a slow reader never
// delays the others. The queue is a slice the writer takes whole, so an idle
// connection holds no queue memory at all.
func (c *client) enqueue(p []byte) {
	select {
	case <-c.done:
		return
	default:
	}
	c.qmu.Lock()
	if len(c.queue) >= sendQueue {
		c.qmu.Unlock()
		c.s.m.slowClients.Inc()
		c.close(closeTryLater, "send queue full: you are reading too slowly")
		return
	}
	c.queue = append(c.queue, p)
	c.qmu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// takeQueue returns the waiting frames, oldest first, and empties the queue.
func (c *client) takeQueue() [][]byte {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	q := c.queue
	c.queue = nil
	return q
}

func (c *client) sendJSON(v any) {
	p, err := json.Marshal(v)
	if err != nil {
		c.s.log.Error("encode frame", "err", err)
		return
	}
	c.enqueue(p)
}

// close starts closing the connection with code; the writer sends the
// close frame and closes the socket.
func (c *client) close(code int, text string) {
	c.closeOnce.Do(func() {
		c.closeCode, c.closeText = code, text
		close(c.done)
	})
}

// writeLoop is the only writer of the connection.
func (c *client) writeLoop(finished chan<- struct{}) {
	defer close(finished)
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	for {
		select {
		case <-c.wake:
			for _, p := range c.takeQueue() {
				_ = c.conn.SetWriteDeadline(time.Now().Add(writeWait))
				if err := c.conn.WriteMessage(websocket.TextMessage, p); err != nil {
					c.close(websocket.CloseAbnormalClosure, "")
					_ = c.conn.Close()
					return
				}
			}
		case <-ping.C:
			if err := c.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeWait)); err != nil {
				c.close(websocket.CloseAbnormalClosure, "")
				_ = c.conn.Close()
				return
			}
		case <-c.done:
			// flush what is queued, briefly, then say goodbye; a client that
			// was too slow gets only the close frame
			_ = c.conn.SetWriteDeadline(time.Now().Add(time.Second))
			if c.closeCode != closeTryLater {
				for _, p := range c.takeQueue() {
					if c.conn.WriteMessage(websocket.TextMessage, p) != nil {
						break
					}
				}
			}
			if c.closeCode != websocket.CloseAbnormalClosure {
				_ = c.conn.WriteControl(websocket.CloseMessage,
					websocket.FormatCloseMessage(c.closeCode, c.closeText), time.Now().Add(time.Second))
			}
			_ = c.conn.Close()
			return
		}
	}
}

// inFrame is any client → server frame.
type inFrame struct {
	Type  string `json:"type"`
	Lobby string `json:"lobby"`
	Room  string `json:"room"`
	Text  string `json:"text"`
	Ref   string `json:"ref"`
	After string `json:"after"`
}

// decodeFrame decodes a client frame strictly: one JSON object with a
// string "type"; wrong field types and deep nesting are errors.
func decodeFrame(p []byte) (inFrame, error) {
	var f inFrame
	if !utf8.Valid(p) {
		return f, errf(http.StatusBadRequest, "bad_json", "frames must be UTF-8 text")
	}
	if err := decodeJSON(p, &f); err != nil {
		return f, err
	}
	if f.Type == "" {
		return f, errf(http.StatusBadRequest, "bad_request", `every frame needs a "type"`)
	}
	if len(f.Ref) > 64 {
		return f, errf(http.StatusBadRequest, "bad_request", `"ref" is longer than 64 characters`)
	}
	return f, nil
}

// handle runs one frame. Errors go back as error events and keep the
// connection open.
func (c *client) handle(ctx context.Context, f inFrame) {
	var err error
	switch f.Type {
	case "ping":
		c.sendJSON(map[string]string{"type": "pong"})
	case "join":
		err = c.join(ctx, f.Lobby)
	case "say":
		err = c.say(ctx, f)
	case "leave":
		err = c.leave(ctx, f.Room)
	case "resume":
		err = c.resume(ctx, f.Room, f.After)
	default:
		err = errf(http.StatusBadRequest, "unknown_type", "unknown frame type %q; use join, say, leave, resume or ping", clipText(f.Type, 40))
	}
	if err != nil {
		c.sendError(err, f.Ref)
		return
	}
	c.abuse = 0 // only refusals in a row count as abuse
}

func (c *client) sendError(err error, ref string) {
	ae := toAPIError(err)
	if ae.Status >= 500 {
		c.s.log.Warn("websocket frame failed", "user", c.user, "code", ae.Code, "err", err)
	}
	ev := map[string]string{"type": "error", "code": ae.Code, "message": ae.Message}
	if ref != "" {
		ev["ref"] = ref
	}
	c.sendJSON(ev)
	if ae.Code == "rate_limited" {
		c.abuse++
		if c.abuse >= abuseLimit {
			c.close(websocket.ClosePolicyViolation, "too many messages")
		}
	} else {
		c.abuse = 0
	}
}

func (c *client) join(ctx context.Context, lobby string) error {
	room, err := c.s.rooms.Join(ctx, lobby, c.user)
	if err != nil {
		return err
	}
	c.s.goRun(func() { c.s.markRoom(room.ID, dirty.Of(dirty.Rooms)) })
	return c.enter(ctx, room, "")
}

// enter subscribes c to room, sends joined, then the history after `after`
// ("" = the latest joinHistory messages), then whatever arrived live
// meanwhile: no gap and no duplicate at the seam.
func (c *client) enter(ctx context.Context, room rooms.Room, after string) error {
	c.mu.Lock()
	if cr := c.rooms[room.ID]; cr != nil && after == "" {
		c.mu.Unlock()
		c.sendJSON(map[string]any{"type": "joined", "room": room})
		return nil // already in: a repeated join answers with the same room
	}
	c.rooms[room.ID] = &clientRoom{catching: true, lastID: after}
	c.mu.Unlock()
	if err := c.s.hub.add(ctx, room.ID, c); err != nil {
		c.forget(room.ID)
		return err
	}
	// Other nodes learn that the user is here before the client hears it
	// joined: a disconnect of the user's other connection elsewhere then
	// keeps the seat (Server.disconnect).
	c.s.touchUser(ctx, c.user)
	c.sendJSON(map[string]any{"type": "joined", "room": room})

	limit := joinHistory
	if after != "" {
		limit = rooms.MaxHistoryLimit
	}
	msgs, err := c.s.rooms.History(ctx, room.ID, after, limit)
	if errors.Is(err, rooms.ErrResumeGap) {
		c.sendError(err, "")
		msgs, err = c.s.rooms.History(ctx, room.ID, "", joinHistory)
	}
	if err != nil {
		c.s.hub.remove(room.ID, c)
		c.forget(room.ID)
		return err
	}
	c.catchUp(room.ID, msgs)
	return nil
}

// catchUp sends history, then the live messages held back during it.
func (c *client) catchUp(room string, msgs []rooms.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cr := c.rooms[room]
	if cr == nil {
		return
	}
	for i := range msgs {
		if msgs[i].ID <= cr.lastID {
			continue
		}
		p, err := json.Marshal(rooms.Event{Type: rooms.EventMessage, Message: &msgs[i]})
		if err != nil {
			continue
		}
		cr.lastID = msgs[i].ID
		c.enqueue(p)
	}
	for _, h := range cr.held {
		if h.id <= cr.lastID {
			continue
		}
		cr.lastID = h.id
		c.enqueue(h.p)
	}
	cr.held, cr.catching = nil, false
}

func (c *client) forget(room string) {
	c.mu.Lock()
	delete(c.rooms, room)
	c.mu.Unlock()
}

func (c *client) inRoom(room string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rooms[room] != nil
}

func (c *client) say(ctx context.Context, f inFrame) error {
	msg, err := c.s.say(ctx, c.user, f.Room, f.Text)
	if errors.Is(err, rooms.ErrNotSeated) && c.inRoom(f.Room) {
		// The seat went while this connection still shows the room (freed
		// by the user's other connection closing, or expired during an
		// outage): take it back if it is free, and send once more.
		if _, rerr := c.s.rooms.Reclaim(ctx, f.Room, c.user); rerr == nil {
			msg, err = c.s.rooms.Send(ctx, f.Room, c.user, f.Text)
			if err == nil {
				c.s.goRun(func() { c.s.markRoom(f.Room, dirty.Of(dirty.Messages)) })
			}
		}
	}
	if err != nil {
		return err
	}
	if f.Ref != "" {
		c.sendJSON(map[string]string{"type": "ack", "ref": f.Ref, "id": msg.ID})
	}
	return nil
}

func (c *client) leave(ctx context.Context, room string) error {
	if err := c.s.rooms.Leave(ctx, room, c.user); err != nil && !errors.Is(err, rooms.ErrNotSeated) {
		return err
	}
	if c.inRoom(room) {
		c.s.hub.remove(room, c)
		c.forget(room)
	}
	c.s.goRun(func() {
		c.s.markRoom(room, dirty.Of(dirty.Rooms))
		ctx, cancel := contextTimeout()
		defer cancel()
		c.s.touchUser(ctx, c.user)
	})
	return nil
}

// resume takes the caller back into room after a disconnect, taking its
// seat back if the lease ran out and a seat is free, and replays what was
// sent after `after`.
func (c *client) resume(ctx context.Context, room, after string) error {
	r, err := c.s.rooms.Reclaim(ctx, room, c.user)
	if err != nil {
		return err
	}
	c.s.goRun(func() { c.s.markRoom(room, dirty.Of(dirty.Rooms)) })
	if after == "" {
		return c.enter(ctx, r, "")
	}
	if c.inRoom(room) {
		c.s.hub.remove(room, c)
		c.forget(room)
	}
	return c.enter(ctx, r, after)
}

// roomsHeld returns the rooms c is in.
func (c *client) roomsHeld() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.rooms))
	for r := range c.rooms {
		out = append(out, r)
	}
	return out
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
