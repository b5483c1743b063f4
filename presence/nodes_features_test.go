package presence

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// TestHeartbeatShared: a beat answers which of the node's features every
// live node lists, so a node relies on one only then. A node of v0.1.0
// lists none, an entry that does not decode counts as none, a feature
// listed twice by one node counts once, and a dead node no longer counts
// (the beat drops it from the registry, as Nodes does).
func TestHeartbeatShared(t *testing.T) {
	t.Parallel()
	redistest.Each(t, []redistest.Backend{{Name: "redis-server", Start: redistest.Real}, {Name: "embedded", Start: redistest.InProcess}, {Name: "cluster", Start: redistest.Cluster}}, func(t *testing.T, r *redistest.Redis) {
		ctx := context.Background()
		clk := newClock()
		p := New(r.NewClient(t), Config{Prefix: r.Prefix, TTL: 30 * time.Second, Now: clk.Now})
		shared := func(n Node) []string {
			t.Helper()
			b, err := p.Heartbeat(ctx, n)
			require.NoError(t, err)
			return b.Shared
		}

		assert.Equal(t, []string{"x", "y"}, shared(Node{ID: "a", Features: []string{"x", "y"}}), "alone, a node shares all it has")
		assert.Equal(t, []string{"x"}, shared(Node{ID: "b", Features: []string{"x", "x"}}))
		assert.Equal(t, []string{"x"}, shared(Node{ID: "a", Features: []string{"x", "y"}}), "b lacks y")
		assert.Empty(t, shared(Node{ID: "b"}), "b lists nothing now")
		assert.Empty(t, shared(Node{ID: "a", Features: []string{"x", "y"}}))
		assert.Empty(t, shared(Node{ID: "a", Features: []string{"x", "y"}}))

		// A registry entry that is not a node's JSON counts as a node
		// without features.
		require.NoError(t, r.Client.HSet(ctx, p.k.nodeInfo(), "b", "{not json").Err())
		assert.Empty(t, shared(Node{ID: "a", Features: []string{"x", "y"}}))

		// b stops beating: once its beat has expired, a's next beat drops
		// it and shares everything again.
		clk.Add(20 * time.Second)
		assert.Empty(t, shared(Node{ID: "a", Features: []string{"x", "y"}}), "b is live for 10 s more")
		clk.Add(20 * time.Second)
		assert.Equal(t, []string{"x", "y"}, shared(Node{ID: "a", Features: []string{"x", "y"}}))
		ok, err := r.Client.HExists(ctx, p.k.nodeInfo(), "b").Result()
		require.NoError(t, err)
		assert.False(t, ok, "the beat dropped the dead node's entry")
		n, err := r.Client.ZCard(ctx, p.k.nodeBeats()).Result()
		require.NoError(t, err)
		assert.Equal(t, int64(1), n)

		assert.Empty(t, shared(Node{ID: "a"}), "a node without features is told of none")
	})
}

// TestHeartbeatRetriedIsStillFresh: go-redis sends a beat again when its
// answer comes late, and the first copy may have registered the run. A
// first beat (or one after a lapse, or after a Redis lost its data) must
// answer fresh however often it runs, or the node would not rewrite its
// presence claims; the next beat is not fresh, and a dead node's note of
// its fresh beat goes with it.
func TestHeartbeatRetriedIsStillFresh(t *testing.T) {
	t.Parallel()
	redistest.Each(t, []redistest.Backend{{Name: "redis-server", Start: redistest.Real}, {Name: "embedded", Start: redistest.InProcess}, {Name: "cluster", Start: redistest.Cluster}}, func(t *testing.T, r *redistest.Redis) {
		ctx := context.Background()
		clk := newClock()
		h := redistest.ResendScript("presence.node_heartbeat")
		rdb := h.Client(t, r)
		p := New(rdb, Config{Prefix: r.Prefix, TTL: 30 * time.Second, Now: clk.Now})
		beat := func(n Node) Beat {
			t.Helper()
			b, err := p.Heartbeat(ctx, n)
			require.NoError(t, err)
			return b
		}
		a := Node{ID: "a", Run: "run1"}

		h.Arm(nil)
		assert.True(t, beat(a).Fresh, "a first beat, sent twice, answers fresh")
		h.Resent(t)
		clk.Add(time.Second)
		assert.False(t, beat(a).Fresh, "the next beat is not fresh")

		clk.Add(time.Second)
		h.Arm(nil)
		assert.True(t, beat(Node{ID: "a", Run: "run2"}).Fresh, "a new run's first beat, sent twice, answers fresh")
		h.Resent(t)
		clk.Add(time.Second)
		assert.False(t, beat(Node{ID: "a", Run: "run2"}).Fresh)
		ok, err := r.Client.HExists(ctx, p.k.nodeRuns(), "a fresh").Result()
		require.NoError(t, err)
		assert.False(t, ok, "the note of the fresh beat is gone once a beat is not")

		// b beats once, freshly, and dies: a's beat drops it, note and all.
		beat(Node{ID: "b", Run: "r"})
		clk.Add(time.Minute)
		beat(Node{ID: "a", Run: "run2"})
		fields, err := r.Client.HKeys(ctx, p.k.nodeRuns()).Result()
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"a", "a fresh"}, fields, "b's entry and note dropped; a's lapse noted")
	})
}
