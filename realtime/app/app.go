// Package app composes one node's realtime use cases on its core: it
// builds the core (realtime.New), then each use case, handed only what it
// needs, in an order that needs no wiring after construction (Sessions
// before Chat, which gives connection leases back to it; Chat and Match
// before Polls, which reads both); and it starts and stops them in order,
// as hibiken/asynq's Server starts and stops its components.
//
// Start: the core (bus, settings, subscriptions, clock, heartbeat,
// sweepers), then Chat (seat and presence renewal), Sessions (connection
// leases), Match (its channel, then the matchers), Direct (its channel). Shutdown: the core's
// drain (every client told to reconnect elsewhere, 1012), Match (the
// matchers hand this node's queues over), then the core (the node leaves
// the registry; its loops, the use cases' loops with them, settings,
// dirty tracker, bus).
//
// cmd/chatd composes through it (cmd/chatd/compose, which adds the HTTP
// front), and so do the tests of the use cases (realtime/realtimetest) and
// of the front (package web's harness), so every test runs the node chatd
// runs.
package app

import (
	"context"
	"errors"
	"time"

	dm "github.com/chatd/chatd/direct"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/realtime/admin"
	"github.com/chatd/chatd/realtime/direct"
	"github.com/chatd/chatd/realtime/game"
	"github.com/chatd/chatd/realtime/match"
	moderate "github.com/chatd/chatd/realtime/moderation"
	"github.com/chatd/chatd/realtime/sessions"
)

// App is one node's realtime core and its use cases.
type App struct {
	// Core is the realtime core: the Hub, the domain services, the bus
	// and their lifecycle.
	Core *realtime.Node

	Chat       *realtime.Chat
	REST       *realtime.REST
	Reads      *realtime.Reads
	Polls      *realtime.Polls
	Sessions   *sessions.Sessions
	Match      *match.Matchmaking
	Game       *game.Game
	Moderation *moderate.Moderation
	Admin      *admin.Admin
	Direct     *direct.Direct
}

// New builds the core from cfg, then the use cases on it. Start starts
// them; nothing runs before. It returns realtime.New's errors.
func New(cfg realtime.Config) (*App, error) {
	core, err := realtime.New(cfg)
	if err != nil {
		return nil, err
	}
	a := &App{Core: core}
	svc := core.Services
	a.Sessions = sessions.New(sessions.Config{Node: core, Now: cfg.Now, Logger: cfg.Logger})
	a.Chat = realtime.NewChat(core, a.Sessions)
	a.Direct, err = direct.New(direct.Config{Store: dm.New(cfg.Redis, dm.Config{Prefix: cfg.Prefix, Key: cfg.MatchRoomKey, Now: cfg.Now}),
		Clients: core.Hub(), Marks: svc.Marks, Muted: svc.Moderated, Limits: svc.Settings, Node: core, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	a.Match, err = match.New(match.Config{Node: core, Redis: cfg.Redis, Prefix: cfg.Prefix, RoomKey: cfg.MatchRoomKey,
		Reach: a.Direct, Now: cfg.Now, Logger: cfg.Logger, Registerer: cfg.Registerer})
	if err != nil {
		return nil, err
	}
	a.REST, a.Reads = realtime.NewREST(a.Chat), realtime.NewReads(a.Chat)
	a.Polls = realtime.NewPolls(core, a.REST, a.Match)
	a.Game = game.New(game.Config{Boards: svc.Boards, Shop: svc.Shop, Seen: svc.Seen, Follows: svc.Dirty,
		Caps: svc.Caps, Logger: cfg.Logger})
	a.Moderation = moderate.New(svc.Moderation, svc.Guard)
	a.Admin = admin.New(admin.Config{Settings: svc.Settings, Seats: svc.Rooms.Seats, Messages: svc.Rooms.Messages,
		Lobbies: svc.Rooms.Lobbies, Presence: svc.Presence, Purchases: svc.Shop, Notices: svc.Notices,
		Marks: svc.Marks, Audit: svc.Audit, SayRules: a.Chat, Queues: a.Match, Disconnecter: core})
	return a, nil
}

// Start starts the core, then the use cases that own background work, in
// order, and returns once the node can serve, or with the first error.
func (a *App) Start(ctx context.Context) error {
	if err := a.Core.Start(ctx); err != nil {
		return err
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
	return errors.Join(a.Match.Shutdown(ctx), a.Core.Shutdown(ctx))
}
