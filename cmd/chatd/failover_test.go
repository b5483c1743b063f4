package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/internal/bus"
	"github.com/chatd/chatd/internal/redistest"
)

// traffic writes to keys spread over every slot range from a few goroutines
// until stop, and records when writes to the watched key last failed and
// last succeeded.
type traffic struct {
	ok, failed atomic.Int64
	lastErr    atomic.Value // the last error writing watch
	mu         sync.Mutex
	errs       map[string]int // errors writing watch, by text
	lastOK     atomic.Int64   // unix nanos of the last successful write to watch
	stop       chan struct{}
	wg         sync.WaitGroup
}

func startTraffic(t *testing.T, rdb redis.UniversalClient, prefix, watch string) *traffic {
	tr := &traffic{stop: make(chan struct{}), errs: map[string]int{}}
	for g := 0; g < 4; g++ {
		tr.wg.Add(1)
		go func() {
			defer tr.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-tr.stop:
					return
				default:
				}
				key := watch
				if i%2 == 1 {
					key = fmt.Sprintf("%s:{u%d}", prefix, i%97)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				err := rdb.Incr(ctx, key).Err()
				cancel()
				if err != nil {
					tr.failed.Add(1)
					if key == watch {
						tr.lastErr.Store(err.Error())
						tr.mu.Lock()
						tr.errs[err.Error()]++
						tr.mu.Unlock()
					}
					time.Sleep(20 * time.Millisecond)
					continue
				}
				tr.ok.Add(1)
				if key == watch {
					tr.lastOK.Store(time.Now().UnixNano())
				}
			}
		}()
	}
	t.Cleanup(tr.close)
	return tr
}

func (tr *traffic) errors() map[string]int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	m := map[string]int{}
	for k, v := range tr.errs {
		m[k] = v
	}
	return m
}

func (tr *traffic) close() {
	select {
	case <-tr.stop:
	default:
		close(tr.stop)
	}
	tr.wg.Wait()
}

func TestClusterClientFollowsAFailover(t *testing.T) {
	t.Parallel()
	r := redistest.OwnCluster(t, redistest.ClusterOptions{Replicas: 1})
	spec, err := redisOptions(r.URL())
	require.NoError(t, err)
	rdb := spec.client()
	defer rdb.Close()

	watch := r.Prefix + ":{watched}"
	tr := startTraffic(t, rdb, r.Prefix, watch)
	require.Eventually(t, func() bool { return tr.lastOK.Load() != 0 }, 5*time.Second, 10*time.Millisecond)
	b, got := startBus(t, rdb, r.Prefix)
	ch := r.Prefix + ":{watched}:events" // on the master that dies

	dead := r.NodeOf(t, watch)
	dead.Kill(t)
	killed := time.Now()
	took := r.WaitFailover(t, dead, 30*time.Second)
	t.Logf("cluster failed over %v after the kill", took)
	require.Eventually(t, func() bool { return tr.lastOK.Load() > killed.Add(took).UnixNano() }, 15*time.Second, 50*time.Millisecond,
		"writes to the dead master's slots succeed again through the same client (errors: %v)", tr.errors())
	t.Logf("writes resumed %v after the kill (%v after the failover); %d ok, %d failed, errors on the watched key %v",
		time.Duration(tr.lastOK.Load()-killed.UnixNano()), time.Duration(tr.lastOK.Load()-killed.Add(took).UnixNano()), tr.ok.Load(), tr.failed.Load(), tr.errors())
	busReceivesAgain(t, b, rdb, ch, got)
	t.Logf("bus receives again %v after the kill", time.Since(killed))
}

// startBus starts a bus on rdb subscribed to the classic channel
// prefix:{watched}:events, whose messages it sends to the returned channel.
func startBus(t *testing.T, rdb redis.UniversalClient, prefix string) (*bus.Bus, chan string) {
	b := bus.New(rdb, bus.Config{Prefix: prefix, CanaryEvery: 100 * time.Millisecond})
	t.Cleanup(b.Start(context.Background()))
	got := make(chan string, 100)
	_, err := b.Subscribe(context.Background(), prefix+":{watched}:events", bus.HandlerFuncs{
		OnReceive: func(_ string, p []byte) {
			select {
			case got <- string(p):
			default:
			}
		},
	})
	require.NoError(t, err)
	require.Eventually(t, b.Ready, 5*time.Second, 20*time.Millisecond)
	return b, got
}

