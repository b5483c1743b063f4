package realtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/hooks"
	"github.com/chatd/chatd/internal/bus"
	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/notices"
	"github.com/chatd/chatd/presence"
	"github.com/chatd/chatd/protocol"
	"github.com/chatd/chatd/rooms"
	"github.com/chatd/chatd/seen"
	"github.com/chatd/chatd/settings"
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
	// SendWindow is the shortest time between two send commits of the
	// node (rooms.Config.SendWindow): a busy node's says share fewer,
	// fuller script calls, for up to this much latency each; 0 = none.
	SendWindow time.Duration
	// Now is the clock; nil = time.Now.
	Now func() time.Time
	// Logger receives the logs; nil = slog.Default().
	Logger *slog.Logger
	// Registerer receives the metrics; nil = none.
	Registerer prometheus.Registerer
	// Version is the build version the node reports in the node registry;
	// "" = none.
	Version string
	// Run is this process's run id: ids made of it and NextID never
	// repeat across restarts, and presence claims live with it (the
	// Presence given must have the same); "" = a new one (NewRun).
	Run string

	// Settings, Seats, Messages, Presence, Dirty, Notices and Seen are the
	// domain services the core itself uses, built by the composition root
	// (realtime/app) on the node's Redis client: the live settings it
	// watches and broadcasts, the seats it starts, sweeps and marks from,
	// the messages its Hub subscribes to and reads, the node registry of
	// its heartbeat, the dirty tracker of its marks and session sweep, and
	// the notices and seen filters of its notice delivery. Required.
	Settings *settings.Store
	Seats    *rooms.Seats
	Messages *rooms.Messages
	Presence *presence.Presence
	Dirty    *dirty.Tracker
	Notices  *notices.Board
	Seen     *seen.Filter
	// Hooks calls the application's backend (package hooks): connect,
	// join, publish, match and rpc; nil = every hook off.
	Hooks *hooks.Hooks
	// Blocks reads the users a user blocks (package direct's Service),
	// whose messages and typing the Hub then keeps from that user's
	// clients in every room (blocks.go); nil = nobody is hidden.
	Blocks BlockLister
}

// ShardedPubSub reports whether room channels use sharded pub/sub
// (SPUBLISH/SSUBSCRIBE): on a Redis Cluster client, unless ClassicPubSub.
// The bus and the rooms' messages must agree on it.
func (c Config) ShardedPubSub() bool {
	_, cluster := c.Redis.(*redis.ClusterClient)
	return cluster && !c.ClassicPubSub
}

// NewRun returns a new random run id (Config.Run).
func NewRun() string {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	return hex.EncodeToString(rnd[:])
}

// Node is one chatd node's realtime core: the bus, the Hub, the
// coalesced marks, the notice delivery and the lifecycle: Start starts
// the core's components in order, Shutdown drains the clients and stops
// them in reverse order, waiting for every goroutine they own. It builds
// no domain service and no use case: the composition root (realtime/app)
// builds the domain services, hands the core those it uses (Config),
// builds the use cases on the core's exported API, and starts them after
// the Node, each owning its own Start and Shutdown. It knows no transport:
// a Client writes through a Transport.
type Node struct {
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

	notices *Notices
	unwatch func()
	proc    procStats
	started time.Time // when Start was called
	runs    atomic.Pointer[liveRuns]

	seq          atomic.Uint64 // NextID
	fresh        atomic.Bool   // the heartbeat said Fresh (or nothing written yet)
	claimRecords atomic.Bool   // followFeatures' last answer
	marks        *marker
}

// liveRuns is what the last heartbeat said of the live nodes' runs.
type liveRuns struct {
	conns []string // as connection-id runs: "c-" + run
	at    time.Time
}

// ConnRuns returns the runs of the live nodes as connection ids carry
// them, or nil when the last heartbeat that answered is older than the
// presence TTL (then connection leases count by their ends, and are
// renewed: see package sessions). identity.ConnsConfig.Live reads it.
func (n *Node) ConnRuns() []string {
	v := n.runs.Load()
	if v == nil || n.cfg.Now().Sub(v.at) > n.cfg.Presence.TTL() {
		return nil
	}
	return v.conns
}

