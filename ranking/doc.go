// Package ranking owns chatd's leaderboards: scores posted by game clients
// from any node, read back as top N, a player's rank, the players around one,
// a score range, and the ranks of many players at once.
//
// # The Redis pattern: a sorted set ordered by its members
//
// A board is a [sorted set] whose members all have score 0. Redis orders
// members of equal score by their bytes, so the member itself is the sort key:
//
//	<rev:19 digits>:<seq:15 digits>:<player>
//	0999999999999987500:000000000000042:alice     (alice, 12.5, the 42nd change)
//
// rev is 1e15 minus the score, in thousandths, zero-padded (a higher score
// sorts first); seq is the board's change counter, taken by [INCR] inside the
// post script when the player reached that score (of equal scores the earlier
// sorts first). A [hash] maps each player to its member's rev:seq, so a player
// can be found by name. Rank 0 is the best.
//
// Players are kept under their canonical name (names.Canonical): "Misc1"
// and "misc1" are one entry, so nobody can sit on a board as a look-alike
// of another, and a player's score does not split over the spellings its
// clients send. The hash field is the canonical name; the member carries
// the name as last posted, which every read shows (a post in another case
// that leaves the score renames the member in place: same rev:seq, so the
// same rank and time). The hash value is rev:seq alone when the shown name
// is the canonical one (the common case, and the format boards had before
// names were canonical), else the whole member. A field written before
// under a name that is not canonical ("Bob") is moved to the canonical
// field by that player's next post in the same spelling; until then reads
// by name do not find it (it still ranks and shows in Top and Range).
//
// Commands: the post script (lua/board_post.lua) does [GET] and [SET] of the
// idempotency record, [HGET], [HLEN], [INCR], [ZREM], [ZADD], [HSET],
// [EXPIREAT] (or [PEXPIRE], or [PERSIST]) and [ZRANK] atomically; Top is
// [ZRANGE]; Get and
// Ranks run one script of [HMGET] and [ZRANK] per player; Around one script of
// [HGET], [ZRANK] and [ZRANGE]; Range is [ZLEXCOUNT] and [ZRANGEBYLEX] in one
// MULTI. Each is one round trip and O(log N) per entry read.
//
// # Why the naive version fails
//
// The obvious board is ZADD board GT score player. It breaks ties by member
// name, so of two players on 100 points "aaron" ranks above "zoe" even when zoe
// got there first; games need "first to reach it ranks higher". Folding time
// into the double score (score + 1/time) does not work either: a double holds
// 53 bits, and a score of up to 1e15 with three decimals already needs 60
// (1e18 thousandths), before any time is added. The naive version also
// computes "best" or "incr" on the node (read, compare, write), which loses
// updates when three nodes post for one player at once; here the compare or
// the addition happens inside the script, in two base-1e9 limbs because Lua
// numbers are doubles too.
//
// A post that leaves the score as it was (a lower best, an equal set, an incr
// by 0) writes nothing and so keeps the player's seq: its time.
//
// Ranks are never cached on a node. A rank moves whenever any player on the
// board posts, from any of the nodes, so a node-local copy is stale as soon as
// another node writes; the sorted set answers a rank in O(log N) in one round
// trip, which is cheaper than any invalidation protocol could be.
//
// # Scores
//
// A Score is an exact integer count of thousandths: -1e15..1e15 with at most
// three decimals. ParseScore reads the text of a JSON number exactly (no
// float64 on the way), and Score writes itself back as a JSON number; NaN,
// ±Inf, more decimals and larger magnitudes are refused with ErrBadScore, as
// is an incr whose sum would leave the domain.
//
// # Periodic boards
//
// A board named "name@daily" or "name@weekly" maps to one unit per UTC day or
// ISO week (Monday 00:00 UTC): {lb:name@daily:2026-11-30},
// {lb:name@weekly:2026-W49}. Each post sets EXPIREAT to the end of the
// period plus Config.Grace, a time every node computes alike from the period.
// Reads always use the current period.
//
// # What is bounded: idle boards expire
//
// Any user may name a new board by posting to it, so boards that nobody
// keeps would pile up for ever. An all-time board expires Config.IdleTTL (30
// days) after its last post: every post, changed or not, sets [PEXPIRE] on
// its three keys in the post script, so they carry one expiry and go
// together (a script runs at one frozen time and sees all three or none;
// were the player hash to outlive the ZSET, a later post would read a rev:seq
// whose member is gone). Boards named by Config.Permanent (the ones the
// operator created or lists in settings) never expire, and a post to one
// that had a TTL removes it ([PERSIST]), so declaring a board permanent
// later keeps it. Periodic boards keep their period's expiry. Exists (one
// [EXISTS]) lets the web layer tell the creation of a board from a post to
// an existing one and rate-limit creations per user; together a user can
// keep at most (creations per minute × IdleTTL) boards alive, and only by
// posting to each of them. A post with PostOptions.IdleTTL (the web layer:
// a guest's post, 24 hours) gives a board it creates that shorter life and
// only ever lengthens an existing board's (the script reads [PTTL] first),
// so a board only guests posted to goes within a day of the last post,
// and a guest's post never shortens a board others keep.
//
// The naive alternatives fail: no TTL keeps every board ever named; a TTL
// set once at creation deletes busy boards; a TTL on the ZSET alone leaves
// the player hash and counter behind, and a board that reappears then
// ranks players by a hash that no longer matches its members.
//
// # Many boards at once
//
// GetMany reads one player's entry on many boards in one pipeline of the
// read script, one per board (through internal/redisx, which re-sends as
// EVAL only the scripts a server answered NOSCRIPT) (the boards are different units, so no single
// script may read them; on a Cluster the pipeline is split per shard and
// sent in parallel). A poll that shows a player's place on ten boards pays
// one round trip, not ten.
//
// # Idempotent posts
//
// A post may reach Redis twice: a client retries one whose answer it did
// not get, and go-redis itself re-sends a command whose reply timed out —
// Redis stopped (SIGSTOP) past the read timeout runs both once it goes on,
// and an incr of 1 is applied twice (issue #27;
// TestRetryAfterReadTimeoutAppliesOnce shows 1 → 3 for every post). A read
// timeout does not mean the write did not happen. So a post may carry an
// idempotency key (PostWith, PostOptions.Key, scoped by PostOptions.Scope):
// the post script first [GET]s the key's record in the board's slot; if
// the key was used for this very post (same board name, canonical player,
// mode and score) it writes nothing and answers the first post's entry
// (PostResult.Duplicate; OnChange again if it changed the board, as the
// answer of the first may have been lost), if for another one it refuses
// (ErrIdempotencyMismatch); otherwise it posts and [SET]s the record with
// the answer, PX IdempotencyTTL (10 min), in the same script. Checking
// outside the script would let the two copies both see "new". A refused
// post keeps no record (nothing was applied, so its retry is tried anew).
// The record lives in the board's (period's) slot because it must be
// checked atomically with the write: a key is therefore per board and per
// period — the same key on another board, or a client retry that crosses
// into the next period of a periodic board, is another post.
//
// # Players per board
//
// Any user may post for any player name, so a board could grow without
// bound. Config.MaxPlayers (the live setting limit.players_per_board)
// caps the players of a board (of a period): the post script refuses a new
// player when [HLEN] of the player hash has reached it (ErrBoardFull,
// board_full), atomically with the insert, so concurrent posts from every
// node cannot overshoot; the players on the board still post. A board at
// its cap takes about 220 bytes per player (see below).
//
// # Unit and scale
//
// Every key of a board (or period) shares the hash tag {lb:<id>}: the ZSET, the
// player hash and the seq counter live on one Cluster slot, so a board lives on
// one shard. A million players take about 220 MB there (measured by the
// benchmarks); more boards spread
// across shards, one hot board does not.
//
// The three keys must stay together: run Redis with maxmemory-policy
// noeviction, since an evicted player hash would leave orphan members behind.
//
// # Polling
//
// Config.OnChange is called after each post that changed a board; the poll
// layer uses it to set the "leaderboards" dirty bit of the board's pollers.
//
// [sorted set]: https://redis.io/docs/latest/develop/data-types/sorted-sets/
// [hash]: https://redis.io/docs/latest/develop/data-types/hashes/
// [INCR]: https://redis.io/commands/incr/
// [HGET]: https://redis.io/commands/hget/
// [HMGET]: https://redis.io/commands/hmget/
// [HSET]: https://redis.io/commands/hset/
// [ZADD]: https://redis.io/commands/zadd/
// [ZREM]: https://redis.io/commands/zrem/
// [ZRANK]: https://redis.io/commands/zrank/
// [ZRANGE]: https://redis.io/commands/zrange/
// [ZRANGEBYLEX]: https://redis.io/commands/zrangebylex/
// [ZLEXCOUNT]: https://redis.io/commands/zlexcount/
// [EXPIREAT]: https://redis.io/commands/expireat/
// [PEXPIRE]: https://redis.io/commands/pexpire/
// [PTTL]: https://redis.io/commands/pttl/
// [PERSIST]: https://redis.io/commands/persist/
// [EXISTS]: https://redis.io/commands/exists/
// [GET]: https://redis.io/commands/get/
// [SET]: https://redis.io/commands/set/
// [HLEN]: https://redis.io/commands/hlen/
package ranking
