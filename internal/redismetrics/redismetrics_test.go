package redismetrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redismetrics"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/redisx"
)

// incrScript is named for the metrics, as the domain packages' scripts are.
var incrScript = redisx.NewScript("test.counter_incr", `return redis.call('INCR', KEYS[1])`)

// gather reads reg: "name{k="v",…}" → value; a histogram gives its
// _count and _sum, a counter or gauge its value.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(ls)
			key := mf.GetName()
			if len(ls) > 0 {
				key += "{" + strings.Join(ls, ",") + "}"
			}
			switch {
			case m.Histogram != nil:
				out[strings.Replace(key, mf.GetName(), mf.GetName()+"_count", 1)] = float64(m.Histogram.GetSampleCount())
				out[strings.Replace(key, mf.GetName(), mf.GetName()+"_sum", 1)] = m.Histogram.GetSampleSum()
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[key] = m.Gauge.GetValue()
			}
		}
	}
	return out
}

func count(cmd string) string {
	return fmt.Sprintf(`chatd_redis_command_duration_seconds_count{cmd=%q}`, cmd)
}
func errs(cmd, kind string) string {
	return fmt.Sprintf(`chatd_redis_errors_total{cmd=%q,kind=%q}`, cmd, kind)
}

// instrumented is a new client of addr with the metrics on a registry of
// its own.
func instrumented(t *testing.T, o *redis.Options) (*redis.Client, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	redismetrics.New(reg).Instrument(rdb)
	return rdb, reg
}

func TestScriptsAreCountedByName(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{}) // SCRIPT FLUSH: a server of its own
	rdb, reg := instrumented(t, &redis.Options{Addr: r.Addrs[0]})
	ctx := context.Background()
	key := r.Prefix + ":n"
	require.NoError(t, rdb.ScriptFlush(ctx).Err())

	// Not cached: EVALSHA answered NOSCRIPT, then EVAL (go-redis's Run).
	require.NoError(t, redisx.Run(ctx, rdb, incrScript, []string{key}).Err())
	for i := 0; i < 4; i++ {
		require.NoError(t, redisx.Run(ctx, rdb, incrScript, []string{key}).Err())
	}
	// In a pipeline: each script and the plain command observed.
	require.NoError(t, redisx.Pipelined(ctx, rdb, func(p *redisx.Pipe) {
		p.Script(incrScript, []string{key})
		p.Script(incrScript, []string{key})
		p.Get(ctx, key)
	}))
	m := gather(t, reg)
	assert.Equal(t, 8.0, m[count("test.counter_incr")], "1 NOSCRIPT'ed EVALSHA + its EVAL + 4 EVALSHA + 2 in the pipeline")
	assert.Equal(t, 1.0, m[errs("test.counter_incr", "noscript")])
	assert.Equal(t, 1.0, m[count("get")], "the pipeline's GET")
	assert.Zero(t, m[count("evalsha")], "a named script never shows as evalsha")
	assert.Zero(t, m[count("eval")])

	// An unnamed script is evalsha (answered NOSCRIPT here), then eval.
	require.NoError(t, redis.NewScript(`return 1`).Run(ctx, rdb, nil).Err())
	m = gather(t, reg)
	assert.Equal(t, 1.0, m[count("evalsha")])
	assert.Equal(t, 1.0, m[errs("evalsha", "noscript")])
	assert.Equal(t, 1.0, m[count("eval")])
}

