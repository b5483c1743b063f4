// Package presence owns who is online, on which node and in which rooms, when
// each user was last seen, and the registry of live chatd nodes.
//
// # Pattern: claims that live with their node's lease
//
// Each user is one hash: per node N holding the user, "node:N" (the claim's
// expiry, unix ms), "run:N" (the process that wrote it), "rooms:N" (JSON
// array) and "conns:N" (JSON array), and "last_seen":
//
//	chatd:{user:alice}:presence  HASH  node:<N>, run:<N>, rooms:<N>, conns:<N>, last_seen
//
// Nodes register with Heartbeat every few seconds: one script writes the
// node's JSON into chatd:{nodes:registry}:info, its expiry into
// chatd:{nodes:registry}:beats and its run (a random id per process) into
// chatd:{nodes:registry}:runs, and answers whether this run was registered
// live before (Beat.Fresh) and the runs of the live nodes; it drops the
// expired ones, as Nodes does before it returns the rest. A node's JSON
// lists its Features: what its version does that an older one does not
// understand, to rely on only while every live node lists it. The beat
// answers which of them every live node lists (Beat.Shared), so two
// versions work side by side during a rolling upgrade and following the
// registry costs no round trip of its own.
//
// A node whose Presence has a run (Config.Run) writes a user's claim with
// Touch when the user's rooms or connections change (an [HSET] and a
// [PEXPIRE], pipelined), and not again while the user idles: the claim
// counts exactly while the registry shows run "run:N" beating for node N
// (its "node:N" expiry, an hour ahead, is for a node of an older chatd
// during a rolling upgrade, which judges claims by it alone). So Get is
// one [HGETALL] plus one round trip to the registry ([ZMSCORE] of the
// beats and [HMGET] of the runs), and drops with [HDEL] the claims of
// runs that are gone. A node that dies takes its users offline one TTL
// later, when its beats stop, without anyone deleting anything; a node
// restarted under the same id is a new run, so the dead run's claims do
// not come back with it. Every tick the node keeps a third of its users,
// and those new since the last tick, in the global online index
// (chatd:presence:online, user -> expiry; Online counts it with [ZCOUNT]
// after trimming with [ZREMRANGEBYSCORE]) with KeepOnline: one [ZADD] per
// 1,000 users, each entry living OnlineTTL (7/3 of the TTL), so each user
// is written once per TTL and survives one lost write. A heartbeat that
// comes back Fresh (the node's first, one after a stall of a TTL, or a
// Redis that lost its data) makes the node Touch every user again; a slow
// rotation rewrites each user every half hour in case a write was lost.
// Offline is one
// [EVALSHA] of lua/presence_offline.lua, which removes only that node's
// claim. The hash's real TTL is Retention (30 days), renewed by every
// Touch and Offline, so last_seen survives the claim and then goes. A
// guest's record (UserState.Guest; Touch marks the hash with a guest
// field, which Offline reads) is kept GuestRetention (24 hours) instead:
// a guest who never comes back leaves no record after a day, even when no
// node is left to clean up after it.
// Without a run, a claim lives TTL after its Touch and the node renews all
// its users every tick, as before.
//
// # Why the naive versions fail
//
// "SET online:alice 1 on connect, DEL on disconnect" leaves a killed node's
// users online forever: the DEL never comes. Giving each user a TTL key fixes
// that, but then every idle user costs Redis a write per tick: renewed
// in one pipeline it is one round trip, yet still two commands per user
// per tick, 4,000 commands a second for 20,000 idle users at a 10 s tick
// (measured: chatbench's conns scenario). Tying the claims to the node's
// own lease makes idle users cost one ZADD argument each per TTL (a
// moving score: the member leaves the index's skip list and comes back,
// so even that is what an idle node's Redis CPU mostly was while every
// user was written every tick). A
// single "node" field per user
// breaks with two tabs on two nodes: the first tab to close marks the user
// offline while the second is still connected. The per-node claims make
// Offline(user, node) drop only that node's own.
//
// # Hash-tag unit and scale
//
// A user's presence is one key of the {user:U} unit, so the offline script is
// atomic on one Cluster slot and users spread evenly over the shards. The
// global online index and the node registry are single keys, each on one
// shard: the index takes one [ZADD] per 1,000 users per node per TTL, which
// is the price of an O(log n) global count.
//
// [EVALSHA]: https://redis.io/commands/evalsha/
// [ZADD]: https://redis.io/commands/zadd/
// [PEXPIRE]: https://redis.io/commands/pexpire/
// [HSET]: https://redis.io/commands/hset/
// [HGETALL]: https://redis.io/commands/hgetall/
// [ZCOUNT]: https://redis.io/commands/zcount/
// [ZREMRANGEBYSCORE]: https://redis.io/commands/zremrangebyscore/
// [HDEL]: https://redis.io/commands/hdel/
// [ZMSCORE]: https://redis.io/commands/zmscore/
// [HMGET]: https://redis.io/commands/hmget/
package presence
