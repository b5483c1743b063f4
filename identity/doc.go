// Package identity decides who may use a guest name: while a guest holds
// a name, nobody else gets a token for it. Without it, POST /session mints a
// token for any name, also one whose owner is connected and holds a wallet.
// It also counts the WebSockets of each client address across all nodes
// (Conns), so one address cannot open more than limit.connections_per_ip.
//
// # What it owns
//
// Per name, in the user's unit (see keys.go), NAME being the canonical
// form (names.Canonical: "Misc1", "MISC1" and "misc1" are one name):
//
//	chatd:{user:misc1}:claim    STRING  the holder id, PX ttl
//	chatd:{user:misc1}:revoked  ZSET    signed-out holder -> token expiry (unix ms),
//	                                    PEXPIREAT its latest expiry
//
// the channel chatd:identity:events, on which every sign-out and every
// fresh claim is published (Event), and one key per client address with
// open WebSockets, with its mark (see conns.go and conns_admit.lua):
//
//	chatd:{ip:ip4-cb007107}:conns      ZSET    connection id -> lease end (ms), PX lease
//	chatd:{ip:ip4-cb007107}:connsmark  STRING  "<until ms> <live runs>": what the last
//	                                           full count of the leases found, PX keep
//
// An admission counts the address's leases under its cap. With the live
// runs known, a live run's lease counts however old (its node does not
// renew it), so that count is not a ZCOUNT of scores but a read of every
// lease, O(the address's connections): 4.5 ms of Redis at 6,000, for each
// admission, from one carrier's NAT or one proxy. The mark makes it O(log
// n): while the live runs are the ones it names and its until has not
// come, every lease in the ZSET counts, and ZCARD is the count; the full
// read is done again once per change of the runs or of the leases that
// count by their end, not once per admission.
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
// the holder id, so every operation is a script on one slot with one owner
// to compare. The name is compared in its canonical form, so that nobody
// can pass for "Misc1" as "MISC1"; the form the guest typed is the token's,
// for display.
//
// # The Redis pattern: a lease with an owner, that heals
//
// The lock's: a lease with an owner token, each operation one [EVALSHA] on
// the user's slot. Claim is [SET] NX PX (or, for the holder that has it
// already, a renewal: Claim is idempotent) and [PUBLISH]es "claimed".
// Admit, called on every request and WebSocket open of a guest token,
// renews the holder's claim ([GET], [PEXPIRE]) — and when the name is free
// takes it back for the holder (SET NX PX, and "claimed"): a Redis that
// lost its data, or a claim that ran out while nobody wanted the name,
// costs nobody their session. Only a name another holder has now is
// refused (ErrNotHolder), and a holder that signed out (ErrSignedOut,
// [ZSCORE] of the revoked set). Release is compare-and-[DEL] of the claim
// plus the revocation: [ZADD] GT holder → token expiry, [ZREMRANGEBYSCORE]
// of the ended ones, [PEXPIREAT] the set to its latest expiry (no per-field
// hash TTL, so it runs on Redis 7.0), and [PUBLISH] "signed_out" — one
// script, so a sign-out is never half done. Holder is a GET and a [PTTL] in
// one script. Expiry is decided by Redis's clock; revocations compare the
// token's expiry with the node's clock.
//
// # Every node at once
//
// Each node's Registry subscribes (Start) to the events channel through the
// node's bus. On "signed_out" it remembers the revocation and forgets what
// it cached of the holder; on "claimed" it forgets every other holder of
// the name; either way it calls Config.OnEnded for the holders whose
// session ended, so the core closes their WebSockets (4000) on every node,
// not only on the one that saw the sign-out.
//
// Admit is throttled on the node: an admission Redis confirmed less than
// TTL/4 ago is answered from memory, so a chatty guest costs Redis one
// script per TTL/4 per node, and an idle one keeps its name between 3/4 TTL
// and TTL after its last request. The cache can never make a node accept a
// token Redis refuses for longer than it takes the node to hear about it:
// it is used only while the bus is Ready (its canary came back within 3 ×
// its CanaryEvery), dropped whole on every resubscription (events may have
// been lost), dropped per user on every event, and not filled by an Admit
// during whose round trip any event arrived. The window that remains,
// exactly: between the script of a Release (or a claim that took a name
// over) running in Redis and its event reaching a node — one pub/sub hop,
// a millisecond on a LAN — that node may still accept the ended holder
// from its cache; and when a node's pub/sub connection breaks, events
// published before the bus notices (it stops being Ready at most 3 ×
// CanaryEvery after the last canary came back, 3 s by default) are missed
// and the cache is still trusted until then. A node that is not started
// asks Redis on every Admit.
//
// # Surviving a Redis that lost its data
//
// Claims heal by themselves (Admit takes a free name back), but a stranger
// could take a name in the moment between the loss and its holder's next
// request, and a signed-out holder's token would heal too. So each
// Registry remembers, in bounded memory (Config.MaxAdmits and
// Config.MaxRevocations, 100,000 each by default, oldest evicted and
// counted in chatd_identity_memory_evictions_total): the revocations it
// made or heard of, until each token expires — Admit checks them first,
// with no Redis call — and the holders it saw hold a name. After every
// resubscription of its bus (a reconnect, which an empty restart is) it
// writes back, in pipelines of [EVALSHA] (internal/redisx's Pipelined), every
// revocation still in force (idempotent), then every claim it saw held for
// what that claim had left by its reckoning (TTL after the last renewal it
// saw, never past the token's expiry), with SET NX: a name somebody else
// has now is left alone, and the holder's session ends here (OnEnded). So
// the rightful guests keep their names, and a guest that signed out before
// an empty restart stays out on every node that heard the sign-out. Plainly
// what it does not cover: a node started after the loss that never heard
// the sign-out learns it only from Redis — from a revocation another node
// wrote back; if every node that heard it restarted as well (or evicted
// it), the sign-out is forgotten and the token is good again until it
// expires. And a name whose holder no running node remembers is free
// until that holder's next Admit takes it back (or a stranger claims it
// first).
//
// # Why the naive versions fail
//
// GET the name, then SET it when free: two nodes handling two POST
// /session for "alice" at the same moment both read "free" and both write;
// both guests get a token for alice (TestConcurrentClaimsOneWinner runs 200
// rounds of three clients racing). SET NX decides in one command on the
// server. SETNX then EXPIRE: a node that dies between them leaves a claim
// that never expires, and the name is gone for good. An unconditional
// EXPIRE (or DEL) on activity: a holder whose claim ran out, and whose name
// someone else claimed since, would extend (or delete) the new holder's
// claim; comparing the stored holder first, in one script, is what makes a
// lost name stay lost. Refusing every token whose claim is missing (what
// this package did before) logs every guest out when Redis loses its data;
// taking a missing claim back without revocations lets a signed-out token
// in again. A node-local throttle cache without pub/sub accepts a
// signed-out token on every other node until the cache runs out; one kept
// while the subscription is down accepts what it did not hear. A claim
// with no expiry fills Redis with every name ever used and locks a guest
// out after a lost token. Case-sensitive names let "MISC1" impersonate
// "Misc1".
//
// # Failure behaviour
//
// Redis down: Claim, Admit and Release return the Redis error (the caller
// answers 503); a Release that failed still refuses the holder on this
// node, and is to be repeated (it is idempotent). Redis empty after a
// restart: see above. Every call is bounded by the context's deadline like
// any go-redis call.
//
// # Unit and scale
//
// The claim and revoked keys carry {user:NAME}, the unit of every key of
// that user, so claims spread over Redis Cluster shards with their users.
// The events channel is one classic channel for all nodes (a sign-out
// must reach every node, whichever holds the guest's sockets); its rate is
// that of sign-outs and new guests, not of requests. Metrics
// (Config.Registerer): chatd_identity_calls_total{op, result},
// chatd_identity_events_total{type},
// chatd_identity_memory_evictions_total{memory}.
//
// # Connections per address (Conns)
//
// limit.connections_per_ip caps the WebSockets one client address holds
// across all nodes (an IPv6 /64 is one address, as in RateKey). Each
// connection is a lease: a member of its address's [ZSET] scored with the
// time its lease ends. Admit is one script: drop the leases that count no
// more, count the rest below the cap (or the connection already a member)
// → [ZADD] now+lease and [PEXPIRE] the key. A lease counts while it has
// not ended, or — when the caller gives the runs of the live nodes
// (ConnsConfig.Live, from the node registry's heartbeats) — while the run
// that wrote it is alive: a connection id is <run>-<n>. chatd gives the
// runs, so its nodes do not renew their connections' leases: an idle
// connection costs Redis nothing, and its address's key is kept with one
// [PEXPIRE] per address every Keep/3 (Refresh; the key lasts Keep, an
// hour). Without the runs (the registry did not answer lately) the node
// renews its connections every lease/3 in one pipeline (ZADD XX, so an
// ended lease is never brought back, and PEXPIRE). A connection is
// released on close ([ZREM]). A node that stalls past its registration
// (a heartbeat TTL, 30 s) may find its connections' ended leases dropped
// by another node's admission meanwhile: they go uncounted until they
// close, so the cap errs towards admitting, never towards refusing.
//
// The naive version is a counter: [INCR] on connect, [DECR] on close. A node
// that dies (kill -9, OOM, a partition) never sends its DECRs, and its
// addresses stay over the cap for good — one crash behind a big NAT locks
// the whole network out. A SET of connection ids with a TTL on the key has
// the same flaw member by member while other connections keep the key
// alive. With leases nothing is permanent: a dead node's connections stop
// counting when its run leaves the registry (a heartbeat TTL, 30 s), or
// one lease (60 s by default) after its last renewal, and a key
// holds at most the cap plus the connections admitted with no cap, each
// gone a lease after its holder stops renewing; an address with no open
// connection has no key.
//
// # What is bounded
//
// Claims: one STRING per name used in the last TTL. Revocations: per name
// one ZSET of the holders that signed out and whose tokens have not
// expired, trimmed on every write and gone with its latest expiry; in a
// node's memory at most Config.MaxRevocations, and Config.MaxAdmits
// admitted holders, each forgotten a TTL after its last renewal.
// Connection leases: per address at most max(cap, open connections)
// members, each counting until its lease ends or its run dies, and the key
// for Keep after its last admission or refresh. Nothing this
// package writes lacks an expiry.
//
// [SET]: https://redis.io/commands/set/
// [GET]: https://redis.io/commands/get/
// [PEXPIRE]: https://redis.io/commands/pexpire/
// [DEL]: https://redis.io/commands/del/
// [PTTL]: https://redis.io/commands/pttl/
// [EVALSHA]: https://redis.io/commands/evalsha/
// [PUBLISH]: https://redis.io/commands/publish/
// [ZSCORE]: https://redis.io/commands/zscore/
// [PEXPIREAT]: https://redis.io/commands/pexpireat/
// [ZSET]: https://redis.io/docs/latest/develop/data-types/sorted-sets/
// [ZREMRANGEBYSCORE]: https://redis.io/commands/zremrangebyscore/
// [ZADD]: https://redis.io/commands/zadd/
// [ZREM]: https://redis.io/commands/zrem/
// [INCR]: https://redis.io/commands/incr/
// [DECR]: https://redis.io/commands/decr/
//
// [ZCARD]: https://redis.io/commands/zcard/
package identity
