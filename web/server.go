// Package web is chatd's transport: the Fiber app with the HTTP API, the
// WebSocket gateway (upgrade, read pump, and the frame writer the realtime
// client writes through) and the embedded browser client.
//
// A Server is one chatd node's front: everything a request or a frame
// decides is decided by its realtime.Node, which owns the domain services,
// the pub/sub bridge and the background work. Handlers only decode, call
// the node (or one of its services) and encode; one error table
// (toAPIError) turns every error into the documented shape, for HTTP
// answers and WebSocket error events alike.
package web

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/identity"
	"github.com/chatd/chatd/names"
	"github.com/chatd/chatd/realtime"
)

// Config configures a Server.
type Config struct {
	// Redis is the client every service of the node uses. Required.
	Redis redis.UniversalClient
	// Node is this node's id; "" = hostname-pid.
	Node string
	// Addr is the address this node advertises in the node registry.
	Addr string
	// Prefix namespaces every Redis key and channel; "" = "chatd".
	Prefix string
	// Secret signs session tokens; all nodes share it. Empty = random (one
	// node only).
	Secret []byte
	// TokenTTL is how long a session token is valid; 0 = 24h.
	TokenTTL time.Duration
	// AdminToken is the bearer token of the admin endpoints; "" = they
	// answer 403.
	AdminToken string
	// AllowedOrigins are the Origins allowed to open a WebSocket, as
	// scheme://host[:port]; empty = the request's own host only.
	AllowedOrigins []string
	// BodyLimit bounds request bodies in bytes; 0 = 1 MiB.
	BodyLimit int
	// RedisTimeout bounds the readiness PING; 0 = 500ms.
	RedisTimeout time.Duration
	// Logger receives the logs; nil = slog.Default().
	Logger *slog.Logger
	// Registry collects the node's metrics, served on /metrics; nil = a new one.
	Registry *prometheus.Registry
	// PrivateMetrics stops serving /metrics on this app (it answers 404),
	// for a node whose metrics are served on a private listener of their
	// own (chatd --metrics-addr); false = /metrics is served here.
	PrivateMetrics bool
	// MaxConnsPerUser bounds one user's WebSocket connections on this
	// node; 0 = 10, negative = no bound.
	MaxConnsPerUser int
	// Auth is "guest" (the default: POST /session mints tokens for free
	// guest names, held while in use) or "jwt" (POST /session is off; only
	// tokens of the operator's login service, signed with Secret).
	Auth string
	// TrustedProxies are the peers whose X-Forwarded-For names the client
	// address (per-address caps); empty = trust none.
	TrustedProxies []*net.IPNet
	// ClassicPubSub keeps room channels on classic pub/sub on a Redis
	// Cluster (by default they are sharded there).
	ClassicPubSub bool
	// Now is the clock; nil = time.Now.
	Now func() time.Time
}

// Server is one chatd node's HTTP and WebSocket front.
type Server struct {
	cfg    Config
	log    *slog.Logger
	app    *fiber.App
	rdb    redis.UniversalClient
	node   *realtime.Node
	tokens *tokens

	m *httpMetrics
}

