// Package web is chatd's transport: the Fiber app with the HTTP API, the
// WebSocket gateway (upgrade, read pump, and the frame writer the realtime
// client writes through) and the embedded browser client.
//
// A Server is one chatd node's front: everything a request or a frame
// decides is decided by the realtime use cases it is given (UseCases:
// Chat, Polls, Game, Sessions, Moderation, Admin, Match), which own the
// rules and their side effects; cmd/chatd builds them and the Server, and
// starts and stops them in order. Handlers, grouped by the use case they
// serve (chatAPI, adminAPI, …), only decode, call one use case and
// encode; they never reach a domain package. Errors carry their documented code (package
// errcode); one table here (statusOf) gives each code its HTTP status.
package web

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/realtime/admin"
	"github.com/chatd/chatd/realtime/chat"
	"github.com/chatd/chatd/realtime/direct"
	"github.com/chatd/chatd/realtime/game"
	"github.com/chatd/chatd/realtime/match"
	moderate "github.com/chatd/chatd/realtime/moderation"
	"github.com/chatd/chatd/realtime/polls"
	"github.com/chatd/chatd/realtime/rpc"
	"github.com/chatd/chatd/realtime/serverapi"
	"github.com/chatd/chatd/realtime/sessions"
)

// UseCases are what a Server serves: the realtime use cases its handlers
// call (each handler group holds the ones it needs) and the core's
// readiness and drain. A Server builds none of them: cmd/chatd composes
// them (realtime/app, through cmd/chatd/compose) and hands them over. Every field is required.
type UseCases struct {
	Chat       *chat.Chat
	REST       *chat.REST
	Reads      *chat.Reads
	Polls      *polls.Polls
	Game       *game.Game
	Sessions   *sessions.Sessions
	Moderation *moderate.Moderation
	Admin      *admin.Admin
	Match      *match.Matchmaking
	// RPC forwards clients' calls to the application's backend (the rpc
	// hook); nil = no rpc: every call answers not_found.
	RPC *rpc.RPC
	// Direct is the direct messages and blocks.
	Direct *direct.Direct
	// Core is the realtime core's lifecycle, as far as the front takes
	// part in it (realtime.Node).
	Core Core
	// ServerAPI is the server API for backends (Config.ServerKeys).
	ServerAPI *serverapi.ServerAPI
}

// Core is the realtime core as its front sees it.
type Core interface {
	// Ready reports whether the node can serve (GET /readyz): nil, or an
	// error carrying its code.
	Ready(ctx context.Context, timeout time.Duration) error
	// Drain tells every realtime client to reconnect elsewhere and waits
	// until all are gone; Shutdown runs it while HTTP requests finish.
	Drain(ctx context.Context) error
}

var _ Core = (*realtime.Node)(nil)

// Config configures a Server: the HTTP front's own settings. What the
// realtime core needs (Redis, the key prefix, the caps it enforces) is
// the core's Config.
type Config struct {
	// Node is this node's id, as /healthz, whoami and the audit log say
	// it. Required.
	Node string
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
	// ServerKeys are the API keys of the server role, for the
	// application's backend (the routes under /api/v1/server; see
	// serverkeys.go); none = those routes answer 403.
	ServerKeys []ServerKey
	// AllowedOrigins are the Origins allowed to open a WebSocket, as
	// scheme://host[:port]; empty = the request's own host only.
	AllowedOrigins []string
	// BodyLimit bounds request bodies in bytes; 0 = 1 MiB.
	BodyLimit int
	// RedisTimeout bounds the readiness check (Core.Ready); 0 = 500ms.
	RedisTimeout time.Duration
	// Logger receives the logs; nil = slog.Default().
	Logger *slog.Logger
	// Registry collects the node's metrics, served on /metrics; nil = a new one.
	Registry *prometheus.Registry
	// PrivateMetrics stops serving /metrics on this app (it answers 404),
	// for a node whose metrics are served on a private listener of their
	// own (chatd --metrics-addr); false = /metrics is served here.
	PrivateMetrics bool
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
	// Now is the clock; nil = time.Now.
	Now func() time.Time
}

// Server is one chatd node's HTTP and WebSocket front. It owns the Fiber
// app, the middleware every request passes (request id, recovery, the
// per-address cap), health and readiness, and the lifecycle; the handlers
// are grouped by the use case they serve, one type each (authAPI,
// chatAPI, streamAPI, adminAPI, moderationAPI, gameAPI, matchAPI,
// pollAPI), and routes lists them all.
type Server struct {
	cfg  Config
	log  *slog.Logger
	app  *fiber.App
	core Core
	m    *httpMetrics
	ip   proxies

	requests inflight // requests in flight per client address

	auth   *authAPI
	chat   *chatAPI
	stream *streamAPI
	admin  *adminAPI
	mod    *moderationAPI
	game   *gameAPI
	match  *matchAPI
	direct *directAPI
	poll   *pollAPI
	server *serverAPI
	rpc    *rpcAPI
	// userRequests: requests in flight per user (Config.MaxRequestsPerUser)
	userRequests inflight

	lnMu sync.Mutex
	ln   net.Listener // what Serve serves, for Shutdown to close
	shut bool         // Shutdown began: Serve serves nothing more
}

