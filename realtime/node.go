package realtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/identity"
	"github.com/chatd/chatd/internal/bus"
	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/moderation"
	"github.com/chatd/chatd/notices"
	"github.com/chatd/chatd/presence"
	"github.com/chatd/chatd/ranking"
	"github.com/chatd/chatd/ratelimit"
	"github.com/chatd/chatd/rooms"
	"github.com/chatd/chatd/seen"
	"github.com/chatd/chatd/settings"
	"github.com/chatd/chatd/shop"
)

// Config configures a Node.
type Config struct {
	// Redis is the client every service of the node uses. Required.
	Redis redis.UniversalClient
	// Node is this node's id. Required.
	Node string
	// Addr is the address this node advertises in the node registry.
	Addr string
	// Prefix namespaces every Redis key and channel; "" = "chatd".
	Prefix string
	// MaxConnsPerUser bounds one user's realtime clients on this node;
	// 0 = 10, negative = no bound.
	MaxConnsPerUser int
	// ClassicPubSub keeps room channels on classic PUBLISH/SUBSCRIBE on a
	// Redis Cluster; by default a Cluster client gets sharded pub/sub
	// (SPUBLISH/SSUBSCRIBE: a message goes to its room's shard only).
	ClassicPubSub bool
	// ErrorCode maps an error to the documented error code and message
	// (the transport's one error table); nil = every error is "internal".
	ErrorCode func(error) (code, message string)
	// Now is the clock; nil = time.Now.
	Now func() time.Time
	// Logger receives the logs; nil = slog.Default().
	Logger *slog.Logger
	// Registerer receives the metrics; nil = none.
	Registerer prometheus.Registerer
}

// Node is one chatd node's realtime core: it owns the domain services, the
// pub/sub bridge (Bus and Hub), the background loops (seat and presence
// renewal, node heartbeat, seat sweeper), notice delivery, poll assembly
// and the dirty marks, and decides every join, say, leave, resume and
// disconnect, for WebSocket clients and REST sessions alike. It knows no
// transport: a Client writes through a Transport.
type Node struct {
	cfg  Config
	log  *slog.Logger
	rdb  redis.UniversalClient
	bus  *bus.Bus
	hub  *Hub
	m    *metrics
	run  string // random per process: attachment ids never repeat across restarts
	seqN atomic.Uint64

	settings *settings.Store
	rooms    *rooms.Service
	presence *presence.Presence
	dirty    *dirty.Tracker
	notices  *notices.Board
	seen     *seen.Filter
	ranking  *ranking.Service
	shop     *shop.Shop
	identity *identity.Registry
	conns    *identity.Conns
	mod      *moderation.Service
	boards   *ratelimit.Limiter // new boards per user per minute
	lobbies  *ratelimit.Limiter // new lobbies per user per minute
	sessions *ratelimit.Limiter // new sessions per client address per minute

	marks   coalescer
	modc    modCache
	typing  throttle
	rest    restSessions
	renewed renewals

	mu       sync.Mutex
	ctx      context.Context // the run context: background work stops with it
	cancel   context.CancelFunc
	running  sync.WaitGroup
	stopped  bool
	draining chan struct{}
	drain    sync.Once
}

