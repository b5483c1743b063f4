// Package moderation mutes, bans and kicks users, on every chatd node at
// once.
//
// # What it owns
//
// Per user, in the {mod:<user>} hash-tag unit, <user> being the canonical
// name (names.Canonical: a ban of "bob" bans "Bob" and "BOB", else a banned
// user comes back by changing one letter's case): the mute and the ban, each a
// STRING holding {"until", "reason"} with a TTL of the sanction's duration.
// Globally, in {mods:all}: for each kind a ZSET user → until (unix ms) and
// a HASH user → reason, for listing; and the channel
// prefix:moderation:events that carries every action to every node.
//
// # The pattern: the TTL key is the sanction; pub/sub acts everywhere
//
// A mute is a key that exists while the mute lasts ([SET] PX): Redis lifts
// it by itself when its time is up, with no sweeper and no "expired?" check
// at each read, and a restart of every node forgets nothing. Check reads
// the user's mute and ban with one [MGET] (both keys share the user's hash
// tag, so one command on one Cluster slot even then), cheap enough to run
// on every say, post and API call.
//
// Listing cannot scan for keys (a [SCAN] over a Cluster is a walk over
// every master): each sanction is also put in a ZSET scored by its end,
// which List trims of the ended ones ([ZREMRANGEBYSCORE]) and reads in one
// script. The key and the index live in different slots and are written in
// one pipelined round trip, not atomically; the key is what is enforced,
// the index only what is shown, and a failed write is returned so the admin
// repeats the call (every call is idempotent).
//
// Acting at once is pub/sub: after the write, the action is [PUBLISH]ed on
// one channel all nodes subscribe to (DecodeEvent); the node holding the
// user's WebSockets closes them (4001 kicked, 4003 banned). The event is
// published after the write, so a node that reacts by calling Check sees
// the new state.
//
// Why a node-local ban list fails: the admin's request reaches one node of
// several behind a load balancer without sticky sessions. A list in that
// node's memory does not stop the user's WebSocket on another node, nor
// their next request, which the balancer sends anywhere; it is lost when
// the node restarts; and each node would need its own timer to lift the
// ban at the right moment. Redis holds the one truth with its expiry, and
// pub/sub reaches the connections wherever they are.
//
// Check itself caches nothing: each Check is one round trip. Guard is the
// cache a node keeps in front of it (one per node): bounded, each entry
// fresh for GuardFresh, a user's entry dropped on every Event for that user
// (Guard.Receive, on Channel) and all of them when the subscription
// reconnects (Guard.Reset), so a say or a request costs no round trip and
// a change still acts within one pub/sub hop.
//
// Every action is written to the audit log (Config.Logger): action, user,
// duration, end and reason.
//
// [SET]: https://redis.io/commands/set/
// [MGET]: https://redis.io/commands/mget/
// [SCAN]: https://redis.io/commands/scan/
// [ZREMRANGEBYSCORE]: https://redis.io/commands/zremrangebyscore/
// [PUBLISH]: https://redis.io/commands/publish/
package moderation
