package dirty

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/bus"
	"github.com/chatd/chatd/internal/redistest"
)

// callCommands are the commands a take may send: the wait script (EVAL
// after NOSCRIPT), or a bare GETDEL, as Take did before it ran the script.
var callCommands = []string{"evalsha", "eval", "getdel"}

// scriptKeys returns the KEYS of an EVALSHA or EVAL command, none for
// another command.
func scriptKeys(cmd redis.Cmder) []string {
	args := cmd.Args()
	if name := cmd.Name(); name != "evalsha" && name != "eval" {
		return nil
	}
	n, _ := args[2].(int)
	keys := make([]string, 0, n)
	for _, a := range args[3 : 3+n] {
		s, _ := a.(string)
		keys = append(keys, s)
	}
	return keys
}

var retryBackends = []redistest.Backend{
	{Name: "single server", Start: redistest.New},
	{Name: "embedded", Start: redistest.InProcess},
	{Name: "cluster", Start: redistest.Cluster},
}

// The bounds a take's script call keeps (redisx.CallBound,
// redisx.CallRecordTTL), pinned.
const (
	wantCallBound = 10 * time.Second
	wantTakenTTL  = 30 * time.Second
)

// checkRecord checks the call the hook resent, made by a call that returned
// at end: its context ended wantCallBound after the call started at the
// latest, and its third key is the session's record of the call, in the
// test's prefix, with a TTL of at most wantTakenTTL (present only when the
// take found marks).
func checkRecord(t *testing.T, r *redistest.Redis, h *redistest.Resend, end time.Time, session string, dirty bool) {
	t.Helper()
	cmd, deadline := h.Resent(t)
	if assert.False(t, deadline.IsZero(), "the call's context has a deadline") {
		assert.False(t, deadline.After(end.Add(wantCallBound)), "no retry is sent after the record may have lapsed: deadline %v after the call", deadline.Sub(end))
	}
	keys := scriptKeys(cmd)
	if !assert.Len(t, keys, 3, "mask, waiters and the call's record") {
		return
	}
	assert.True(t, strings.HasPrefix(keys[2], r.Prefix+":{session:"+session+"}:taken:"), "record key %s", keys[2])
	ttl, err := r.Client.PTTL(context.Background(), keys[2]).Result()
	require.NoError(t, err)
	if dirty {
		assert.Greater(t, ttl, time.Duration(0), "the dirty take is recorded, with a TTL")
		assert.LessOrEqual(t, ttl, wantTakenTTL)
	} else {
		assert.Equal(t, time.Duration(-2), ttl, "a clean take records nothing")
	}
}

// checkRetriedDirtyCall arms h so that call (a take or a wait of session,
// whose mask holds first) is sent twice with a mark of between made by
// mark between the copies, then checks that the call answered first (the
// first copy's take), that the call was recorded, and that the next take
// finds between.
func checkRetriedDirtyCall(t *testing.T, r *redistest.Redis, h *redistest.Resend, tr *Tracker, session string,
	mark func(Mask), call func() (Mask, error), first, between Mask) {
	t.Helper()
	h.Arm(func() { mark(between) })
	m, err := call()
	require.NoError(t, err)
	assert.Equal(t, first, m, "the retry answers what the first copy took")
	checkRecord(t, r, h, time.Now(), session, true)
	m, err = tr.Take(context.Background(), session)
	require.NoError(t, err)
	assert.Equal(t, between, m, "the mark made between the copies stays for the next take")
}

