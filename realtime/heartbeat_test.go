package realtime_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/presence"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/realtime/realtimetest"
	"github.com/chatd/chatd/rooms"
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

// TestSendRecordsFollowTheRegistry: a node keeps its says' send records in
// their keys' claims (rooms.FeatureClaimRecords) only while every live node
// in the registry lists the feature: a node of an older version (v0.1.0
// lists no features) reads records in the lobby only, and a say recorded
// in its claim and retried there would be stored twice.
func TestSendRecordsFollowTheRegistry(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	n1 := realtimetest.StartNode(t, r, "n1")
	msgs := n1.Services.Rooms.Messages
	ctx := context.Background()
	assert.True(t, msgs.ClaimRecords(), "on from the beat in Start: n1 is the only node")
	ns, err := n1.Services.Presence.Nodes(ctx)
	require.NoError(t, err)
	require.Len(t, ns, 1)
	assert.Contains(t, ns[0].Features, rooms.FeatureClaimRecords)
	// marks lists this test's mark of since when claim records have been
	// kept (rooms.Messages.FollowClaimRecords), shared with other nodes.
	marks := func() []string {
		var out []string
		for _, k := range r.Client.Keys(ctx, "*claims-since*").Val() {
			if strings.Contains(k, r.Prefix) {
				out = append(out, k)
			}
		}
		return out
	}
	assert.Len(t, marks(), 1, "the node shares since when")

	_, err = n1.Services.Presence.Heartbeat(ctx, presence.Node{ID: "old", Addr: "127.0.0.1:1", Run: "r-old"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !msgs.ClaimRecords() }, 20*time.Second, 50*time.Millisecond,
		"off once a node without the feature beats")
	assert.Eventually(t, func() bool { return len(marks()) == 0 }, 5*time.Second, 20*time.Millisecond, "and deletes the mark")
	require.NoError(t, n1.Services.Presence.Leave(ctx, "old"))
	require.Eventually(t, msgs.ClaimRecords, 20*time.Second, 50*time.Millisecond, "on again once it is gone")
}
