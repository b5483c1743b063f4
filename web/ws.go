package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"

	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/presence"
	"github.com/chatd/chatd/rooms"
)

// wsUpgrade refuses a bad Origin (403) or token (401) before the upgrade.
func (s *Server) wsUpgrade(c *fiber.Ctx) error {
	if !websocket.IsWebSocketUpgrade(c) {
		return errf(http.StatusUpgradeRequired, "bad_request", "this endpoint speaks WebSocket only")
	}
	// the request's own Host header, not c.Hostname(), which would trust a
	// client-sent X-Forwarded-Host
	if !s.originAllowed(c.Get(fiber.HeaderOrigin), string(c.Request().Host())) {
		s.m.wsRefused.WithLabelValues("origin").Inc()
		return errf(http.StatusForbidden, "forbidden", "this Origin may not open a WebSocket here")
	}
	sess, err := s.tokens.verify(c.Query("token"))
	if err != nil {
		s.m.wsRefused.WithLabelValues("token").Inc()
		return errf(http.StatusUnauthorized, "bad_token", "open the WebSocket with ?token=<session token> (from POST /api/v1/session)")
	}
	if !s.conns.reserve(sess.User, s.cfg.MaxConnsPerUser) {
		s.m.wsRefused.WithLabelValues("too_many").Inc()
		return errf(http.StatusTooManyRequests, "rate_limited", "too many connections for this user on this node (at most %d)", s.cfg.MaxConnsPerUser)
	}
	c.Locals(localSession, sess)
	if err := c.Next(); err != nil {
		// the upgrade failed (a bad handshake): serveWS never runs to take
		// the reservation over
		s.conns.unreserve(sess.User)
		return err
	}
	return nil
}

// originAllowed: no Origin (not a browser) is allowed; otherwise the Origin
// must be in the allow-list, or, without one, name the request's own host.
func (s *Server) originAllowed(origin, host string) bool {
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if len(s.cfg.AllowedOrigins) > 0 {
		for _, o := range s.cfg.AllowedOrigins {
			if strings.EqualFold(o, u.Scheme+"://"+u.Host) {
				return true
			}
		}
		return false
	}
	return strings.EqualFold(u.Host, host)
}

// serveWS is the life of one WebSocket connection; the contrib handler must
// block until the connection is done, so this is the reader loop.
func (s *Server) serveWS(conn *websocket.Conn) {
	sess, _ := conn.Locals(localSession).(session)
	c := &client{
		s: s, conn: conn, user: sess.User, sid: sess.ID,
		wake:  make(chan struct{}, 1),
		done:  make(chan struct{}),
		rooms: map[string]*clientRoom{},
	}
	s.conns.add(c)
	s.m.wsOpen.Inc()
	writerDone := make(chan struct{})
	go c.writeLoop(writerDone)
	defer func() {
		c.close(websocket.CloseNormalClosure, "")
		<-writerDone
		s.disconnect(c)
		s.m.wsOpen.Dec()
	}()

	conn.SetReadLimit(maxFrame)
	_ = conn.SetReadDeadline(time.Now().Add(pongWait))
	conn.SetPongHandler(func(string) error { return conn.SetReadDeadline(time.Now().Add(pongWait)) })

	c.sendJSON(map[string]string{"type": "hello", "user": c.user, "node": s.cfg.Node, "motd": s.settings.String("motd")})
	s.goRun(func() { // online at once, not at the next presence tick
		ctx, cancel := contextTimeout()
		defer cancel()
		s.touchUser(ctx, c.user)
	})
	go s.deliverUnseenNotices(c)

	// The contrib handler recycles conn when serveWS returns: nothing may
	// touch it after that, so this watcher is waited for.
	ctx, cancel := context.WithCancel(context.Background())
	watcher := make(chan struct{})
	go func() {
		defer close(watcher)
		select {
		case <-c.done:
			cancel()
			_ = conn.SetReadDeadline(time.Now()) // wake the reader
		case <-ctx.Done():
		}
	}()
	defer func() { cancel(); <-watcher }()
	for {
		typ, p, err := conn.ReadMessage()
		if err != nil {
			if errors.Is(err, websocket.ErrReadLimit) {
				s.m.wsRefused.WithLabelValues("too_big").Inc()
				c.close(websocket.CloseMessageTooBig, "frame larger than 64 KiB")
			}
			return
		}
		_ = conn.SetReadDeadline(time.Now().Add(pongWait))
		if typ != websocket.TextMessage {
			c.sendError(errf(http.StatusBadRequest, "bad_json", "send text frames holding one JSON object"), "")
			continue
		}
		f, err := decodeFrame(p)
		if err != nil {
			c.sendError(err, f.Ref)
			continue
		}
		if ctx.Err() != nil {
			return // closing: frames read meanwhile are not handled
		}
		fctx, fcancel := context.WithTimeout(ctx, 10*time.Second)
		c.handle(fctx, f)
		fcancel()
	}
}

// disconnect forgets a closed client: it leaves the hub, updates the
// user's presence on this node, and frees each seat the user holds on no
// other connection — on this node or, by presence, on any other.
func (s *Server) disconnect(c *client) {
	s.conns.remove(c)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var orphaned []string
	for _, room := range c.roomsHeld() {
		if !s.hub.remove(room, c) {
			orphaned = append(orphaned, room)
		}
	}
	s.touchUser(ctx, c.user)
	if len(orphaned) == 0 {
		return
	}
	elsewhere := map[string]bool{}
	if st, err := s.presence.Get(ctx, c.user); err == nil {
		for _, r := range st.Rooms {
			elsewhere[r] = true
		}
	}
	for _, room := range orphaned {
		if elsewhere[room] {
			continue // the user is in the room on another node: keep the seat
		}
		if err := s.rooms.Leave(ctx, room, c.user); err != nil && !errors.Is(err, rooms.ErrNotSeated) {
			s.log.Debug("free seat on disconnect", "room", room, "user", c.user, "err", err)
			continue
		}
		s.goRun(func() { s.markRoom(room, dirty.Of(dirty.Rooms)) })
	}
}

// touchUser writes this node's presence claim for user now: the rooms of
// all its local connections, or offline when it has none here.
func (s *Server) touchUser(ctx context.Context, user string) {
	cs := s.conns.of(user)
	if len(cs) == 0 {
		if err := s.presence.Offline(ctx, user, s.cfg.Node); err != nil {
			s.log.Debug("presence offline", "user", user, "err", err)
		}
		return
	}
	set := map[string]struct{}{}
	for _, c := range cs {
		for _, r := range c.roomsHeld() {
			set[r] = struct{}{}
		}
	}
	st := presence.UserState{User: user, Rooms: make([]string, 0, len(set))}
	for r := range set {
		st.Rooms = append(st.Rooms, r)
	}
	if err := s.presence.Touch(ctx, s.cfg.Node, []presence.UserState{st}); err != nil {
		s.log.Debug("presence touch", "user", user, "err", err)
	}
}
