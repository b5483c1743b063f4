// Package client is the Go SDK of chatd: a REST client for game clients
// and bots, a poll loop, and a realtime WebSocket connection that survives
// the loss of its node. It speaks the contract of docs/PROTOCOL.md (with
// docs/openapi.json and docs/ws-frames.schema.json) and nothing else: it
// imports no server package but errcode, whose codes it reuses.
//
//	c, err := client.New(client.Config{NodeURLs: []string{"http://10.0.0.1:8080", "http://10.0.0.2:8080"}})
//	err = c.SignIn(ctx, "alice")
//	conn, err := c.Connect(ctx, client.ConnOptions{})
//	room, err := conn.Join(ctx, "general")
//	id, err := conn.Say(ctx, room.ID, "hi")
//	for ev := range conn.Events() { … }
//
// # Errors
//
// Every error answer is an *Error carrying its documented code, HTTP status
// and Retry-After: errors.Is(err, client.ErrNameTaken), or
// errcode.Is(err, errcode.NameTaken). How a WebSocket ended is a
// *CloseError: errors.Is(err, client.ErrKicked), ErrBanned,
// ErrSessionEnded, ErrDraining.
//
// # Retries
//
// A REST call is sent again (Config.Retries times, with backoff, or after
// the answer's Retry-After) when its node did not answer or answered 502,
// 503 or 504, and moves to the next node URL — but only when repeating it
// is safe: reads, calls idempotent by nature (join, leave, read marks, seen
// marks, settings, moderation), and the three posts that carry an
// Idempotency-Key: Post (a message), PostScore and Buy. Each of those
// calls makes a fresh random key and sends the same key on every retry, so
// the server stores the post or purchase once (purchases are deduplicated
// by key, and message and score posts on servers that deduplicate them
// too). A purchase answered 409 conflict is retried with its key as well,
// and so is a keyed call answered 503 not_durable (applied, no replica
// holds it yet: the retry answers the first result once one does), on the
// same node.
// A request that never reached a node (the dial failed) is always retried.
// Sign-in, grants without WithIdempotencyKey, notices and polls are not
// repeated after an unknown outcome: a repeat would claim, grant or post
// twice, or a poll's answer would be lost.
//
// # Polling
//
// Poll runs the long-poll loop of REST clients: ?wait= polls, each answer
// with dirty sections decoded into a PollResult for a callback, failures
// retried with exponential backoff and full jitter (or after Retry-After on
// 429 and 503), until its context ends.
//
// # The realtime connection
//
// Conn uses github.com/fasthttp/websocket, the gorilla/websocket API that
// the module already depends on (the server's WebSocket is built on it):
// a maintained RFC 6455 client with fragmentation, control frames, close
// codes, TLS and proxies, so that the SDK's own code is the protocol, not
// the framing. (cmd/chatbench keeps a hand-written frame reader that
// allocates nothing per frame, for measuring; the SDK decodes each event
// with encoding/json, which costs microseconds per event.)
//
// A Conn opens /ws?batch=1 (several events per frame) unless told not to,
// and follows the rooms it joined. When the connection is lost it
// reconnects by itself: at once after a drain (1012), after backoff
// otherwise (longer after 1013 too slow, 1008 flood, 1011), each time to
// the next node URL (Config.NodeURLs, or Config.NextURL). On the new
// connection it sends a resume for every room, after the last message id it
// queued for the application, then every call that had no answer yet, in
// order, with the same ref. Messages it had already are dropped by id at
// the seam, so the application sees every message of its rooms once, in id
// order, across any number of reconnects — unless the history no longer
// holds the resume point, which is a ResumeGapEvent. A session that ended
// (4000), a ban (4003) and by default a kick (4001) end the Conn instead.
//
// The naive client — reconnect and join again — shows the last 50
// messages twice and loses every message sent while it was away beyond
// those 50; one that resends an unacknowledged say without its ref stores
// it twice. Resuming by id with a dedup filter at the seam, and resending
// with the same ref, are what make the reconnect invisible.
//
// The connection's events reach the application through Conn.Events, a
// channel, from a queue between it and the reader: acks and joins keep
// being processed while the application is busy (a Say from the code that
// reads Events does not deadlock) up to ConnOptions.MaxQueued waiting
// events; beyond that the reader waits, which the server sees as a slow
// client.
package client
