package redisx_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/redisx"
)

var incr = redis.NewScript(`return redis.call('INCR', KEYS[1])`)

func TestPipelinedResendsOnlyTheScriptsAnsweredNoScript(t *testing.T) {
	r := redistest.Own(t, redistest.Options{}) // SCRIPT FLUSH: a server of its own
	rdb := r.Client
	ctx := context.Background()
	key := r.Prefix + ":{n}:count"
	require.NoError(t, rdb.ScriptFlush(ctx).Err())

	var a, b *redis.Cmd
	var plain *redis.IntCmd
	var after *redis.StatusCmd
	err := redisx.Pipelined(ctx, rdb, func(p *redisx.Pipe) {
		a = p.Script(incr, []string{key})
		plain = p.Incr(ctx, key) // not a script: runs once, never re-sent
		b = p.Script(incr, []string{key})
		p.AfterRetry(func(pipe redis.Pipeliner) {
			assert.True(t, p.Resent(a) && p.Resent(b), "both scripts are re-sent")
			after = pipe.Ping(ctx)
		})
	})
	require.NoError(t, err)
	assert.Equal(t, int64(1), plain.Val(), "the plain INCR ran first, between two NOSCRIPT replies")
	assert.Equal(t, int64(2), a.Val())
	assert.Equal(t, int64(3), b.Val())
	require.NotNil(t, after, "the after-retry commands were queued")
	assert.Equal(t, "PONG", after.Val())
	n, err := rdb.Get(ctx, key).Int64()
	require.NoError(t, err)
	assert.Equal(t, int64(3), n, "each command applied exactly once")

	// Cached now: one pipeline, no retry.
	after = nil
	err = redisx.Pipelined(ctx, rdb, func(p *redisx.Pipe) {
		a = p.Script(incr, []string{key})
		p.AfterRetry(func(pipe redis.Pipeliner) { after = pipe.Ping(ctx) })
	})
	require.NoError(t, err)
	assert.Equal(t, int64(4), a.Val())
	assert.Nil(t, after, "nothing to retry: the after-retry hook is not run")
}

func TestPipelinedReportsAScriptError(t *testing.T) {
	rdb := redistest.Real(t).Client
	ctx := context.Background()
	bad := redis.NewScript(`return redis.error_reply('NOPE no')`)
	var c *redis.Cmd
	err := redisx.Pipelined(ctx, rdb, func(p *redisx.Pipe) { c = p.Script(bad, nil) })
	require.Error(t, err)
	assert.ErrorContains(t, c.Err(), "NOPE")
}