// TestRetriedTakeLosesNoMark: go-redis sends a call again when its reply
// does not come in time, and the first copy may have run. A bare GETDEL
// retried that way lost the mask the first copy took: the client never read
// those sections until they were marked again. The retry must answer the
// first copy's mask and leave a mark made between the copies for the next
// take.
func TestRetriedTakeLosesNoMark(t *testing.T) {
	t.Parallel()
	redistest.Each(t, retryBackends, func(t *testing.T, r *redistest.Redis) {
		ctx := context.Background()
		h := redistest.ResendCommands(callCommands...)
		rdb := h.Client(t, r)
		tr := New(rdb, Config{Prefix: r.Prefix, Node: "n0", Logger: quiet})
		other := New(r.Client, Config{Prefix: r.Prefix, Node: "n1", Logger: quiet})

		t.Run("a retried dirty take answers the first copy's mask", func(t *testing.T) {
			_, err := tr.Open(ctx, "s-take", "ann")
			require.NoError(t, err)
			mark := func(bits Mask) { require.NoError(t, other.MarkSessions(ctx, []string{"s-take"}, bits)) }
			checkRetriedDirtyCall(t, r, h, tr, "s-take", mark, func() (Mask, error) { return tr.Take(ctx, "s-take") }, AllSections, Of(Wallet))
		})

		t.Run("a retried clean take marks nothing and records nothing", func(t *testing.T) {
			h.Arm(func() {})
			m, err := tr.Take(ctx, "s-take")
			require.NoError(t, err)
			assert.Zero(t, m)
			checkRecord(t, r, h, time.Now(), "s-take", false)
			assert.Zero(t, r.Client.Exists(ctx, tr.k.waiters("s-take")).Val(), "a take registers no long poll")
		})

		t.Run("a caller's earlier deadline stays the call's", func(t *testing.T) {
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			want, _ := cctx.Deadline()
			h.Arm(func() {})
			_, err := tr.Take(cctx, "s-take")
			require.NoError(t, err)
			_, deadline := h.Resent(t)
			assert.True(t, deadline.Equal(want), "deadline %v, the caller's %v", deadline, want)
		})
	})
}

// TestRetriedWaitLosesNoMark: the long poll's script call, retried, answers
// the mask its first copy took; a retried clean call registers the poll
// once, or delivers a mark made between the copies.
func TestRetriedWaitLosesNoMark(t *testing.T) {
	t.Parallel()
	redistest.Each(t, retryBackends, func(t *testing.T, r *redistest.Redis) {
		ctx := context.Background()
		h := redistest.ResendCommands(callCommands...)
		rdb := h.Client(t, r)
		b := bus.New(r.NewClient(t), bus.Config{Node: "n0", Prefix: r.Prefix, Logger: quiet})
		t.Cleanup(b.Start(context.Background()))
		tr := New(rdb, Config{Prefix: r.Prefix, Node: "n0", Logger: quiet})
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		require.NoError(t, tr.Start(sctx, b))
		t.Cleanup(func() { _ = tr.Stop(context.Background()) })
		other := New(r.Client, Config{Prefix: r.Prefix, Node: "n1", Logger: quiet})
		mark := func(bits Mask) {
			require.NoError(t, other.MarkSessions(ctx, []string{"s-wait"}, bits))
		}
		_, err := tr.Open(ctx, "s-wait", "bea")
		require.NoError(t, err)
		_, err = tr.Take(ctx, "s-wait")
		require.NoError(t, err)

		t.Run("a retried dirty wait answers the first copy's mask", func(t *testing.T) {
			mark(Of(Wallet))
			checkRetriedDirtyCall(t, r, h, tr, "s-wait", mark, func() (Mask, error) { return tr.Wait(ctx, "s-wait", 5*time.Second) }, Of(Wallet), Of(Match))
		})

		t.Run("a retried clean wait registers the poll once", func(t *testing.T) {
			h.Arm(func() {})
			m, err := tr.Wait(ctx, "s-wait", 300*time.Millisecond)
			require.NoError(t, err)
			assert.Zero(t, m)
			checkRecord(t, r, h, time.Now(), "s-wait", false)
			assert.Equal(t, []string{tr.channel}, r.Client.SMembers(ctx, tr.k.waiters("s-wait")).Val())
		})

		t.Run("a retried clean wait delivers a mark made between the copies", func(t *testing.T) {
			h.Arm(func() { mark(Of(Notices)) })
			m, err := tr.Wait(ctx, "s-wait", 5*time.Second)
			require.NoError(t, err)
			assert.Equal(t, Of(Notices), m)
			m, err = tr.Take(ctx, "s-wait")
			require.NoError(t, err)
			assert.Zero(t, m, "taken once")
		})
	})
}
