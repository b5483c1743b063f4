// Package app is the composition root of one node's realtime side: it
// builds the domain services on the node's Redis client (settings, locks,
// rooms, presence, dirty, notices, seen, then ranking, shop, identity and
// moderation, whose hooks reach the core's clients and marks), the core
// (realtime.New, handed the services it uses), and each use case (chat,
// polls, sessions, match, game, moderation, admin), handed only what it
// needs, in an order that needs no wiring after construction (Sessions
// before Chat, which gives connection leases back to it; Chat and Match
// before Polls, which reads both); and it starts and stops them in order,
// as hibiken/asynq's Server starts and stops its components.
//
// Start: the core (bus, settings, subscriptions, clock, heartbeat,
// sweepers), the name registry and the moderation guard on the core's bus,
// then Chat (seat and presence renewal), Sessions (connection leases),
// Match (its channel, then the matchers), Direct (its channel). Shutdown: the core's drain
// (every client told to reconnect elsewhere, 1012), Match (the matchers
// hand this node's queues over), the name registry, then the core (the
// node leaves the registry; its loops, the use cases' loops with them,
// settings, dirty tracker, bus).
//
// cmd/chatd composes through it (cmd/chatd/compose, which adds the HTTP
// front), and so do the tests of the use cases (realtime/realtimetest) and
// of the front (package web's harness), so every test runs the node chatd
// runs.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/chatd/chatd/audit"
	dm "github.com/chatd/chatd/direct"
	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/identity"
	"github.com/chatd/chatd/internal/bus"
	"github.com/chatd/chatd/lock"
	"github.com/chatd/chatd/moderation"
	"github.com/chatd/chatd/notices"
	"github.com/chatd/chatd/presence"
	"github.com/chatd/chatd/ranking"
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
	"github.com/chatd/chatd/rooms"
	"github.com/chatd/chatd/seen"
	"github.com/chatd/chatd/settings"
	"github.com/chatd/chatd/shop"
)

// App is one node's realtime core, the domain services it was built
// from, and its use cases.
type App struct {
	// Core is the realtime core: the Hub, the bus and their lifecycle.
	Core *realtime.Node
	// Services are the domain services this root built on the node's
	// Redis client, each handed to the core and the use cases that use it.
	Services Services

	Chat       *chat.Chat
	REST       *chat.REST
	Reads      *chat.Reads
	Polls      *polls.Polls
	Sessions   *sessions.Sessions
	Match      *match.Matchmaking
	RPC        *rpc.RPC
	Game       *game.Game
	Moderation *moderate.Moderation
	Admin      *admin.Admin
	Direct     *direct.Direct
	// ServerAPI is the server API for backends (API keys).
	ServerAPI *serverapi.ServerAPI

	log *slog.Logger
}

// Services are the domain services of one node, and the core's shared
// parts built on them (Moderated, Caps, Marks). They are built here, in
// an order that needs no wiring after construction: those the core uses
// first, then the core, then those whose hooks reach the core's clients
// or marks.
type Services struct {
	Settings   *settings.Store
	Locks      *lock.Client
	Rooms      *rooms.Service
	Presence   *presence.Presence
	Dirty      *dirty.Tracker
	Notices    *notices.Board
	Seen       *seen.Filter
	Boards     *ranking.Service
	Shop       *shop.Shop
	Names      *identity.Registry
	Conns      *identity.Conns
	Moderation *moderation.Service
	// Guard is the node's cache of moderation statuses (the core's mute
	// and ban checks read it); a use case that changes a status drops it.
	Guard *moderation.Guard
	// Moderated is the core's mute and ban refusals, read from Guard.
	Moderated *realtime.Moderated
	// Caps are the per-minute caps shared by every node.
	Caps *realtime.Caps
	// Marks are the core's coalesced dirty marks.
	Marks realtime.Marks
	// Audit is the admin actions' log.
	Audit *audit.Log
	// Direct is the direct messages and blocks (the core reads a
	// client's blocks from it; the direct use case is built on it).
	Direct *dm.Service
}

