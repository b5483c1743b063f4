package client_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/chatdtest"
)

// TestAPollPastATrimmedHistoryNamesTheRoomInGaps: a REST client polls the
// messages of its room; more are sent and the room's history is trimmed
// past its place. Its next poll returns what is left and names the room in
// Gaps (the poll's resume_gap), once.
func TestAPollPastATrimmedHistoryNamesTheRoomInGaps(t *testing.T) {
	skipShort(t)
	cl := chatdtest.Start(t, chatdtest.Options{Nodes: 1})
	ctx := ctxT(t)
	_, err := adminOf(t, cl).SetSetting(ctx, "rate.messages_per_second", 1000)
	require.NoError(t, err)
	alice := newClient(t, "alice", client.Config{BaseURL: cl.Nodes[0].URL})
	require.Eventually(t, func() bool {
		s, err := alice.Settings(ctx)
		return err == nil && s.Values["rate.messages_per_second"] == float64(1000)
	}, wait, 20*time.Millisecond)
	room, err := alice.Join(ctx, "trim")
	require.NoError(t, err)
	// polls until the messages section holds the room
	poll := func() *client.PollResult {
		t.Helper()
		var r *client.PollResult
		require.Eventually(t, func() bool {
			var err error
			r, err = alice.PollOnce(ctx, 0)
			require.NoError(t, err)
			return len(r.Messages[room.ID]) > 0
		}, wait, 20*time.Millisecond)
		return r
	}
	_, err = alice.Post(ctx, room.ID, "first")
	require.NoError(t, err)
	r := poll()
	assert.Empty(t, r.Gaps)

	var sent []string
	for i := range 10 {
		m, err := alice.Post(ctx, room.ID, fmt.Sprint("m", i))
		require.NoError(t, err)
		sent = append(sent, m.ID)
	}
	keys, err := cl.Redis.Client.Keys(ctx, cl.Prefix+"*history*").Result()
	require.NoError(t, err)
	require.Len(t, keys, 1)
	require.NoError(t, cl.Redis.Client.XTrimMaxLen(ctx, keys[0], 3).Err())

	r = poll()
	assert.Equal(t, sent[7:], ids(r.Messages[room.ID]))
	assert.Equal(t, []string{room.ID}, r.Gaps, "the room's messages since the last poll are not all there")

	last, err := alice.Post(ctx, room.ID, "after")
	require.NoError(t, err)
	r = poll()
	assert.Equal(t, []string{last.ID}, ids(r.Messages[room.ID]))
	assert.Empty(t, r.Gaps, "told once")
}