// New builds a node; Start starts its background work.
func New(cfg Config) (*Server, error) {
	if cfg.Redis == nil {
		return nil, errors.New("web: Config.Redis is required")
	}
	if cfg.Node == "" {
		host, _ := os.Hostname()
		cfg.Node = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if err := names.User(cfg.Node); err != nil && len(cfg.Node) > 64 {
		return nil, fmt.Errorf("web: node id: %w", err)
	}
	if len(cfg.Secret) == 0 {
		cfg.Secret = make([]byte, 32)
		if _, err := rand.Read(cfg.Secret); err != nil {
			return nil, err
		}
	}
	if cfg.TokenTTL == 0 {
		cfg.TokenTTL = 24 * time.Hour
	}
	if cfg.BodyLimit == 0 {
		cfg.BodyLimit = 1 << 20
	}
	if cfg.RedisTimeout == 0 {
		cfg.RedisTimeout = 500 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
		cfg.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Auth == "" {
		cfg.Auth = "guest"
	}
	if cfg.Auth != "guest" && cfg.Auth != "jwt" {
		return nil, fmt.Errorf("web: Config.Auth %q: expected guest or jwt", cfg.Auth)
	}
	if cfg.MaxConnsPerUser == 0 {
		cfg.MaxConnsPerUser = 10
	}
	s := &Server{
		cfg:    cfg,
		log:    cfg.Logger.With("node", cfg.Node),
		rdb:    cfg.Redis,
		tokens: &tokens{secret: cfg.Secret, ttl: cfg.TokenTTL, now: cfg.Now},
		m:      newHTTPMetrics(cfg.Registry),
	}
	node, err := realtime.New(realtime.Config{
		Redis: cfg.Redis, Node: cfg.Node, Addr: cfg.Addr, Prefix: cfg.Prefix,
		MaxConnsPerUser: cfg.MaxConnsPerUser, ClassicPubSub: cfg.ClassicPubSub,
		ErrorCode: func(err error) (string, string) { ae := toAPIError(err); return ae.Code, ae.Message },
		Now:       cfg.Now, Logger: s.log, Registerer: cfg.Registry,
	})
	if err != nil {
		return nil, err
	}
	s.node = node
	s.app = fiber.New(fiber.Config{
		AppName:               "chatd",
		DisableStartupMessage: true,
		ErrorHandler:          func(c *fiber.Ctx, err error) error { return s.handleError(c, err) },
		BodyLimit:             cfg.BodyLimit,
		ReadTimeout:           10 * time.Second,
		WriteTimeout:          10 * time.Second,
		IdleTimeout:           75 * time.Second,
		ReadBufferSize:        8192,
		// Handlers hand params and bodies to services that keep them (a
		// settings key becomes a map key): without Immutable, Fiber's strings
		// alias the request buffer and change under them on the next request.
		Immutable: true,
	})
	s.routes()
	return s, nil
}

// App returns the Fiber app, for tests (app.Test) and embedding.
func (s *Server) App() *fiber.App { return s.app }

// Node returns this node's id.
func (s *Server) Node() string { return s.cfg.Node }

// Node returns the realtime core of this node.
func (s *Server) Core() *realtime.Node { return s.node }

// Start starts the node's background work: the pub/sub bus and what
// follows it. It returns once the node can serve.
func (s *Server) Start(ctx context.Context) error { return s.node.Start(ctx) }

// Serve serves HTTP and WebSocket on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error { return s.app.Listener(ln) }

// Shutdown drains the node within ctx: it stops accepting connections,
// tells every WebSocket client to reconnect elsewhere (close 1012) and
// detaches it (a seat is freed only where that was the user's last
// attachment), lets HTTP requests finish (long polls return early), leaves
// the node registry and stops the background work.
func (s *Server) Shutdown(ctx context.Context) error {
	httpDone := make(chan error, 1)
	go func() { httpDone <- s.app.ShutdownWithContext(ctx) }()
	errs := []error{s.node.Shutdown(ctx)}
	select {
	case err := <-httpDone:
		errs = append(errs, err)
	case <-ctx.Done():
		errs = append(errs, ctx.Err())
	}
	return errors.Join(errs...)
}

// Draining is closed when Shutdown starts.
func (s *Server) Draining() <-chan struct{} { return s.node.Draining() }

func (s *Server) routes() {
	s.app.Use(s.requestID, s.recoverer)
	s.app.Get("/healthz", func(c *fiber.Ctx) error { return c.JSON(fiber.Map{"ok": true, "node": s.cfg.Node}) })
	s.app.Get("/readyz", s.readyz)
	if !s.cfg.PrivateMetrics {
		s.app.Get("/metrics", adaptor.HTTPHandler(promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{})))
	}

	s.app.Get("/ws", s.wsUpgrade, websocket.New(s.serveWS, websocket.Config{
		HandshakeTimeout: 10 * time.Second,
		ReadBufferSize:   4096,
		WriteBufferSize:  4096,
		// An idle connection holds no write buffer: it is taken from the
		// pool for each write and given back.
		WriteBufferPool: &sync.Pool{},
		RecoverHandler:  s.recoverWS,
	}))

	api := s.app.Group("/api/v1")
	api.Post("/session", s.createSession)
	api.Delete("/session", s.requireUser, s.deleteSession)
	s.apiRoutes(api)
	s.specRoutes(api)
	s.staticRoutes()
}

// readyz is 200 only while Redis answers PING within RedisTimeout and this
// node's pub/sub connection is receiving (its canary comes back).
func (s *Server) readyz(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), s.cfg.RedisTimeout)
	defer cancel()
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return errf(http.StatusServiceUnavailable, "redis_unavailable", "Redis did not answer PING within %s", s.cfg.RedisTimeout)
	}
	select {
	case <-s.node.Draining():
		return errf(http.StatusServiceUnavailable, "draining", "this node is shutting down")
	default:
	}
	if !s.node.Ready() {
		return errf(http.StatusServiceUnavailable, "redis_unavailable", "this node's pub/sub connection is not receiving yet")
	}
	return c.JSON(fiber.Map{"ok": true, "node": s.cfg.Node})
}

