// Package realtime is chatd's transport-free core, shaped after
// centrifugal/centrifuge (Node, Hub, Client, a test transport) and
// hibiken/asynq (components started and stopped in order). It owns no
// Redis keys of its own and no use case: it is what every use case
// shares and none owns, and the use cases are packages above it.
//
// # Shape: a core, one package per use case above it, a root that composes
//
// The core (this package):
//
//   - Node runs the core's lifecycle: Start starts its components in
//     order (bus, settings, dirty tracker, the notice and command
//     subscriptions, clock, heartbeat, sweepers); Shutdown drains the
//     clients (1012), then stops them in reverse order and waits for every
//     goroutine they own (group), the use cases' loops among them
//     (Node.Go). It is handed the domain services it uses itself
//     (Config: settings, seats, messages, presence, dirty, notices, seen,
//     blocks)
//     and builds none; it hands none out. Its command channel
//     (Node.Disconnect) closes a user's or one connection's clients on
//     every node, like centrifuge's control channel.
//   - Hub is the one registry of the node's clients, by room and by user,
//     with no pointer back to the Node: what it needs (subscribe, history,
//     owned goroutines) it gets at construction. Its API for the use cases
//     (members.go) registers a client (Register, Unregister) and makes it
//     a live member of a room (Enter: history then live, no gap, no
//     duplicate; Leave).
//   - Client is one connection's state — its send queue, its per-room
//     feeds, its say queue (QueueSay: bounded, one worker, batches), its
//     refusal count (Refuse) — and writes through a small Transport (the
//     WebSocket or the event stream in package web, testkit's in-memory
//     one in tests); it holds no rule of what a frame does.
//   - Feed (history then live, each id once), Principal, the close codes,
//     the errors with their codes (errors.go), the caps (Caps: the one
//     place a cap is written), the coalesced dirty marks (Marks), the
//     moderation refusals (Moderated, read from moderation.Guard), the
//     notices' delivery (Notices), the coarse clock.
//
// The use cases, each a package under realtime/, each built from the
// domain packages it needs and the core's exported API, and reaching
// another use case only through an interface it declares itself:
// chat (join, say, leave, resume, typing, reads, REST sessions and their
// streams), polls (the REST poll), sessions (guest sign-in, admission,
// connection leases), match (matchmaking tickets, parties, the matchers'
// hooks), game (leaderboards, seen, shop), moderation (kick, mute, ban),
// admin (settings, notices, stats and the console), direct (direct
// messages and blocks, delivered to a user's connections on every node),
// rpc (clients' calls to the application's backend through its rpc hook)
// and serverapi (the backends' API-key routes: publish, broadcast,
// presence, disconnect, grant and revoke). The compiler
// keeps them apart: a use case cannot read another's fields, and the core
// imports none of them. Each package's doc.go says what it declares.
//
// The composition root, realtime/app, builds the domain services on the
// node's Redis client, the core from those it uses, then the services
// whose hooks reach the core's clients or marks (identity, the moderation
// guard, ranking, shop), then each use case with what it needs, in an
// order that needs no wiring after construction, and starts and stops
// them around the core. cmd/chatd/compose adds the HTTP front (package
// web, which builds nothing); realtime/realtimetest starts an app for the
// tests of the use cases, and package web's harness composes through it
// too, so every test runs the node chatd runs.
//
// # What it shows, and why the naive versions fail
//
// Fan-out: a room's channel is subscribed while the node has a member
// there; each event is encoded once (by the send script) and its bytes are
// shared by every member's queue. A Client's writer takes everything queued
// and hands it to the Transport in one call, which writes it in one system
// call with one deadline. The naive writer — one write and one deadline per
// event per client — spent two thirds of a loaded node's CPU in syscalls.
//
// Flow control: a queue is bounded in bytes and by its writer's progress:
// a client is "too slow" (close 1013) when its writer has made no progress
// for 5 s with more than 1 MiB queued, or when 16 MiB are queued at all.
// The naive bound, a count of queued frames, closed healthy clients after
// any burst. Replays go page by page, each after the writer drained.
//
// Bounded work per client: a connection's says wait for Redis in a queue
// bounded by count and bytes; when it is full the reader stops reading
// (TCP pushes back on the peer), and when the client closes, the says it
// never got an answer for are dropped, not sent. The naive unbounded queue
// let one client, during a Redis pause, grow a node by 170 MB and send all
// of it to Redis after the client had gone. Refusals for rate limiting are
// counted in a time window (AbuseLimit in AbuseWindow closes with 1008);
// counting "refusals in a row" let a ping every 19th frame dodge the
// close, each refusal costing a script call.
//
// Feed: "catch up from history, hold live messages, then go live" is one
// type, used by join, resume and the gap fill after the bus reconnects.
// Reading history and then subscribing loses what is sent in between;
// subscribing and then reading delivers the overlap twice and lets live
// messages overtake the history. A Feed holds live messages while it reads,
// compares ids at the seam, and delivers each id once, in order.
//
// Blocks in rooms: each Client holds its user's block set (blocks.go),
// read once when it registers and replaced by package direct's event on
// every change, on every node; a member's Feed leaves the blocked users'
// messages out (and moves past them: no gap, no re-delivery) and the
// fan-out their typing. A user who blocks nobody pays one atomic load per
// delivery. The naive versions fail: filtering at the sender cannot know
// every member's blocks, and reading the set per delivery costs a round
// trip per message per member.
//
// Background work has an owner: the heartbeat, sweeper and session-sweep
// loops, the coarse clock, the coalesced dirty marks, unsubscribes, gap
// fills, say workers, and the use cases' loops (chat's seat renewal and
// presence, sessions' connection leases) all run in the node's group;
// Shutdown cancels it and waits for them.
//
// What a guest leaves: GuestTTL is the longest a guest's own keys live
// after its last write; package chat's doc says how every package honours
// it.
package realtime
