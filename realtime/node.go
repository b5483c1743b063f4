package realtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/audit"
	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/hooks"
	"github.com/chatd/chatd/identity"
	"github.com/chatd/chatd/internal/bus"
	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/lock"
	"github.com/chatd/chatd/moderation"
	"github.com/chatd/chatd/notices"
	"github.com/chatd/chatd/presence"
	"github.com/chatd/chatd/protocol"
	"github.com/chatd/chatd/ranking"
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
	// MatchRoomKey makes the number of each match's private room (see
	// Matchmaking.Room): every node must have the same; nil = room 1, an
	// id anyone can guess from the match's.
	MatchRoomKey []byte
	// MaxConnsPerUser bounds one user's realtime clients on this node;
	// 0 = 10, negative = no bound.
	MaxConnsPerUser int
	// ClassicPubSub keeps room channels on classic PUBLISH/SUBSCRIBE on a
	// Redis Cluster; by default a Cluster client gets sharded pub/sub
	// (SPUBLISH/SSUBSCRIBE: a message goes to its room's shard only).
	ClassicPubSub bool
	// Now is the clock; nil = time.Now.
	Now func() time.Time
	// Logger receives the logs; nil = slog.Default().
	Logger *slog.Logger
	// Registerer receives the metrics; nil = none.
	Registerer prometheus.Registerer
	// Version is the build version the node reports in the node registry;
	// "" = none.
	Version string
	// Hooks calls the application's backend (package hooks): connect,
	// join, publish, match and rpc; nil = every hook off.
	Hooks *hooks.Hooks
}

// Node is one chatd node's realtime core. It only wires: it builds the
// domain services on the node's Redis client, the bus and the Hub, and
// runs the core's lifecycle: Start starts the core's components in order,
// Shutdown drains the clients and stops them in reverse order, waiting for
// every goroutine they own. It builds no use case: the composition root
// (realtime/app) builds them on a Node — sessions.New, match.New, NewChat,
// NewPolls here, and the packages under realtime/ from Services — and
// starts them after the Node, each owning its own Start and Shutdown. It
// knows no transport: a Client writes through a Transport.
type Node struct {
	// Services are what the use cases are built from.
	Services Services

	cfg      Config
	log      *slog.Logger
	bus      *bus.Bus
	hub      *Hub
	clock    *coarseClock
	loops    *group // the node's loops and owned goroutines
	busRun   *group // the bus alone: it stops last
	draining chan struct{}
	// drainOnce closes draining (Drain, Shutdown)
	drainOnce sync.Once

	settings *settings.Store
	rooms    *rooms.Service
	presence *presence.Presence
	dirty    *dirty.Tracker
	names    *identity.Registry
	guard    *moderation.Guard
	notices  *noticeBoard
	unwatch  func()
	proc     procStats
	started  time.Time // when Start was called
	runs     atomic.Pointer[liveRuns]

	// What the use cases of this package are built from (New*).
	runID string        // random per process: ids never repeat across restarts
	seq   atomic.Uint64 // NextID
	fresh atomic.Bool   // the heartbeat said Fresh (or nothing written yet)
	marks *marker
	env   *clientEnv
}

// Services are the domain services and the core's shared parts a Node
// built, for the use cases built above the core (packages admin, game and
// moderation under realtime/), each of which takes only the narrow
// interfaces it declares. Until the composition root builds the domain
// services itself (issue 41), the Node builds them, on its Redis client,
// wired to its settings and marks.
type Services struct {
	Settings   *settings.Store
	Rooms      *rooms.Service
	Presence   *presence.Presence
	Dirty      *dirty.Tracker
	Shop       *shop.Shop
	Boards     *ranking.Service
	Seen       *seen.Filter
	Notices    *notices.Board
	Moderation *moderation.Service
	// Guard is the node's cache of moderation statuses (the core's mute
	// and ban checks read it); a use case that changes a status drops it.
	Guard *moderation.Guard
	// Moderated is the core's mute and ban refusals, read from Guard.
	Moderated *Moderated
	// Names is the guest-name registry.
	Names *identity.Registry
	// Conns are the connection leases per client address, across nodes.
	Conns *identity.Conns
	// Locks are the node's distributed locks (room creation, matchers).
	Locks *lock.Client
	// Caps are the per-minute caps shared by every node.
	Caps *Caps
	// Marks are the node's coalesced dirty marks.
	Marks Marks
	// Audit is the admin actions' log.
	Audit *audit.Log
}

