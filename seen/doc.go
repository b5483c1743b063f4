// Package seen remembers, per user, which items (notices, announcements,
// rooms, game items) the user has already seen, in Redis, so that every node
// answers alike: "certainly unseen" or "maybe seen".
//
// # What it owns
//
// One scalable bloom filter per user (Almeida et al., "Scalable Bloom
// Filters", 2007): a run of generations, each a bloom filter on a Redis
// string, described by one hash:
//
//	chatd:{user:alice}:seen      hash: field "<g>" = "m k c n" per kept generation g
//	chatd:{user:alice}:seen:b3   string: the m bits of the generation in slot 3
//
// Generation g lives in slot g mod S (S = 10 + Config.Generations), so the
// keys of a user are known before any read and both scripts take them all
// in KEYS.
//
// # Start small, grow, rotate
//
// A user's first generation holds FirstCapacity (128) items: 230 bytes at
// the default 1%. When a generation has counted its capacity the next one
// starts, Growth (4) times larger and at Tightening (0.8) times the rate,
// until a generation would hold seen.capacity or more; from then on every
// generation holds seen.capacity items. When a new generation starts, the
// oldest is dropped while the other older ones still hold
// (Generations-1)·seen.capacity items, so a busy user ends with the
// fixed-size design's Generations full-size generations. The rates keep
// every run the filter can hold within seen.fp_rate p: a full-size
// generation gets p' with 1-(1-p')^G = p, as in the fixed-size design, and
// the growing ones share B = p-(G-1)·p' as B·0.2·0.8^i (their sum stays
// below B however many there are); a filter is at worst all growing
// generations plus G-1 full-size ones, whose rates add up to at most p.
//
// Measured with MEMORY USAGE on Redis 7 at 10,000 items and 1%
// (TestBytesPerUser): 496 bytes after 1 mark and after 100 (one generation
// of 128), 22,376 after 10,000 (generations of 128, 512, 2,048 and 8,192
// items: tighter rates cost about 1.5 times the single 14,592-byte filter of
// the fixed-size design), 29,048 after 30,000 (two full-size generations,
// as before); a SET of the same ids takes 248, 7,296, 756,768 and 1,942,304
// bytes. 1,000 users marking one item each raise used_memory by 649 KB
// (TestThousandUsersOneMarkEach; 14.7 MB when every first mark allocated a
// bitmap for seen.capacity). False positives measured on 100,000 unmarked
// ids (TestFalsePositiveRate, target 1%): 0.025% after 100 marks, 0.19%
// after 1,000, 0.27% at capacity, 0.75% after 3x capacity.
//
// # The Redis pattern
//
// A bloom filter on a bitmap. An item's k bit positions in a generation of m
// bits are those of github.com/bits-and-blooms/bloom/v3 —
// bloom.Locations(item, k), each modulo m, exactly what bloom.New(m, k)
// uses. The node sends the 64-bit hash values (as many as the largest k
// needs, 8 bytes each) to one Lua script per call ([EVALSHA]), which takes
// them modulo the m of each kept generation itself: one payload serves every
// generation, whatever its size. Mark runs seen_mark.lua: [HGETALL] the
// description, set the bits in the newest generation ([SETBIT], or for a
// bitmap of a few KB per item in the call, [GET], the bytes changed in Lua
// and one [SET]), start and drop generations ([HSET], [HDEL], [DEL]) and
// [PEXPIRE] every key of the filter, so a user's filter lives Config.TTL (a
// week) after the user's last mark, or the shorter TTL given to MarkFor
// (the realtime core gives a guest's filter 24 hours: an abandoned guest's
// filter, about 550 bytes for 50 items, goes within a day). Seen and Unseen run seen_check.lua,
// which tests the items in every kept generation, newest first ([GETBIT],
// or one GET per small bitmap). Each generation stores its own m and k: it
// keeps the size it was made with when seen.capacity or seen.fp_rate change
// later; a generation that needs more hash values than were sent makes the
// script answer with its k, and the node sends again (and sends that many
// from then on).
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
// all k of its bits in the newest generation; a check tests every kept
// generation with that generation's own m and k; and each call is one
// script, so concurrent marks from several nodes cannot undo one another.
// An item is forgotten (answered unseen again) only by design: when its
// generation is dropped, after at least (Generations-1)·seen.capacity newer
// marks, or expires, TTL after the user's last mark.
//
// # Why the naive versions fail
//
// A SET of ids per user grows by some 75 bytes per id, without bound. A
// bloom filter sized for seen.capacity from the first mark costs 14 KB for
// a user who reads one notice and never comes back. A filter that only
// fills drifts towards answering "maybe seen" for everything. A filter in
// each node's memory is not shared: a user who reconnects to another node
// sees every notice again. Reading the bitmap, changing it on the node and
// writing it back loses the marks another node made meanwhile. One SETBIT
// per bit is k round trips per item; here a call of up to MaxItems items is
// one round trip.
//
// # Cost
//
// A check does up to k bit tests per item and kept generation in Lua,
// several times the work of a SMISMEMBER: 100 items against a filter of
// 10,000 (four generations) take p50 250 µs on a loaded 2-core machine,
// against 110 µs with the single fixed-size filter and 65 µs for
// SMISMEMBER (BenchmarkUnseen100).
//
// # Unit and scale
//
// Every key of a user carries {user:U}: a user's generations live on one
// Cluster shard and one script reads and writes them all; users spread over
// the shards. All nodes of a deployment must use the same Prefix and
// Generations. The keys of the fixed-size design (seen:<slot>,
// seen:<slot>:meta) are not read: what users saw before the upgrade is
// forgotten once, and those keys run out with their TTL.
//
// [EVALSHA]: https://redis.io/commands/evalsha/
// [HGETALL]: https://redis.io/commands/hgetall/
// [SETBIT]: https://redis.io/commands/setbit/
// [GETBIT]: https://redis.io/commands/getbit/
// [GET]: https://redis.io/commands/get/
// [SET]: https://redis.io/commands/set/
// [HSET]: https://redis.io/commands/hset/
// [HDEL]: https://redis.io/commands/hdel/
// [DEL]: https://redis.io/commands/del/
// [PEXPIRE]: https://redis.io/commands/pexpire/
package seen
