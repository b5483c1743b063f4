// Package presence owns who is online, on which node and in which rooms, when
// each user was last seen, and the registry of live chatd nodes.
//
// # Pattern: leases renewed in one pipeline, judged by expiry
//
// Each user is one hash: per node N holding the user, "node:N" (the lease
// expiry, unix ms) and "rooms:N" (JSON array), and "last_seen":
//
//	chatd:{user:alice}:presence  HASH  node:<N>, rooms:<N>, last_seen
//
// Every node renews all of its connected users once per tick with Touch: an
// [HSET] and a [PEXPIRE] per user (nothing there needs a script's
// atomicity), all in ONE pipeline, plus one [ZADD] of every user into the
// global online index (chatd:presence:online, user -> expiry) that Online
// counts with [ZCOUNT] after trimming with [ZREMRANGEBYSCORE]. A user is
// online while some node's expiry is in the future, so a node that dies takes
// its users offline one TTL later without anyone deleting anything. Get is one
// [HGETALL], and drops the claims of dead nodes with [HDEL] when it finds some. Offline is
// one [EVALSHA] of lua/presence_offline.lua, which removes only that node's
// claim. The hash's real TTL is Retention (30 days), renewed by every Touch
// and Offline, so last_seen survives the lease and then goes.
//
// Nodes register the same way: Heartbeat writes the node's JSON into
// chatd:{nodes:registry}:info and its expiry into chatd:{nodes:registry}:beats;
// Nodes drops the expired ones and returns the rest, in one script each.
//
// # Why the naive version fails
//
// "SET online:alice 1 on connect, DEL on disconnect" leaves a killed node's
// users online forever: the DEL never comes. Giving each user a TTL key fixes
// that but, renewed with one command per user, a node of 10,000 users pays
// 10,000 round trips per tick; Touch pays one. A single "node" field per user
// breaks with two tabs on two nodes: the first tab to close marks the user
// offline while the second is still connected. The per-node claims make
// Offline(user, node) drop only that node's own.
//
// # Hash-tag unit and scale
//
// A user's presence is one key of the {user:U} unit, so the offline script is
// atomic on one Cluster slot and users spread evenly over the shards. The
// global online index and the node registry are single keys, each on one
// shard: the index takes one [ZADD] per node per tick (all the node's users
// in one command), which is the price of an O(log n) global count.
//
// [EVALSHA]: https://redis.io/commands/evalsha/
// [ZADD]: https://redis.io/commands/zadd/
// [PEXPIRE]: https://redis.io/commands/pexpire/
// [HSET]: https://redis.io/commands/hset/
// [HGETALL]: https://redis.io/commands/hgetall/
// [ZCOUNT]: https://redis.io/commands/zcount/
// [ZREMRANGEBYSCORE]: https://redis.io/commands/zremrangebyscore/
// [HDEL]: https://redis.io/commands/hdel/
package presence
