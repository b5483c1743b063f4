// Package presence owns who is online, on which node and in which rooms, when
// each user was last seen, and the registry of live chatd nodes.
//
// # Pattern: leases renewed in one pipeline, judged by expiry scores
//
// Each user has a sorted set of the nodes holding it, scored by lease expiry
// (unix ms), and a hash with last_seen and the rooms it is in per node:
//
//	chatd:{user:alice}:presence:nodes  ZSET  node -> expiry
//	chatd:{user:alice}:presence        HASH  last_seen, rooms:<node>
//
// Every node renews all of its connected users once per tick with Touch:
// five bare commands per user ([ZREMRANGEBYSCORE], [ZADD], [PEXPIRE], [HSET],
// [PEXPIRE]; nothing there needs a script's atomicity), all in ONE pipeline,
// plus one [ZADD] of every user into the global online index
// (chatd:presence:online, user -> expiry) that Online counts with [ZCOUNT]
// after trimming. A user is online while some node's score is in the future;
// Get reads both keys in one round trip ([ZRANGEBYSCORE], [HGETALL]) and drops
// the rooms of nodes that died holding the user. Offline is one [EVALSHA] of
// lua/presence_offline.lua, so a node removes only its own claim. The nodes set also carries a real TTL of one
// lease, so a cluster whose nodes all died leaves nothing behind, while the
// hash lives for Retention (30 days) so last_seen survives.
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
// offline while the second is still connected. The per-node scores make
// Offline(user, node) drop only that node's claim.
//
// # Hash-tag unit and scale
//
// A user's presence is one {user:U} unit, so the touch and offline scripts are
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
// [ZRANGEBYSCORE]: https://redis.io/commands/zrangebyscore/
// [ZREMRANGEBYSCORE]: https://redis.io/commands/zremrangebyscore/
package presence
