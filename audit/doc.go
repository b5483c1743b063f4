// Package audit owns the log of admin actions: who (which admin token, by
// its role and a short fingerprint, never the token), what (the request's
// method and path, its target and a summary), where (the node) and when.
//
// # Redis pattern: a capped list with a TTL
//
// The log is one LIST, newest first. Record appends with [LPUSH], trims it
// to Config.Max entries with [LTRIM] and renews its TTL with [PEXPIRE], in
// one MULTI/EXEC: the list never grows past Max, and a cluster nobody
// administers for Config.TTL keeps no log at all. List reads the newest
// entries with [LRANGE].
//
// Actions (answered below 400) and refusals (400 or more: the read-only
// token trying to act, a bad request) are two lists, each capped at
// Config.Max: a thousand refusals in half a second, all from the read-only
// token, cannot push one action out of the log. List merges the two by
// time. Each list is kept Config.TTL (30 days) after its own last entry.
// The entries of the server API's keys (the application's backend, which
// may call many times a second) are a third list, actions and refusals
// alike, capped apart too: a busy backend pushes no admin entry out.
//
// The naive version — a key per action, or a list without LTRIM — grows
// Redis with every click of the admin console, and without a TTL outlives
// any retention policy.
//
// [LPUSH]: https://redis.io/commands/lpush/
// [LTRIM]: https://redis.io/commands/ltrim/
// [PEXPIRE]: https://redis.io/commands/pexpire/
// [LRANGE]: https://redis.io/commands/lrange/
package audit
