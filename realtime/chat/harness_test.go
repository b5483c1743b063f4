package chat_test

import (
	"testing"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/realtime/realtimetest"
)

// The chat use case is tested without a network transport, on a node
// composed as chatd composes it (realtimetest: realtime/app), whose
// clients write through testkit's in-memory Transport, like centrifuge's
// testTransport. Redis is real (internal/redistest): the rules are about
// what Redis holds.

// startNode starts a node with id on r; see realtimetest.StartNode.
func startNode(t testing.TB, r *redistest.Redis, id string, opts ...func(*realtime.Config)) *realtimetest.Node {
	t.Helper()
	return realtimetest.StartNode(t, r, id, opts...)
}
