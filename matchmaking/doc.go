// Package matchmaking matches players across chatd nodes: tickets wait in
// skill-ordered queues in Redis, one matcher per queue — on whichever node
// holds the queue's lock — forms matches atomically, and a fence keeps a
// matcher that paused past its lease from forming anything.
//
// # What it owns
//
// Queues are defined by the live setting matchmaking.queues (ParseQueues;
// the settings registry validates writes with CheckQueues), so every node
// sees a change at its next call. Everything of one queue is in the
// {mm:QUEUE} hash-tag unit, together with the queue lock's keys, which
// package lock keeps there:
//
//	chatd:{mm:duel}:pool     ZSET   waiting tickets' entries, score 0 (lex order: bucket, skill)
//	chatd:{mm:duel}:age      ZSET   the same entries scored by enqueue time (ms): oldest first, expiry
//	chatd:{mm:duel}:users    HASH   canonical user -> open ticket (every party member): one open ticket per person
//	chatd:{mm:duel}:t:ID     HASH   a ticket: state, entry, user, party, skill, attributes, created, ended, match, accepted, expires
//	chatd:{mm:duel}:pending  ZSET   pending parties' ticket ids, scored by their invitations' deadline (ms)
//	chatd:{mm:duel}:m:SEQ    HASH   a match: seq, created, fence, attributes, players (JSON)
//	chatd:{mm:duel}:seq      STRING the match counter (INCRBY), never reset
//	chatd:{mm:duel}:outbox   ZSET   "m:SEQ" and "x:TICKET" not yet handed to the hooks
//	chatd:{mm:duel}:fresh    LIST   entries submitted and not yet seeded, oldest first
//	chatd:{mm:duel}:sweep    STRING the pool entry the sweep seeded last
//	chatd:{mm:duel}:trouble  STRING since when the matcher's rounds fail (unix ms), TTL 10 s + 3 ticks
//	chatd:{mm:duel}:lock     STRING the matcher's lock (package lock)
//	chatd:{mm:duel}:fence    STRING the lock's fences (package lock), never reset
//
// Outside the queues, what users are told (Notify, Events):
//
//	chatd:{user:U}:mm:events  LIST   U's match and expiry events (JSON), newest first, capped at 20, status TTL
//	chatd:mm:events           CHANNEL every Notify, for every node to hand to its connections
//
// An entry is 16 hex digits of attribute bucket (SHA-256 of the
// attributes' canonical JSON), 16 of skill (its float64 bits, made to sort
// as the numbers do), 2 of party size, then the ticket id. All buckets share
// the one pool: with every score 0, [ZRANGEBYLEX] orders the pool by bucket,
// then skill, so a skill window in one bucket is a lex range the script
// computes from the seed's entry and ARGV. The alternative, a ZSET per
// bucket, needs a key chosen at run time, which a script may not build
// (Redis Cluster routes a script by its declared KEYS) and the caller cannot
// know before the script has looked. A bucket collision (64 bits) can only
// make two attribute sets share a range: the formation compares the
// attributes themselves, so it may refuse such a match, never form one.
//
// Ended tickets and match records keep Config.StatusTTL (10 minutes), so a
// poller learns how its ticket ended. The queue's keys and waiting tickets
// carry a TTL of max wait + status TTL + 1 hour, renewed by every
// submission and formation: a queue that no node serves for that long is
// forgotten. The match counter and the fence keep no TTL (one integer each
// per queue an operator defined): a counter that went back would reuse match
// ids, a fence that went back would let a paused holder through.
//
// Scale: a queue lives on one shard, which makes a formation atomic; queues
// spread over the cluster. One matcher round is two scripts whatever the
// number of matches it forms (up to MatchersConfig.MaxMatches).
//
// # The pattern: choose, then form under the fence, then announce
//
// Submit is one script (lua/ticket_submit.lua): [HGET] each member in the
// user map (a party only when its members accepted: see Parties by
// consent), and only if none has an open ticket, [HSET] them, [ZADD] the
// entry to the pool and the age index, [RPUSH] it to the fresh list, [HSET]
// the ticket, [PEXPIRE]. Cancel
// is one script taking a waiting ticket out as cancelled ([ZREM], [HDEL]).
//
// A queue's matcher runs on the node that holds "mm:QUEUE" (lock.TryAcquire,
// renewed with Lock.Refresh every lease/3 from the matcher's own loop, so a
// matcher that stalls loses the queue). Each round:
//
//  1. lua/queue_pick.lua chooses. Its seeds are the oldest tickets
//     ([ZRANGEBYSCORE] on the age index), then the fresh ones (each
//     submitted ticket once, off the fresh list: [LRANGE], [LTRIM]), then
//     the next ones of a sweep over the pool ([ZRANGEBYLEX] after the
//     entry it seeded last, wrapping round). A seed's window is window +
//     widen_per_second × its wait; the waiting tickets of its bucket inside
//     the window on either side ([ZRANGEBYLEX], [ZREVRANGEBYLEX], [ZSCORE])
//     are taken closest skill first while the players fit in max — a party
//     counts all its members and is never split — and the match is chosen
//     when it holds at least min players (its oldest ticket first).
//     Tickets older than max wait are chosen to expire. It writes no
//     ticket; it reserves the match numbers ([INCRBY] seq), removes the
//     outbox entries announced since the last round and moves the fresh
//     list and the sweep on.
//  2. lua/match_form.lua forms, with lock.FenceCheckLua prepended: if the
//     fence is no longer the lock's newest, it writes nothing; otherwise,
//     for each chosen match whose tickets are all still waiting with equal
//     attributes and a size within min and max, the tickets leave the pool,
//     the age index and the user map, become matched, the match record is
//     written and "m:SEQ" joins the outbox — all in the one script, so no
//     ticket is in two matches and none is lost between. A match one of
//     whose tickets went meanwhile (cancelled, expired, matched by a newer
//     holder) is skipped whole. Expiries are fenced and written the same
//     way ("x:TICKET" in the outbox).
//  3. The holder calls Config.OnMatched / OnExpired for what it formed, and
//     acknowledges each entry in its next pick. Entries it did not form
//     (left by a holder that died between its formation and its hooks, or
//     whose hook failed) are read back from the outbox and announced, a
//     failed hook again after a backoff (1 s doubling to 30 s) until its
//     record expires. So nothing formed goes unannounced; an entry may be
//     announced twice (a holder killed after the hook, before the ack), and
//     the hooks are idempotent by Match.ID.
//
// # Parties by consent: invite, accept, then queue
//
// Nobody is queued, matched or kept from queueing by someone else's
// ticket. A party is formed by Invite: its ticket is written in state
// pending — the hash and its deadline in the pending index, one MULTI —
// and is in no other index: not in the pool (nobody is matched with it),
// not in the user map (its invitees may queue alone and be invited
// elsewhere). Each invitee, by canonical name (names.Canonical, so any
// case of one's name is one's own invitation, and only one's own),
// accepts with lua/party_accept.lua: it records the acceptance in the
// ticket ([HSET] accepted) and, for the last one, queues the ticket as
// ticket_submit.lua does — the one-open-ticket check of every member in
// the user map, then [HSET] users, [ZADD] pool and age, [RPUSH] fresh,
// [ZREM] pending — in the same script, so no acceptance can slip between
// the check and the queueing. A decline is Cancel (ticket_cancel.lua
// dissolves a pending ticket: cancelled, [ZREM] pending). Invitations
// lapse after Config.InviteTTL (60 s): the queue's holder expires pending
// tickets past their deadline each round (lua/party_expire.lua: each is
// checked still pending in the script, [HSET] expired, [ZADD] "x:ID" to
// the outbox), so the expiry is announced through OnExpired like a
// waiting ticket's, at least once, by whichever node holds the queue; an
// acceptance after the deadline, before the sweep, expires it itself.
// Every MatchersConfig.PendingEvery (2 s) the holder hands the pending
// parties (ZRANGE pending, then [HGETALL] each in one pipeline) to
// OnPending, which dissolves those whose players are not all online.
//
// The naive version — a ticket whose party is queued with it at once
// (this package before #40) — lets anyone queue any online user: the
// victim's own Submit is refused ticket_open, and they are matched with
// the attacker. An acceptance kept in a key of the invitee's own (the
// {user:U} unit) would need a second step to queue the ticket, which
// another acceptance or a cancel can interleave: everything of a party is
// in its queue's unit, beside the user map it checks.
//
// # Fair matching: bounded work, a wait no queue depth stretches
//
// A round seeds at most S + F + W tickets (MatchersConfig.Seeds,
// FreshSeeds, SweepSeeds: 128, 128, 64), and each seed reads at most
// 2 × (2 × max + 8) candidates, each a [ZSCORE]: O((S + F + W) × max ×
// log N) for a queue of N tickets, whatever N is. Its guarantees:
//
//   - A ticket that, when submitted, has enough compatible tickets waiting
//     (in its bucket, within its window) is matched in the first round
//     that takes it off the fresh list: the round after its submission,
//     unless more than F tickets were submitted before it and not yet
//     seeded — then rounds run back to back, F submissions each. Its wait
//     is about Tick + (submissions ahead of it / F) rounds: waiting
//     tickets, however many and however unmatchable, cost it nothing.
//   - A ticket among the oldest S is seeded every round: the longest waits
//     get the first choice.
//   - Tickets that become compatible only as their windows widen are found
//     when one of them is among the oldest S, or when the sweep reaches
//     them: within N / W rounds.
//
// The naive version seeded only the oldest S tickets: S tickets that can
// never match (one address's guests, skills a million apart) made every
// later ticket wait until they expired (#38: 59 s for two compatible
// tickets behind 128 such).
//
// The pick is a separate script because the formation must name every key
// it writes — the chosen tickets' and the match record's — in KEYS, and
// they are known only once something has looked. The formation checks
// again what the pick saw, so the pause between them is harmless.
//
// # Why the naive versions fail
//
// A matcher on every node: two nodes read the same oldest ticket and each
// forms a match with it — one ticket, two matches, two game rooms with a
// player who can only be in one — or, each removing what it took, they tear
// a party apart. One matcher per queue (the lock) makes the choice
// consistent; the scripts make it safe even when the lock fails.
//
// [ZRANGE] then [ZREM] in two steps: between the read and the removal, a
// cancel, an expiry or another matcher changes the queue. Checking ZREM's
// count does not help: when it removed only some of the tickets, those are
// gone from the queue and in no match (lost), unless more round trips put
// them back, which races again. Here the check and every write of a match
// are one script.
//
// An unfenced matcher after a pause: the holder chose matches and then
// stalled (GC, SIGSTOP, a slow network) past its lease, and another node
// took the queue. When the stale one wakes, its choice is from before the
// pause — made under definitions an operator may have changed since (a
// narrower window, another max), by a clock that may be behind — and it
// races the new holder, breaking the matches that one chose by taking their
// tickets first. The per-ticket check keeps a ticket out of two matches;
// only the fence keeps the queue to one matcher. The formation checks the
// lock's fence in the same script as its writes (a check before the script
// would be one more place to pause), so a holder that lost the lock forms
// and expires nothing (fence_rejected_total) and gives the queue up.
//
// Calling the hook after the script with nothing recorded: a node that
// crashes between the two has formed a match nobody is told about — the
// players wait in a match room that never opens. The outbox is written by
// the formation itself and emptied only once a hook succeeded.
//
// # Failure behaviour
//
// Rounds that fail while Redis answers (a script error, data of the wrong
// type): from the third in a row, the holder writes the queue's trouble
// key and refreshes it while they fail, and Status shows it on every
// waiting ticket (Status.TroubleSince; the protocol's trouble_since), so a
// client waiting for a match learns that matching is failing instead of
// waiting silently; the first round that succeeds deletes it. The log
// says it too, once per 10 s.
//
// Redis down: Submit, Cancel and Status return the Redis error (503); the
// matcher's rounds fail and are retried each tick; a holder that cannot
// refresh for a whole lease gives the queue up. A node that dies: its lease
// expires and another node takes the queue within about Lease + TryEvery.
// Nodes' clocks: a ticket's wait is the matcher's now minus the submitting
// node's clock, so keep them in NTP step. If Redis loses its data, waiting
// tickets are gone (Status: unknown ticket) and numbering restarts.
//
// Metrics (Config.Registerer): chatd_matchmaking_tickets_total{queue,event},
// matches_total, wait_seconds, queue_depth, oldest_wait_seconds,
// matcher_holding, fence_rejected_total, announcements_total{hook,result},
// matcher_ticks_total.
//
// [ZADD]: https://redis.io/commands/zadd/
// [ZREM]: https://redis.io/commands/zrem/
// [ZRANGE]: https://redis.io/commands/zrange/
// [ZRANGEBYSCORE]: https://redis.io/commands/zrangebyscore/
// [ZRANGEBYLEX]: https://redis.io/commands/zrangebylex/
// [ZREVRANGEBYLEX]: https://redis.io/commands/zrevrangebylex/
// [ZSCORE]: https://redis.io/commands/zscore/
// [INCRBY]: https://redis.io/commands/incrby/
// [LRANGE]: https://redis.io/commands/lrange/
// [LTRIM]: https://redis.io/commands/ltrim/
// [RPUSH]: https://redis.io/commands/rpush/
// [HGET]: https://redis.io/commands/hget/
// [HSET]: https://redis.io/commands/hset/
// [HDEL]: https://redis.io/commands/hdel/
// [HGETALL]: https://redis.io/commands/hgetall/
// [PEXPIRE]: https://redis.io/commands/pexpire/
package matchmaking
