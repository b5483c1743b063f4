// Package realtime is chatd's transport-free core, shaped after
// centrifugal/centrifuge (Node, Hub, Client, a test transport) and
// hibiken/asynq (components started and stopped in order). It owns no
// Redis keys of its own: it wires the domain packages (rooms, presence,
// dirty, ranking, shop, seen, notices, identity, moderation, settings,
// matchmaking) to each other and to the node's one pub/sub bridge
// (internal/bus), and, with the use-case packages under realtime/, it
// holds every rule about what a frame or a request does.
//
// # Shape: a core, and one package per use case above it
//
// The core is this package: what every use case shares and none owns.
// Each use case is its own package under realtime/, built from the
// domain packages it needs and from the core's exported API, and it
// reaches another use case only through an interface it declares itself;
// nothing is wired into a use case after it is built (a reaction across
// use cases is an event on the bus or a hook of a domain package, wired
// once where the parts are built). The compiler keeps them apart: a use
// case cannot read another's fields, and the core imports none of them.
//
// The core (this package):
//
//   - Hub (the node's clients by room and by user; CloseUser), Client (one
//     connection), Feed (history then live, each id once), Transport (and
//     Aborter, Waker), Principal and Viewer, the close codes and the
//     errors with their codes (errors.go), the lifecycle group and the
//     coarse clock, the caps (Caps: the one place a cap is written), the
//     coalesced dirty marks (Marks), the moderation refusals (guard.go:
//     muted, banned, read from moderation.Guard), the notices' delivery,
//     and the node's command channel (Node.Disconnect: a user's or one
//     connection's clients closed on every node, like centrifuge's
//     control channel).
//   - Node runs the core's lifecycle. New builds the domain services, the
//     bus and the Hub, and no use case; Start starts the core's components
//     in order (bus, settings, dirty tracker, subscriptions, clock,
//     heartbeat, sweepers); Shutdown drains the clients (1012), then stops
//     the components in reverse order and waits for every goroutine they
//     own (group), the use cases' loops among them (Node.Go). The
//     composition root, realtime/app, builds the use cases on a Node
//     (NewChat and NewPolls, still in this package,
//     and the packages below from Node.Services), in an order that needs
//     no wiring after construction, and runs their Start and Shutdown
//     around the core's; cmd/chatd/compose (cmd/chatd), realtimetest and
//     package web's tests all compose through it.
//   - realtimetest gives the use-case packages' tests a recording
//     Transport and a started node (realtime/app) (the core's own tests keep theirs).
//
// The use cases, each a package, each with the interfaces it declares:
//
//   - admin (settings, notices, stats, queue depths, and the console's
//     reads and actions: nodes, rooms by population, user search, a
//     message from the system, disconnects, the audit log): settingsStore,
//     counters, registry, purchases, adminRooms, adminMessages,
//     lobbyLister, adminPresence, auditLog of the domain packages;
//     noticeStore, marks (realtime.Marks), sayRules (Chat.CheckSay),
//     queues (Matchmaking.Queues), disconnecter (Node.Disconnect).
//   - game (leaderboards, seen, shop): boardStore, shopStore, seenFilter,
//     follower of the domain packages; caps (realtime.Caps).
//   - sessions (guest sign-in and sign-out, the per-request admission,
//     connection leases and caps, the leases' renewal): nameClaims and
//     connLeases (package identity), banCheck (realtime.Moderated),
//     sessionCaps (Caps), clients (Hub), nodeRun (Node: RunID, NextID,
//     LiveRuns, Go). Chat gives leases back through its ReleaseConn.
//   - match (matchmaking tickets, parties by consent, and the matchers'
//     hooks: a match becomes a private room with the players' seats
//     reserved, and each player learns of it by a matched event on every
//     connection on every node, over the matchmaking channel, and by the
//     match poll section; an expired ticket likewise): matchStore,
//     matchRooms, onlineChecker of the domain packages; players (Hub),
//     marks (Marks), node (Node: Subscribe, RunContext). Polls read its
//     Events, admin its Queues.
//   - direct (direct messages and blocks: open, send, typing, read marks,
//     history, lists, blocks, admins' audited reads and removals; every
//     direct event delivered to each connection of its users on every node
//     over one channel, and a conversation's resume without a gap or a
//     double): store (package direct), clients (Hub), marks (Marks),
//     muteCheck (Moderated), limits (settings), node (Node: Subscribe, Go).
//     Match asks it whether a party invitation may reach its invitee.
//   - moderation (kick, mute, ban, their lifting): Store (the domain
//     service) and Cache (moderation.Guard's Drop). It needs nothing of
//     the core.
//
// Still in this package, to be split the same way (the plan: one package
// each, chat below polls):
//
//   - Chat: join, say, leave, resume, typing, read marks of WebSocket
//     clients, the say rules and the send path (CheckSay, send) that REST
//     posts take too, the access rules (CanSee); REST: the REST sessions'
//     joins, leaves, typing, posts and event streams, and their seats'
//     renewal by the poll; Reads: history, rooms, lobbies, presence,
//     unread counts; keeper: the seat and presence loops Chat.Start runs.
//     REST, Reads and keeper share Chat's state (one send path for both
//     transports); each is built from a Chat (NewREST, NewReads).
//   - Polls: the REST poll (its sections read Chat's REST seats, the
//     match events and the notices).
//
// A REST write marks the dirty bits it must; a mute drops the cached
// status; nothing is left for the transport to remember.
//
//   - Hub is the one registry of the node's clients, by room and by user,
//     with no pointer back to the Node: what it needs (subscribe, history,
//     owned goroutines) it gets at construction. Client is one connection's
//     state — its send queue, its per-room feeds, its queued says, its
//     refusal count — and writes through a small Transport (the WebSocket
//     in package web, a fake in this package's tests); it holds no rule.
//   - Errors carry their documented code (package errcode); the transport
//     maps codes to statuses in one table.
//
// # What it shows, and why the naive versions fail
//
// One rule per thing. A REST post and a WebSocket say take the same send
// path (Chat.send: a REST post is a batch of one), so a seat lost by lease
// is taken back for both, the mute check, the local rate knowledge and the
// REST members' marks apply to both. The Feed and the REST poll read
// history with one catch-up rule (readFrom). A cap is written once (caps).
// The naive split — a send path per transport — drifted: the reclaim
// existed only on the WebSocket one.
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
// counted in a time window (AbuseLimit in AbuseWindow closes with 1008),
// and while this node knows a sender's bucket is empty it refuses without
// a Redis call; counting "refusals in a row" let a ping every 19th frame
// dodge the close, each refusal costing a script call.
//
// Idempotent says: a say carries the session and the client's own id of
// it (the frame's ref, the post's Idempotency-Key), which the send script
// checks and records with the write; a Redis client retry after a timeout,
// or a client re-sending after a reconnect, gets the original message, and
// nothing is stored or delivered twice.
//
// Feed: "catch up from history, hold live messages, then go live" is one
// type, used by join, resume and the gap fill after the bus reconnects.
// Reading history and then subscribing loses what is sent in between;
// subscribing and then reading delivers the overlap twice and lets live
// messages overtake the history. A Feed holds live messages while it reads,
// compares ids at the seam, and delivers each id once, in order.
//
// Seats held by attachments: a seat belongs to its user; each WebSocket and
// each REST session in the room is an attachment of it (rooms.Attach).
// Closing a connection detaches only that connection, so a second tab, the
// same user's REST session, or the connection that already resumed on
// another node during a rolling restart keeps the seat.
//
// Background work has an owner: the renewal, presence, heartbeat, sweeper,
// session-sweep and connection-lease loops, the coarse clock, the
// coalesced dirty marks, unsubscribes and gap fills all run in the node's
// group; Shutdown cancels it and waits for them.
//
// What a guest leaves: every key of a guest's own (its seen filter, its
// follows, its presence record, a board only guests posted to and its
// followers) is written with GuestTTL (24 hours) as its lifetime, through
// each domain package's own option (seen.Filter.MarkFor,
// dirty.Tracker.FollowFor, presence.UserState.Guest,
// ranking.PostOptions.IdleTTL), at write time: a guest who never comes
// back, signed out or not, leaves nothing in Redis a day after its last
// write, even if every node crashed. A guest that signed in, joined, said,
// marked read, polled, marked 50 items seen and posted a score to a new
// board leaves 18 keys, about 3.6 KB (TestAbandonedGuestFootprintBudget in
// web/). Registered users keep the packages' longer lifetimes.
package realtime
