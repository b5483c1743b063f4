// Package direct owns direct messages: private conversations between two
// users, their histories, read marks and unread counts, each user's list
// of conversations by last activity, the budget of new conversations, and
// blocks. The realtime use case (realtime/direct) decides who may do what
// and delivers the events; this package keeps the data and publishes.
//
// # Keys
//
// A conversation is one hash-tag unit, {dm:<id>}: its history (a
// [XADD] stream, capped with MAXLEN ~), its record (a hash: the pair, the
// read marks and unread counts per participant) and its idempotency and
// rate keys; every script of a conversation runs on one Cluster slot. A
// user's own keys — the list of conversations ([ZADD] GT by last
// activity, trimmed), the blocks (a set), the budget of new
// conversations (INCR with an expiry) — are the unit {dmu:<name>}. Names
// are canonical (names.Canonical): "Alice" and "alice" are one user, one
// list, one conversation, one block.
//
// The id of a conversation is "dm-" and 32 hex digits of an HMAC-SHA256,
// under Config.Key (the node's secret), of the sorted canonical pair: the
// same from both sides, computed without a read, and not guessable without
// the key. Outsiders are refused anyway (ErrNoConversation: not found, so
// an id tells nothing).
//
// # How it maps onto the room machinery
//
// A conversation is not a room: it has no seats, no lobby, no capacity,
// no lease, and it does not count against room.capacity. What it takes
// from rooms is the message machinery: the history is a stream whose ids
// order it, padded "%013d-%06d" so they compare as strings; the send
// script checks the sender's idempotency key (or, for a send without
// one, a key of the Send call's own) before anything and records it with
// the write, takes a token from the sender's bucket, appends, and
// publishes inside the script, so the ids on the channel come in history
// order; a resume reads the stream after an id, and a page whose oldest
// kept message is newer than that id says so (Page.Gap): gaps are told,
// never silent.
//
// # Delivery
//
// Every event is published on one node-wide channel ([PUBLISH], classic
// pub/sub), prefixed by the canonical names of the users it is for; each
// node hands it to its own connections of those users. A recipient joins
// nothing: every connection of a user gets the user's direct events. The
// naive version — a channel per conversation or per user that nodes
// subscribe to while a user is connected — needs a subscription per
// connected user per node, changed on every connect and disconnect, and
// loses what is published between a connection and its subscription. The
// price of one channel is that every node receives every direct event;
// with Redis Cluster's classic pub/sub every master already does.
//
// # Two slots, one order
//
// A send writes the conversation (one script, atomic: idempotency, rate,
// append, unread count, publish) and then both users' lists (ZADD GT,
// idempotent). A crash between the two leaves the lists a message behind
// until the next send or open; a retried send (same idempotency key)
// finds the first write and does not append again. The Redis client
// retries too: go-redis sends the script again when its reply does not
// come within the read timeout, and the first copy may have been applied
// (a stalled server, or a node paused while it waited). So every send is
// recorded — under the client's key, or under "~<call>", a random id of
// the Send call kept 30 s, when it has none — with the call's id and the
// answer it got, and the script call's context ends 10 s after its start
// at the latest: every copy finds the record and answers the first run's
// message and unread count, and the call that sent it tells its own retry
// (not Repeated: the caller's follow-up runs) from a client's repeat. The
// naive version — a check only when the client sent a key — stores a
// keyless message twice, counts it unread twice, publishes it twice and
// takes two tokens. Likewise, unread counts kept in each user's own key
// would be counted twice by such a retry; here the count lives with the
// history it counts, in the same script, and a read mark recounts it from
// the history.
//
// # Blocks
//
// A block is a member of the blocker's set, by canonical name, kept a
// year after the set's last change for a registered user (sign-out does
// not touch it: every key chatd writes expires, but a block outlives any
// session) and GuestTTL for a guest. CheckReach reads both directions in
// one round trip; the use case runs it before an open, a send, a typing
// event and a party invitation. Rooms need the set itself: a node keeps
// each connection's copy (realtime.Client.SetBlocks) to leave the
// blocked users' room messages and typing out. Block and Unblock change
// the set and publish it whole (NodeEventBlocks) in one script
// (blocks_change.lua), so every node sees the changes in their order and
// a lost or late event is healed by the next one or by a read of the set
// ([SMEMBERS]). The naive version — SADD, then a PUBLISH of the change
// from Go — lets two changes' events cross, and a node applying "bob
// added" after "bob removed" would hide bob from a user who unblocked
// him.
//
// # Lifetimes
//
// A conversation's keys live Config.TTL (30 days) after its last message,
// GuestTTL (24 hours) once a guest opened or wrote to it; a list and a
// guest's blocks likewise. Nothing of a direct message outlives its
// conversation.
//
// [XADD]: https://redis.io/commands/xadd/
// [ZADD]: https://redis.io/commands/zadd/
// [PUBLISH]: https://redis.io/commands/publish/
// [SMEMBERS]: https://redis.io/commands/smembers/
package direct
