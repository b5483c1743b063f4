// Package settings holds chatd's live settings: operators change one once,
// and every node applies it within a round trip, checked against a typed
// registry, and a node that starts, restarts or loses Redis for a while still
// ends on the newest version.
//
// # What it owns
//
// Three names in one hash-tag unit, {settings:live}, so the write script
// runs on one Cluster slot (all settings live on one shard; they are a
// handful of fields written by hand, read from memory):
//
//	prefix:{settings:live}:values   HASH    key -> canonical JSON of a value set away from its default
//	prefix:{settings:live}:version  STRING  the version: INCR'd by every accepted write
//	prefix:{settings:live}:changes  channel one JSON change per write
//
// The registry (Defs) lists every setting of docs/PROTOCOL.md with its type,
// default, bounds and description; Validate refuses a wrong JSON type or an
// out-of-range value with a reason, and an unknown key, before anything
// touches Redis.
//
// # The Redis pattern
//
// Versioned state replicated by pub/sub, with a snapshot to close the gaps.
// A write is one Lua script: [HSET] (or [HDEL] for a reset), [INCR] the
// version, [PUBLISH] {"key","value","version","op"} as JSON — never a
// colon-split string, which a value holding ':' would break. Because the
// three happen atomically, version order is publish order.
//
// A node subscribes to the channel (through the node's bus) first, then
// reads the snapshot — [HGETALL] and [GET] of the version in one
// [MULTI]/EXEC — and from then on applies each change whose version is newer
// than the one its key holds. Reads (Int, Float, String) load an immutable
// map through an atomic pointer: no lock on the hot path.
//
// # Why a local map synced only by pub/sub drifts, and what closes each gap
//
//   - Lost messages. Redis pub/sub is fire-and-forget: a node whose
//     connection drops misses everything published until it is back, and
//     go-redis resubscribes silently. The bus reports the resubscription;
//     the Store then re-reads the snapshot. A change that arrives past a hole
//     in the versions is not applied but triggers the same reload, which
//     brings it with what was missing (so a node never shows a version
//     without every change before it); a slow periodic resync
//     (Config.Resync) catches what nothing signalled.
//   - The start-up race. Load-then-subscribe misses a change published
//     between the two; subscribe-then-load cannot, since the change is
//     either in the snapshot or on its way on the subscription. The version
//     sorts out which: a change already in the snapshot is not newer and is
//     dropped.
//   - Reordering. A snapshot read may answer after a newer change arrived on
//     the subscription, and messages can in principle be delivered late.
//     Each key remembers the version its value is as of; a snapshot or change
//     older than that is ignored, so a node never moves a key back to an
//     older value.
//
// One exception is deliberate: the version only grows while Redis keeps its
// data. When a snapshot shows a version below one Redis already confirmed,
// Redis lost its data (a restart without persistence, a failover to a stale
// replica); the Store then takes Redis' values as they are, since Redis is
// the master copy.
//
// # Wiring
//
// New, then Start with the node's bus before serving; Watch for the keys a
// component reacts to (read the value after Watch returns); Close at
// shutdown. Set and Reset serve the admin API: the change is applied on the
// writing node before they return.
//
// [HSET]: https://redis.io/commands/hset/
// [HDEL]: https://redis.io/commands/hdel/
// [INCR]: https://redis.io/commands/incr/
// [PUBLISH]: https://redis.io/commands/publish/
// [HGETALL]: https://redis.io/commands/hgetall/
// [GET]: https://redis.io/commands/get/
// [MULTI]: https://redis.io/commands/multi/
package settings
