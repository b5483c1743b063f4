// Package protocol is chatd's real-time wire format as Go types: every
// client → server frame, every server → client event, and the records of
// the SSE stream, as docs/ws-frames.schema.json and docs/PROTOCOL.md
// describe them. The server (realtime, web), the Go SDK (client), the
// load generator (cmd/chatbench) and the tests (internal/wsclient) all
// speak through these types, so a field is added in one place; a test
// checks every type against the schema both ways (field names and which
// are required), so a field in one and not the other fails.
//
// Encoding is in one place too: Encode sets an event's "type" from its Go
// type (callers leave Type empty), EncodeFrame does the same for a
// client frame and enforces MaxFrame. Decode reads a client frame as the
// server does (strict JSON, depth-bounded, UTF-8, a "type", a bounded
// "ref"); DecodeEvent reads and checks one server event as a client does.
//
// The package owns no Redis data and depends on nothing but the standard
// library and errcode, so the SDK can import it without the server.
//
// Two events are made outside this package for speed and checked against
// it by a test: a room's "message", "presence", "typing" and
// "message_removed" events are published by rooms (from Lua for messages
// and seats) and forwarded to clients byte for byte, and matchmaking's
// "matched" and "ticket_expired" likewise — one encoding per event, never
// one per recipient.
package protocol