func TestReplyErrorsByKind(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	rdb, reg := instrumented(t, &redis.Options{Addr: r.Addrs[0], MaxRetries: -1})
	ctx := context.Background()
	key := r.Prefix + ":h"

	require.NoError(t, rdb.HSet(ctx, key, "f", "v").Err())
	require.Error(t, rdb.Incr(ctx, key).Err(), "WRONGTYPE")
	require.ErrorIs(t, rdb.Get(ctx, r.Prefix+":none").Err(), redis.Nil)

	// OOM: no room for a write at all.
	admin := r.Server.Client(t)
	require.NoError(t, admin.ConfigSet(ctx, "maxmemory", "1").Err())
	err := rdb.Set(ctx, r.Prefix+":big", "x", 0).Err()
	require.Error(t, err)
	require.Contains(t, err.Error(), "OOM")
	require.NoError(t, admin.ConfigSet(ctx, "maxmemory", "0").Err())

	// BUSY: a script running past busy-reply-threshold.
	require.NoError(t, admin.ConfigSet(ctx, "busy-reply-threshold", "50").Err())
	spin := make(chan error, 1)
	go func() {
		spin <- admin.Eval(ctx, `local t = redis.call('TIME'); local s = tonumber(t[1]) + 1
			while tonumber(redis.call('TIME')[1]) < s + 1 do end return 1`, nil).Err()
	}()
	require.Eventually(t, func() bool {
		err := rdb.Ping(ctx).Err()
		return err != nil && strings.HasPrefix(err.Error(), "BUSY")
	}, 3*time.Second, 20*time.Millisecond, "a command during the script is answered BUSY")
	killer := redis.NewClient(&redis.Options{Addr: r.Addrs[0]})
	defer killer.Close()
	require.NoError(t, killer.ScriptKill(ctx).Err())
	<-spin

	m := gather(t, reg)
	assert.Equal(t, 1.0, m[errs("incr", "reply")], "WRONGTYPE is a reply error")
	assert.Equal(t, 1.0, m[errs("set", "oom")])
	assert.GreaterOrEqual(t, m[errs("ping", "busy")], 1.0)
	assert.Zero(t, m[errs("get", "reply")]+m[errs("get", "other")], "redis.Nil is not an error")
	assert.Equal(t, 1.0, m[count("get")], "but it is a command")
}

func TestAPausedServerCountsTimeoutsAndADeadOneNetworkErrors(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	rdb, reg := instrumented(t, &redis.Options{Addr: r.Addrs[0], ReadTimeout: 200 * time.Millisecond, MaxRetries: -1, DialTimeout: 300 * time.Millisecond})
	ctx := context.Background()
	require.NoError(t, rdb.Ping(ctx).Err())

	r.Server.Pause(t) // SIGSTOP
	err := rdb.Get(ctx, r.Prefix+":k").Err()
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "a read timeout: %v", err)
	_, err = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, r.Prefix+":a")
		p.Incr(ctx, r.Prefix+":b")
		return nil
	})
	require.Error(t, err)
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	require.Error(t, rdb.Set(cctx, r.Prefix+":c", 1, 0).Err())
	cancel()
	r.Server.Resume(t)

	m := gather(t, reg)
	assert.Equal(t, 1.0, m[errs("get", "timeout")])
	assert.Equal(t, 2.0, m[errs("incr", "timeout")], "each command of the pipeline")
	assert.Equal(t, 1.0, m[errs("set", "timeout")], "a context deadline is a timeout")
	assert.Greater(t, m[`chatd_redis_command_duration_seconds_sum{cmd="get"}`], 0.19, "the wait is observed")

	r.Server.Kill(t)
	require.Error(t, rdb.Get(ctx, r.Prefix+":k").Err())
	m = gather(t, reg)
	assert.GreaterOrEqual(t, m[errs("dial", "network")], 1.0, "connection refused: %v", m)
	assert.GreaterOrEqual(t, m[errs("get", "network")], 1.0)

	t.Run("the caller's own cancellation is not counted", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		require.Error(t, rdb.Get(cctx, "x").Err())
		after := gather(t, reg)
		for k, v := range after {
			if strings.HasPrefix(k, "chatd_redis_errors_total") {
				assert.Equal(t, m[k], v, k)
			}
		}
	})
}

