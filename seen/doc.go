// Package seen remembers, per user, which items (notices, announcements,
// rooms, game items) the user has already seen, in Redis, so that every node
// answers alike: "certainly unseen" or "maybe seen".
//
// # What it owns
//
// One bloom filter per user, kept as up to Config.Generations generations,
// each a Redis string bitmap and a small hash describing it:
//
//	chatd:{user:alice}:seen:0        string: the m bits of the generation in slot 0
//	chatd:{user:alice}:seen:0:meta   hash: g (generation number), m, k, c (capacity), n (count)
//
// Generation g lives in slot g mod Generations, so the keys of a user are
// known before any read and both scripts take them all in KEYS.
//
// # The Redis pattern
//
// A bloom filter on a bitmap. An item's k bit positions are those of
// github.com/bits-and-blooms/bloom/v3 — bloom.Locations(item, k), each
// modulo m, exactly what bloom.New(m, k) uses — computed on the node and sent
// to one Lua script per call ([EVALSHA]): Mark runs seen_mark.lua, which sets
// the bits in the current generation ([SETBIT], or for a bitmap of a few KB
// per item in the call, [GET], the bytes changed in Lua and one [SET]);
// Seen and Unseen run seen_check.lua, which tests them in every kept
// generation ([GETBIT], or one [GET] per small bitmap). Each generation
// stores its own m and k ([HMGET], [HSET]): it keeps the size it was made
// with when seen.capacity or seen.fp_rate change later. The node sends
// positions for the live settings' size; a generation of another size makes
// the script answer with its m and k, and the node sends again with those
// too — and keeps sending them along for ten minutes, so that after a
// settings change a call is still one round trip.
//
// Generations bound the false-positive rate for users who keep reading: a
// filter that only fills drifts towards answering "maybe seen" for
// everything. When the current generation has counted its capacity, the next
// item starts a new one ([DEL] of the oldest slot, sized by the settings of
// that moment) and checks look at all kept generations. Each of G
// generations is sized for the rate p' with 1-(1-p')^G = p, so G full
// generations checked together still err at rate p. Every write refreshes
// the current generation's TTL ([PEXPIRE]); older ones run out.
//
// # Why a bloom filter
//
// Memory per user. Measured with MEMORY USAGE on Redis 7.0 for 10,000
// stream-id-like ids at 1% (TestBytesPerUser): the filter takes 14,592 bytes
// (a 13,779-byte bitmap allocated whole, and its 152-byte meta hash), a SET
// of the same ids 756,768 bytes: 52 times more. After a rotation two
// generations are kept, about 29 KB. A filter takes its full size from the
// first mark on: below about 200 ids a user's SET would be smaller (some 76
// bytes an id). It costs Redis CPU instead: a check
// does k bit tests per item in Lua, several times the work of a SMISMEMBER
// (see the benchmarks).
//
// # What a false positive costs
//
// An item the user has not seen is answered "maybe seen" and held back: a
// notice not delivered on connect, an item left out of a game client's
// list. That happens at most at the configured rate (seen.fp_rate), never
// more often as the user reads more. A false positive never shows anything
// twice.
//
// # Why there are no false negatives
//
// Bits are only ever set while a generation is kept; a marked item has set
// all k of its bits in the current generation; a check tests every kept
// generation with that generation's own m and k; and each call is one
// script, so concurrent marks from several nodes cannot undo one another.
// An item is forgotten (answered unseen again) only by design: when its
// generation is dropped, after at least Capacity newer items, or expires,
// TTL after the user's last mark.
//
// # Why the naive versions fail
//
// A SET of ids per user grows by some 75 bytes per id, without bound. A
// filter in each node's memory is not shared: a user who reconnects to
// another node sees every notice again. Reading the bitmap, changing it on
// the node and writing it back loses the marks another node made meanwhile.
// One SETBIT per bit is k round trips per item; here a call of up to
// MaxItems items is one round trip.
//
// # Unit and scale
//
// Every key of a user carries {user:U}: a user's generations live on one
// Cluster shard and one script reads and writes them all; users spread over
// the shards. All nodes of a deployment must use the same Prefix and
// Generations.
//
// [EVALSHA]: https://redis.io/commands/evalsha/
// [SETBIT]: https://redis.io/commands/setbit/
// [GETBIT]: https://redis.io/commands/getbit/
// [GET]: https://redis.io/commands/get/
// [SET]: https://redis.io/commands/set/
// [HMGET]: https://redis.io/commands/hmget/
// [HSET]: https://redis.io/commands/hset/
// [DEL]: https://redis.io/commands/del/
// [PEXPIRE]: https://redis.io/commands/pexpire/
package seen
