package redisx

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"time"
)

// A write that is not naturally idempotent is made safe to send twice by a
// record of its call: the script is given a random id of the call (CallID)
// in a key, and a second copy of the same call finds the first one's
// record and answers its result instead of writing again.
//
// Second copies are ordinary: go-redis sends a command again when its
// answer is late (a read timeout; the first copy may have run), a plain
// pipeline is re-sent whole, and on a Cluster a redirection adds a copy. A
// node paused while it waited for the answer (SIGSTOP, a frozen VM) sends
// its copy when it wakes, however late that is, unless the call's context
// has ended by then: go-redis checks the context before each retry, and a
// REST request's context has no deadline of its own.
//
// So a recorded call runs in a context that ends CallBound after it began
// at the latest (BoundCall), and its record is kept CallRecordTTL, which
// outlives that bound by 20 s, for copies that wait in a slow server's
// queue. The naive versions fail: without the bound a paused node's copy
// comes after the record has gone and is applied again; a record kept for
// as long as a paused node could sleep costs memory on every write.
const (
	// CallBound is the longest a recorded call may take, the Redis
	// client's retries included.
	CallBound = 10 * time.Second
	// CallRecordTTL is how long a call's record is kept.
	CallRecordTTL = 30 * time.Second
)

// CallRecordLua defines the Lua functions call_recorded(key), the number a
// call recorded under key answered (nil when it has not run), and
// call_answer(key, code, ttl), which records code for ttl ms and returns
// it: for a script that records its own answer, prepended to its source.
//
//go:embed lua/call_lib.lua
var CallRecordLua string

// CallID returns a new random id of one call: 16 hex digits.
func CallID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	return hex.EncodeToString(b[:])
}

// BoundCall returns ctx ending CallBound from now at the latest.
func BoundCall(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, CallBound)
}
