// Package web is chatd's transport: the Fiber app with the HTTP API, the
// WebSocket gateway (upgrade, read pump, and the frame writer the realtime
// client writes through) and the embedded browser client.
//
// A Server is one chatd node's front: everything a request or a frame
// decides is decided by the use cases of its realtime.Node (Chat, Polls,
// Game, Sessions, Moderation, Admin), which own the rules and their side
// effects. Handlers only decode, call one use case and encode; they never
// reach a domain package. Errors carry their documented code (package
// errcode); one table here (statusOf) gives each code its HTTP status.
package web

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/errcode"
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
	// AdminReadToken is a read-only admin token: it opens every admin read
	// (GET) and every admin action answers it 403; "" = none.
	AdminReadToken string
	// Version is the build version this node reports in the node registry;
	// "" = none.
	Version string
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
	// MaxRequestsPerAddr bounds the HTTP requests under /api/v1 (the event
	// stream aside) one client address has in flight on this node; one
	// more is refused 429 rate_limited. 0 = 256, negative = no bound.
	MaxRequestsPerAddr int
	// MaxRequestsPerUser bounds the HTTP requests under /api/v1 (the event
	// stream aside) one user (by its token) has in flight on this node,
	// over all its sessions and addresses; one more is refused 429
	// rate_limited. 0 = 64, negative = no bound.
	MaxRequestsPerUser int
	// MaxHistoryBuilds bounds the history pages (GET
	// /rooms/{room}/messages) this node reads and builds at once; more
	// wait their turn. 0 = 4.
	MaxHistoryBuilds int
	// MaxPollsPerAddr bounds the long polls (wait > 0) one client address
	// has parked on this node; 0 = 64, negative = no bound.
	MaxPollsPerAddr int
	// MaxPollsPerUser bounds the long polls one user has parked on this
	// node, over all its sessions; 0 = 8, negative = no bound.
	MaxPollsPerUser int
	// Auth is "guest" (the default: POST /session mints tokens for free
	// guest names, held while in use) or "jwt" (POST /session is off; only
	// tokens of the operator's login service, signed with Secret).
	Auth string
	// JWTIssuer is the "iss" every token must carry (and chatd's own
	// tokens carry); "" = "chatd".
	JWTIssuer string
	// JWTAudience, when set, is an "aud" every token must name (chatd's own
	// tokens name it); "" = the audience is not checked.
	JWTAudience string
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
	node   *realtime.Node // lifecycle and readiness only
	tokens *tokens

	// The use cases the handlers call.
	chat     *realtime.Chat
	polls    *realtime.Polls
	game     *realtime.Game
	sessions *realtime.Sessions
	mod      *realtime.Moderation
	admin    *realtime.Admin
	match    *realtime.Matchmaking

	m *httpMetrics

	requests inflight // requests in flight per client address
	// userRequests: requests in flight per user (Config.MaxRequestsPerUser)
	userRequests inflight
	// histories bounds the history pages being built at once on this
	// node (Config.MaxHistoryBuilds): each holds up to 1,000 messages read from
	// Redis while it is cut to its byte budget
	histories chan struct{}
	polling   inflight // long polls parked per client address and per user

	lnMu sync.Mutex
	ln   net.Listener // what Serve serves, for Shutdown to close
	shut bool         // Shutdown began: Serve serves nothing more
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
	if cfg.AdminReadToken != "" && cfg.AdminReadToken == cfg.AdminToken {
		return nil, errors.New("web: Config.AdminReadToken must differ from Config.AdminToken")
	}
	if cfg.Auth != "guest" && cfg.Auth != "jwt" {
		return nil, fmt.Errorf("web: Config.Auth %q: expected guest or jwt", cfg.Auth)
	}
	if cfg.MaxConnsPerUser == 0 {
		cfg.MaxConnsPerUser = 10
	}
	if cfg.MaxRequestsPerAddr == 0 {
		cfg.MaxRequestsPerAddr = defaultMaxRequestsPerAddr
	}
	if cfg.MaxRequestsPerUser == 0 {
		cfg.MaxRequestsPerUser = defaultMaxRequestsPerUser
	}
	if cfg.MaxHistoryBuilds <= 0 {
		cfg.MaxHistoryBuilds = defaultMaxHistoryBuilds
	}
	if cfg.MaxPollsPerAddr == 0 {
		cfg.MaxPollsPerAddr = defaultMaxPollsPerAddr
	}
	if cfg.MaxPollsPerUser == 0 {
		cfg.MaxPollsPerUser = defaultMaxPollsPerUser
	}
	s := &Server{
		cfg:    cfg,
		log:    cfg.Logger.With("node", cfg.Node),
		rdb:    cfg.Redis,
		tokens: &tokens{secret: cfg.Secret, ttl: cfg.TokenTTL, now: cfg.Now, issuer: cfg.JWTIssuer, audience: cfg.JWTAudience},
		m:      newHTTPMetrics(cfg.Registry),

		histories: make(chan struct{}, cfg.MaxHistoryBuilds),
	}
	node, err := realtime.New(realtime.Config{
		Redis: cfg.Redis, Node: cfg.Node, Addr: cfg.Addr, Prefix: cfg.Prefix,
		MatchRoomKey:    cfg.Secret, // shared by every node: one room id per match
		MaxConnsPerUser: cfg.MaxConnsPerUser, ClassicPubSub: cfg.ClassicPubSub,
		Now: cfg.Now, Logger: s.log, Registerer: cfg.Registry, Version: cfg.Version,
	})
	if err != nil {
		return nil, err
	}
	s.node = node
	s.chat, s.polls, s.game = node.Chat, node.Polls, node.Game
	s.sessions, s.mod, s.admin = node.Sessions, node.Moderation, node.Admin
	s.match = node.Match
	s.app = fiber.New(fiber.Config{
		AppName:               "chatd",
		DisableStartupMessage: true,
		ErrorHandler:          func(c *fiber.Ctx, err error) error { return s.handleError(c, err) },
		BodyLimit:             cfg.BodyLimit,
		ReadTimeout:           10 * time.Second,
		WriteTimeout:          10 * time.Second,
		IdleTimeout:           75 * time.Second,
		ReadBufferSize:        8192,
		// A connection's read and write buffers go back to fasthttp's pools
		// whenever nothing is buffered: an idle keep-alive connection holds
		// none, and a WebSocket, upgraded right after its request was read,
		// reads straight from the socket instead of through an 8 KiB reader
		// kept for its whole life (6.6 KiB of the 22 KiB of heap an idle
		// WebSocket held, measured with chatbench's conns scenario).
		ReduceMemoryUsage: true,
		// Handlers hand params and bodies to services that keep them (a
		// settings key becomes a map key): without Immutable, Fiber's strings
		// alias the request buffer and change under them on the next request.
		Immutable: true,
	})
	s.routes()
	return s, nil
}

