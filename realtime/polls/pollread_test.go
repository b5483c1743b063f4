package polls_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/realtime/chat"
	"github.com/chatd/chatd/realtime/polls"
	"github.com/chatd/chatd/realtime/realtimetest"
	"github.com/chatd/chatd/rooms"
)

// TestPollReadsPageByPageFromWhereItsCursorIs: a poll's read of a room
// (readWithin) takes polls.PollPage messages at a time and stops once its byte
// budget is passed; from the room's first message when the cursor is ""
// and, when the cursor's message was removed, from the first again,
// keeping only what comes after the cursor: no message skipped or
// repeated; a history trimmed past the cursor is a gap, a removed
// message is not.
func TestPollReadsPageByPageFromWhereItsCursorIs(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	n := realtimetest.StartNode(t, r, "n1")
	c, f := n.Connect(t, "alice")
	room := n.JoinRoom(t, c, f, "pollread")
	var ids []string
	for i := range 100 {
		ids = append(ids, n.Say(t, c, f, room, fmt.Sprint("m", i), fmt.Sprint("r", i)))
	}
	reads := 0
	read := func(ctx context.Context, after string, limit int) ([]rooms.Message, error) {
		reads++
		assert.Equal(t, polls.PollPage, limit, "one page at a time")
		return n.Reads.History(ctx, chat.Viewer{}, room, after, limit)
	}
	idsOf := func(ms []rooms.Message) []string {
		out := make([]string, len(ms))
		for i, m := range ms {
			out[i] = m.ID
		}
		return out
	}

	got, gap, err := polls.ReadWithin(ctx, read, "", 1<<20)
	require.NoError(t, err)
	assert.False(t, gap)
	assert.Equal(t, ids, idsOf(got), "everything, from the first")
	assert.Equal(t, 100/polls.PollPage+1, reads, "page by page")

	reads = 0
	got, _, err = polls.ReadWithin(ctx, read, "", 1)
	require.NoError(t, err)
	assert.Equal(t, ids[:polls.PollPage], idsOf(got), "one page past a budget of 1 byte")
	assert.Equal(t, 1, reads)

	require.NoError(t, n.Services.Rooms.Messages.Remove(ctx, room, ids[40]))
	got, gap, err = polls.ReadWithin(ctx, read, ids[40], 1<<20)
	require.NoError(t, err)
	assert.Equal(t, ids[41:], idsOf(got), "after a removed cursor: what comes after it")
	assert.False(t, gap, "a removed message with older ones still there is no gap")

	// The history trimmed past the cursor: what is left, and a gap.
	keys, err := r.Client.Keys(ctx, r.Prefix+"*history*").Result()
	require.NoError(t, err)
	require.Len(t, keys, 1)
	require.NoError(t, r.Client.XTrimMaxLen(ctx, keys[0], 10).Err())
	got, gap, err = polls.ReadWithin(ctx, read, ids[50], 1<<20)
	require.NoError(t, err)
	assert.Equal(t, ids[90:], idsOf(got), "what the trimmed history still holds")
	assert.True(t, gap, "the cursor's message was trimmed with those after it")
}
