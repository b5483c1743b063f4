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
	require.NoError(t, r.Client.Set(ctx, key, "v", 0).Err())
	master := r.NodeOf(t, key)
	assert.Contains(t, r.Nodes[:3], master, "the first three nodes are the masters")

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
	require.NoError(t, r.Client.Set(ctx, r.Prefix+":k", "v", 0).Err())
	// the write must reach the replica before the kill, or it is lost
	require.NoError(t, r.Client.Do(ctx, "WAIT", 1, 5000).Err())

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
