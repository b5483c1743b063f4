// Package rooms seats users in the numbered rooms of lobbies and carries
// their messages: a lobby ("general") is served by rooms "general-1",
// "general-2", … of room.capacity seats each, shared by every chatd node.
//
// New builds the package's parts over one Redis client, each a type that
// owns its keys (keys.go) and scripts (scripts.go), with the Redis pattern
// it shows described below under its name:
//
//   - Seats: joins, resumes, attachments, leases (per attachment, or per
//     node run and lobby), the sweeper, the cap on a
//     user's lobbies, lock-guarded room creation, and who sits where;
//   - Messages: says (rate limited, idempotent, durable on request),
//     history, removal, typing, the rooms' channels, the global counters;
//   - Lobbies: the listing of lobbies by seated users;
//   - ReadMarks: last-read ids and unread counts;
//   - Private: private rooms for a fixed set of users (a match).
//
// # What it owns
//
// Everything of one lobby, in the {lobby:L} hash-tag unit. Lobby-wide
// keys hold the seats of all its rooms: members (a ZSET user → room
// number), leases (a ZSET user → the seat's lease expiry), the attachments
// holding the seats (a ZSET "user id" → expiry, and a HASH user → their
// attachment ids, REST ones and those bound to a run marked), the leases
// of the runs holding attachments (a ZSET run → expiry) and their index (a
// ZSET "run user id"), the users held by a REST session (a
// ZSET user → room number), the index of its rooms, the room records (one
// HASH room number → JSON), the set of rooms that may have a free seat, the
// room counter, the stamp of the lobby's last count change and — kept there
// by the lock package — the lobby lock's fence. Per room: its message
// history (a Stream). Per user: their say bucket and last-read ids. Per
// call, for 30 s: the record of a leave's or a removal's answer, for the
// Redis client's retry of it. Outside it: a global index of the lobbies
// that have seats, for the sweeper; the lobby listing's index
// ({rooms:index}); and the global message and room counters.
//
// # Seats: atomic seat claims, a lock only for creation, leases
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
// contender for a lobby's lock; an uncontended join runs inline. The
// queued joins are seated by a drain that Seats own: Start gives it
// the run context the drains run under, Close stops new ones and waits for
// the running ones (cancelling them when its own context ends). Without
// Start, every join runs inline. The naive drain, a goroutine on the first
// caller's context made uncancellable, belongs to nobody: a shutdown
// neither waits for it nor stops it.
//
// What the lease adds that the lock does not: the lock only orders room
// creation. A node that dies (kill -9, a partition) never sends the leaves of
// its users, so their seats would stay taken forever. Each seat is therefore
// a lease (the leases ZSET scores each seat by its expiry), renewed by whoever
// holds it; a seat not renewed expires and is reaped by the next seat script
// of its lobby ([ZRANGEBYSCORE] of the leases up to now) or by the sweeper
// (Sweep, RunSweeper), which publishes "left" for it. A clean Leave frees
// the seat at once, once: its script records its answer under the call
// (leftKey), so that the Redis client's retry of a late call does not free
// a seat the user took again meanwhile. Lowering the capacity evicts
// nobody; later joins respect it. Holes left by leavers are filled first: a
// freed room goes back into the open set, which is walked lowest number
// first.
//
// # Seats: held by attachments
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
// A REST session's attachments are renewed by its polls (Renew: one
// script per lobby, a few bulk commands per thousand attachments and no
// decoding: [ZMSCORE] of the members, leases and attachments, then [ZADD]
// XX GT of the attachments and leases). An attachment is a ZSET member of
// its own, "user id" → expiry, so renewing one is a score, not a JSON map
// of the user's attachments decoded and encoded again. The user's list of
// attachment ids (a HASH field) changes only on attach, detach and reap.
// Expired attachments of seats that live on are dropped by every renewal
// and sweep ([ZRANGEBYSCORE] of the attachments up to now, O(log N) when
// there is none). The lobby also keeps the users held by a REST
// attachment, scored by their room, maintained on attach, detach, purge
// and reap, so that a say learns in O(log N) ([ZCOUNT] n n) whether its
// room has REST members to mark (SendResult.HasREST).
//
// # Seats: attachments that live with their node's run
//
// A WebSocket lives on one node's process, its run (Attach.Run), and so
// does its attachment: it is bound to the run and lives while the run's
// lease in the lobby does (a ZSET run → expiry, one member per node with
// connections there), next to an index of each run's attachments (a ZSET
// "run user id", all scored 0, so [ZRANGEBYLEX] and [ZLEXCOUNT] find a
// run's). A node keeps all its connections with KeepRun: per lobby and
// tick one script that checks the run's lease is live and that Redis holds
// as many of the run's attachments as the node has ([ZSCORE],
// [ZLEXCOUNT]), then extends the lease ([ZADD] GT): O(log N) per lobby,
// whatever its number of idle users. The attachments' own expiries, and
// their seats' leases, are a hold of RunHoldLeases leases, renewed one by
// one as above every third of the hold, 5 minutes at the default lease
// (which also reports the lost ones and ends the run's attachments it no
// longer lists, a detach that failed, once they are a lease old). When a run's lease in a lobby ends — its
// node was killed or partitioned, or paused past the lease — the first
// seat script of the lobby to run (every one starts with it; the sweeper
// comes within a second, the index giving the run's expiry as the lobby's
// due time) ends the run's attachments at once and sets each seat's lease
// to its latest remaining attachment's, or to now, so that the seats only
// they held are reaped as usual, "left" published: a dead node's seats come
// back one lease after its last tick, as before. A paused node that comes
// back finds its run's lease gone: KeepRun renews one by one, reports
// every attachment lost, and the connections take their seats back
// (Reclaim) or are told. A second connection, on a live run or a REST
// session, keeps the seat; a reconnect attaches afresh.
//
// The naive renewal, every attachment extended every tick, costs O(users)
// for users that do nothing: three quarters of an idle node's Redis CPU
// (issue #42, BENCHMARKS.md). A bare long lease instead, with no renewal,
// costs nothing idle but strands a dead node's seats for that long: users
// shown present for minutes, and a full room kept full by nobody. The run
// lease is what the node registry of package presence does for a user's
// presence claims, kept per lobby so that the reap is one script in the
// lobby's slot (a registry on another shard cannot be read by it).
//
// # Seats: a cap on the lobbies a user sits in
//
// Config.MaxLobbiesPerUser (limit.seats_per_user) bounds the lobbies a user
// holds seats in, checked by Join and Reclaim for a lobby the user has no
// seat in (ErrTooManyLobbies). The lobbies are in as many slots, so the
// check cannot be one script: each user has an index of candidate lobbies
// in their own slot ({user:U}:lobbies), and only the candidates where the
// seat data say the user holds a live seat count — verified in one
// pipeline, dead ones dropped by a compare-and-delete on their score — plus
// the reservations of joins still in flight. A join reserves its lobby in
// the same script that counts (so two joins of one user cannot both take
// the last place), confirms it once seated, and gives it back when it
// certainly failed; an unknown outcome ages out of "pending" after the
// longest a join may take. A rejoin of a lobby the user sits in costs one
// extra round trip, a new lobby three (see cap.go). The naive check, by
// presence, lags behind the seats (three REST joins before any poll all
// pass it) and is skipped by a resume.
//
// # Seats: idle lobbies are forgotten
//
// Lobbies are created by joining them. Without care every lobby ever joined
// keeps its keys, and its entry in the sweeper's index, forever: 3,000
// lobbies joined once would be swept every lease period. When a lobby's
// last seat goes (leave, detach, reap), the script gives every lobby-wide
// key — rooms, records, counters — one and the same expiry, Config.IdleTTL
// from the server's clock ([PEXPIREAT]), and the lobby leaves the sweeper's
// index; the seat that wakes it removes them ([PERSIST]) and puts it back.
//
// A room's history is not among them: a seat script does not know, in its
// KEYS, the histories of the rooms it may touch. Each history carries its
// own TTL instead, Config.IdleTTL from the last send in the room or the
// last renewal of an attachment there ([PEXPIRE]; Renew passes the
// histories of the rooms it renews in KEYS, each at most once per
// IdleTTL/48 per node: a PEXPIRE per room per tick bought nothing against
// a TTL of a day; a send refreshes it as seldom, per room per node, and
// always when its XADD had to create the stream, so no history lives
// without a TTL). A history therefore lives
// while someone sits or talks in its room (a room nobody sits in loses its
// history IdleTTL after its last use, even in a busy lobby), and never
// outlives the lobby's idle expiry: it is refreshed only by a script that
// found a live seat in the lobby, so its last refresh comes before the
// lobby's last seat went, and both expiries count IdleTTL on the same
// server clock. That is the invariant that matters: the room counter must
// never go back while a room record or history with a higher number
// exists, or a new room would take over an old one's history. Records
// expire with the counter; histories no later. (A backwards step of the
// server's clock between a history's last refresh and the lobby's retiring
// could let the history outlive the counter by that step.) The index is outside the
// lobby's slot, so leaving it cannot be atomic with the script: the lobby
// is removed first and its users are looked at after; a seat taken in
// between is seen then, or its own registration comes later still.
//
// # Private: rooms for a fixed set of users
//
// Private.Create makes room 1 of a lobby of its own for a fixed set of
// users (a matchmaking match), in one script (lua/room_private.lua): the
// users are seated at once, each seat with a lease ending when the
// reservation does and no attachment. A user takes their seat with
// Reclaim, which attaches and from then on keeps it like any other seat; a
// seat nobody attached to is reaped when its lease ends, by the lobby's
// next seat script or the sweeper, with a "left" event. The lobby's
// records HASH holds the users under the field "private" (a key every seat
// script already has in KEYS): seat_claim.lua refuses a lobby join there
// and a claim of the room by anyone else (ErrPrivateRoom), and lobby_count
// never indexes the lobby, so the listing never shows it. The naive
// version, a room of a public lobby with seats taken for its players, is
// joined by the next stranger who joins that lobby once a seat is freed.
// Players reads that field (one HGET): the one rule of who may read a
// private room — its players and the admins — is applied on top of it by
// the chat use case (realtime/chat: Chat.CanSee), for history, details, listing, read
// marks and presence alike.
//
// Grant and Revoke (the server API's) change that field in one script
// (lua/room_grant.lua: [HGET], [HSET]): a user let in claims the room's
// seat like a player; one taken out can no longer, and Revoke then frees
// their seat (seat_release.lua, a "left" event). The users the room was
// made with move to the field "made" at the first change, which
// room_private.lua compares a retry of Create with: the naive version,
// comparing with "private", answers the matchmaker's retry ErrLobbyTaken
// once a spectator was let in.
//
// # Lobbies: a listing written after the script, newest stamp wins
//
// Lobbies.List lists lobbies by seated users from one global ZSET (lobby →
// minus its seated users, so [ZRANGE] gives the most seated first, ties by
// name) with a HASH of each lobby's rooms. The naive version has the seat script
// [ZADD] the global key; on Redis Cluster that key lives in another slot and
// the script fails with CROSSSLOT. So each seat script returns the lobby's
// count (users and rooms, [ZCARD] each) and, when it changed, a stamp from the
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
// # Messages: one script per say
//
// Messages.Send: one script checks the sender's seat, takes a token from
// the sender's say bucket, appends to the room's history ([XADD] MAXLEN ~
// HistoryMax) and [PUBLISH]es the event on the room's channel ([SPUBLISH]
// with Config.ShardedPubSub), so ids on the channel come in history order,
// a message is stored and published together or not at all, and a say is
// one round trip. The say bucket is a token bucket per user per lobby
// ({lobby:L}:sayrate:<user>, expiring when it would be full again), not per
// user: a per-user key would live in another Cluster slot than the room and
// need a second script, in series, before the send. A refused say stores,
// publishes and counts nothing. The message id is the stream id, zero-padded so ids sort as strings. History
// reads with [XRANGE] from the resume id itself, inclusive: when that id is
// gone (trimmed, or Redis lost its data), ErrResumeGap says so instead of
// silently skipping messages. Seat, leave and reap scripts publish
// "presence" events on the same channel; every event is JSON exactly as the
// WebSocket frame, so a node forwards it verbatim. Pub/sub delivers only to
// whoever is subscribed and connected at that moment: the history, not the
// channel, is the record a subscriber fills gaps from.
//
// # Messages: one round trip for the says of many callers
//
// Each WebSocket connection has its own say worker, and a user in a room
// of 50 says once every few seconds, so the naive SendMany — a pipeline per
// call — made every say a round trip of its own and a script call of its
// own (EVALSHA, its 7 keys and 17 arguments), on one of many pooled
// connections: Redis's cost per say was its per-call and per-read cost,
// 3–4 × a bare PUBLISH, whatever the script did inside. SendMany is a group
// commit instead, node-wide (one Messages per node): a call that finds no
// commit in flight starts the node's committer, which sends its says at
// once; calls that come in while a commit is in flight wait and go out
// together in the next, which the committer sends as soon as the last is
// answered, and it ends when none wait — no timer, no added latency on an
// idle node, and the busier the node, the more says per round trip. (The
// first of the waiting calls used to run the next commit itself: that
// hand-over made the next commit wait for a CPU, and doubled the time the
// answered callers waited for one on a busy node.)
// A commit is one pipeline with one message_send.lua call per lobby (at
// most 64 says each, looped over in the script: all of a lobby's keys
// share its hash tag, so on Redis Cluster that is one script on one
// shard). On a Redis that is not a Cluster, where a script may touch any
// key, that script also claims the keyed says' keys and counts the says,
// and the commit is one round trip and one script call per lobby: a say
// on a quiet node costs Redis one EVALSHA, about 2 × a bare PUBLISH
// (BenchmarkSendConcurrent/serial). On a Cluster the claims go first
// ([SET] NX GET each, in the user's slot: one round trip, only when there
// are any), and the pipeline carries one call of the counter's script. Calls are taken in arrival order and each call's says
// in its order, so a call's says are stored in order, and a caller's next
// call — after this one returned — comes after them. A say the script
// refuses does not stop the next one; a Redis error reply to a script call
// of several says fails all of them and is not taken as "not sent" (the
// script may have stored the first ones). chatd_rooms_send_commit_says
// shows says per commit, chatd_rooms_send_waiting_calls the calls waiting,
// and chatd_rooms_send_seconds how long a call took (its wait and its
// commit).
//
// A group commit shares a script call only among the says that came
// during the last round trip: on a node whose round trips are short next
// to the gaps between says (a few says a millisecond), most commits still
// carry one or two, and each pays a script call's cost — Redis's read and
// write of it, the script's setup, the call's [INCRBY] — for them alone.
// Config.SendWindow trades a little latency for that: a commit that would
// start within the window of the last one waits out the rest of it, and
// carries what came meanwhile. A quiet node (its last commit a window
// ago) and a full script call's says (64) wait for nothing, so the window
// adds at most its length to a say, and only on a busy node.
//
// # Messages: idempotent says
//
// A read timeout does not mean a say was not stored. go-redis retries a
// pipeline whose answer did not come in time on a new connection; when the
// server was only slow (paused, busy), it runs both, and the say is stored
// and published twice. A client that re-sends after a reconnect does the
// same one level up. So a say may carry an idempotency key
// (SendRequest.Key, the sender's, say "<session id>:<ref>"): the send
// script looks it up first ({lobby:L}:said:<user>:<key>, [GET]) — before
// the seat check and the rate limit, since the say was applied and its
// answer stands — and answers the recorded message (same id and ts) without
// writing, publishing or taking a token; a key reused for another text or
// room is refused. A fresh say records its key in the same script as the
// [XADD] ([SET] PX Config.IdempotencyTTL), so the record exists exactly
// when the message does. The record names the call that stored it: the
// second run of one commit's pipeline is that say's answer, not a
// Duplicate. Keys are per lobby: the record must be in the lobby's slot.
// A key's first message is also claimed in the user's slot
// ({user:U}:said:<key>, one [SET] NX GET before the send on a Cluster; in
// the send script itself on a Redis that is not a Cluster, where the
// script runs alone: a [GET] first, and a [SET] PX once the say is stored
// or refused), so that the same key used for another room or text in
// another lobby is refused too.
//
// Claim records. On a Redis that is not a Cluster the claim can hold the
// record too (Messages.SetClaimRecords): the script writes the stored
// say's call, id and ts into the claim instead of a second key in the
// lobby, and the claim's [GET] answers a retry. A new key
// with a TTL is the dearest write of a say (the keyspace's and the
// expiries' tables each grow by an entry, and rehash): one a say instead
// of two. A node of an older version reads records in the lobby only, so
// a say recorded in its claim and retried there would be stored twice:
// the realtime node turns claim records on only while every live node in
// the registry lists FeatureClaimRecords, and off within a heartbeat of
// one that does not. The script reads records in both places while a free
// claim is no proof that the lobby holds no record (v0.1.0 claimed
// nothing, and this version claims without a record while the setting is
// off): until claim records have been on for twice IdempotencyTTL, when no
// record kept in the lobby can be left, or at once in a deployment whose
// Redis never stored a message (Messages.FollowClaimRecords: the nodes
// share the time in a mark, and a Redis without the global message
// counter holds no record of any version). Then a keyed say reads its
// claim only: 7 commands a say in the script (8 when the sender's say
// bucket is still there from the last say).
//
// On a Redis that is not a Cluster the send script counts the says it
// stores (one INCRBY per call, with the XADDs): a script run twice finds
// its records and counts nothing the second time. On a Cluster the global message counter
// lives in a slot of its own, so no send script can count its own
// message. The send pipeline adds the number of its says
// through a script that first sets a token of the call in the counter's
// slot (SET NX PX): a pipeline run twice counts once, on Cluster too, where
// go-redis retries only the commands of the node that failed. After the
// replies the says that were certainly not sent (refused, duplicates, Redis
// error replies) are taken back the same way, in a second round trip only
// then. The naive version, INCRBY in the pipeline, counts a retried
// pipeline twice; INCRBY after the replies costs every say a round trip,
// and counts nothing for a pipeline whose first run's answer was lost.
//
// # Messages: durability
//
// Redis replicates asynchronously, so a master that dies right after
// acking a send may take the message with it when its replica is promoted. With Config.Durability "replica" the send's pipeline ends with
// [WAIT] 1 <timeout> on the connection the scripts went out on (on Redis
// Cluster, routed to the room's master: WAIT names no key, and go-redis
// would pick any master) and a send no replica acknowledged returns
// ErrNotReplicated instead of an ack. The naive version — WAIT as its own
// call afterwards — runs on another pooled connection, whose own writes
// are none, and answers at once.
//
// A keyed say's retry is acked on the same terms: its earlier message may
// be on the master alone (that call answered ErrNotReplicated), so the
// Duplicate is answered ErrNotReplicated too until a replica holds it.
// Its script writes nothing new, and WAIT is documented to cover only
// writes made on its own connection: so under "replica" the replay
// rewrites its record as it is (SET KEEPTTL XX, flag d of
// message_send.lua), a write of this connection that replicates after the
// message, and the WAIT behind it covers that. (Redis 7.0 measurably
// covers other connections' writes too, after any command on the
// connection; chatd does not lean on it. The shop's replays do the same.)
//
// # ReadMarks: unread counts
//
// ReadMarks.MarkRead keeps each user's last-read id per room in
// {lobby:L}:read:<user> (room number → padded id; padded ids compare as
// strings in send order), moved forward only, by one script comparing ids; the key expires
// Config.IdleTTL after the last mark. Unread counts, per room, the history's
// entries after that id ([XRANGE] exclusive, COUNT 1,001, capped at 1,000)
// or [XLEN] when nothing was read, all rooms in one pipeline.
//
// # All parts: every key in KEYS
//
// A seat script chooses the room at run time (the lowest with a free seat,
// the rooms whose leases ran out), so it cannot be told that room's keys in
// advance. The naive layout — a seats ZSET and a REST set per room, whose
// names the script builds from a prefix passed in KEYS — works only while
// every key of the lobby sits on one node: during a Redis Cluster
// resharding, the slot's keys move one MIGRATE at a time, and a script
// whose declared keys are all still on the old master starts, writes, and
// then fails on the first key it built that has moved ("non local key"),
// leaving the lobby half changed. Redis checks only the declared keys
// before running a script; a script whose every key is in KEYS is refused
// whole (TRYAGAIN, ASK) while its keys are split, and go-redis retries it.
//
// So the seat data are lobby-wide keys: who sits where is one ZSET user →
// room number, a room's members are [ZRANGEBYSCORE] n n and its count
// [ZCOUNT] n n; the leases are one ZSET user → expiry, whose lowest score is
// the lobby's next expiry (no per-room due index); the REST members are
// one ZSET user → room number. The cost: a room's count is O(log N) in the
// lobby's seats instead of O(1) ([ZCARD] of the room's set), and a join's
// answer lists its room's members by score range and reads their leases
// ([ZMSCORE]) only while some seat of the lobby has expired unreaped. The
// package's benchmarks put a rejoin at 1.95× a trivial EVALSHA (1.83×
// before) and a new seat at 3.4× (3.2×); renewing 1,000 attachments at
// 2.3–2.5× 1,000 pipelined ZADDs (5.1–5.6× before). Only a room's history is
// per room: the scripts that touch one (send, remove, read marks, unread
// counts, renewal) are given it by Go, which knows the room. Channels are
// not keys; the scripts still build channel names.
//
// # All parts: a lobby lives on one shard
//
// All keys of a lobby share the {lobby:L} hash tag, so on Redis Cluster a
// lobby — its seats, rooms and every room's history and sends — is served by
// one master. That is what makes the seat claim and the send atomic; it also
// means one lobby's traffic cannot be spread over shards: a very busy lobby
// is bounded by one Redis core (tens of thousands of script calls a second),
// while many lobbies spread evenly. Split a hot lobby into several lobbies
// rather than expecting the cluster to split it. Classic pub/sub channels are
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
// [EVALSHA]: https://redis.io/commands/evalsha/
// [ZRANGE]: https://redis.io/commands/zrange/
// [ZCARD]: https://redis.io/commands/zcard/
// [ZADD]: https://redis.io/commands/zadd/
// [ZSCORE]: https://redis.io/commands/zscore/
// [ZRANGEBYLEX]: https://redis.io/commands/zrangebylex/
// [ZLEXCOUNT]: https://redis.io/commands/zlexcount/
// [SET]: https://redis.io/commands/set/
// [INCR]: https://redis.io/commands/incr/
// [GET]: https://redis.io/commands/get/
// [HSET]: https://redis.io/commands/hset/
// [XADD]: https://redis.io/commands/xadd/
// [XRANGE]: https://redis.io/commands/xrange/
// [PUBLISH]: https://redis.io/commands/publish/
// [SPUBLISH]: https://redis.io/commands/spublish/
// [WAIT]: https://redis.io/commands/wait/
// [ZMSCORE]: https://redis.io/commands/zmscore/
// [ZCOUNT]: https://redis.io/commands/zcount/
// [ZRANGEBYSCORE]: https://redis.io/commands/zrangebyscore/
// [PEXPIRE]: https://redis.io/commands/pexpire/
// [PEXPIREAT]: https://redis.io/commands/pexpireat/
// [PERSIST]: https://redis.io/commands/persist/
// [XLEN]: https://redis.io/commands/xlen/
package rooms