// Node returns this node's id.
func (s *Server) Node() string { return s.cfg.Node }

// Start starts the node's background work: the pub/sub bus and what
// follows it. It returns once the node can serve.
func (s *Server) Start(ctx context.Context) error { return s.node.Start(ctx) }

// Serve serves HTTP and WebSocket on ln until Shutdown (at once, closing
// ln, when Shutdown came first).
func (s *Server) Serve(ln net.Listener) error {
	s.lnMu.Lock()
	if s.shut {
		s.lnMu.Unlock()
		_ = ln.Close()
		return nil
	}
	s.ln = ln
	s.lnMu.Unlock()
	return s.app.Listener(ln)
}

// Shutdown drains the node within ctx: it stops accepting connections,
// tells every WebSocket client to reconnect elsewhere (close 1012) and
// detaches it (a seat is freed only where that was the user's last
// attachment), lets HTTP requests finish (long polls return early), leaves
// the node registry and stops the background work.
func (s *Server) Shutdown(ctx context.Context) error {
	// fasthttp's shutdown closes only the listeners its Serve has
	// registered: a Shutdown that came before Serve got that far would leave
	// Serve accepting for ever. The listener is closed here as well.
	s.lnMu.Lock()
	s.shut = true
	ln := s.ln
	s.lnMu.Unlock()
	if ln != nil {
		defer func() { _ = ln.Close() }()
	}
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

func (s *Server) routes() {
	s.app.Use(s.requestID, s.recoverer)
	s.app.Get("/healthz", func(c *fiber.Ctx) error { return c.JSON(fiber.Map{"ok": true, "node": s.cfg.Node}) })
	s.app.Get("/readyz", s.readyz)
	if !s.cfg.PrivateMetrics {
		s.app.Get("/metrics", adaptor.HTTPHandler(promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{})))
	}

	s.app.Get("/ws", s.wsUpgrade, websocket.New(s.serveWS, websocket.Config{
		HandshakeTimeout: 10 * time.Second,
		// The only read buffer of an idle connection (see ReduceMemoryUsage
		// above): client frames are small, and a larger one is read through
		// it without copying.
		ReadBufferSize:  1024,
		WriteBufferSize: 4096,
		// An idle connection holds no write buffer: it is taken from the
		// pool for each write and given back.
		WriteBufferPool: &sync.Pool{},
		RecoverHandler:  s.recoverWS,
	}))

	api := s.app.Group("/api/v1", s.capRequests)
	api.Post("/session", s.createSession)
	api.Delete("/session", s.requireUser, s.deleteSession)
	s.apiRoutes(api)
	s.specRoutes(api)
	s.eventsRoutes(api)
	s.staticRoutes()
}

// readyz is 200 only while Redis answers PING within RedisTimeout and this
// node's pub/sub connection is receiving (its canary comes back).
// Ready reports whether the node can serve, as GET /readyz does: nil, or
// an error carrying its code (draining, redis_unavailable, redis_oom,
// redis_busy).
func (s *Server) Ready(ctx context.Context, timeout time.Duration) error {
	return s.node.Ready(ctx, timeout)
}

func (s *Server) readyz(c *fiber.Ctx) error {
	if err := s.node.Ready(c.UserContext(), s.cfg.RedisTimeout); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ok": true, "node": s.cfg.Node})
}

// createSession answers POST /session in guest mode: a token for a guest
// name (Sessions.SignIn decides: a free name is claimed for a new holder; a
// request that carries a live token of that same guest joins its holder).
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
	var prev *realtime.Principal
	if p, err := s.tokens.verify(bearer(c)); err == nil {
		prev = &p
	}
	holder, err := s.sessions.SignIn(c.UserContext(), s.clientIP(c), req.User, prev)
	if err != nil {
		return err
	}
	user := req.User
	if prev != nil && prev.Holder == holder {
		user = prev.User // the guest's own name in another case: one guest, one display name
	}
	tok, _, err := s.tokens.mint(user, holder)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"token": tok, "user": user})
}

// deleteSession signs a guest out: the name is free again at once, and the
// guest's connections close.
func (s *Server) deleteSession(c *fiber.Ctx) error {
	if err := s.sessions.SignOut(c.UserContext(), principal(c)); err != nil {
		return err
	}
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
			err = errf(errcode.Internal, "internal error; it has been logged")
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