// New builds a node on the domain services of cfg; Start starts its
// background work.
func New(cfg Config) (*Node, error) {
	if cfg.Redis == nil {
		return nil, errors.New("realtime: Config.Redis is required")
	}
	if cfg.Node == "" || len(cfg.Node) > 64 {
		return nil, errors.New("realtime: Config.Node is required, at most 64 bytes")
	}
	if cfg.Settings == nil || cfg.Seats == nil || cfg.Messages == nil || cfg.Presence == nil || cfg.Dirty == nil ||
		cfg.Notices == nil || cfg.Seen == nil {
		return nil, errors.New("realtime: Config's domain services are required (realtime/app builds them)")
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
	if cfg.Run == "" {
		cfg.Run = NewRun()
	}
	n := &Node{cfg: cfg, log: cfg.Logger, loops: newGroup(), busRun: newGroup(), draining: make(chan struct{}),
		clock: newCoarseClock(cfg.Now)}
	m := newMetrics(cfg.Registerer)
	log := cfg.Logger
	n.bus = bus.New(cfg.Redis, bus.Config{Node: cfg.Node, Prefix: cfg.Prefix, Logger: log, Registerer: cfg.Registerer,
		Sharded: cfg.ShardedPubSub()})
	n.marks = &marker{dirty: cfg.Dirty, rooms: cfg.Seats, run: n.loops.Go, log: log}
	env := &clientEnv{m: m, clock: n.clock, now: cfg.Now, log: log, run: n.loops.Go}
	msgs := cfg.Messages
	n.hub = newHub(hubDeps{
		subscribe: n.bus.SubscribeSharded,
		channel:   msgs.Channel,
		read: func(room string) ReadFunc {
			return func(ctx context.Context, after string, limit int) ([]rooms.Message, error) {
				return msgs.History(ctx, room, after, limit)
			}
		},
		run: n.loops.Go, env: env, m: m, log: log, blocks: cfg.Blocks,
	})
	n.notices = &Notices{store: cfg.Notices, seen: cfg.Seen, hub: n.hub, run: n.loops.Go, log: log}
	n.fresh.Store(true) // nothing written yet
	return n, nil
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
func (n *Node) LiveRuns() bool { return n.ConnRuns() != nil }

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
func (n *Node) RunID() string { return n.cfg.Run }

// Draining is closed when Shutdown starts.
func (n *Node) Draining() <-chan struct{} { return n.draining }

// Start starts the core's components, in order: the bus (everything else
// subscribes through it), the settings (everything reads them), the dirty
// tracker's wake-ups, the notice and command subscriptions, then the
// loops (coarse clock, node heartbeat, seat sweeper, session
// sweep). The use cases start after it (their Start), on its loops. It
// returns once the core can serve.
func (n *Node) Start(ctx context.Context) error {
	n.started = n.cfg.Now().UTC()
	n.busRun.Go(func(ctx context.Context) { _ = n.bus.Run(ctx) })
	if err := n.cfg.Settings.Start(ctx, n.bus); err != nil {
		return fmt.Errorf("realtime: start settings: %w", err)
	}
	if err := n.cfg.Dirty.Start(ctx, n.bus); err != nil {
		return fmt.Errorf("realtime: start dirty tracker: %w", err)
	}
	if _, err := n.bus.Subscribe(ctx, n.notices.store.Channel(), bus.HandlerFuncs{OnReceive: n.notices.receive}); err != nil {
		return fmt.Errorf("realtime: subscribe notices: %w", err)
	}
	if _, err := n.bus.Subscribe(ctx, adminChannel(n.cfg.Prefix), bus.HandlerFuncs{OnReceive: n.receiveCommand}); err != nil {
		return fmt.Errorf("realtime: subscribe admin commands: %w", err)
	}
	n.unwatch = n.cfg.Settings.Watch("", func(ch settings.Change) {
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
	if err := n.cfg.Seats.Start(g.ctx); err != nil {
		return fmt.Errorf("realtime: start seats: %w", err)
	}
	// The first beat registers the run before the node serves anyone, so
	// no claim of this run exists before the registry knows it: its Fresh
	// asks for no rewrite. Left to the loop, it could answer after users
	// had joined, and the next tick would write every one of them again
	// (thousands at once when a new node takes a reconnect storm). Without
	// an answer here, the loop's first answered beat is Fresh and asks.
	bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if n.heartbeat(bctx) {
		n.fresh.Store(false)
	}
	cancel()
	g.Go(n.clock.run)
	g.Go(func(ctx context.Context) {
		Every(ctx, n.cfg.Now, func() time.Duration { return 5 * time.Second }, func(ctx context.Context) { n.heartbeat(ctx) })
	})
	g.Go(func(ctx context.Context) { _ = n.cfg.Seats.RunSweeper(ctx, time.Second) })
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
	if err := n.cfg.Presence.Leave(ctx, n.cfg.Node); err != nil {
		n.log.Debug("leave node registry", "err", err)
	}
	if err := n.cfg.Seats.Close(ctx); err != nil { // the joins' drains finish their batches
		errs = append(errs, fmt.Errorf("realtime: stop seats: %w", err))
	}
	if err := n.loops.Stop(ctx); err != nil {
		errs = append(errs, fmt.Errorf("realtime: stop loops: %w", err))
	}
	if n.unwatch != nil {
		n.unwatch()
	}
	if err := n.cfg.Settings.Close(ctx); err != nil {
		n.log.Debug("close settings", "err", err)
	}
	if err := n.cfg.Dirty.Stop(ctx); err != nil {
		n.log.Debug("stop dirty tracker", "err", err)
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

// heartbeat keeps the node in the registry, with its figures; it reports
// whether the registry answered.
func (n *Node) heartbeat(ctx context.Context) bool {
	now := n.cfg.Now()
	ps := n.proc.sample(now)
	beat, err := n.cfg.Presence.Heartbeat(ctx, presence.Node{ID: n.cfg.Node, Addr: n.cfg.Addr, Connections: n.hub.Count(), LastHeartbeat: now,
		Version: n.cfg.Version, StartedAt: n.started, CPU: ps.cpu, MemoryBytes: ps.memoryBytes, HeapBytes: ps.heapBytes,
		Goroutines: ps.goroutines, Run: n.cfg.Run, Features: rooms.Features()})
	if err != nil {
		n.log.Debug("node heartbeat", "err", err)
		return false
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
	n.followFeatures(ctx, beat.Shared, len(beat.Runs))
	return true
}

// followFeatures keeps the node's use of what older nodes do not
// understand in step with the registry, as the heartbeat found it (shared:
// the node's features every live node lists): a say's send record is kept
// in its key's claim (rooms.FeatureClaimRecords) only while every live
// node reads it there, and goes back to the lobby when a node that does
// not (a rolling upgrade from v0.1.0, a rollback) beats. Without a beat's
// answer the node keeps what it had.
//
// It shares what it found through Redis (rooms.Messages.FollowClaimRecords):
// a deployment that has kept records in claims for long enough, or that
// has never stored a message, is settled at once, and the send script
// reads a keyed say's claim only.
func (n *Node) followFeatures(ctx context.Context, shared []string, runs int) {
	on := slices.Contains(shared, rooms.FeatureClaimRecords)
	if n.claimRecords.Swap(on) != on {
		n.log.Info("send records in the keys' claims", "on", on, "live_runs", runs)
	}
	if err := n.cfg.Messages.FollowClaimRecords(ctx, on); err != nil {
		// Locally it is followed all the same; the mark waits for the next beat.
		n.log.Debug("claim records", "on", on, "err", err)
	}
}

// sweepSessions trims the global index of REST sessions of the idle ones.
func (n *Node) sweepSessions(ctx context.Context) {
	if _, err := n.cfg.Dirty.Sweep(ctx); err != nil {
		n.log.Debug("sweep sessions", "err", err)
	}
}

// Bus is the node's pub/sub bridge, for the domain services the
// composition root starts on it (the name registry).
func (n *Node) Bus() *bus.Bus { return n.bus }

// Hub is the node's registry of its clients.
func (n *Node) Hub() *Hub { return n.hub }

// Notices is the node's delivery of notices: to every open connection as
// they are posted, to a new connection the ones its user has not seen, and
// to a REST session in its poll.
func (n *Node) Notices() *Notices { return n.notices }

// Marks is the node's coalesced dirty marks.
func (n *Node) Marks() Marks { return Marks{n.marks} }

// TakeFresh reports, and forgets, that every user's presence claim must be
// written again: the heartbeat found the registry did not know this run
// (a lapse, a Redis that lost its data, or a first beat that answered only
// after Start).
func (n *Node) TakeFresh() bool { return n.fresh.Swap(false) }

// MarkFresh asks for every claim to be written again (a rewrite that
// failed).
func (n *Node) MarkFresh() { n.fresh.Store(true) }

// Follow subscribes h to a classic pub/sub channel on the node's bus (a
// session's channel) until the subscription is closed or the node stops;
// it returns the bus's error.
func (n *Node) Follow(ctx context.Context, channel string, h bus.Handler) (*bus.Subscription, error) {
	return n.bus.Subscribe(ctx, channel, h)
}

// Publish publishes message on a classic pub/sub channel (PUBLISH).
func (n *Node) Publish(ctx context.Context, channel string, message any) error {
	return n.cfg.Redis.Publish(ctx, channel, message).Err()
}

// MaxConnsPerUser is the bound of one user's realtime clients on this
// node (Config.MaxConnsPerUser; negative: none).
func (n *Node) MaxConnsPerUser() int { return n.cfg.MaxConnsPerUser }

// Clients returns the number of realtime clients on this node.
func (n *Node) Clients() int { return n.hub.Count() }
