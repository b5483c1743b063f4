// Package realtime is chatd's transport-free core, on the centrifuge
// pattern: a Node decides every join, say, leave, resume, disconnect and
// poll; a Hub is the one registry of the node's clients, by room and by
// user; a Client owns its send queue and its per-room feeds and writes
// through a small Transport (the WebSocket in package web, anything in
// tests). It owns no Redis keys of its own: it wires the domain packages
// (rooms, presence, dirty, ranking, shop, seen, notices, identity,
// moderation, settings) together and to the node's one pub/sub bridge
// (internal/bus).
//
// # What it shows, and why the naive versions fail
//
// Fan-out: a room's channel is subscribed while the node has a member
// there; each event is encoded once (by the send script) and its bytes are
// shared by every member's queue. A Client's writer takes everything queued
// and hands it to the Transport in one call, which writes it in one system
// call with one deadline. The naive writer — one WriteMessage, one write
// and one SetWriteDeadline per event per client — spent two thirds of a
// loaded node's CPU in those system calls.
//
// Flow control: a queue is bounded in bytes and by its writer's progress:
// a client is "too slow" (close 1013) when its writer has made no progress
// for 5 s with more than 1 MiB queued, or when 16 MiB are queued at all.
// The naive bound, a count of queued frames checked at each enqueue, closed
// healthy clients after any burst larger than the count: a pub/sub backlog
// after a paused process, a large replay, a gap fill. Replays and catch-ups
// go page by page, each page after the client's writer has drained.
//
// Feed: "catch up from history, hold live messages, then go live" is one
// type, used by join, resume and the node's gap fill after the bus
// reconnects. Reading history and then subscribing loses what is sent in
// between; subscribing and then reading delivers the overlap twice and lets
// live messages overtake the history. A Feed holds live messages while it
// reads, compares ids at the seam, and delivers each id once, in order.
//
// Seats held by attachments: a seat belongs to its user; each WebSocket and
// each REST session in the room is an attachment of it (rooms.Attach).
// Closing a connection detaches only that connection, so a second tab, the
// same user's REST session, or the connection that already resumed on
// another node during a rolling restart keeps the seat. The naive "free the
// seat when a connection closes" lost seats on every rolling restart and
// whenever one of a user's connections closed.
//
// Says: one Redis round trip each (seat check, rate limit, XADD and PUBLISH
// in one script, rooms.Send); a client's says go to Redis in order in one
// pipeline (rooms.SendMany) from a worker of their own, so the connection's
// reader never waits for Redis, and acks come back in order.
//
// Background work has an owner: the renewal, presence, heartbeat, sweeper
// and session-sweep loops, the coalesced dirty marks (one mark per key at a
// time, the rest folded into one rerun) and gap fills all run on the node's
// run context (goRun); Shutdown cancels it and waits for them.
package realtime
