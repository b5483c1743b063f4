package redistest

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redisx"
)

// Resend is a go-redis hook (Client.AddHook) that plays the Redis client's
// own retry of a call whose reply came late. go-redis sends a command
// again when its reply does not come within the read timeout (a stalled
// Redis, or a chatd paused while it waited: after SIGCONT the deadline
// has passed), and the first copy may have been applied. Armed, the hook
// sends the next matching command, runs between (other clients' writes
// meanwhile), and sends the very same command again (same KEYS and ARGV):
// the caller gets the second copy's reply, as it would. A test of a write
// that must be safe to run twice arms it and checks that the second copy
// changed nothing and answered the first one's result.
//
// A first copy that fails (NOSCRIPT: go-redis sends the script whole,
// EVAL, next) is answered as is, and the next matching command is sent
// twice instead. Commands that do not match, such as a new connection's
// handshake (which goes through hooks too), are sent once. Pipelines pass
// through untouched.
type Resend struct {
	match func(redis.Cmder) bool

	mu       sync.Mutex
	armed    bool
	always   bool
	between  func()
	cmd      redis.Cmder
	deadline time.Time
	copies   int
}

// ResendScript returns a Resend of the calls of the redisx script named
// name (EVALSHA, or EVAL after NOSCRIPT).
func ResendScript(name string) *Resend {
	return &Resend{match: func(cmd redis.Cmder) bool {
		args := cmd.Args()
		if len(args) < 2 {
			return false
		}
		s, _ := args[1].(string)
		switch cmd.Name() {
		case "evalsha":
		case "eval":
			sum := sha1.Sum([]byte(s))
			s = hex.EncodeToString(sum[:])
		default:
			return false
		}
		got, _ := redisx.ScriptName(s)
		return got == name
	}}
}

// ResendCommands returns a Resend of the commands named names (lower case,
// as redis.Cmder.Name gives them).
func ResendCommands(names ...string) *Resend {
	return &Resend{match: func(cmd redis.Cmder) bool { return slices.Contains(names, cmd.Name()) }}
}

// Arm makes the next matching command run twice, with between (nil for
// nothing) run between the copies.
func (h *Resend) Arm(between func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed, h.always, h.between, h.cmd, h.deadline = true, false, between, nil, time.Time{}
}

// Always makes every matching command run twice from now on, with between
// (nil for nothing) run between the copies of each.
func (h *Resend) Always(between func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed, h.always, h.between, h.cmd, h.deadline = true, true, between, nil, time.Time{}
}

// Resent returns the last command sent twice and its context's deadline
// (zero for none), failing tb when none was since Arm or Always.
func (h *Resend) Resent(tb testing.TB) (redis.Cmder, time.Time) {
	tb.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	require.NotNil(tb, h.cmd, "a command was sent twice")
	return h.cmd, h.deadline
}

// Copies returns how many copies of matching commands were sent twice so
// far, both copies counted.
func (h *Resend) Copies() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.copies
}

// Client returns a new client of r that sends through h, closed when tb
// ends: the client of the code under test, whose calls h sends twice.
func (h *Resend) Client(tb testing.TB, r *Redis) redis.UniversalClient {
	tb.Helper()
	c := r.NewClient(tb)
	c.AddHook(h)
	return c
}

// DialHook passes dials through.
func (h *Resend) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook sends an armed matching command twice.
func (h *Resend) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		armed, between := h.armed, h.between
		h.mu.Unlock()
		if !armed || !h.match(cmd) {
			return next(ctx, cmd)
		}
		if err := next(ctx, cmd); err != nil && !errors.Is(err, redis.Nil) {
			return err // nothing ran, or it failed: not a lost reply
		}
		if between != nil {
			between()
		}
		h.mu.Lock()
		h.armed = h.always
		h.cmd = cmd
		h.deadline, _ = ctx.Deadline()
		h.copies += 2
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook passes pipelines through.
func (h *Resend) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
