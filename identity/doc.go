// Package identity decides who may use a guest name: while a session holds
// a name, nobody else gets a token for it. Without it, POST /session mints a
// token for any name, also one whose owner is connected and holds a wallet.
// It also counts the WebSockets of each client address across all nodes
// (Conns), so one address cannot open more than limit.connections_per_ip.
//
// # What it owns
//
// One key per claimed name, in the user's unit (see keys.go):
//
//	chatd:{user:alice}:claim   STRING  the holder id, PX ttl
//
// and one key per client address with open WebSockets (see conns.go):
//
//	chatd:{ip:ip4-cb007107}:conns  ZSET  connection id -> lease end (ms), PX lease
//
// # One name, one holder
//
// A guest has no password: a token is the only proof that a request comes
// from the guest who took the name. So a name is held by exactly one holder
// id — minted by the POST /session that claimed it and carried in every
// token of that guest (the "hid" claim) — and a second POST /session for a
// held name is refused (ErrNameTaken) unless the request shows a live token
// of that same holder: that is the token-to-token handover by which the
// guest's second device or tab gets a session of its own. The claim stores
// the holder id, not a session id, so every operation stays a single-key
// script with one owner to compare. A guest who lost every token gets the
// name back when the claim runs out (Config.TTL after the last request or
// open WebSocket) or after signing out (Release) elsewhere.
//
// # The Redis pattern
//
// The lock's: a lease with an owner token. Claim is [SET] NX PX with the
// session id as the owner (or, for the session that holds it already, a
// renewal — Claim is idempotent, so a retry whose reply was lost succeeds);
// Touch is a compare-and-[PEXPIRE] script ([GET], then PEXPIRE only when the
// value is the caller's session id); Release a compare-and-[DEL]; Holder a
// GET and a [PTTL] in one script. Each is one [EVALSHA]. Expiry is decided
// by Redis's clock only. Touch is called on every request but throttled on
// the node: a session's claim is renewed in Redis at most every TTL/4, so a
// chatty session costs Redis one script per TTL/4 per node, and an idle one
// loses its name between 3/4 TTL and TTL after its last request.
//
// # Why the naive versions fail
//
// GET the name, then SET it when free: two nodes handling two POST
// /session for "alice" at the same moment both read "free" and both write;
// both guests get a token for alice (TestConcurrentClaimsOneWinner runs 200
// rounds of three clients racing). SET NX decides in one command on the
// server. SETNX then EXPIRE: a node that dies between them leaves a claim
// that never expires, and the name is gone for good. An unconditional
// EXPIRE (or DEL) on activity: a session whose claim ran out, and whose name
// someone else claimed since, would extend (or delete) the new holder's
// claim; comparing the stored session id first, in one script, is what
// makes a lost name stay lost. A claim with no expiry fills Redis with every
// name ever used and locks a guest out after a lost token.
//
// # Failure behaviour
//
// If Redis loses its data (a restart without persistence, a failover to a
// replica that missed the last writes), claims vanish: a name can then be
// claimed by a new session, and the old holder's next Touch (within TTL/4)
// returns ErrNotHolder. Claim and Touch are bounded by the context's
// deadline like any go-redis call.
//
// # Unit and scale
//
// The claim key carries {user:NAME}, the unit of every key of that user, so
// claims spread over Redis Cluster shards with their users. Metrics
// (Config.Registerer): chatd_identity_calls_total{op, result}.
//
// # Connections per address (Conns)
//
// limit.connections_per_ip caps the WebSockets one client address holds
// across all nodes (an IPv6 /64 is one address, as in RateKey). Each
// connection is a lease: a member of its address's [ZSET] scored with the
// time its lease ends. Admit is one script: [ZREMRANGEBYSCORE] the ended
// leases, [ZCARD] below the cap (or the connection already a member) →
// [ZADD] now+lease and [PEXPIRE] the key for a lease. The node renews its
// connections every lease/3 in one pipeline (ZADD XX, so an ended lease is
// never brought back, and PEXPIRE) and releases one on close ([ZREM]).
//
// The naive version is a counter: [INCR] on connect, [DECR] on close. A node
// that dies (kill -9, OOM, a partition) never sends its DECRs, and its
// addresses stay over the cap for good — one crash behind a big NAT locks
// the whole network out. A SET of connection ids with a TTL on the key has
// the same flaw member by member while other connections keep the key
// alive. With leases nothing is permanent: a dead node's connections stop
// counting one lease (60 s by default) after its last renewal, and a key
// holds at most the cap plus the connections admitted with no cap, each
// gone a lease after its holder stops renewing; an address with no open
// connection has no key.
//
// # What is bounded
//
// Claims: one STRING per name used in the last TTL. Connection leases: per
// address at most max(cap, open connections) members, each ending a lease
// after its last renewal, and the key with its newest lease. Nothing this
// package writes lacks an expiry.
//
// [SET]: https://redis.io/commands/set/
// [GET]: https://redis.io/commands/get/
// [PEXPIRE]: https://redis.io/commands/pexpire/
// [DEL]: https://redis.io/commands/del/
// [PTTL]: https://redis.io/commands/pttl/
// [EVALSHA]: https://redis.io/commands/evalsha/
// [ZSET]: https://redis.io/docs/latest/develop/data-types/sorted-sets/
// [ZREMRANGEBYSCORE]: https://redis.io/commands/zremrangebyscore/
// [ZCARD]: https://redis.io/commands/zcard/
// [ZADD]: https://redis.io/commands/zadd/
// [ZREM]: https://redis.io/commands/zrem/
// [INCR]: https://redis.io/commands/incr/
// [DECR]: https://redis.io/commands/decr/
package identity
