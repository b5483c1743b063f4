// Package rpc is the rpc use case of a chatd node: a client's call (the
// WebSocket rpc frame, POST /api/v1/rpc/{method}) forwarded to the
// application's backend by the rpc hook (package hooks), and the
// backend's answer returned. It owns no Redis keys and no state: a call
// is one signed POST, never retried by chatd (it may act), bounded by the
// hook's timeout and refused at once while the hook's circuit breaker is
// open. The transports rate-limit the calls like every other frame and
// request.
package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/hooks"
	"github.com/chatd/chatd/realtime"
)

// MaxData is the largest data a call may carry.
const MaxData = 16 << 10

// Errors of a call, besides the hooks' (hooks.ErrNoRPC, a
// *hooks.DeniedError, hooks.ErrUnavailable).
var (
	// ErrBadMethod is returned for a method name that is not 1 to 64 of
	// A–Z a–z 0–9 _ . : -.
	ErrBadMethod = errcode.New(errcode.BadName, "rpc: bad method name")
	// ErrTooLarge is returned for data over MaxData bytes.
	ErrTooLarge = errcode.New(errcode.TooLarge, "rpc: the call's data is too large")
	// ErrBadData is returned for data that is not JSON.
	ErrBadData = errcode.New(errcode.BadJSON, "rpc: the call's data is not JSON")
)

// ErrTooManyCalls is the sentinel of a call over a user's rate on this
// node (Rate a second, Burst at once), over every transport together.
var ErrTooManyCalls = errcode.New(errcode.RateLimited, "rpc: too many calls")

// The rate of one user's calls on one node, WebSocket frames and REST
// requests together (a WebSocket rpc frame is also held to its
// connection's frame rate, realtime.FrameRates).
const (
	Rate  = 5  // calls a second
	Burst = 20 // calls at once
)

// RPC forwards clients' calls to the backend.
type RPC struct {
	hooks *hooks.Hooks
	now   func() time.Time
	mu    sync.Mutex
	users map[string]*bucket // the rate of each caller on this node
}

type bucket struct {
	tokens float64
	at     time.Time
}

// New builds the rpc use case on h (nil = no rpc hook: every call answers
// hooks.ErrNoRPC); now is the clock (nil = time.Now).
func New(h *hooks.Hooks, now func() time.Time) *RPC {
	if now == nil {
		now = time.Now
	}
	return &RPC{hooks: h, now: now, users: map[string]*bucket{}}
}

// allow takes a token of user's bucket.
func (r *RPC) allow(user string) error {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.users[user]
	if b == nil {
		if len(r.users) >= 100_000 {
			r.users = map[string]*bucket{} // bounded: start over
		}
		b = &bucket{tokens: Burst, at: now}
		r.users[user] = b
	}
	if now.After(b.at) {
		b.tokens = min(Burst, b.tokens+now.Sub(b.at).Seconds()*Rate)
		b.at = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return nil
	}
	retry := time.Duration((1 - b.tokens) / Rate * float64(time.Second))
	return &realtime.LimitError{Err: ErrTooManyCalls, Retry: retry,
		Text: fmt.Sprintf("at most %d calls a second (%d at once); retry in %.1f s", Rate, Burst, retry.Seconds())}
}

// Call calls method of the backend as p with data ("" or any JSON) and
// returns the backend's data (nil = none). It returns ErrBadMethod,
// ErrTooLarge, a rate limit (wrapping ErrTooManyCalls), ErrBadData, hooks.ErrNoRPC, a *hooks.DeniedError or an
// error wrapping hooks.ErrUnavailable.
func (r *RPC) Call(ctx context.Context, p realtime.Principal, method string, data json.RawMessage) (json.RawMessage, error) {
	if !validMethod(method) {
		return nil, fmt.Errorf("%w: a method is 1 to 64 of A-Z a-z 0-9 _ . : - (got %q)", ErrBadMethod, clip(method))
	}
	if len(data) > MaxData {
		return nil, fmt.Errorf("%w: at most %d bytes, got %d", ErrTooLarge, MaxData, len(data))
	}
	if len(data) > 0 && !json.Valid(data) {
		return nil, ErrBadData
	}
	if err := r.allow(p.User); err != nil {
		return nil, err
	}
	return r.hooks.RPC(ctx, hooks.RPCRequest{User: p.User, Session: p.Session, Method: method, Data: data})
}

func validMethod(m string) bool {
	if len(m) == 0 || len(m) > 64 {
		return false
	}
	for i := 0; i < len(m); i++ {
		c := m[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
