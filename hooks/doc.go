// Package hooks calls the application's backend over HTTP, so that a
// team's own service takes part in what chatd does (like Centrifugo's
// connect, subscribe, publish and RPC proxies, or Nakama's before hooks):
//
//	connect  a WebSocket or event stream opens (web/admit.go, through
//	         sessions.Connect): allow, deny with a reason (the open is
//	         refused 403 hook_denied), or attach data the client sees in
//	         hello's "data"
//	join     a seat in a lobby (a WebSocket join, a REST join; Chat.join):
//	         allow, or deny with a reason (hook_denied)
//	publish  a say or a REST post, before it is stored (Chat.send, on the
//	         sender's say worker or request): allow, deny (hook_denied,
//	         the message stored and delivered nowhere), or replace the
//	         text (checked again against message.max_length). Data in a
//	         publish reply is ignored: a message stores no data.
//	match    a match formed (the matcher's OnMatched, realtime/match):
//	         the backend learns the players, the room and the queue; the
//	         data it answers is carried by every player's matched event
//	         on every node (and the poll's match section)
//	rpc      a client's call (the WebSocket rpc frame, POST
//	         /api/v1/rpc/{method}; realtime/rpc): forwarded, the answer's
//	         data returned in rpc_result
//
// # The request
//
// Every call is a POST of a JSON object to the hook's URL with these
// headers: Content-Type application/json; X-Chatd-Hook (the hook's name);
// X-Chatd-Timestamp (unix seconds when this attempt was sent);
// Idempotency-Key (the event id: the same on every attempt of one call,
// and for a publish the same for the same say sent again by its client —
// its session, room and ref — and for a match "match-<queue>-<id>");
// X-Chatd-Signature: "v1=" + hex(HMAC-SHA256(secret, timestamp + "." +
// body)) for each configured secret, comma-separated (rotation: add the
// new secret to chatd, then to the backend, then drop the old one from
// chatd). The backend must check one signature against one of its secrets
// and refuse a timestamp more than ReplayWindow (5 minutes) from its clock;
// it may remember event ids to recognise a retry. The body starts with
// "hook", "id" (the event id), "node" and "ts" (unix ms); the rest is the
// hook's request (ConnectRequest, JoinRequest, PublishRequest,
// MatchRequest, RPCRequest).
//
// # The reply
//
// Status 200 with a JSON object (Reply), every field optional: {} allows;
// {"deny": {"reason": "…"}} refuses, the reason told to the client with
// code hook_denied; "data" is the connect, match or rpc hook's data (at
// most MaxData for connect and match); "text" replaces a publish's text.
// Anything else — another status (redirects are not followed), a body
// that is not JSON, over MaxReply, a timeout, a refused connection — is a
// failure of the backend.
//
// # Failure is a policy
//
// Per hook: Timeout per attempt (2 s, publish 1 s); Retries after a
// failure (0 by default; only connect, join, publish and match are
// retried — their requests are decisions the backend recognises by the
// event id; rpc never, a call may act); Failure, the policy when the
// backend fails: closed refuses (the client gets hook_unavailable; a match
// stays unannounced and the matcher calls again after its backoff) or open
// lets it through as if allowed, without data (a match is then told
// without data, and that answer is kept). Defaults: closed for connect,
// join, publish and rpc (always), open for match. Scope lists the lobbies
// (join, publish) or queues (match) a hook applies to as path.Match globs;
// empty = all.
//
// A circuit breaker per hook (github.com/sony/gobreaker/v2, a small,
// maintained implementation of the usual closed → open → half-open
// machine, used rather than a copy of it): BreakerFailures failed calls in
// a row (5) open it; while open (BreakerOpen, 10 s) a call fails at once
// without a request and takes the hook's policy; then one call tries, and
// closes it if it passes. So a dead backend costs each say its timeout
// only until the breaker opens, and then nothing.
//
// # Where a hook runs, and what it never holds
//
// A hook call holds no lock and no Redis script: connect runs in the
// opening request, before the upgrade; join in the joining frame's or
// request's own goroutine, before the seat script; publish in the
// sender's say worker (one per WebSocket client) or its REST request,
// after the mute and local rate checks and before rooms.SendMany — never
// in a loop shared by rooms or clients, so a slow backend delays only the
// says of the senders in its scope; rpc in the calling frame's reader or
// request (a connection's later frames wait for it, as for a join). match
// runs in the queue's matcher after the match's room is made, with no
// script open; it delays that queue's next announcements by at most its
// timeout (the breaker bounds a dead backend). The match hook's answer is
// kept in Redis (matchAnswerKey, a STRING for MatchAnswerTTL, written with
// SET NX), so the matcher announcing a match again (at least once per
// match) tells the same data, however the backend answers a retry.
//
// With no URL for a hook, its method answers at once, and a nil *Hooks
// has every hook off: the say path then costs one nil check per batch.
//
// # Metrics
//
// chatd_hook_calls_total{hook,result} (allow, deny, failed_open,
// failed_closed), chatd_hook_errors_total{hook,kind} (timeout, transport,
// status, bad_reply, breaker_open), chatd_hook_duration_seconds{hook} (a
// call, retries included) and chatd_hook_breaker_state{hook} (0 closed, 1
// half-open, 2 open).
//
// The naive versions fail: a hook called inside the send script (or under
// a room's lock) would stop every say of the room, or of the Redis shard,
// for the backend's timeout; without a breaker a dead backend adds its
// full timeout to every say; a retried match hook whose answer is not
// kept tells different players different game servers.
package hooks
