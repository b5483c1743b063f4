package realtime_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/realtime/realtimetest"
	"github.com/chatd/chatd/rooms"
)

// TestStartRunsTheGroupCommitOfJoins: a started node seats the joins
// queued behind one in progress in batches (rooms.Seats.Start), as the
// rooms package's own tests run them, rather than each join inline.
func TestStartRunsTheGroupCommitOfJoins(t *testing.T) {
	t.Parallel()
	n := realtimetest.StartNode(t, redistest.New(t), "n1")
	assert.ErrorIs(t, n.Services.Rooms.Seats.Start(context.Background()), rooms.ErrStarted, "the node started the Seats already")
}
