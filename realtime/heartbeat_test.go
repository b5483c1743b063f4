package realtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/presence"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/realtime/realtimetest"
)

// TestNodesReportTheirFigures: each node's heartbeat carries its version,
// start time and process figures, read by any node.
func TestNodesReportTheirFigures(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	n1 := realtimetest.StartNode(t, r, "n1", func(c *realtime.Config) { c.Version = "v9.8.7" })
	n2 := realtimetest.StartNode(t, r, "n2")
	n1.Connect(t, "dora")
	var ns []presence.Node
	require.Eventually(t, func() bool {
		var err error
		ns, err = n2.Services.Presence.Nodes(context.Background())
		return err == nil && len(ns) == 2 && ns[0].Connections == 1
	}, 30*time.Second, 100*time.Millisecond, "n1's heartbeat counts dora's connection")
	assert.Equal(t, "n1", ns[0].ID)
	assert.Equal(t, "v9.8.7", ns[0].Version)
	assert.False(t, ns[0].StartedAt.IsZero())
	assert.False(t, ns[0].StartedAt.After(ns[0].LastHeartbeat), "started before its heartbeat")
	assert.Positive(t, ns[0].Goroutines)
	assert.Positive(t, ns[0].MemoryBytes)
	assert.Positive(t, ns[0].HeapBytes)
	assert.GreaterOrEqual(t, ns[0].CPU, 0.0)
	assert.Empty(t, ns[1].Version, "n2 was given no version")
}