// New builds a node; Start starts its background work.
func New(cfg Config) (*Node, error) {
	if cfg.Redis == nil {
		return nil, errors.New("realtime: Config.Redis is required")
	}
	if cfg.Node == "" {
		return nil, errors.New("realtime: Config.Node is required")
	}
	if cfg.MaxConnsPerUser == 0 {
		cfg.MaxConnsPerUser = 10
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	n := &Node{
		cfg:      cfg,
		log:      cfg.Logger,
		rdb:      cfg.Redis,
		m:        newMetrics(cfg.Registerer),
		run:      hex.EncodeToString(rnd[:]),
		draining: make(chan struct{}),
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.marks.n = n
	_, cluster := cfg.Redis.(*redis.ClusterClient)
	n.bus = bus.New(cfg.Redis, bus.Config{Node: cfg.Node, Prefix: cfg.Prefix, Logger: n.log, Registerer: cfg.Registerer,
		Sharded: cluster && !cfg.ClassicPubSub})
	if err := n.newServices(); err != nil {
		return nil, err
	}
	n.hub = newHub(n)
	return n, nil
}

// newServices builds the node's domain services on its Redis client, wired
// to the live settings and to each other through the domain hooks.
func (n *Node) newServices() error {
	cfg, rdb, reg := n.cfg, n.cfg.Redis, n.cfg.Registerer
	n.settings = settings.New(rdb, settings.Config{Prefix: cfg.Prefix, Logger: n.log, Registerer: reg})
	var err error
	n.rooms, err = rooms.New(rdb, rooms.Config{
		Prefix:        cfg.Prefix,
		Capacity:      func() int { return n.settings.Int(settings.RoomCapacity) },
		Lease:         n.lease,
		ShardedPubSub: n.bus.Sharded(),
		Durability:    func() string { return n.settings.String(settings.MessageDurability) },
		Now:           cfg.Now,
		Logger:        n.log,
		Registerer:    reg,
	})
	if err != nil {
		return err
	}
	n.presence = presence.New(rdb, presence.Config{Prefix: cfg.Prefix, Now: cfg.Now, Registerer: reg})
	n.dirty = dirty.New(rdb, dirty.Config{Prefix: cfg.Prefix, Node: cfg.Node, Now: cfg.Now, Logger: n.log, Registerer: reg})
	n.notices = notices.New(rdb, notices.Config{Prefix: cfg.Prefix, Now: cfg.Now})
	n.seen = seen.New(rdb, seen.Config{
		Prefix:     cfg.Prefix,
		Capacity:   func() int { return n.settings.Int(settings.SeenCapacity) },
		FPRate:     func() float64 { return n.settings.Float(settings.SeenFPRate) },
		TTL:        func() time.Duration { return time.Duration(n.settings.Int(settings.SeenTTLSeconds)) * time.Second },
		Registerer: reg,
	})
	n.ranking = ranking.New(rdb, ranking.Config{Prefix: cfg.Prefix, Now: cfg.Now, Registerer: reg,
		OnChange:  noteBoardChange,
		Permanent: n.permanentBoard,
	})
	n.boards = n.perMinute("newboards", settings.NewBoardsPerUserPerMin)
	n.lobbies = n.perMinute("newlobbies", settings.NewLobbiesPerUserPerMin)
	n.sessions = n.perMinute("sessions", settings.SessionsPerIPPerMin)
	n.conns = identity.NewConns(rdb, identity.ConnsConfig{Prefix: cfg.Prefix, Now: cfg.Now, Registerer: reg})
	n.identity = identity.New(rdb, identity.Config{Prefix: cfg.Prefix, Now: cfg.Now, Registerer: reg,
		TTL: func() time.Duration { return time.Duration(n.settings.Int(settings.SessionIdleSeconds)) * time.Second },
	})
	n.mod = moderation.New(rdb, moderation.Config{Prefix: cfg.Prefix, Now: cfg.Now, Logger: n.log})
	n.shop = shop.New(rdb, shop.Config{Prefix: cfg.Prefix, Registerer: reg,
		OnWalletChange: func(_ context.Context, user string) { n.markUser(user, dirty.Of(dirty.Wallet)) },
	})
	return nil
}

// Services of the node, for the transport's plain request handlers.
func (n *Node) Settings() *settings.Store       { return n.settings }
func (n *Node) Rooms() *rooms.Service           { return n.rooms }
func (n *Node) Presence() *presence.Presence    { return n.presence }
func (n *Node) Dirty() *dirty.Tracker           { return n.dirty }
func (n *Node) Notices() *notices.Board         { return n.notices }
func (n *Node) Seen() *seen.Filter              { return n.seen }
func (n *Node) Ranking() *ranking.Service       { return n.ranking }
func (n *Node) Shop() *shop.Shop                { return n.shop }
func (n *Node) Identity() *identity.Registry    { return n.identity }
func (n *Node) Moderation() *moderation.Service { return n.mod }
func (n *Node) Hub() *Hub                       { return n.hub }
func (n *Node) ID() string                      { return n.cfg.Node }

// Ready reports whether the node's pub/sub connection is receiving.
func (n *Node) Ready() bool { return n.bus.Ready() }

// Draining is closed when Shutdown starts.
func (n *Node) Draining() <-chan struct{} { return n.draining }

// Start starts the node's background work: the bus, settings, the dirty
// tracker's wake-ups, notices, and the periodic loops. It returns once the
// node can serve.
func (n *Node) Start(ctx context.Context) error {
	n.goRun(func(ctx context.Context) { _ = n.bus.Run(ctx) })
	if err := n.settings.Start(ctx, n.bus); err != nil {
		return fmt.Errorf("realtime: start settings: %w", err)
	}
	if err := n.dirty.Start(ctx, n.bus); err != nil {
		return fmt.Errorf("realtime: start dirty tracker: %w", err)
	}
	if _, err := n.bus.Subscribe(ctx, n.notices.Channel(), bus.HandlerFuncs{OnReceive: n.onNotice}); err != nil {
		return fmt.Errorf("realtime: subscribe notices: %w", err)
	}
	if _, err := n.bus.Subscribe(ctx, n.mod.Channel(), bus.HandlerFuncs{OnReceive: n.onModeration, OnResubscribed: n.modc.reset}); err != nil {
		return fmt.Errorf("realtime: subscribe moderation: %w", err)
	}
	n.settings.Watch("", func(ch settings.Change) {
		n.broadcast(mustJSON(map[string]any{"type": "settings", "key": ch.Key, "value": ch.Value, "version": ch.Version}))
	})
	n.goRun(func(ctx context.Context) { n.every(ctx, func() time.Duration { return n.lease() / 3 }, n.renewSeats) })
	n.goRun(func(ctx context.Context) {
		n.every(ctx, func() time.Duration { return n.presence.TTL() / 3 }, n.touchPresence)
	})
	n.goRun(func(ctx context.Context) { n.every(ctx, func() time.Duration { return 5 * time.Second }, n.heartbeat) })
	n.goRun(func(ctx context.Context) { _ = n.rooms.RunSweeper(ctx, time.Second) })
	n.goRun(func(ctx context.Context) { n.every(ctx, func() time.Duration { return time.Minute }, n.sweepSessions) })
	n.goRun(func(ctx context.Context) {
		n.every(ctx, func() time.Duration { return n.conns.Lease() / 3 }, n.renewConns)
	})
	return nil
}

// goRun runs fn on the node's run context, owned by the node: Shutdown
// cancels it and waits. After Shutdown, fn is dropped.
func (n *Node) goRun(fn func(ctx context.Context)) {
	n.mu.Lock()
	if n.stopped {
		n.mu.Unlock()
		return
	}
	n.running.Add(1)
	ctx := n.ctx
	n.mu.Unlock()
	go func() {
		defer n.running.Done()
		fn(ctx)
	}()
}

// Shutdown drains the node within ctx: every realtime client is told to
// reconnect elsewhere (close 1012) and detached — which frees a seat only
// where it was the user's last attachment — then the node leaves the
// registry and its background work stops.
func (n *Node) Shutdown(ctx context.Context) error {
	n.drain.Do(func() { close(n.draining) })
	for _, c := range n.hub.Clients() {
		c.Close(CloseServiceReboot, "server restarting: reconnect")
	}
	var errs []error
	for n.hub.Count() > 0 {
		if ctx.Err() != nil {
			errs = append(errs, fmt.Errorf("realtime: %d clients still open: %w", n.hub.Count(), ctx.Err()))
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := n.presence.Leave(ctx, n.cfg.Node); err != nil {
		n.log.Debug("leave node registry", "err", err)
	}
	n.mu.Lock()
	n.stopped = true
	n.mu.Unlock()
	n.cancel()
	done := make(chan struct{})
	go func() { n.running.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, ctx.Err())
	}
	return errors.Join(errs...)
}

func (n *Node) lease() time.Duration {
	return time.Duration(n.settings.Int(settings.SeatLeaseSeconds)) * time.Second
}

// every runs fn now and then every interval() until ctx ends. interval is
// read again while waiting, so a shorter lease (seat.lease_seconds lowered)
// takes effect within half a second, not after the old, longer wait.
func (n *Node) every(ctx context.Context, interval func() time.Duration, fn func(context.Context)) {
	for {
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		fn(fctx)
		cancel()
		last := time.Now()
		for {
			left := max(interval(), 100*time.Millisecond) - time.Since(last)
			if left <= 0 {
				break
			}
			if !sleep(ctx, min(left, 500*time.Millisecond)) {
				return
			}
		}
	}
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// broadcast queues a frame for every client of this node.
func (n *Node) broadcast(frame []byte) {
	for _, c := range n.hub.Clients() {
		c.Send(frame)
	}
}

// heartbeat keeps the node in the registry.
func (n *Node) heartbeat(ctx context.Context) {
	err := n.presence.Heartbeat(ctx, presence.Node{ID: n.cfg.Node, Addr: n.cfg.Addr, Connections: n.hub.Count(), LastHeartbeat: n.cfg.Now()})
	if err != nil {
		n.log.Debug("node heartbeat", "err", err)
	}
}

// reader reads a room's history for feeds.
func (n *Node) reader(room string) ReadFunc {
	return func(ctx context.Context, after string, limit int) ([]rooms.Message, error) {
		return n.rooms.History(ctx, room, after, limit)
	}
}

func isGap(err error) bool { return errors.Is(err, rooms.ErrResumeGap) }

var errClientClosed = errors.New("realtime: client closed")

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// permanentBoard says whether an all-time board is declared permanent
// (setting boards.permanent); the others expire when idle.
func (n *Node) permanentBoard(board string) bool {
	for _, b := range strings.Split(n.settings.String(settings.PermanentBoards), ",") {
		if strings.TrimSpace(b) == board {
			return true
		}
	}
	return false
}

// sweepSessions trims the global index of REST sessions of the idle ones.
func (n *Node) sweepSessions(ctx context.Context) {
	if _, err := n.dirty.Sweep(ctx); err != nil {
		n.log.Debug("sweep sessions", "err", err)
	}
}

// renewConns renews the per-address connection leases of this node's
// clients, in one pipeline.
func (n *Node) renewConns(ctx context.Context) {
	var cs []identity.Conn
	for _, c := range n.hub.Clients() {
		if c.addr != "" {
			cs = append(cs, identity.Conn{Addr: c.addr, ID: c.connID})
		}
	}
	if len(cs) == 0 {
		return
	}
	if err := n.conns.Renew(ctx, cs); err != nil {
		n.log.Debug("renew connection leases", "err", err)
	}
}

// AdmitConn counts a new connection from addr against
// limit.connections_per_ip across all nodes and returns its lease id, or
// ErrTooManyFromAddr. Give the id to Connect, or to ReleaseConn if the
// connection does not open. A Redis error admits (the cap is a guard, not
// a dependency): the id is then "".
func (n *Node) AdmitConn(ctx context.Context, addr string) (string, error) {
	if max := n.settings.Int(settings.ConnectionsPerNode); max > 0 && n.hub.Count() >= max {
		return "", fmt.Errorf("%w: this node holds %d, its most; reconnect (the balancer may pick another node)", ErrNodeFull, max)
	}
	id := "c-" + n.run + "-" + strconv.FormatUint(n.seqN.Add(1), 36)
	ok, err := n.conns.Admit(ctx, addr, id, n.settings.Int(settings.ConnectionsPerIP))
	if err != nil {
		n.log.Debug("admit connection", "addr", addr, "err", err)
		return "", nil
	}
	if !ok {
		return "", fmt.Errorf("%w: at most %d open WebSockets from one address across all nodes", ErrTooManyFromAddr, n.settings.Int(settings.ConnectionsPerIP))
	}
	return id, nil
}

// ReleaseConn gives back a connection lease of addr.
func (n *Node) ReleaseConn(ctx context.Context, addr, id string) {
	if id == "" {
		return
	}
	if err := n.conns.Release(ctx, addr, id); err != nil {
		n.log.Debug("release connection", "addr", addr, "err", err)
	}
}

// checkSeats refuses a join of a lobby the user holds no seat in when the
// user already holds seats in limit.seats_per_user lobbies (by presence:
// every node's claim of the user's rooms — a WebSocket's at once, a REST
// session's from its first poll; the new-lobby cap bounds the rest).
func (n *Node) checkSeats(ctx context.Context, user, lobby string) error {
	max := n.settings.Int(settings.SeatsPerUser)
	if max == 0 {
		return nil
	}
	st, err := n.presence.Get(ctx, user)
	if err != nil {
		return err
	}
	lobbies := map[string]bool{}
	for _, r := range st.Rooms {
		if l, _, err := rooms.ParseRoom(r); err == nil {
			lobbies[l] = true
		}
	}
	if !lobbies[lobby] && len(lobbies) >= max {
		return fmt.Errorf("%w: you hold seats in %d lobbies, the most allowed; leave one first", ErrTooManySeats, len(lobbies))
	}
	return nil
}

// perMinute is a limiter of the per-minute cap in setting key: a bucket of
// rate N/60 a second and burst N, under its own prefix (each limiter keys
// its buckets by user or address alone).
func (n *Node) perMinute(name, key string) *ratelimit.Limiter {
	perMin := func() float64 { return float64(n.settings.Int(key)) }
	return ratelimit.New(n.rdb, ratelimit.Config{
		Prefix: keyspace.New(n.cfg.Prefix).Prefix() + ":" + name, Now: n.cfg.Now, Registerer: n.cfg.Registerer,
		Rate: func() float64 { return perMin() / 60 }, Burst: perMin,
	})
}

// AllowSession takes a token of the client address's bucket of new
// sessions (limit.sessions_per_ip_per_minute), or returns
// ErrTooManySessions.
func (n *Node) AllowSession(ctx context.Context, addr string) error {
	limit := n.settings.Int(settings.SessionsPerIPPerMin)
	if limit == 0 {
		return nil
	}
	key, err := identity.RateKey(addr)
	if err != nil {
		return nil // not an IP (a unix socket): nothing to count
	}
	ok, retry, err := n.sessions.Allow(ctx, key)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: at most %d a minute from one address; retry in %.0f s", ErrTooManySessions, limit, max(1, retry.Round(time.Second).Seconds()))
	}
	return nil
}

// allowNewLobby takes a token of user's new-lobby bucket when lobby has no
// room yet (a join would create it): limit.new_lobbies_per_user_per_minute.
func (n *Node) allowNewLobby(ctx context.Context, user, lobby string) error {
	if err := n.checkSeats(ctx, user, lobby); err != nil {
		return err
	}
	if n.settings.Int(settings.NewLobbiesPerUserPerMin) == 0 {
		return nil
	}
	exists, err := n.rooms.LobbyExists(ctx, lobby)
	if err != nil || exists {
		return err
	}
	ok, _, err := n.lobbies.Allow(ctx, user)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: at most %d a minute; join an existing lobby (GET /api/v1/lobbies)", ErrTooManyLobbies, n.settings.Int(settings.NewLobbiesPerUserPerMin))
	}
	return nil
}