// createSession answers POST /session in guest mode: a token for a guest
// name. A free name is claimed for a new holder (identity.Claim: SET NX
// PX); a name in use answers 409 name_taken, unless the request carries a
// live token of that same guest (a second device or tab: the new session
// joins the holder). Sessions per client address per minute are capped.
func (s *Server) createSession(c *fiber.Ctx) error {
	if s.cfg.Auth == "jwt" {
		return errGuestOff
	}
	var req struct {
		User string `json:"user"`
	}
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	if err := names.User(req.User); err != nil {
		return err
	}
	ctx := c.UserContext()
	if err := s.node.AllowSession(ctx, s.clientIP(c)); err != nil {
		return err
	}
	if err := s.node.CheckBanned(ctx, req.User); err != nil {
		return err
	}
	holder := ""
	if prev, err := s.tokens.verify(bearer(c)); err == nil && prev.User == req.User && prev.Holder != "" {
		if err := s.admit(ctx, prev); err != nil {
			return err
		}
		holder = prev.Holder
	} else {
		id, err := randomID()
		if err != nil {
			return err
		}
		if err := s.node.Identity().Claim(ctx, req.User, id); err != nil {
			if errors.Is(err, identity.ErrNameTaken) {
				return errf(http.StatusConflict, "name_taken", "the name %q is in use by another guest; pick another, or wait until that guest signs out or is idle for %s", req.User, humanDuration(s.node.Identity().TTL()))
			}
			return err
		}
		holder = id
	}
	tok, _, err := s.tokens.mint(req.User, holder)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"token": tok, "user": req.User})
}

// deleteSession signs a guest out: the name is free again at once, and the
// guest's connections on this node close (on other nodes at their next
// renewal).
func (s *Server) deleteSession(c *fiber.Ctx) error {
	sess := sessionOf(c)
	if sess.Holder != "" {
		if err := s.node.Identity().Release(c.UserContext(), sess.User, sess.Holder); err != nil && !errors.Is(err, identity.ErrNotHolder) {
			return err
		}
	}
	s.node.SignedOut(sess.User, sess.Holder)
	return c.JSON(fiber.Map{"ok": true})
}

// handleError is Fiber's error handler: every error leaves in the documented
// shape; 5xx are logged at warn with the request.
func (s *Server) handleError(c *fiber.Ctx, err error) error {
	ae := toAPIError(err)
	if ae.Status >= 500 {
		s.log.Warn("request failed", "method", c.Method(), "path", c.Path(), "status", ae.Status, "code", ae.Code, "err", err)
	} else {
		s.log.Debug("request refused", "method", c.Method(), "path", c.Path(), "status", ae.Status, "code", ae.Code, "err", err)
	}
	return writeError(c, ae)
}

// recoverer turns a panic in a handler into a 500 in the documented shape
// and a log line with the stack; the process keeps serving.
func (s *Server) recoverer(c *fiber.Ctx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.m.panics.Inc()
			s.log.Error("panic in handler", "method", c.Method(), "path", c.Path(), "panic", r, "stack", string(debug.Stack()))
			err = errf(http.StatusInternalServerError, "internal", "internal error; it has been logged")
		}
	}()
	return c.Next()
}

// recoverWS logs a panic in a WebSocket handler and closes that connection
// with 1011; the process keeps serving.
func (s *Server) recoverWS(conn *websocket.Conn) {
	if r := recover(); r != nil {
		s.m.panics.Inc()
		s.log.Error("panic in websocket handler", "panic", r, "stack", string(debug.Stack()))
		_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseInternalServerErr, "internal error"), time.Now().Add(time.Second))
	}
}

// logRequests logs one line per request at debug and counts it.
func (s *Server) logRequests(c *fiber.Ctx) error {
	start := time.Now()
	err := c.Next()
	status := c.Response().StatusCode()
	if err != nil {
		status = toAPIError(err).Status
	}
	route := c.Route().Path
	s.m.observe(c.Method(), route, status, time.Since(start))
	s.log.Debug("request", "method", c.Method(), "path", c.Path(), "status", status, "dur", time.Since(start))
	return err
}

// humanDuration writes d for people: "30 minutes", "2 hours", "45 seconds".
func humanDuration(d time.Duration) string {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return plural(int(d/time.Hour), "hour")
	case d >= time.Minute && d%time.Minute == 0:
		return plural(int(d/time.Minute), "minute")
	}
	return plural(int(d.Round(time.Second)/time.Second), "second")
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return strconv.Itoa(n) + " " + unit + "s"
}
