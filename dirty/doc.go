// Package dirty owns the per-session dirty bitmasks that make a REST game
// client's poll cost one Redis round trip when nothing changed.
//
// # Pattern: dirty flags in a Redis bitmap, read-and-clear with GETDEL
//
// Each session (one token) has a bitmap, one bit per Section (the table is in
// Section's doc). Producers set bits with [SETBIT] when something the session
// cares about changes; a poll reads and clears the whole mask with a
// [GETDEL] in one script call (lua/session_wait.lua), then fetches only the
// dirty sections. GETDEL is atomic: a mark lands before it (and is returned)
// or after it (and stays for the next poll); none is lost between a read and
// a clear, as it would be with GET then DEL.
//
// A bare GETDEL still loses marks when go-redis sends it again (it retries a
// call whose reply is late: a stalled Redis, a paused chatd) after the first
// copy ran: the first took the mask, its reply was lost, and the retry finds
// none, so the client never reads those sections until they are marked
// again. So the script also writes what it took to a key of its own call
// ({session:S}:taken:<nonce>, [SET] PX 30 s) and a second run of the same
// call answers that record ([GET]) and takes nothing; the call's context
// ends 10 s after it started at the latest, so go-redis sends no retry after
// the record may have lapsed.
//
//	chatd:{session:S}:user      STRING  the session's user; its TTL is the session's
//	chatd:{session:S}:mask      STRING  the dirty bitmap
//	chatd:{session:S}:waiters   SET     wake channels of nodes where a long poll waits
//	chatd:{session:S}:taken:N   STRING  the mask take call N (a nonce) took, for its retry; 30 s
//	chatd:{session:S}:cursor    HASH    room -> last delivered message id
//	chatd:{user:U}:dirty:sessions  ZSET session -> expiry, for MarkUsers (capped)
//	chatd:dirty:sessions        ZSET    session -> expiry, for MarkAll (swept)
//	chatd:{topic:T}:followers   SET     users to mark when topic (a board) changes
//	chatd:{user:U}:dirty:follows   ZSET topic -> lapse, what U follows (capped)
//	chatd:dirty:wake:<node>     channel a node's long-poll wake-ups
//
// Marking is lua/session_mark.lua per session ([EXISTS], SETBIT, [PEXPIRE],
// [SMEMBERS], [PUBLISH], [DEL]), pipelined: MarkUsers reads the users'
// sessions ([ZRANGEBYSCORE]) in one round trip and marks them in one more;
// MarkAll walks the live set with [ZSCAN] and marks it in pipelines of 500.
//
// Long poll: Wait runs lua/session_wait.lua, which takes the mask as Take
// does and, when clean, adds this node's wake channel to the session's
// waiters ([SADD]) in the same atomic step, then sleeps on an in-process
// waiter. The mark script publishes the session id to every registered
// channel (and forgets them: one wake per registration), so the poll wakes
// within a pub/sub hop of the mark on any node and takes again. Wake-ups lost while the Bus was
// reconnecting are covered by waking every local waiter on Resubscribed.
//
// # What is bounded, and how
//
// Nothing a client does grows these keys without bound; every key has a TTL.
//
//   - A user's session index holds at most Config.MaxSessionsPerUser (10)
//     sessions. Open adds to it with lua/index_add.lua, which in the same
//     step removes expired entries ([ZREMRANGEBYSCORE]), [ZADD]s the session
//     and, past the cap, drops the sessions renewed longest ago ([ZRANGE],
//     [ZREM]); Go then ZREMs them from the live set. A dropped session's own
//     keys expire by SessionTTL. So a message to a room of a user who opened
//     2,000 sessions marks 10 of them, not 2,000 (TestSessionsPerUserCapped:
//     15 commands per message for that room of 3 users instead of 2,005).
//     The naive index, one ZADD per Open trimmed only of expired entries,
//     grows with every token a client mints within a TTL, and every message
//     pays for all of them.
//   - The live set (MarkAll's) is trimmed of every session whose expiry score
//     passed, by MarkAll itself and by Sweep, which a node calls
//     periodically: it holds the sessions opened or renewed within
//     SessionTTL, plus at most one sweep period of expired ones. It is the
//     one key without a hash tag of a unit; a TTL on it would not help (it is
//     written on every Open, so it would never lapse), trimming by score does.
//   - A user follows at most Config.MaxFollows (100) topics: Follow runs
//     lua/followers_add.lua on the topic ([SADD] and PEXPIRE FollowTTL in one
//     step, so a followers SET never exists without a TTL) and
//     lua/index_add.lua on the user's follows in one pipeline, then [SREM]s
//     the user from the followers of every topic the cap dropped. The two
//     sides are in different slots ({topic:T}, {user:U}), so no transaction
//     spans them: a failure between them leaves the user marked for a topic
//     it no longer lists, or listing one it is not marked for, until the next
//     Follow repairs it or the followers SET lapses FollowTTL after its last
//     Follow (Follow's doc lists each case).
//   - FollowFor is Follow with a shorter life (the realtime core gives a
//     guest 24 hours): the user's follows index lives that long, and the
//     followers SET lives at least that long but keeps a longer expiry
//     (followers_add.lua only lengthens it then), so a guest's follow never
//     cuts short a registered user's, and a board only guests follow
//     leaves no followers SET after a day.
//   - A take's record ({session:S}:taken:N) lives 30 s, and only a take
//     that found the session dirty writes one, so a session holds at most
//     one per take that returned marks in the last 30 s; a clean poll
//     writes nothing.
//
// What remains proportional to use rather than capped: a followers SET keeps
// a user whose follow lapsed without being dropped by the cap for as long as
// others keep following the topic (SMEMBERS returns them; MarkUsers finds no
// live session for most of them). It is bounded by the users who followed
// the topic since it was last idle for FollowTTL.
//
// # Why bitmask dirty flags
//
// The naive poll queries every section — rooms, members, messages per room,
// settings, wallet, notices, boards — on every poll of every client, changed
// or not: 7+ commands per poll, most of them returning what the client
// already has, so the cost grows with the number of sections and with the
// data behind them. With dirty flags a clean poll is one script call (a GET
// of a missing record and a GETDEL of a few bytes), whatever the sections
// and however much changed for other sessions; a dirty poll fetches exactly
// the dirty sections. The trade: writes pay.
// A message marks every member of the room (one script per member session,
// pipelined), a setting or notice marks every live session (N scripts in
// batches), and a mark of a session nobody polls is work for nothing. That
// is the right side of the trade for game clients that poll far more often
// than anything changes for them.
//
// # Hash-tag unit and scale
//
// Everything about a session is one {session:S} unit, so the open, mark and
// wait scripts are atomic on one Cluster slot and sessions spread evenly over
// the shards; a MarkUsers pipeline fans out to every shard in parallel. The
// two session indexes are per user ({user:U}) and global (one key on one
// shard, written once per session per SessionTTL/4, read by MarkAll and
// trimmed by MarkAll and Sweep).
//
// [SETBIT]: https://redis.io/commands/setbit/
// [GETDEL]: https://redis.io/commands/getdel/
// [EXISTS]: https://redis.io/commands/exists/
// [PEXPIRE]: https://redis.io/commands/pexpire/
// [SMEMBERS]: https://redis.io/commands/smembers/
// [SADD]: https://redis.io/commands/sadd/
// [PUBLISH]: https://redis.io/commands/publish/
// [DEL]: https://redis.io/commands/del/
// [SET]: https://redis.io/commands/set/
// [GET]: https://redis.io/commands/get/
// [ZRANGEBYSCORE]: https://redis.io/commands/zrangebyscore/
// [ZSCAN]: https://redis.io/commands/zscan/
// [ZREMRANGEBYSCORE]: https://redis.io/commands/zremrangebyscore/
// [ZADD]: https://redis.io/commands/zadd/
// [ZRANGE]: https://redis.io/commands/zrange/
// [ZREM]: https://redis.io/commands/zrem/
// [SREM]: https://redis.io/commands/srem/
package dirty