// New builds the domain services on cfg.Redis, the core from cfg and
// those of them it uses, then the use cases, each handed what it needs.
// Start starts them; nothing runs before. It returns the errors of
// realtime.New and of the domain services' constructors.
func New(cfg realtime.Config) (*App, error) {
	if cfg.Redis == nil {
		return nil, errors.New("app: realtime.Config.Redis is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Run == "" {
		cfg.Run = realtime.NewRun()
	}
	rdb, prefix, now, log, reg := cfg.Redis, cfg.Prefix, cfg.Now, cfg.Logger, cfg.Registerer
	a := &App{log: log}
	svc := &a.Services

	// The domain services the core uses.
	st := settings.New(rdb, settings.Config{Prefix: prefix, Logger: log, Registerer: reg})
	svc.Settings = st
	svc.Locks = lock.New(rdb, lock.Config{Prefix: prefix, Registerer: reg}) // room creation and matchers
	rs, err := rooms.New(rdb, rooms.Config{
		Prefix:        prefix,
		Lock:          svc.Locks,
		Capacity:      func() int { return st.Int(settings.RoomCapacity) },
		Lease:         func() time.Duration { return time.Duration(st.Int(settings.SeatLeaseSeconds)) * time.Second },
		ShardedPubSub: cfg.ShardedPubSub(),
		Durability:    func() string { return st.String(settings.MessageDurability) },
		SendWindow:    cfg.SendWindow,
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
	svc.Rooms = rs
	svc.Presence = presence.New(rdb, presence.Config{Prefix: prefix, Now: now, Registerer: reg, Run: cfg.Run,
		GuestRetention: realtime.GuestTTL})
	svc.Dirty = dirty.New(rdb, dirty.Config{Prefix: prefix, Node: cfg.Node, Now: now, Logger: log, Registerer: reg})
	svc.Notices = notices.New(rdb, notices.Config{Prefix: prefix, Now: now})
	svc.Seen = seen.New(rdb, seen.Config{
		Prefix:     prefix,
		Capacity:   func() int { return st.Int(settings.SeenCapacity) },
		FPRate:     func() float64 { return st.Float(settings.SeenFPRate) },
		TTL:        func() time.Duration { return time.Duration(st.Int(settings.SeenTTLSeconds)) * time.Second },
		Registerer: reg,
	})
	svc.Direct = dm.New(rdb, dm.Config{Prefix: prefix, Key: cfg.MatchRoomKey, Now: now})
	cfg.Settings, cfg.Seats, cfg.Messages, cfg.Presence, cfg.Dirty, cfg.Notices, cfg.Seen, cfg.Blocks =
		st, rs.Seats, rs.Messages, svc.Presence, svc.Dirty, svc.Notices, svc.Seen, svc.Direct

	// The core, then the services whose hooks reach its clients and marks.
	core, err := realtime.New(cfg)
	if err != nil {
		return nil, err
	}
	a.Core = core
	hub, marks := core.Hub(), core.Marks()
	svc.Marks = marks
	svc.Boards = ranking.New(rdb, ranking.Config{Prefix: prefix, Now: now, Registerer: reg,
		MaxPlayers: func() int { return st.Int(settings.PlayersPerBoard) },
		OnChange:   func(_ context.Context, board string, _ ranking.Entry) { marks.Board(board) },
		Permanent:  func(board string) bool { return listed(st.String(settings.PermanentBoards), board) },
	})
	svc.Conns = identity.NewConns(rdb, identity.ConnsConfig{Prefix: prefix, Now: now, Registerer: reg, Live: core.ConnRuns})
	svc.Names = identity.New(rdb, identity.Config{Prefix: prefix, Now: now, Registerer: reg, Logger: log,
		TTL: func() time.Duration { return time.Duration(st.Int(settings.SessionIdleSeconds)) * time.Second },
		// the guests' ended sessions close their connections
		OnEnded: func(name, holder string) {
			hub.CloseUser(name, holder, realtime.CloseSessionEnded, "your session ended: sign in again")
		},
	})
	svc.Moderation = moderation.New(rdb, moderation.Config{Prefix: prefix, Now: now, Logger: log})
	// a kick or a ban, decided on any node, closes the user's clients here
	svc.Guard = moderation.NewGuard(svc.Moderation, moderation.GuardConfig{Now: now, OnEvent: hub.Moderated})
	svc.Moderated = realtime.NewModerated(svc.Guard, now)
	svc.Shop = shop.New(rdb, shop.Config{Prefix: prefix, Registerer: reg,
		Durability:     func() string { return st.String(settings.ShopDurability) },
		OnWalletChange: func(_ context.Context, user string) { marks.User(user, dirty.Of(dirty.Wallet)) },
	})
	svc.Caps = realtime.NewCaps(rdb, prefix, now, reg, st)
	svc.Audit = audit.New(rdb, audit.Config{Prefix: prefix, Now: now})

	// The use cases.
	a.Sessions = sessions.New(sessions.Config{Node: core, Names: svc.Names, Conns: svc.Conns, Moderated: svc.Moderated,
		Caps: svc.Caps, Settings: st, Now: now, Logger: log, Hooks: cfg.Hooks})
	a.Chat = chat.New(chat.Config{Node: cfg.Node, Core: core, Hub: hub, Notices: core.Notices(), Marks: marks,
		Moderated: svc.Moderated, Caps: svc.Caps, Seats: rs.Seats, Messages: rs.Messages,
		Lobbies: rs.Lobbies, ReadMarks: rs.ReadMarks, Players: rs.Private, Presence: svc.Presence,
		Cursors: svc.Dirty, Settings: st, Names: svc.Names, Leases: a.Sessions,
		MaxConnsPerUser: core.MaxConnsPerUser(), Prefix: prefix, Now: now, Logger: log, Hooks: cfg.Hooks,
		Blocks: svc.Direct})
	a.Direct, err = direct.New(direct.Config{Store: svc.Direct,
		Clients: hub, Marks: marks, Muted: svc.Moderated, Limits: st, Node: core, Logger: log})
	if err != nil {
		return nil, err
	}
	a.Match, err = match.New(match.Config{Node: core, Redis: rdb, Prefix: prefix, Settings: st, Rooms: rs.Private,
		Presence: svc.Presence, Marks: marks, Locks: svc.Locks, RoomKey: cfg.MatchRoomKey, Reach: a.Direct,
		Now: now, Logger: log, Registerer: reg, Hooks: cfg.Hooks})
	if err != nil {
		return nil, err
	}
	a.REST, a.Reads = chat.NewREST(a.Chat), chat.NewReads(a.Chat)
	a.RPC = rpc.New(cfg.Hooks, now)
	a.Polls = polls.New(polls.Config{Sessions: a.REST, Dirty: svc.Dirty, Rooms: rs.Seats, History: rs.Messages,
		Settings: st, Wallets: svc.Shop, Boards: svc.Boards, Notices: core.Notices(), Match: a.Match,
		Gaps: hub, Blocks: svc.Direct, Draining: core.Draining(), Now: now, Logger: log})
	a.Game = game.New(game.Config{Boards: svc.Boards, Shop: svc.Shop, Seen: svc.Seen, Follows: svc.Dirty,
		Caps: svc.Caps, Logger: log})
	a.Moderation = moderate.New(svc.Moderation, svc.Guard)
	a.Admin = admin.New(admin.Config{Settings: st, Seats: rs.Seats, Messages: rs.Messages,
		Lobbies: rs.Lobbies, Presence: svc.Presence, Purchases: svc.Shop, Notices: svc.Notices,
		Marks: marks, Audit: svc.Audit, SayRules: a.Chat, Queues: a.Match, Disconnecter: core})
	a.ServerAPI = serverapi.New(serverapi.Config{Messages: rs.Messages, Seats: rs.Seats,
		Private: rs.Private, Presence: svc.Presence, SayRules: a.Chat, Marks: marks, Commands: core,
		Redis: rdb, Prefix: prefix, Now: now, Registerer: reg})
	return a, nil
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

// Start starts the core, then the use cases that own background work, in
// order, and returns once the node can serve, or with the first error.
func (a *App) Start(ctx context.Context) error {
	if err := a.Core.Start(ctx); err != nil {
		return err
	}
	// The services started on the core's bus: the name registry's events,
	// and the moderation events the guard caches and the Hub acts on.
	if err := a.Services.Names.Start(ctx, a.Core.Bus()); err != nil {
		return fmt.Errorf("app: start the name registry: %w", err)
	}
	g := a.Services.Guard
	if err := a.Core.Subscribe(ctx, a.Services.Moderation.Channel(), bus.HandlerFuncs{OnReceive: g.Receive, OnResubscribed: g.Reset}); err != nil {
		return fmt.Errorf("app: subscribe moderation: %w", err)
	}
	for _, start := range []func(context.Context) error{a.Chat.Start, a.Sessions.Start, a.Match.Start, a.Direct.Start} {
		if err := start(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Ready is the core's readiness (realtime.Node.Ready).
func (a *App) Ready(ctx context.Context, timeout time.Duration) error {
	return a.Core.Ready(ctx, timeout)
}

// Drain is the core's drain (realtime.Node.Drain): the first step of
// Shutdown, for a front to run while its requests finish.
func (a *App) Drain(ctx context.Context) error { return a.Core.Drain(ctx) }

// Shutdown stops the node within ctx, in the reverse order of Start: the
// drain, the matchers, then the core and every loop it runs.
func (a *App) Shutdown(ctx context.Context) error {
	// The clients go first; the core's Shutdown drains again, at once or
	// with this same error, which it reports.
	_ = a.Core.Drain(ctx)
	err := a.Match.Shutdown(ctx)
	// The registry keeps answering (from Redis) after Close: the loops the
	// core stops next may still ask it.
	if cerr := a.Services.Names.Close(ctx); cerr != nil {
		a.log.Debug("close the name registry", "err", cerr)
	}
	return errors.Join(err, a.Core.Shutdown(ctx))
}
