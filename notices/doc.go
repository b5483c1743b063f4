// Package notices keeps the global notices an admin posts to every user,
// and fans each new one out to every node.
//
// Pattern: a capped Redis Stream as the durable history plus PUBLISH for the
// live fan-out, written together by one Lua script so that the order on the
// channel is the order in history. Users online when a notice is posted get
// it live from their node; users who connect later read the recent history
// and are shown, once, the notices their seen-filter (package seen) says
// they have not seen.
//
// Naive versions fail: PUBLISH alone reaches only who is connected at that
// instant (a node that reconnects, or a user who logs in later, never sees
// it); a list without a cap grows forever.
//
// Keys (one hash-tag unit, {notices:global}, so the script runs on one
// Cluster slot):
//
//	prefix:{notices:global}:stream   STREAM  the last ~MaxKept notices
//	prefix:{notices:global}:events   channel one JSON notice per post
//
// [XADD]: https://redis.io/commands/xadd/
// [XREVRANGE]: https://redis.io/commands/xrevrange/
// [PUBLISH]: https://redis.io/commands/publish/
package notices
