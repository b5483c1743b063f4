package redistest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/keyspace"
)

func TestNewGivesPrefixedWorkingRedis(t *testing.T) {
	t.Parallel()
	r := New(t)
	ctx := context.Background()
	key := r.Prefix + ":k"
	require.NoError(t, r.Client.Set(ctx, key, "v", time.Minute).Err())
	assert.Equal(t, "v", r.Client.Get(ctx, key).Val())
	assert.NotEqual(t, r.Prefix, Prefix(t), "prefixes are unique")
	if Strict() {
		assert.NotEqual(t, Embedded, r.Kind, "strict mode never falls back to miniredis")
	}
}

func TestPrivateServerKillPauseRestart(t *testing.T) {
	t.Parallel()
	r := Own(t, Options{})
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: r.Addrs[0], MaxRetries: -1, ReadTimeout: 300 * time.Millisecond, DialTimeout: 300 * time.Millisecond})
	defer c.Close()
	require.NoError(t, c.Set(ctx, "k", "1", 0).Err())

	t.Run("paused server times out, resumed answers", func(t *testing.T) {
		r.Server.Pause(t)
		err := c.Get(ctx, "k").Err()
		require.Error(t, err)
		r.Server.Resume(t)
		// the timed-out connection was dropped; a fresh one answers
		require.Eventually(t, func() bool { return c.Get(ctx, "k").Val() == "1" }, 5*time.Second, 20*time.Millisecond)
	})

	t.Run("killed server refuses, restarted answers empty", func(t *testing.T) {
		r.Server.Kill(t)
		require.Error(t, c.Ping(ctx).Err())
		r.Server.Start(t)
		require.Eventually(t, func() bool { return c.Ping(ctx).Err() == nil }, 5*time.Second, 20*time.Millisecond)
		assert.Equal(t, redis.Nil, c.Get(ctx, "k").Err(), "no persistence: data is gone")
	})
}

func TestAOFServerKeepsDataAcrossRestart(t *testing.T) {
	t.Parallel()
	r := Own(t, Options{AOF: true})
	ctx := context.Background()
	require.NoError(t, r.Client.Set(ctx, "k", "kept", 0).Err())
	r.Server.Restart(t)
	require.Eventually(t, func() bool { return r.Client.Get(ctx, "k").Val() == "kept" }, 5*time.Second, 20*time.Millisecond)
}

func TestClusterHasThreeMastersAndRoutesTaggedKeys(t *testing.T) {
	t.Parallel()
	r := Cluster(t)
	ctx := context.Background()
	cc := r.Client.(*redis.ClusterClient)
	var masters atomic.Int32
	require.NoError(t, cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		masters.Add(1)
		return c.Ping(ctx).Err()
	}))
	assert.Equal(t, int32(3), masters.Load())

	// keys of many units spread over all masters; keys of one unit share a slot,
	// so a multi-key command on them works
	ks := keyspace.New(r.Prefix)
	nodes := map[string]bool{}
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
		k1, k2 := ks.Key("user", id, "x"), ks.Key("user", id, "y")
		require.NoError(t, cc.MSet(ctx, k1, "1", k2, "2").Err(), "tagged keys share a slot")
		node, err := cc.MasterForKey(ctx, k1)
		require.NoError(t, err)
		nodes[node.Options().Addr] = true
	}
	assert.Len(t, nodes, 3, "ten units land on all three masters")
	err := cc.MSet(ctx, ks.Key("user", "a", "x"), "1", ks.Key("user", "b", "x"), "2").Err()
	assert.ErrorContains(t, err, "CROSSSLOT")
}
