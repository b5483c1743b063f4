// Package redismetrics measures chatd's Redis client from go-redis hooks:
// how long each command takes by command family, which fail and how, and
// how the connection pool fares. It owns no keys and sends no command of
// its own; it watches the commands the domain packages send.
//
// Metrics (registered on the Registerer given to New):
//
//   - chatd_redis_command_duration_seconds{cmd}: a histogram of command
//     latency as the client saw it (write, server time, read; a retry by
//     go-redis is a second observation). cmd is the command's name in
//     lower case ("get", "xadd", "cluster"), or for a Lua script the name
//     it was made with (redisx.NewScript: "rooms.message_send"), never
//     the opaque "evalsha" of a named script. A pipeline is observed once
//     per command, each with the pipeline's round trip: that is the time
//     each of its commands waited.
//   - chatd_redis_errors_total{cmd,kind}: failed commands by family and
//     kind: timeout (a read or write deadline, a context deadline, a pool
//     wait), network (a refused, reset or closed connection, the client
//     closed), oom, busy (a script ran past busy-reply-threshold), moved
//     (MOVED or ASK: the slot map changed), noscript (EVALSHA of a script
//     the server does not hold; redisx re-sends it as EVAL), reply (any
//     other error reply: LOADING, READONLY, CLUSTERDOWN, a script's own
//     error…) and other. A redis.Nil answer is not an error and neither is
//     the caller's own cancellation (a shutdown, a client gone): counting
//     those would page someone at each deploy. Failed dials are counted
//     under cmd="dial".
//   - chatd_redis_pool_*: the pool's counters and gauges (hits, misses,
//     timeouts, total, idle and stale connections), read from PoolStats at
//     scrape time, for the main pool and go-redis's pipeline pool.
//
// Instrument wires a single-server, Sentinel (failover) or Cluster client.
// On a Cluster the hook goes on every node's client (ClusterClient.OnNewNode)
// rather than on the cluster client, so that each observation is one round
// trip to one server: a cluster-level hook would time a command across its
// MOVED redirects and retries, and a pipeline across every node it spans.
//
// Why not time commands at their call sites: a dashboard needs every
// command, including the ones go-redis sends on its own (CLUSTER SLOTS,
// the EVAL fallback of a NOSCRIPT), and the call sites would drift; and an
// "evalsha" family lumps the seat, send and lock scripts into one line, so
// the script that is slow cannot be told from the others.
//
// Cost: the hook adds two clock reads, a label lookup and a histogram
// observation per command (see BenchmarkHook).
package redismetrics
