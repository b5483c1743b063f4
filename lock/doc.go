// Package lock is chatd's global lock: mutual exclusion between nodes that
// share one Redis or Redis Cluster, with owner tokens, expiry, refresh and
// fencing. It guards room creation ("when every room of a lobby is full,
// exactly one node creates the next") and is usable as a library on its own.
//
// # What it owns
//
// For a lock name, a hash-tag unit "kind:id" such as "lobby:general", two keys
// (see [Client.Keys]):
//
//	chatd:{lobby:general}:lock   STRING  the holder's token (128 random bits, hex), PX ttl
//	chatd:{lobby:general}:fence  STRING  INCR counter of fences issued, no TTL
//
// Both are in the unit's slot, with every other key of the unit, so a
// caller's own script can check the fence atomically with its writes, also
// on Redis Cluster. Locks of different units spread over the cluster's slots;
// one lock's load always falls on one master.
//
// # The pattern
//
// Acquire runs one script (one round trip): [SET] lock token NX PX ttl and,
// only if that succeeded, [INCR] fence. Release is a compare-and-delete
// script ([GET], then [DEL] only if the value is the caller's token), Refresh
// a compare-and-[PEXPIRE], TTL a compare-and-[PTTL]. The watchdog
// (Options.Watchdog) refreshes at ttl/3 until Release. FencedHSet, and any
// script built on FenceCheckLua, writes only while the fence key still holds
// the writer's fence: `GET fence == ARGV fence`, then the write, in one script.
//
// # Why the naive versions fail
//
// SETNX then EXPIRE: two commands. A node that crashes (or loses its
// connection) between them leaves a lock with no expiry, and nobody can ever
// take it again. SET with NX and PX sets value and expiry in one atomic
// command.
//
// Takeover by timestamp (the old SETNX recipe: the value is an expiry time
// by the acquiring node's clock; a waiter that reads a past time GETSETs its
// own and has won if the value it got back was still past): it trusts every
// node's clock. A node whose clock runs ahead sees a live lock as expired and
// takes it over while the holder still works — two holders. The loser of a
// GETSET race also overwrites the winner's expiry, and the value names no
// owner, so a holder cannot tell whether its DEL removes its own lock. Here
// only Redis decides expiry, by its own clock (PX), and the value is the
// owner's random token.
//
// Unlock with a plain DEL: holder A stalls (GC pause, swapped out, slow
// disk), its lock expires, B acquires; A wakes and DELs — B's lock. Now C
// acquires too, and B and C both run. Release therefore deletes only when
// the value is A's own random token, in one script so no other holder can
// slip in between the GET and the DEL; A gets ErrNotHeld and deletes nothing.
//
// No fencing: the token protects the lock, not the data. A holder paused
// past its ttl does not know it lost the lock; when it resumes it writes
// anyway, over what the new holder wrote (a pause can strike between any
// check and the write, so checking the lock first does not help). Every
// acquisition gets a fence greater than all before it, and the protected write
// is a script that refuses to write when the fence key holds a greater one:
// the stale holder's write fails with ErrFenceStale, atomically with the check.
//
// # Failure behaviour
//
// Every call is bounded by its context's deadline, and Acquire also by
// Options.Wait: a hung or SIGSTOPped Redis makes Acquire return ErrNoAnswer
// then, whatever the go-redis client's timeouts (go-redis waits out its
// ReadTimeout, 5s by default and retried MaxRetries times, and watches a
// context's deadline only with ContextTimeoutEnabled). Configure the client
// with ContextTimeoutEnabled: true and a finite ReadTimeout: then go-redis
// itself stops at the deadline; without it, calls under a deadline run on a
// goroutine of their own, a slower path. A try that Redis runs after it was
// abandoned is released when its answer arrives, or expires after its ttl.
//
// If Redis loses its data (a restart without persistence, a failover to a
// replica that missed the last writes), locks vanish and fences restart from
// 1: lock safety holds only as long as Redis keeps its writes. This is a
// single-instance lock, not Redlock.
//
// Metrics (Config.Registerer): chatd_lock_wait_seconds{result},
// chatd_lock_contended_total, chatd_lock_expired_total.
//
// [SET]: https://redis.io/commands/set/
// [INCR]: https://redis.io/commands/incr/
// [GET]: https://redis.io/commands/get/
// [DEL]: https://redis.io/commands/del/
// [PEXPIRE]: https://redis.io/commands/pexpire/
// [PTTL]: https://redis.io/commands/pttl/
package lock
