// Package ratelimit limits how many messages a user may send per second
// across all nodes: one token bucket per user, kept in Redis.
//
// # What it owns
//
// One key per active user, prefix:{user:U}:bucket, a [STRING] "<tokens> <at
// ms>" (tokens left, a float; the time of the last refill) with a TTL.
// It lives in the user's unit {user:U}, so a Redis Cluster spreads buckets
// over every shard by user and a check never crosses slots.
//
// # The Redis pattern
//
// A token bucket checked and updated by one Lua script ([EVALSHA]): read
// the bucket, refill it for the time elapsed at the current rate, take a
// token if there is one and [SET] it back with PX for as long as it takes
// to fill up again (a full bucket and no bucket mean the same, so idle
// users cost no memory). The read is itself a write: SET NX GET writes a
// missing bucket less the token, which is right whatever the rate, and
// answers a bucket that is there, which is then refilled and written
// again (or, empty, left alone). Most users' buckets have filled up and
// expired by their next message, so most takes are one command, not a
// [GET] and a SET. The arithmetic is lua/bucket_lib.lua, which the send
// scripts of rooms and direct prepend too (BucketLua): one bucket.
// The rate is read from a live function on every check, so a change of the
// rate.messages_per_second setting applies to the next message; the burst
// is max(1, rate), as docs/PROTOCOL.md says, so a rate below one still lets
// one message through and then one per 1/rate seconds.
// Config.Burst, also read live, sets the capacity apart from the rate: a cap
// of N per minute is a Limiter of rate N/60 and burst N (N at once, then one
// every 60/N seconds), a bucket that never holds more than N tokens where a
// fixed per-minute window would let 2N through across its boundary. Give
// each such limiter a Prefix of its own: the bucket key is per user, not per
// limiter.
//
// # Refusing locally while a bucket is known empty
//
// A flood is mostly refusals, and asking Redis for each one makes the
// flooder cost Redis one script per message it is refused. But once the
// script said "empty, next token in r", nobody can make the bucket fill
// faster than its rate: until now+r every node's check would be refused
// too. So the Limiter remembers that answer (a bounded map, Config.MaxEmpty
// keys, each forgotten at its refill time) and refuses the key from memory
// until then, with the retry-after that is left, without a round trip:
// 2,000 refused calls on one empty bucket cost Redis no script
// (TestFloodOnAnEmptyBucketIsRefusedLocally counts them with INFO
// commandstats). The memory is bypassed when the rate or burst in force
// changed since Redis answered (a live setting applies at once) and when
// the clock went back; a raised rate is then not delayed, and nothing is
// ever admitted from memory — only refused. chatd_ratelimit_refusals_total
// {source="local"|"redis"} tells the two apart.
//
// # A sliding window, for "N per minute" meant exactly
//
// A bucket of N refilling at N/60 lets N through at once and N more over
// the next minute: 2N in 60 s. Config.Window makes a Limiter a sliding
// window instead (lua/window_take.lua): a [ZSET] per key of the events
// admitted, scored by their time; one script drops those older than the
// window ([ZREMRANGEBYSCORE]), admits the event if fewer than N are left
// ([ZCARD], [ZADD]) and sets the key to expire with the window. Any window
// of that length holds at most N, on every node; a key holds at most N
// members and lives one window after its last admission.
//
// # What is bounded
//
// In each Limiter, at most Config.MaxEmpty known-empty keys (100,000 by
// default). In Redis, one small string per user (or per key such as identity.RateKey) that has
// spent tokens in the last burst/rate seconds plus a minute: the key expires
// once it would be full again, so the memory is that of the active callers,
// whatever they send.
//
// # Why the naive versions fail
//
// A per-node in-memory limiter lets a user send N times the rate by
// spreading connections over N nodes. A GET, compute, SET from the client
// races: two nodes read the same token count and both take the "last" token.
// INCR on a per-second window key is atomic but lets 2×rate through across a
// window boundary and cannot express fractional rates. The script does the
// read, the arithmetic and the write in one atomic step on the server.
//
// # Clocks
//
// The caller's clock (Config.Now, in ms) is passed in ARGV rather than read
// with Redis [TIME] inside the script. That makes the limiter testable with
// an injected clock and keeps the script deterministic, at a price: nodes
// with skewed clocks disagree about "now". The script never moves the
// bucket's time backwards, so a node whose clock lags refills nothing until
// its clock passes it, and a node whose clock runs ahead by d grants at
// most d×rate tokens early (never more than the burst). With NTP-synced
// nodes (ms of skew) the error is a fraction of one token; reading TIME
// would remove it but tie the limiter to the server's clock in tests.
//
// [STRING]: https://redis.io/docs/latest/develop/data-types/strings/
// [EVALSHA]: https://redis.io/commands/evalsha/
// [GET]: https://redis.io/commands/get/
// [SET]: https://redis.io/commands/set/
// [TIME]: https://redis.io/commands/time/
// [ZSET]: https://redis.io/docs/latest/develop/data-types/sorted-sets/
// [ZREMRANGEBYSCORE]: https://redis.io/commands/zremrangebyscore/
// [ZCARD]: https://redis.io/commands/zcard/
// [ZADD]: https://redis.io/commands/zadd/
package ratelimit
