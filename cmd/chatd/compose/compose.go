// Package compose is chatd's composition root: it builds one node's
// components from their configurations, each handed what it needs, and
// starts and stops them in order. cmd/chatd runs a node through it (after
// building the Redis client), and so do the end-to-end tests of the
// browser client, so that they run the node chatd runs. It lives under
// cmd/chatd, above every package it wires: nothing below the binary
// imports it, so no package of the server can reach the whole node.
//
// The components, in the order they start:
//
//	core  the realtime core and its use cases (realtime/app: the domain
//	      services on the node's Redis client, the bus, the Hub, then
//	      Chat, Polls, Sessions, Match, Game, Moderation and Admin), and
//	      their background work (app.App.Start)
//	web   the HTTP and WebSocket front (web.New), given the use cases it
//	      serves; it builds nothing of its own
//
// They stop in the reverse order, as hibiken/asynq's Server stops its
// components: the front first, which stops accepting and drains the
// core's clients while its requests finish, then the core (its loops, the
// node registry, the bus). The Redis client is the caller's: it outlives
// the node.
package compose

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/realtime/app"
	"github.com/chatd/chatd/web"
)

// Config configures a node: each component's own Config.
// realtime.Config.Redis and both Node ids are required.
type Config struct {
	Realtime realtime.Config
	Web      web.Config
}

// Node is one chatd node, composed.
type Node struct {
	// Core is the realtime core and its use cases, with their lifecycle.
	Core *app.App
	// Web is the front that serves Core's use cases.
	Web *web.Server
}

// New builds a node: the realtime core, then the front serving its use
// cases. Start starts it; nothing runs before.
func New(cfg Config) (*Node, error) {
	core, err := app.New(cfg.Realtime)
	if err != nil {
		return nil, err
	}
	srv, err := web.New(web.UseCasesOf(core), cfg.Web)
	if err != nil {
		return nil, err
	}
	return &Node{Core: core, Web: srv}, nil
}

// Start starts the core's background work (the bus first, then what
// follows it) and returns once the node can serve; then Serve serves.
func (n *Node) Start(ctx context.Context) error {
	if err := n.Core.Start(ctx); err != nil {
		return fmt.Errorf("compose: start the realtime core: %w", err)
	}
	return nil
}

// Serve serves HTTP and WebSocket on ln until Shutdown.
func (n *Node) Serve(ln net.Listener) error { return n.Web.Serve(ln) }

// Shutdown stops the node within ctx, in the reverse order of Start: the
// front (no new connection; the core's clients are told to reconnect
// elsewhere, 1012, while HTTP requests finish), then the core.
func (n *Node) Shutdown(ctx context.Context) error {
	return errors.Join(n.Web.Shutdown(ctx), n.Core.Shutdown(ctx))
}
