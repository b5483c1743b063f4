// Package shop sells items for coins: admins stock items and grant coins,
// users read their wallet and buy, and no two buyers get the last sword and
// no coin is made or lost, however many chatd nodes sell at once.
//
// # What it owns
//
// Per shop (Config.Shop, default "main"), all under the hash tag {shop:NAME}:
// each item's stock and price (a hash), the list of items (a set), each
// user's balance (a string holding an integer) and inventory (a hash
// item → count), the idempotency records of purchases, and the purchase
// counter. See keys.go. (chatd's other global counters, of messages and
// rooms, are package rooms'.)
//
// # The pattern: an optimistic transaction
//
// Buy is check-and-set with [WATCH], [MULTI] and [EXEC]:
//
//	WATCH item balance inventory [idem]     -- 1 round trip
//	HMGET item stock price; GET balance;    -- 1 round trip (pipeline)
//	HGETALL inventory; [GET idem]
//	(check in Go: known item? enough stock? enough coins?)
//	MULTI                                   -- 1 round trip
//	  HINCRBY item stock -qty; DECRBY balance cost
//	  HINCRBY inventory item qty; INCR purchases
//	  [SET idem <answer> PX ttl]
//	EXEC
//
// Besides those it uses [HMGET], [HGETALL], [HINCRBY], [DECRBY], [INCRBY]
// (grants, also under WATCH), [SET] with PX, [SADD] and [SMEMBERS] (the item
// list), and [GET].
//
// EXEC runs the queued writes only if none of the watched keys was written
// since WATCH (by anyone: another buyer, an admin's Stock, a Grant);
// otherwise it runs nothing and returns nil, go-redis reports
// redis.TxFailedErr, and Buy retries from WATCH after a random wait
// ("full jitter": uniform in [0, min(MaxBackoff, MinBackoff·2^n))), at most
// MaxRetries times, then gives up with ErrConflict (409 conflict: nothing was
// bought, retry later). A refusal (sold out, too poor, unknown item) needs no
// write and returns after the reads (plus an UNWATCH), unless an
// idempotency key asks for it to be recorded.
//
// The naive version, read-check-write without WATCH, sells the last sword
// twice: nodes A and B both read stock=1, both decrement, stock is -1 and
// two buyers paid. DECR-first-and-undo-if-negative shows a negative stock to
// readers and loses the undo (and the coins) if the node dies in between; a
// debit and a stock decrement sent separately lose coins on a crash between
// them. MULTI alone (without WATCH) makes the writes atomic but not the
// check they depend on.
//
// Why WATCH the inventory and the idempotency record too: the returned
// wallet is computed from the inventory read, and two requests with one
// Idempotency-Key must not both see "no record yet" and both buy; watching
// the record makes the second EXEC abort, and its retry finds and replays
// the first answer.
//
// # Idempotency
//
// With an Idempotency-Key (1–128 printable ASCII bytes, scoped per user),
// the purchase's first answer — the wallet, or the refusal code — is SET in
// the same EXEC (or the same script) that buys, with a TTL
// (Config.IdempotencyTTL, default 24h). A later request with the key gets
// that answer and buys nothing, even if the wallet or stock changed since; a
// request reusing the key for another item or quantity gets
// ErrIdempotencyMismatch. ErrConflict and Redis errors are not recorded: the
// client retries with the same key and nothing was bought.
//
// # Durability: WAIT for a replica
//
// Redis acks a write before any replica has it; a failover right after
// loses it, and a purchase the buyer was told of is gone. Under
// Config.Durability DurabilityReplica every purchase, grant and restock is
// followed by [WAIT] 1 on the connection that wrote it (a transaction's
// own, so on a Cluster the shop's master), and answered ErrNotReplicated
// (503 not_durable) when no replica acknowledged it in time: the write
// stays applied, and its retry with the same idempotency key answers the
// first result once a replica holds it. A replayed answer is made as
// durable as a fresh one: its record is rewritten unchanged before its
// WAIT, since WAIT covers only its own connection's writes (durability.go).
//
// # The purchase counter: INCR needs no lock
//
// [INCR] is executed by Redis' single command thread as one read-modify-write,
// so concurrent INCRs from any number of nodes never lose an update; no lock,
// no WATCH. The purchase counter is INCRed inside the purchase's MULTI (so it
// counts exactly the committed purchases) and is deliberately not watched: no
// check depends on its value, and watching it would make every purchase
// conflict with every other. A counter is signed 64-bit: 9.2·10^18, which at
// a million increments per second lasts 292,000 years; at the limit INCR
// answers an error instead of wrapping around.
//
// # Numbers
//
// Balances, stock and counts stay at or below 2^53-1 (MaxBalance, MaxStock):
// the largest integer a JSON number keeps exactly in a browser, and the
// largest Lua (whose numbers are doubles) computes exactly. Grants that would
// pass it are refused (ErrBalanceOverflow); qty is 1..MaxQty (10^6), price
// 0..MaxPrice (10^12), so a cost (≤ 10^18) never overflows int64 in Go.
//
// # One slot per shop: the trade-off
//
// On Redis Cluster every key of one MULTI/EXEC (or script) must hash to one
// slot, and a purchase touches the item and the buyer's wallet together. So
// the tag is the shop: every item, wallet, inventory and record of a shop is
// in one slot, on one master. That master serves all of the shop's reads and
// writes and stores all its wallets; adding masters adds no shop throughput
// (BenchmarkBuyCluster vs BenchmarkRawCluster: spreading plain INCRs over 32
// slots uses all three masters, the shop uses one).
//
// The tempting split — {item:X} for stock, {user:U} for wallets, so both
// spread over the cluster — cannot buy atomically: the stock is in the
// item's slot and the coins in the user's, and no MULTI or script spans two
// slots. It would take a saga (reserve stock, debit, settle; compensate on
// failure) with a durable log to recover a node that dies between steps,
// and readers would see reserved-but-unpaid stock. For a chat/game server's
// shop, where purchases are human actions (tens per second), one master is
// far more than enough (thousands per second, below). A deployment that
// outgrows it runs several shops (Config.Shop: per region, per game world),
// each its own slot; a user's coins are then per shop.
//
// # WATCH/MULTI/EXEC or one Lua script
//
// BuyLua does the same purchase (same keys, checks, writes, records and
// errors) in one script, lua/item_buy.lua, run with [EVALSHA].
//
//   - Buy (WATCH): 3 round trips when it commits, 3 more per retry; under
//     contention on one item, retries and, rarely, ErrConflict. The logic is
//     Go (typed, tested, observable), Redis runs only plain commands, and the
//     server never blocks longer than one EXEC.
//   - BuyLua: 1 round trip, never a retry or a conflict; but the script holds
//     Redis' only command thread while it runs (microseconds here, an
//     inventory HGETALL included), its arithmetic is in doubles (hence the
//     2^53 limits), and its logic lives in a second language.
//
// Measured on a 2-core machine shared with other builds (load 9–16, so
// ±50%; run go test -bench . ./shop/ for yours), purchases per second on a
// single server, against a bare HINCRBY at 30,000–35,000/s:
//
//	                         WATCH (Buy)                 Lua (BuyLua)
//	1 buyer                  7,000–10,500, 3 trips       5,700–12,000, 1 trip
//	32 buyers, one item      2,300–3,900, ~0.45 retries, 8,800–13,000,
//	                         ErrConflict 0–0.05%,        p99 8–14 ms
//	                         p99 200–400 ms
//	32 buyers, 32 items      3,500–8,300, no retries     6,700–8,600
//
// (BenchmarkBuy; BenchmarkRetryPolicy shows why the default backoff is
// 2ms..200ms: 0.1ms..10ms makes 5 retries per purchase and 7% ErrConflict.)
// On the cluster the figures are about the same, the shop's slot being on
// one master; this machine's two cores cannot show the gain of spreading
// keys either (BenchmarkRawCluster). Buy stays the product path: its worst
// case (every buyer hammering one item with no pause) is still far above
// what a chat shop sees, a conflict is a documented, safely retryable
// answer (with an Idempotency-Key the retry cannot buy twice), and it shows
// the optimistic-transaction pattern this package exists to show. A
// deployment expecting flash sales of one item can switch the web handler to
// BuyLua: the data and records are the same.
//
// It runs unchanged on a single Redis 7, a Redis Cluster, and the embedded
// miniredis.
//
// [WATCH]: https://redis.io/commands/watch/
// [MULTI]: https://redis.io/commands/multi/
// [EXEC]: https://redis.io/commands/exec/
// [INCR]: https://redis.io/commands/incr/
// [EVALSHA]: https://redis.io/commands/evalsha/
// [HMGET]: https://redis.io/commands/hmget/
// [HGETALL]: https://redis.io/commands/hgetall/
// [HINCRBY]: https://redis.io/commands/hincrby/
// [DECRBY]: https://redis.io/commands/decrby/
// [INCRBY]: https://redis.io/commands/incrby/
// [SET]: https://redis.io/commands/set/
// [SADD]: https://redis.io/commands/sadd/
// [SMEMBERS]: https://redis.io/commands/smembers/
// [GET]: https://redis.io/commands/get/
// [WAIT]: https://redis.io/commands/wait/
package shop
