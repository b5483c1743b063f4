// Package notices keeps the global notices an admin posts to every user,
// and fans each new one out to every node.
//
// Pattern: a capped Redis Stream ([XADD] MAXLEN ~) as the durable history
// plus [PUBLISH] for the live fan-out, written together by one Lua script
// so that the order on the channel is the order in history. Users online
// when a notice is posted get it live from their node; users who connect
// later read the recent history ([XREVRANGE]) and are shown, once, the
// notices their seen-filter (package seen) says they have not seen.
//
// Naive versions fail: PUBLISH alone reaches only who is connected at that
// instant (a node that reconnects, or a user who logs in later, never sees
// it); a list without a cap grows forever; and a script without a record of
// its call stores and broadcasts a notice twice when go-redis sends the call
// again (it retries a call whose reply is late: a stalled Redis, a paused
// chatd), after the first copy ran. So Post keys each call with a random
// nonce: the script answers the id recorded under that key ([GET]) when the
// key exists, and otherwise stores, publishes and records the id ([SET] PX
// 30 s); the call's context ends 10 s after it started at the latest, so
// go-redis sends no retry after the record may have lapsed.
//
// Keys (one hash-tag unit, {notices:global}, so the script runs on one
// Cluster slot):
//
//	prefix:{notices:global}:stream   STREAM  the last ~MaxKept notices
//	prefix:{notices:global}:events   channel one JSON notice per post
//	prefix:{notices:global}:posted:N STRING  the id Post call N (a nonce) stored, for its retry; 30 s
//
// [XADD]: https://redis.io/commands/xadd/
// [XREVRANGE]: https://redis.io/commands/xrevrange/
// [PUBLISH]: https://redis.io/commands/publish/
// [GET]: https://redis.io/commands/get/
// [SET]: https://redis.io/commands/set/
package notices