// liveRuns is what the last heartbeat said of the live nodes' runs.
type liveRuns struct {
	conns []string // as connection-id runs: "c-" + run
	at    time.Time
}

// connRuns returns the runs of the live nodes as connection ids carry
// them, or nil when the last heartbeat that answered is older than the
// presence TTL (then connection leases count by their ends, and are
// renewed: see Sessions.renewConns).
func (n *Node) connRuns() []string {
	v := n.runs.Load()
	if v == nil || n.cfg.Now().Sub(v.at) > n.presence.TTL() {
		return nil
	}
	return v.conns
}

// New builds a node; Start starts its background work.
func New(cfg Config) (*Node, error) {
	if cfg.Redis == nil {
		return nil, errors.New("realtime: Config.Redis is required")
	}
	if cfg.Node == "" || len(cfg.Node) > 64 {
		return nil, errors.New("realtime: Config.Node is required, at most 64 bytes")
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
	runID := hex.EncodeToString(rnd[:])
	n := &Node{cfg: cfg, log: cfg.Logger, loops: newGroup(), busRun: newGroup(), draining: make(chan struct{}),
		clock: newCoarseClock(cfg.Now)}
	m := newMetrics(cfg.Registerer)
	rdb, reg, now, log := cfg.Redis, cfg.Registerer, cfg.Now, cfg.Logger
	_, cluster := rdb.(*redis.ClusterClient)
	n.bus = bus.New(rdb, bus.Config{Node: cfg.Node, Prefix: cfg.Prefix, Logger: log, Registerer: reg,
		Sharded: cluster && !cfg.ClassicPubSub})

	// Domain services, wired to the live settings and, through their hooks,
	// to the marks the use cases own.
	st := settings.New(rdb, settings.Config{Prefix: cfg.Prefix, Logger: log, Registerer: reg})
	n.settings = st
	lease := func() time.Duration { return time.Duration(st.Int(settings.SeatLeaseSeconds)) * time.Second }
	locks := lock.New(rdb, lock.Config{Prefix: cfg.Prefix, Registerer: reg}) // room creation and matchers
	rs, err := rooms.New(rdb, rooms.Config{
		Prefix:        cfg.Prefix,
		Lock:          locks,
		Capacity:      func() int { return st.Int(settings.RoomCapacity) },
		Lease:         lease,
		ShardedPubSub: n.bus.Sharded(),
		Durability:    func() string { return st.String(settings.MessageDurability) },
		// limit.seats_per_user, counted by rooms from the seat data on
		// every join, REST join and resume (not from presence, which lags)
		MaxLobbiesPerUser: func() int { return st.Int(settings.SeatsPerUser) },
		Now:               now,
		Logger:            log,
		Registerer:        reg,
	})
	if err != nil {
		return nil, err
	}
	n.rooms = rs
	n.presence = presence.New(rdb, presence.Config{Prefix: cfg.Prefix, Now: now, Registerer: reg, Run: runID, GuestRetention: GuestTTL})
	n.dirty = dirty.New(rdb, dirty.Config{Prefix: cfg.Prefix, Node: cfg.Node, Now: now, Logger: log, Registerer: reg})
	nb := notices.New(rdb, notices.Config{Prefix: cfg.Prefix, Now: now})
	sf := seen.New(rdb, seen.Config{
		Prefix:     cfg.Prefix,
		Capacity:   func() int { return st.Int(settings.SeenCapacity) },
		FPRate:     func() float64 { return st.Float(settings.SeenFPRate) },
		TTL:        func() time.Duration { return time.Duration(st.Int(settings.SeenTTLSeconds)) * time.Second },
		Registerer: reg,
	})
	mk := &marker{dirty: n.dirty, rooms: rs.Seats, run: n.loops.Go, log: log}
	rk := ranking.New(rdb, ranking.Config{Prefix: cfg.Prefix, Now: now, Registerer: reg,
		MaxPlayers: func() int { return st.Int(settings.PlayersPerBoard) },
		OnChange:   func(_ context.Context, board string, _ ranking.Entry) { mk.board(board) },
		Permanent:  func(board string) bool { return listed(st.String(settings.PermanentBoards), board) },
	})
	conns := identity.NewConns(rdb, identity.ConnsConfig{Prefix: cfg.Prefix, Now: now, Registerer: reg, Live: n.connRuns})

	// The realtime machinery: the Hub first, since the domain services'
	// hooks close its clients.
	env := &clientEnv{m: m, clock: n.clock, log: log, run: n.loops.Go}
	n.hub = newHub(hubDeps{
		subscribe: n.bus.SubscribeSharded,
		channel:   rs.Messages.Channel,
		read: func(room string) ReadFunc {
			return func(ctx context.Context, after string, limit int) ([]rooms.Message, error) {
				return rs.Messages.History(ctx, room, after, limit)
			}
		},
		run: n.loops.Go, m: m, log: log,
	})
	hub := n.hub
	n.names = identity.New(rdb, identity.Config{Prefix: cfg.Prefix, Now: now, Registerer: reg, Logger: log,
		TTL: func() time.Duration { return time.Duration(st.Int(settings.SessionIdleSeconds)) * time.Second },
		// the guests' ended sessions close their connections
		OnEnded: func(name, holder string) {
			hub.CloseUser(name, holder, CloseSessionEnded, "your session ended: sign in again")
		},
	})
	ms := moderation.New(rdb, moderation.Config{Prefix: cfg.Prefix, Now: now, Logger: log})
	// a kick or a ban, decided on any node, closes the user's clients here
	n.guard = moderation.NewGuard(ms, moderation.GuardConfig{Now: now, OnEvent: hub.moderated})
	sh := shop.New(rdb, shop.Config{Prefix: cfg.Prefix, Registerer: reg,
		OnWalletChange: func(_ context.Context, user string) { mk.user(user, dirty.Of(dirty.Wallet)) },
	})
	cp := newCaps(rdb, cfg.Prefix, now, reg, st)
	mod := &Moderated{status: n.guard, now: now}
	n.notices = &noticeBoard{store: nb, seen: sf, hub: n.hub, marks: mk, run: n.loops.Go, log: log}
	n.runID, n.marks, n.env = runID, mk, env
	n.fresh.Store(true) // nothing written yet
	n.Services = Services{Settings: st, Rooms: rs, Presence: n.presence, Dirty: n.dirty, Shop: sh, Boards: rk,
		Seen: sf, Notices: nb, Moderation: ms, Guard: n.guard, Moderated: mod, Names: n.names, Conns: conns, Locks: locks, Caps: cp, Marks: Marks{mk},
		Audit: audit.New(rdb, audit.Config{Prefix: cfg.Prefix, Now: now})}
	return n, nil
}

// redisPublisher publishes with PUBLISH.
type redisPublisher struct{ rdb redis.UniversalClient }

func (p redisPublisher) Publish(ctx context.Context, channel string, message any) error {
	return p.rdb.Publish(ctx, channel, message).Err()
}

// listed says whether name is in a comma-separated list.
func listed(list, name string) bool {
	for _, b := range strings.Split(list, ",") {
		if strings.TrimSpace(b) == name {
			return true
		}
	}
	return false
}

// Ready reports whether the node can serve: not draining, Redis answers a
// PING and takes a write (a probe key that expires in 10 s: a Redis out of
// memory answers PING but refuses writes, so PING alone would call such a
// node ready), within timeout, and the node's pub/sub connection is
// receiving (its canary comes back). The error carries its code
// (draining, redis_unavailable, redis_oom, redis_busy).
func (n *Node) Ready(ctx context.Context, timeout time.Duration) error {
	select {
	case <-n.draining:
		return ErrDraining
	default:
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pipe := n.cfg.Redis.Pipeline()
	ping := pipe.Ping(ctx)
	probe := pipe.Set(ctx, keyspace.New(n.cfg.Prefix).Key("node", n.cfg.Node, "ready"), n.cfg.Now().UnixMilli(), 10*time.Second)
	_, _ = pipe.Exec(ctx)
	if err := ping.Err(); err != nil {
		if errcode.Of(err) == errcode.Internal {
			return fmt.Errorf("%w: Redis did not answer PING within %s: %v", ErrNotReady, timeout, err)
		}
		return fmt.Errorf("realtime: Redis did not answer PING within %s: %w", timeout, err)
	}
	if err := probe.Err(); err != nil {
		return fmt.Errorf("realtime: Redis refused a write: %w", err)
	}
	if !n.bus.Confirm(ctx) {
		return fmt.Errorf("%w: this node's pub/sub connection is not receiving yet", ErrNotReady)
	}
	return nil
}

// Go runs fn in the node's group, on its loops' context: the one owner of
// the use cases' background work, stopped and waited for by Shutdown. It
// reports false once the group stopped.
func (n *Node) Go(fn func(ctx context.Context)) bool { return n.loops.Go(fn) }

// LiveRuns reports whether the live nodes' runs are known now: the last
// heartbeat that answered is within the presence TTL (then a connection
// lease of a live run counts without renewal).
func (n *Node) LiveRuns() bool { return n.connRuns() != nil }

// ConnRun is a run as connection-lease ids start with it: an id is
// ConnRun(run) + "-" + a sequence number, so that package identity finds
// the run before the last '-'.
func ConnRun(run string) string { return "c-" + run }

// Subscribe subscribes h to a node-wide channel on the node's bus (a
// use case's own channel, such as matchmaking's) until the node stops; it
// returns the bus's error.
func (n *Node) Subscribe(ctx context.Context, channel string, h bus.Handler) error {
	_, err := n.bus.Subscribe(ctx, channel, h)
	return err
}

// RunContext is the context of the node's loops: work a use case starts
// on it (the matchers) stops when Shutdown stops the loops.
func (n *Node) RunContext() context.Context { return n.loops.ctx }

// NextID is a number not handed out before by this node's run.
func (n *Node) NextID() uint64 { return n.seq.Add(1) }

// RunID is this process's random run id: ids made of it and NextID never
// repeat across restarts.
func (n *Node) RunID() string { return n.runID }

// Draining is closed when Shutdown starts.
func (n *Node) Draining() <-chan struct{} { return n.draining }

// Start starts the core's components, in order: the bus (everything else
// subscribes through it), the settings (everything reads them), the dirty
// tracker's wake-ups, the notice, moderation and command subscriptions,
// then the loops (coarse clock, node heartbeat, seat sweeper, session
// sweep). The use cases start after it (their Start), on its loops. It
// returns once the core can serve.
func (n *Node) Start(ctx context.Context) error {
	n.started = n.cfg.Now().UTC()
	n.busRun.Go(func(ctx context.Context) { _ = n.bus.Run(ctx) })
	if err := n.settings.Start(ctx, n.bus); err != nil {
		return fmt.Errorf("realtime: start settings: %w", err)
	}
	if err := n.dirty.Start(ctx, n.bus); err != nil {
		return fmt.Errorf("realtime: start dirty tracker: %w", err)
	}
	if err := n.names.Start(ctx, n.bus); err != nil {
		return fmt.Errorf("realtime: start the name registry: %w", err)
	}
	if _, err := n.bus.Subscribe(ctx, n.notices.store.Channel(), bus.HandlerFuncs{OnReceive: n.notices.receive}); err != nil {
		return fmt.Errorf("realtime: subscribe notices: %w", err)
	}
	if _, err := n.bus.Subscribe(ctx, n.Services.Moderation.Channel(), bus.HandlerFuncs{OnReceive: n.guard.Receive, OnResubscribed: n.guard.Reset}); err != nil {
		return fmt.Errorf("realtime: subscribe moderation: %w", err)
	}
	if _, err := n.bus.Subscribe(ctx, adminChannel(n.cfg.Prefix), bus.HandlerFuncs{OnReceive: n.receiveCommand}); err != nil {
		return fmt.Errorf("realtime: subscribe admin commands: %w", err)
	}
	n.unwatch = n.settings.Watch("", func(ch settings.Change) {
		frame, err := protocol.Encode(protocol.Settings{Key: ch.Key, Value: ch.Value, Version: ch.Version})
		if err != nil {
			n.log.Error("encode settings event", "key", ch.Key, "err", err)
			return
		}
		n.hub.Broadcast(frame)
	})
	g := n.loops
	// Joins queued behind one in progress are seated in one batch (the
	// group commit); the drains run on the loops' context.
	if err := n.rooms.Seats.Start(g.ctx); err != nil {
		return fmt.Errorf("realtime: start seats: %w", err)
	}
	g.Go(n.clock.run)
	g.Go(func(ctx context.Context) {
		Every(ctx, n.cfg.Now, func() time.Duration { return 5 * time.Second }, n.heartbeat)
	})
	g.Go(func(ctx context.Context) { _ = n.rooms.Seats.RunSweeper(ctx, time.Second) })
	g.Go(func(ctx context.Context) {
		Every(ctx, n.cfg.Now, func() time.Duration { return time.Minute }, n.sweepSessions)
	})
	return nil
}

// Shutdown drains the node within ctx, then stops it: every realtime
// client is told to reconnect elsewhere (close 1012) and detached — which
// frees a seat only where it was the user's last attachment — the node
// leaves the registry, and the components stop in the reverse order of
// Start: the loops and every goroutine they own (the use cases' loops
// too), the settings watch and store, the dirty tracker, and last the
// bus. A root stops the use cases that hand work over (Match) between
// Drain and Shutdown.
func (n *Node) Shutdown(ctx context.Context) error {
	var errs []error
	if err := n.Drain(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := n.presence.Leave(ctx, n.cfg.Node); err != nil {
		n.log.Debug("leave node registry", "err", err)
	}
	if err := n.rooms.Seats.Close(ctx); err != nil { // the joins' drains finish their batches
		errs = append(errs, fmt.Errorf("realtime: stop seats: %w", err))
	}
	if err := n.loops.Stop(ctx); err != nil {
		errs = append(errs, fmt.Errorf("realtime: stop loops: %w", err))
	}
	if n.unwatch != nil {
		n.unwatch()
	}
	if err := n.settings.Close(ctx); err != nil {
		n.log.Debug("close settings", "err", err)
	}
	if err := n.dirty.Stop(ctx); err != nil {
		n.log.Debug("stop dirty tracker", "err", err)
	}
	if err := n.names.Close(ctx); err != nil {
		n.log.Debug("close the name registry", "err", err)
	}
	if err := n.busRun.Stop(ctx); err != nil {
		errs = append(errs, fmt.Errorf("realtime: stop bus: %w", err))
	}
	return errors.Join(errs...)
}

// Drain is the first step of Shutdown, for a transport to run while its
// own requests finish: from now on the node is not ready and refuses new
// clients (ErrDraining), long polls return, and every realtime client is
// told to reconnect elsewhere (close 1012); Drain returns once all are
// detached, or with ctx's error. It may be called again.
func (n *Node) Drain(ctx context.Context) error {
	n.drainOnce.Do(func() { close(n.draining) })
	for _, c := range n.hub.Clients() {
		c.Close(CloseServiceReboot, "server restarting: reconnect")
	}
	for n.hub.Count() > 0 {
		if ctx.Err() != nil {
			return fmt.Errorf("realtime: %d clients still open: %w", n.hub.Count(), ctx.Err())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// heartbeat keeps the node in the registry, with its figures.
func (n *Node) heartbeat(ctx context.Context) {
	now := n.cfg.Now()
	ps := n.proc.sample(now)
	beat, err := n.presence.Heartbeat(ctx, presence.Node{ID: n.cfg.Node, Addr: n.cfg.Addr, Connections: n.hub.Count(), LastHeartbeat: now,
		Version: n.cfg.Version, StartedAt: n.started, CPU: ps.cpu, MemoryBytes: ps.memoryBytes, HeapBytes: ps.heapBytes,
		Goroutines: ps.goroutines, Run: n.runID})
	if err != nil {
		n.log.Debug("node heartbeat", "err", err)
		return
	}
	runs := make([]string, len(beat.Runs))
	for i, r := range beat.Runs {
		runs[i] = ConnRun(r)
	}
	n.runs.Store(&liveRuns{conns: runs, at: now})
	if beat.Fresh {
		// The registry did not know this run (first beat, a lapse, a Redis
		// that lost its data): the users' claims are written again.
		n.fresh.Store(true)
	}
}

// sweepSessions trims the global index of REST sessions of the idle ones.
func (n *Node) sweepSessions(ctx context.Context) {
	if _, err := n.dirty.Sweep(ctx); err != nil {
		n.log.Debug("sweep sessions", "err", err)
	}
}

// Hub is the node's registry of its clients.
func (n *Node) Hub() *Hub { return n.hub }

// Clients returns the number of realtime clients on this node.
func (n *Node) Clients() int { return n.hub.Count() }