// busReceivesAgain publishes to ch until the bus receives it, and waits for
// the bus's canary.
func busReceivesAgain(t *testing.T, b *bus.Bus, rdb redis.UniversalClient, ch string, got chan string) {
	t.Helper()
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = rdb.Publish(ctx, ch, "again").Err()
		select {
		case m := <-got:
			return m == "again"
		case <-time.After(200 * time.Millisecond):
			return false
		}
	}, 15*time.Second, 10*time.Millisecond, "the bus receives again")
	require.Eventually(t, b.Ready, 15*time.Second, 20*time.Millisecond, "the bus is ready again")
}

func TestSentinelClientFollowsAFailover(t *testing.T) {
	t.Parallel()
	r := redistest.OwnSentinel(t)
	spec, err := redisOptions(r.URL())
	require.NoError(t, err)
	require.NotNil(t, spec.failover, "%s is a Sentinel URL", r.URL())
	rdb := spec.client()
	defer rdb.Close()

	watch := r.Prefix + ":{watched}"
	tr := startTraffic(t, rdb, r.Prefix, watch)
	require.Eventually(t, func() bool { return tr.lastOK.Load() != 0 }, 5*time.Second, 10*time.Millisecond)
	b, got := startBus(t, rdb, r.Prefix)

	r.Nodes[0].Kill(t)
	killed := time.Now()
	require.Eventually(t, func() bool { return r.SentinelMasterAddr(t) == r.Nodes[1].Addr }, 30*time.Second, 50*time.Millisecond,
		"the Sentinels promote the replica")
	took := time.Since(killed)
	t.Logf("Sentinels promoted the replica %v after the kill", took)
	require.Eventually(t, func() bool { return tr.lastOK.Load() > killed.Add(took).UnixNano() }, 15*time.Second, 50*time.Millisecond,
		"writes succeed again through the same client (errors: %v)", tr.errors())
	t.Logf("writes resumed %v after the kill; %d ok, %d failed, errors on the watched key %v",
		time.Duration(tr.lastOK.Load()-killed.UnixNano()), tr.ok.Load(), tr.failed.Load(), tr.errors())
	ctx := context.Background()
	cn := rdb.(*redis.Client).Conn()
	defer cn.Close()
	addr, err := cn.ClientInfo(ctx).Result()
	require.NoError(t, err)
	t.Logf("a new connection reaches %s (the promoted replica is %s)", addr.LAddr, r.Nodes[1].Addr)
	role, err := rdb.Do(ctx, "ROLE").Slice()
	require.NoError(t, err)
	require.Equal(t, "master", role[0], "the client now talks to a master")
	busReceivesAgain(t, b, rdb, r.Prefix+":{watched}:events", got)
	t.Logf("bus receives again %v after the kill", time.Since(killed))
}

// TestRequireMaster: the Sentinel client's OnConnect refuses a connection to
// a replica (what a stale Sentinel answer leads to right after a failover)
// with a READONLY error that errcode maps to redis_unavailable, and lets a
// master's and a Sentinel's connections through.
func TestRequireMaster(t *testing.T) {
	t.Parallel()
	r := redistest.OwnSentinel(t)
	ctx := context.Background()
	dial := func(addr string) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: addr, OnConnect: requireMaster, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}

	err := dial(r.Nodes[1].Addr).Get(ctx, r.Prefix+":k").Err()
	require.Error(t, err, "a read on the replica is refused, not answered with its data")
	assert.Contains(t, err.Error(), "READONLY")
	assert.Equal(t, errcode.RedisUnavailable, errcode.Of(err))
	assert.True(t, redis.IsReadOnlyError(err) || strings.HasPrefix(err.Error(), "READONLY "), "go-redis retries it: %v", err)

	require.NoError(t, dial(r.Nodes[0].Addr).Set(ctx, r.Prefix+":k", "v", time.Minute).Err(), "the master passes")
	require.NoError(t, dial(r.Addrs[0]).Ping(ctx).Err(), "a Sentinel passes")

	spec, err := redisOptions(r.URL())
	require.NoError(t, err)
	rdb := spec.client()
	defer rdb.Close()
	require.NotNil(t, rdb.(*redis.Client).Options().OnConnect, "chatd's Sentinel client checks each connection's role")
	require.NoError(t, rdb.Set(ctx, r.Prefix+":k", "w", time.Minute).Err(), "and reaches the master through it")
}
