package match_test

import (
	"testing"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/realtime/realtimetest"
)

// This package's tests drive a started node (the core, Chat, Polls and the
// matchmaking use case, composed as chatd composes them: realtimetest)
// through testkit's Transport.

// startNode starts a node with id on r; see realtimetest.StartNode.
func startNode(t testing.TB, r *redistest.Redis, id string) *realtimetest.Node {
	t.Helper()
	return realtimetest.StartNode(t, r, id)
}
