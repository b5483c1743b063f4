package redistest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOwnClusterWithReplicasFailsOver(t *testing.T) {
	t.Parallel()
	r := OwnCluster(t, ClusterOptions{Replicas: 1})
	require.Len(t, r.Nodes, 6)
	ctx := context.Background()
	key := r.Prefix + ":{k}"
	master := r.NodeOf(t, key)
	assert.Contains(t, r.Nodes[:3], master, "the first three nodes are the masters")
	// SET and WAIT on one connection: the write reaches the replica before
	// the kill (replication is asynchronous), or the promoted replica lacks it
	cmds, err := master.Client(t).Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, key, "v", 0)
		p.Do(ctx, "WAIT", 1, 5000)
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, int64(1), cmds[1].(*redis.Cmd).Val(), "one replica acknowledged the write")

	master.Kill(t)
	took := r.WaitFailover(t, master, 30*time.Second)
	t.Logf("replica promoted %v after the kill", took)
	promoted := r.NodeOf(t, key)
	assert.NotEqual(t, master, promoted)
	c := promoted.Client(t)
	assert.Equal(t, "v", c.Do(ctx, "GET", key).Val(), "the promoted replica has the data (asked directly: the slot is its own)")
}

func TestOwnSentinelPromotesTheReplica(t *testing.T) {
	t.Parallel()
	r := OwnSentinel(t)
	ctx := context.Background()
	require.Equal(t, r.Nodes[0].Addr, r.SentinelMasterAddr(t))
	// SET and WAIT on one connection: the write must reach the replica
	// before the kill, or it is lost
	cmds, err := r.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, r.Prefix+":k", "v", 0)
		p.Do(ctx, "WAIT", 1, 5000)
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, int64(1), cmds[1].(*redis.Cmd).Val(), "one replica acknowledged the write")

	r.Nodes[0].Kill(t)
	start := time.Now()
	require.Eventually(t, func() bool { return r.SentinelMasterAddr(t) == r.Nodes[1].Addr }, 30*time.Second, 100*time.Millisecond,
		"the Sentinels promote the replica")
	t.Logf("Sentinels name the replica master %v after the kill", time.Since(start))
	c := redis.NewClient(&redis.Options{Addr: r.Nodes[1].Addr})
	defer c.Close()
	require.Eventually(t, func() bool { return c.Set(ctx, r.Prefix+":k2", "w", 0).Err() == nil }, 10*time.Second, 100*time.Millisecond,
		"the promoted replica takes writes")
	assert.Equal(t, "v", c.Get(ctx, r.Prefix+":k").Val())
}
