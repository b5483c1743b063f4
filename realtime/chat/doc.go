// Package chat is the chat use case of a chatd node: join, say, leave,
// resume, typing and read marks of WebSocket clients (Chat), the same for
// REST sessions and their event streams (REST: a stream is a realtime
// client that follows its session's rooms, Server-Sent Events in package
// web), and the reads that go with chat (Reads: history, rooms, lobbies,
// presence, unread counts), with the access rule of rooms (CanSee) and
// the seat and presence loops that keep a connection's seats and its
// user's presence (Chat.Start).
//
// It owns no Redis keys: the seats, messages, lobbies, read marks and
// private rooms are package rooms', presence package presence's, a REST
// session's rooms (its poll cursors) package dirty's. It is built (New)
// on the realtime core's exported API — the Hub (Register, Enter, Leave,
// LocalSeats), a Client's say queue and refusals, the node's ids, loops,
// drain and pub/sub (the node interface), the core's notices, marks,
// moderation refusals and caps — and on the domain services, each through
// an interface declared here (chatSeats, chatMessages, lobbyLister,
// readMarks, playerList, chatPresence, cursors, liveSettings,
// nameKeeper). It reaches package sessions only through leaseReleaser (a
// closed connection gives its lease back); polls, admin and match reach it
// through interfaces of their own (REST.RenewPoll, Chat.CheckSay). Nothing
// is wired into it after New.
//
// # What it shows, and why the naive versions fail
//
// One rule per thing. A REST post and a WebSocket say take the same send
// path (Chat.send: a REST post is a batch of one), so a seat lost by lease
// is taken back for both, the mute check, the local rate knowledge and the
// REST members' marks apply to both. A REST join and a WebSocket join are
// the same seat claim (Chat.join). The naive split — a send path per
// transport — drifted: the reclaim existed only on the WebSocket one.
//
// Seats of idle connections: a WebSocket's seat attachment is bound to
// the node's run (rooms.Attach.Run), and the seat loop keeps all of them
// with rooms.Seats.KeepRun, one run lease per lobby per tick. The naive
// loop, Renew of every attachment every tick, cost Redis O(users) for
// users who do nothing (issue #42); a REST session, which has no run, is
// still renewed by its polls (REST.RenewPoll).
//
// Idempotent says: a say carries the session and the client's own id of
// it (the frame's ref, the post's Idempotency-Key), which the send script
// checks and records with the write; a Redis client retry after a timeout,
// or a client re-sending after a reconnect, gets the original message, and
// nothing is stored or delivered twice.
//
// Says of all connections share round trips: each connection's say worker
// sends its queued says (up to 64) as one rooms.SendMany call, and the
// node's rooms.Messages commits the says of every call that comes in while
// one commit is in flight together, with one script call per lobby (a
// group commit: no timer, nothing added on an idle node). A user of a room
// of 50 says once every few seconds, so a batch is one say: sent alone, as
// before, each say was a round trip and a script call of its own, which
// cost Redis 3–4 × a bare PUBLISH (issue #42).
//
// Local knowledge of empty buckets: after Redis refused a say as rate
// limited, this node refuses the sender's says in that lobby without a
// Redis call until the refusal's retry time (it only ever refuses what
// Redis would refuse).
//
// Seats held by attachments: a seat belongs to its user; each WebSocket and
// each REST session in the room is an attachment of it (rooms.Attach).
// Closing a connection detaches only that connection, so a second tab, the
// same user's REST session, or the connection that already resumed on
// another node during a rolling restart keeps the seat.
//
// Presence without a write per user per tick: a node's presence claims
// live with its run (package presence); a user's claim is written when its
// rooms or connections change, the online index is kept by one command per
// 1,000 users a tick, and a slow rotation heals a lost write. After a
// fresh heartbeat (Redis lost the claims, or the node lapsed) every claim
// is written again.
//
// Blocks: Reads.History leaves out the messages of users the reader
// blocks (one SMEMBERS per read), and fills a page after an id from
// further on, so a page emptied by hidden messages never reads as the end
// of the room; a connection's live feed and replay leave them out in the
// core (realtime.Client's block set).
//
// Streams: a stream's position is one value for every room it sits in
// (Position, the SSE id), so a reconnect resumes every room with no gap
// and no duplicate; a REST join or leave on any node reaches the stream's
// node over the session's channel, so no request needs sticky sessions.
//
// What a guest leaves: every key of a guest's own (its seen filter, its
// follows, its presence record, a board only guests posted to and its
// followers) is written with realtime.GuestTTL (24 hours) as its lifetime,
// through each domain package's own option, at write time: a guest who
// never comes back leaves nothing in Redis a day after its last write,
// even if every node crashed (TestAbandonedGuestFootprintBudget in web/).
package chat