func TestPoolStatsMove(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	// No retries: go-redis retries a command after a pool timeout (with
	// backoff), and on a loaded machine a waiter's retry found a connection
	// freed by then, so no command failed though the pool had timed out
	// (CI, once).
	rdb, reg := instrumented(t, &redis.Options{Addr: r.Addrs[0], PoolSize: 4, PoolTimeout: 50 * time.Millisecond, MaxRetries: -1})
	ctx := context.Background()
	before := gather(t, reg)
	for i := 0; i < 20; i++ {
		require.NoError(t, rdb.Ping(ctx).Err())
	}
	m := gather(t, reg)
	assert.Greater(t, m[`chatd_redis_pool_hits_total{pool="commands"}`], before[`chatd_redis_pool_hits_total{pool="commands"}`], "idle connections reused")
	assert.GreaterOrEqual(t, m[`chatd_redis_pool_misses_total{pool="commands"}`], 1.0, "the first had to dial")
	assert.GreaterOrEqual(t, m[`chatd_redis_pool_conns{pool="commands"}`], 1.0)
	assert.GreaterOrEqual(t, m[`chatd_redis_pool_idle_conns{pool="commands"}`], 1.0)

	// More concurrent blocking commands than connections: pool timeouts.
	// They start together, so four hold the connections for half a second
	// while the other four wait 50 ms for one.
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_ = rdb.Do(ctx, "BLPOP", r.Prefix+":empty", "0.5").Err() // go-redis's BLPop rounds up to 1 s
		}()
	}
	close(start)
	wg.Wait()
	m = gather(t, reg)
	assert.Equal(t, 4.0, m[`chatd_redis_pool_conns{pool="commands"}`], "the pool filled up")
	assert.GreaterOrEqual(t, m[`chatd_redis_pool_timeouts_total{pool="commands"}`], 1.0, "waiters timed out")
	assert.GreaterOrEqual(t, m[errs("blpop", "timeout")], 1.0, "a pool timeout is a timeout")
}

func TestClusterHooksEveryNode(t *testing.T) {
	t.Parallel()
	r := redistest.OwnCluster(t, redistest.ClusterOptions{})
	reg := prometheus.NewRegistry()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: r.Addrs})
	defer rdb.Close()
	redismetrics.New(reg).Instrument(rdb)
	ctx := context.Background()
	for i := 0; i < 30; i++ {
		require.NoError(t, rdb.Set(ctx, fmt.Sprintf("%s:{k%d}", r.Prefix, i), i, 0).Err())
	}
	m := gather(t, reg)
	assert.Equal(t, 30.0, m[count("set")], "every node's commands, once each")
	assert.GreaterOrEqual(t, m[count("cluster")], 1.0, "go-redis's own CLUSTER SLOTS too")
	assert.GreaterOrEqual(t, m[`chatd_redis_pool_conns{pool="commands"}`], 3.0, "the pools of the three masters")

	key := r.Prefix + ":{moved}"
	require.NoError(t, rdb.Set(ctx, key, "a", 0).Err())
	from := r.NodeOf(t, key)
	to := r.Nodes[0]
	if to == from {
		to = r.Nodes[1]
	}
	r.MoveSlot(t, key, to)
	require.NoError(t, rdb.Get(ctx, key).Err(), "go-redis follows the MOVED")
	m = gather(t, reg)
	assert.Equal(t, 1.0, m[errs("get", "moved")], "the node's MOVED answer is seen, one round trip to one node")
	assert.Equal(t, 2.0, m[count("get")], "the GET to the old master and to the new")
}

func TestSentinelClient(t *testing.T) {
	t.Parallel()
	r := redistest.OwnSentinel(t)
	reg := prometheus.NewRegistry()
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: redistest.SentinelMaster, SentinelAddrs: r.Addrs})
	defer rdb.Close()
	redismetrics.New(reg).Instrument(rdb)
	ctx := context.Background()
	require.NoError(t, redisx.Run(ctx, rdb, incrScript, []string{r.Prefix + ":n"}).Err())
	require.NoError(t, rdb.Ping(ctx).Err())
	m := gather(t, reg)
	assert.GreaterOrEqual(t, m[count("test.counter_incr")], 1.0)
	assert.Equal(t, 1.0, m[count("ping")])
	assert.GreaterOrEqual(t, m[`chatd_redis_pool_conns{pool="commands"}`], 1.0)
}

func TestKind(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		kind string
	}{
		{nil, ""},
		{redis.Nil, ""},
		{context.Canceled, ""},
		{fmt.Errorf("op: %w", context.Canceled), ""},
		{context.DeadlineExceeded, "timeout"},
		{redis.ErrPoolTimeout, "timeout"},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, "network"},
		{io.EOF, "network"},
		{redis.ErrClosed, "network"},
		{errors.New("a bug"), "other"},
	} {
		assert.Equal(t, tc.kind, redismetrics.Kind(tc.err), "%v", tc.err)
	}
}