// New builds the front of the use cases uc; Serve serves it.
func New(uc UseCases, cfg Config) (*Server, error) {
	if uc.Chat == nil || uc.REST == nil || uc.Reads == nil || uc.Polls == nil || uc.Game == nil || uc.Sessions == nil || uc.Moderation == nil ||
		uc.Admin == nil || uc.Match == nil || uc.Direct == nil || uc.Core == nil {
		return nil, errors.New("web: every use case is required (realtime/app builds them)")
	}
	if uc.ServerAPI == nil {
		return nil, errors.New("web: UseCases.ServerAPI is required (realtime/app builds it)")
	}
	if cfg.Node == "" {
		return nil, errors.New("web: Config.Node is required")
	}
	if err := CheckServerKeys(cfg.ServerKeys, cfg.AdminToken, cfg.AdminReadToken); err != nil {
		return nil, err
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
		cfg:  cfg,
		log:  cfg.Logger.With("node", cfg.Node),
		core: uc.Core,
		m:    newHTTPMetrics(cfg.Registry),
		ip:   proxies(cfg.TrustedProxies),
	}
	tok := &tokens{secret: cfg.Secret, ttl: cfg.TokenTTL, now: cfg.Now, issuer: cfg.JWTIssuer, audience: cfg.JWTAudience}
	s.auth = &authAPI{mode: cfg.Auth, tokens: tok, sessions: uc.Sessions, audit: uc.Admin,
		adminToken: cfg.AdminToken, adminReadToken: cfg.AdminReadToken, node: cfg.Node, ip: s.ip, log: s.log}
	s.auth.serverKeys = cfg.ServerKeys
	s.server = &serverAPI{api: uc.ServerAPI}
	s.chat = &chatAPI{chat: uc.Chat, rest: uc.REST, reads: uc.Reads, histories: make(chan struct{}, cfg.MaxHistoryBuilds)}
	s.match = &matchAPI{match: uc.Match}
	if uc.RPC == nil {
		uc.RPC = rpc.New(nil, cfg.Now)
	}
	s.rpc = &rpcAPI{rpc: uc.RPC}
	s.direct = &directAPI{direct: uc.Direct}
	s.stream = &streamAPI{chat: uc.Chat, rest: uc.REST, sessions: uc.Sessions, match: s.match, rpc: s.rpc, direct: s.direct, tokens: tok, ip: s.ip,
		allowedOrigins: cfg.AllowedOrigins, now: cfg.Now, m: s.m, log: s.log}
	s.admin = &adminAPI{admin: uc.Admin, node: cfg.Node, ip: s.ip, now: cfg.Now, log: s.log}
	s.mod = &moderationAPI{mod: uc.Moderation}
	s.game = &gameAPI{game: uc.Game}
	s.poll = &pollAPI{polls: uc.Polls, ip: s.ip, maxPollsPerAddr: cfg.MaxPollsPerAddr, maxPollsPerUser: cfg.MaxPollsPerUser}
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

// Shutdown stops the front within ctx: it stops accepting connections
// and, while HTTP requests finish, drains the core (Core.Drain: every
// realtime client is told to reconnect elsewhere, close 1012, and
// detached; long polls return early). The core itself is stopped after,
// by whoever started it.
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
	errs := []error{s.core.Drain(ctx)}
	select {
	case err := <-httpDone:
		errs = append(errs, err)
	case <-ctx.Done():
		errs = append(errs, ctx.Err())
	}
	return errors.Join(errs...)
}

// routes registers every endpoint: health, metrics, the WebSocket, the
// API under /api/v1 by use case, the contract and the browser client.
func (s *Server) routes() {
	s.app.Use(s.requestID, s.recoverer)
	s.app.Get("/healthz", func(c *fiber.Ctx) error { return c.JSON(fiber.Map{"ok": true, "node": s.cfg.Node}) })
	s.app.Get("/readyz", s.readyz)
	if !s.cfg.PrivateMetrics {
		s.app.Get("/metrics", adaptor.HTTPHandler(promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{})))
	}

	s.app.Get("/ws", s.stream.wsUpgrade, websocket.New(s.stream.serveWS, websocket.Config{
		HandshakeTimeout: 10 * time.Second,
		// The only read buffer of an idle connection (see ReduceMemoryUsage
		// in New): client frames are small, and a larger one is read
		// through it without copying.
		ReadBufferSize:  1024,
		WriteBufferSize: 4096,
		// An idle connection holds no write buffer: it is taken from the
		// pool for each write and given back.
		WriteBufferPool: &sync.Pool{},
		RecoverHandler:  s.stream.recoverWS,
	}))

	api := s.app.Group("/api/v1", s.capRequests)
	a := s.auth
	api.Post("/session", a.createSession)
	api.Delete("/session", a.requireUser, a.deleteSession)
	s.chat.routes(api, a)
	s.admin.routes(api, a)
	s.mod.routes(api, a)
	s.game.routes(api, a)
	s.match.routes(api, a)
	s.direct.routes(api, a)
	s.server.routes(api, a)
	s.rpc.routes(api, a)
	api.Get("/poll", a.requireUser, s.poll.poll)
	specRoutes(api)
	api.Get("/events", s.stream.streamEvents) // the token is checked by admit
	staticRoutes(s.app)
}

// readyz is 200 only while Redis answers PING within RedisTimeout and this
// node's pub/sub connection is receiving (its canary comes back).
// Ready reports whether the node can serve, as GET /readyz does: nil, or
// an error carrying its code (draining, redis_unavailable, redis_oom,
// redis_busy).
func (s *Server) Ready(ctx context.Context, timeout time.Duration) error {
	return s.core.Ready(ctx, timeout)
}

func (s *Server) readyz(c *fiber.Ctx) error {
	if err := s.core.Ready(c.UserContext(), s.cfg.RedisTimeout); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ok": true, "node": s.cfg.Node})
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
