package identity

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/names"
)

// pipeCounter counts the pipelines a client sends (n), and their
// commands (cmds).
type pipeCounter struct{ n, cmds atomic.Int64 }

func (*pipeCounter) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*pipeCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (p *pipeCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		p.n.Add(1)
		p.cmds.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// countedRegistry is a registry on a Redis of its own whose client counts
// its pipelines, not started: no cache, every admission that is not
// refused on the node asks Redis.
func countedRegistry(t *testing.T) (*redistest.Redis, *Registry, *pipeCounter) {
	r := redistest.Own(t, redistest.Options{})
	c := redis.NewClient(&redis.Options{Addr: r.Addrs[0]})
	t.Cleanup(func() { _ = c.Close() })
	pipes := &pipeCounter{}
	c.AddHook(pipes)
	return r, New(c, Config{Prefix: r.Prefix, TTL: fixed(time.Hour), Registerer: prometheus.NewRegistry()}), pipes
}

// TestAdmitMany: each admission is answered as Admit would have answered
// it alone — renewed, taken back, another holder's, signed out (known here
// or only in Redis), a bad name — and those Redis must answer go in
// pipelines of admitBatch, not one round trip each.
func TestAdmitMany(t *testing.T) {
	t.Parallel()
	r, reg, pipes := countedRegistry(t)
	ctx := context.Background()
	other := New(r.Client, Config{Prefix: r.Prefix, TTL: fixed(time.Hour)})

	const n = 600
	var as []Admission
	for i := range n {
		name := fmt.Sprintf("u%d", i)
		require.NoError(t, other.Claim(ctx, name, "h"))
		require.NoError(t, r.Client.PExpire(ctx, claimKey(reg.space, name), time.Minute).Err())
		as = append(as, Admission{Name: name, Holder: "h", Expires: hour()})
	}
	require.NoError(t, other.Claim(ctx, "taken", "x"))
	require.NoError(t, other.Claim(ctx, "gone", "h"))
	require.NoError(t, other.Release(ctx, "gone", "h", hour())) // signed out: only Redis knows
	require.NoError(t, reg.Claim(ctx, "left", "h"))
	require.NoError(t, reg.Release(ctx, "left", "h", hour())) // signed out here too
	as = append(as,
		Admission{Name: "taken", Holder: "h", Expires: hour()},
		Admission{Name: "gone", Holder: "h", Expires: hour()},
		Admission{Name: "free", Holder: "h", Expires: hour()},
		Admission{Name: "bad name!", Holder: "h", Expires: hour()},
		Admission{Name: "left", Holder: "h", Expires: hour()},
	)
	require.NoError(t, other.Claim(ctx, "warm", "h"))
	require.NoError(t, reg.Admit(ctx, "warm", "h", hour()), "the script loaded: a NOSCRIPT is sent again")
	before := pipes.n.Load()
	errs := reg.AdmitMany(ctx, as)
	require.Len(t, errs, len(as))
	for i := range n {
		require.NoError(t, errs[i], as[i].Name)
	}
	assert.ErrorIs(t, errs[n], ErrNotHolder)
	assert.ErrorIs(t, errs[n+1], ErrSignedOut)
	assert.NoError(t, errs[n+2], "a free name is taken back")
	assert.ErrorIs(t, errs[n+3], names.ErrBadName)
	assert.ErrorIs(t, errs[n+4], ErrSignedOut)
	// 603 asked (not the bad name, nor the holder signed out here): 10 pipelines of at most 64
	assert.Equal(t, int64(10), pipes.n.Load()-before, "pipelines")
	assert.Equal(t, float64(n+1), count(t, reg, "admit", "renewed"))
	assert.Equal(t, 1.0, count(t, reg, "admit", "taken_back"))
	assert.Equal(t, 1.0, count(t, reg, "admit", "not_holder"))
	assert.Equal(t, 1.0, count(t, reg, "admit", "signed_out"))
	assert.Equal(t, 1.0, count(t, reg, "admit", "signed_out_local"))
	assert.Greater(t, pttl(t, r, "u599"), 59*time.Minute, "renewed to the full TTL")
	h, _, err := reg.Holder(ctx, "free")
	require.NoError(t, err)
	assert.Equal(t, "h", h)
	assert.Empty(t, reg.AdmitMany(ctx, nil))
}

// TestAdmitManyAsksOncePerHolderAndName: a guest's connections renewed in
// one call (two tabs, the same token) cost one script, and each is
// answered its reply — renewed, or refused when the name is another's —
// while another holder's admission of the same name is asked apart.
func TestAdmitManyAsksOncePerHolderAndName(t *testing.T) {
	t.Parallel()
	_, reg, pipes := countedRegistry(t)
	ctx := context.Background()
	require.NoError(t, reg.Claim(ctx, "warm", "h"), "the scripts are loaded")
	require.NoError(t, reg.Admit(ctx, "warm", "h", hour()))
	require.NoError(t, reg.Claim(ctx, "Tabs", "h"))
	require.NoError(t, reg.Claim(ctx, "taken", "x"))

	before, renewed := pipes.cmds.Load(), count(t, reg, "admit", "renewed")
	errs := reg.AdmitMany(ctx, []Admission{
		{Name: "Tabs", Holder: "h", Expires: hour()},
		{Name: "taken", Holder: "h", Expires: hour()},
		{Name: "tabs", Holder: "h", Expires: hour()}, // the same name, folded
		{Name: "taken", Holder: "h", Expires: hour()},
		{Name: "Tabs", Holder: "h", Expires: hour()},
		{Name: "tabs", Holder: "other", Expires: hour()}, // another holder: its own script
	})
	require.Len(t, errs, 6)
	for _, i := range []int{0, 2, 4} {
		assert.NoError(t, errs[i], "admission %d renewed", i)
	}
	for _, i := range []int{1, 3, 5} {
		assert.ErrorIs(t, errs[i], ErrNotHolder, "admission %d", i)
	}
	assert.Equal(t, int64(3), pipes.cmds.Load()-before, "one script per holder and name")
	assert.Equal(t, 3.0, count(t, reg, "admit", "renewed")-renewed, "every admission counted, as Admit counts it")
	assert.Equal(t, 3.0, count(t, reg, "admit", "not_holder"))
}
