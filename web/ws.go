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

	"github.com/chatd/chatd/rooms"
)

// wsUpgrade refuses a bad Origin (403) or token (401) before the upgrade.
func (s *Server) wsUpgrade(c *fiber.Ctx) error {
	if !websocket.IsWebSocketUpgrade(c) {
		return errf(http.StatusUpgradeRequired, "bad_request", "this endpoint speaks WebSocket only")
	}
	if !s.originAllowed(c.Get(fiber.HeaderOrigin), c.Hostname()) {
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
	return c.Next()
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
		send:  make(chan []byte, sendQueue),
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
		fctx, fcancel := context.WithTimeout(ctx, 10*time.Second)
		c.handle(fctx, f)
		fcancel()
	}
}

// disconnect forgets a closed client: it leaves the hub, and frees the
// seats it was the user's last local connection for.
func (s *Server) disconnect(c *client) {
	s.conns.remove(c)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, room := range c.roomsHeld() {
		if s.hub.remove(room, c) {
			continue
		}
		if err := s.rooms.Leave(ctx, room, c.user); err != nil && !errors.Is(err, rooms.ErrNotSeated) {
			s.log.Debug("free seat on disconnect", "room", room, "user", c.user, "err", err)
		}
	}
	if !s.conns.has(c.user) {
		if err := s.presence.Offline(ctx, c.user, s.cfg.Node); err != nil {
			s.log.Debug("presence offline", "user", c.user, "err", err)
		}
	}
}
