// Package rooms seats users in the numbered rooms of lobbies and carries
// their messages: a lobby ("general") is served by rooms "general-1",
// "general-2", … of room.capacity seats each, shared by every chatd node.
//
// # What it owns
//
// Everything of one lobby, in the {lobby:L} hash-tag unit: the index of its
// rooms, the room records, each room's seats (a ZSET user → lease expiry),
// the user → room map, the attachments holding each seat (a HASH user →
// JSON {attachment id: [expiry, REST?]}), each room's set of users held by
// a REST session, the set of rooms that may have a free seat, the rooms'
// next-expiry index, the room counter, each room's message history (a
// Stream), each sender's say bucket, the stamp of the lobby's last count
// change, each user's last-read ids, and — kept there by the lock package —
// the lobby lock's fence. Outside it: a global index of the lobbies that
// have seats, for the sweeper; the lobby listing's index ({rooms:index});
// and the global message and room counters.
//
// # The pattern: atomic seat claims, a lock only for creation, leases
//
// A join is one Lua script ([EVALSHA]): if the user already holds a live
// seat, extend it and answer the same room; else reap the rooms whose
// leases are due, walk the rooms that may have a free seat lowest number
// first ([ZRANGE]), and take the first seat with [ZCARD] < capacity
// ([ZADD]). Capacity therefore holds with no lock at all: two nodes can never
// both take a room's last seat.
//
// Only when every room is full does a node take the lobby's lock (package
// lock, [SET] NX PX plus a fence [INCR]) and run the creation script, which
// checks the fence ([GET] fence == mine), looks for a free seat once more,
// and only then creates room seq = [INCR], writes its record ([HSET]) and
// seats the user — all in one script, so a join never leaves a half-created
// room, even when Redis goes away mid-call.
//
// Why not check-then-create? A node that reads "every room is full" and then
// creates a room races every other node that read the same: under a join
// storm each node creates its own room, and a lobby that needs one new room
// gets three half-empty ones. The lock makes one node the creator; the
// others back off and retry the seat claim, which finds the new room. The
// fence covers the holder that paused (GC, SIGSTOP, a slow network) past the
// lock's TTL while another node took the lock: its fence is no longer the
// latest, so its creation is refused and it retries from the seat claim.
// Because the creation script re-checks for a free seat atomically, even a
// stale holder could not overfill a room; the fence makes it fail loudly
// instead of acting on a lock it no longer holds.
//
// Joins to one lobby that reach one node while a seat script for it is
// running queue up and are seated together by the next script call, in
// arrival order (group commit). A join storm then costs a few script calls
// instead of one (plus lock polling) per join, and each node has at most one
// contender for a lobby's lock; an uncontended join runs inline.
//
// What the lease adds that the lock does not: the lock only orders room
// creation. A node that dies (kill -9, a partition) never sends the leaves of
// its users, so their seats would stay taken forever. Each seat is therefore
// a lease (score = expiry), renewed by whoever holds it; a seat not renewed
// expires and is reaped by the next join that meets it or by the sweeper
// (Sweep, RunSweeper), which publishes "left" for it. A clean Leave frees
// the seat at once. Lowering the capacity evicts nobody; later joins
// respect it. Holes left by leavers are filled first: a freed room goes back
// into the open set, which is walked lowest number first.
//
// # Seats are held by attachments
//
// A seat belongs to its user, but what keeps it is the user's presence: each
// WebSocket connection and each REST session of the user that is in the
// room is an attachment of the seat (Attach: an id the caller chooses, and
// its kind), recorded with a lease of its own. Join and Reclaim record the
// attachment in the same script that claims or keeps the seat (a join batch
// carries user, attachment, kind triples); the seat's lease is the latest of
// its attachments'. Renew extends attachments, never creates one: an
// attachment that is not recorded is reported lost and keeps nothing alive.
// Detach is a compare-and-delete of one attachment; only when no live
// attachment is left is the seat freed, exactly as by Leave. Reaping a seat
// removes its attachments.
//
// The naive version frees the seat when a connection closes. It fails as
// soon as the user has two ways in: the WebSocket of a user who also polls
// over REST closes, and the REST user is thrown out of the room; a second
// tab closes and takes the first one's seat; and during a rolling restart,
// the draining node's "leave" for a connection that already resumed on
// another node lands after the resume and frees the seat the new connection
// holds — the user is shown as gone while still there, and a stranger can
// take the seat. With attachments the draining node detaches only its own,
// whatever the order, and the seat stays while any other holds it.
//
// Each node renews all its attachments in one pipelined round trip per
// tick (Renew: one script per lobby, a few bulk commands per thousand
// attachments: [HMGET], [ZMSCORE], [HSET], [ZADD] XX GT). Each room also
// keeps the set of users held there by a REST attachment, maintained on
// attach, detach, renewal and reap, so that a say learns in O(1) ([SCARD])
// whether the room has REST members to mark (SendResult.HasREST).
//
// # Idle lobbies are forgotten
//
// Lobbies are created by joining them. Without care every lobby ever joined
// keeps its keys, and its entry in the sweeper's index, forever: 3,000
// lobbies joined once would be swept every lease period. When a lobby's
// last seat goes (leave, detach, reap), the script gives every key of the
// lobby — rooms, records, histories, counters — one and the same expiry,
// Config.IdleTTL from the server's clock ([PEXPIREAT]), and the lobby leaves
// the sweeper's index; the seat that wakes it removes them ([PERSIST]) and
// puts it back. One expiry for all matters: the room counter must never go
// back while a room record or history with a higher number exists, or a
// new room would take over an old one's history. The index is outside the
// lobby's slot, so leaving it cannot be atomic with the script: the lobby
// is removed first and its users are looked at after; a seat taken in
// between is seen then, or its own registration comes later still.
//
// # The lobby listing: an index written after the script, newest stamp wins
//
// Lobbies lists lobbies by seated users from one global ZSET (lobby → minus
// its seated users, so [ZRANGE] gives the most seated first, ties by name)
// with a HASH of each lobby's rooms. The naive version has the seat script
// [ZADD] the global key; on Redis Cluster that key lives in another slot and
// the script fails with CROSSSLOT. So each seat script returns the lobby's
// count (users [HLEN], rooms [ZCARD]) and, when it changed, a stamp from the
// lobby's own slot (max(server µs, last + 1) in {lobby:L}:ver), and Go copies
// it into the index right after the reply (lobbies_count.lua on the index's
// slot). The index keeps the newest stamp per lobby: two nodes whose copies
// arrive out of order cannot put an older count back, and a lobby that lost
// its last seat leaves a tombstone (10 minutes) so a late copy cannot bring
// it back as a ghost. The index lags a change by one round trip, and a copy
// that failed stays stale until the lobby's next change; every Renew
// therefore holds the counts it saw and sends them along with the next
// Renew's pipeline (no extra round trip), so a lost copy is repaired within
// a renewal period. A listing may be that far off; who may sit where is
// decided by the seat scripts, never by the index.
//
// # Unread counts
//
// MarkRead keeps each user's last-read id per room in {lobby:L}:read:<user>
// (room number → padded id; padded ids compare as strings in send order),
// moved forward only, by one script comparing ids; the key expires
// Config.IdleTTL after the last mark. Unread counts, per room, the history's
// entries after that id ([XRANGE] exclusive, COUNT 1,001, capped at 1,000)
// or [XLEN] when nothing was read, all rooms in one pipeline.
//
// Messages: one script checks the sender's seat, takes a token from the
// sender's say bucket, appends to the room's history ([XADD] MAXLEN ~
// HistoryMax) and [PUBLISH]es the event on the room's channel ([SPUBLISH]
// with Config.ShardedPubSub), so ids on the channel come in history order,
// a message is stored and published together or not at all, and a say is
// one round trip. The say bucket is a token bucket per user per lobby
// ({lobby:L}:rate:<user>, expiring when it would be full again), not per
// user: a per-user key would live in another Cluster slot than the room and
// need a second script, in series, before the send. A refused say stores,
// publishes and counts nothing. The
// message id is the stream id, zero-padded so ids sort as strings. History
// reads with [XRANGE] from the resume id itself, inclusive: when that id is
// gone (trimmed, or Redis lost its data), ErrResumeGap says so instead of
// silently skipping messages. Seat, leave and reap scripts publish
// "presence" events on the same channel; every event is JSON exactly as the
// WebSocket frame, so a node forwards it verbatim. Pub/sub delivers only to
// whoever is subscribed and connected at that moment: the history, not the
// channel, is the record a subscriber fills gaps from.
//
// # Scale: a lobby lives on one shard
//
// All keys of a lobby share the {lobby:L} hash tag, so on Redis Cluster a
// lobby — its seats, rooms and every room's history and sends — is served by
// one master. That is what makes the seat claim and the send atomic; it also
// means one lobby's traffic cannot be spread over shards: a very busy lobby
// is bounded by one Redis core (tens of thousands of script calls a second),
// while many lobbies spread evenly. Split a hot lobby into several lobbies
// rather than expecting the cluster to split it. The scripts that choose a
// room at run time get their key prefix in KEYS (the BullMQ way) and append
// the room number: the keys they build carry the same hash tag, so Cluster
// serves them from the declared slot. Classic pub/sub channels are
// cluster-wide (every message is broadcast to every node of the cluster);
// with Config.ShardedPubSub the events go out with SPUBLISH on the shard
// that owns the lobby's slot, for subscribers that SSUBSCRIBE there.
//
// Failure: with Redis down or out of memory every call returns the Redis
// error (web answers 503); the scripts write nothing before their first
// write succeeds, and Redis runs each to the end. If Redis loses its data,
// rooms are numbered from 1 again as users rejoin, and a History resume
// from an id that is gone returns ErrResumeGap.
//
// Durability: Redis replicates asynchronously, so a master that dies right
// after acking a send may take the message with it when its replica is
// promoted. With Config.Durability "replica" the send's pipeline ends with
// [WAIT] 1 <timeout> on the connection the scripts went out on (on Redis
// Cluster, routed to the room's master: WAIT names no key, and go-redis
// would pick any master) and a send no replica acknowledged returns
// ErrNotReplicated instead of an ack. The naive version — WAIT as its own
// call afterwards — runs on another pooled connection, whose own writes
// are none, and answers at once.
//
// [EVALSHA]: https://redis.io/commands/evalsha/
// [ZRANGE]: https://redis.io/commands/zrange/
// [ZCARD]: https://redis.io/commands/zcard/
// [ZADD]: https://redis.io/commands/zadd/
// [SET]: https://redis.io/commands/set/
// [INCR]: https://redis.io/commands/incr/
// [GET]: https://redis.io/commands/get/
// [HSET]: https://redis.io/commands/hset/
// [XADD]: https://redis.io/commands/xadd/
// [XRANGE]: https://redis.io/commands/xrange/
// [PUBLISH]: https://redis.io/commands/publish/
// [SPUBLISH]: https://redis.io/commands/spublish/
// [WAIT]: https://redis.io/commands/wait/
// [HMGET]: https://redis.io/commands/hmget/
// [ZMSCORE]: https://redis.io/commands/zmscore/
// [SCARD]: https://redis.io/commands/scard/
// [PEXPIREAT]: https://redis.io/commands/pexpireat/
// [PERSIST]: https://redis.io/commands/persist/
// [HLEN]: https://redis.io/commands/hlen/
// [XLEN]: https://redis.io/commands/xlen/
package rooms
