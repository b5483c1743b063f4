package polls_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/realtime/polls"
	"github.com/chatd/chatd/realtime/realtimetest"
	"github.com/chatd/chatd/rooms"
)

// counterValue reads a counter of reg by name (0 when absent).
func counterValue(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// pollMessages polls p until its messages section holds room.
func pollMessages(t testing.TB, n *realtimetest.Node, p realtime.Principal, room string) polls.PollResult {
	t.Helper()
	var res polls.PollResult
	require.Eventually(t, func() bool {
		var err error
		res, err = n.Polls.Poll(context.Background(), p, 0)
		require.NoError(t, err)
		m, _ := res.Data["messages"].(map[string][]rooms.Message)
		return len(m[room]) > 0
	}, 10*time.Second, 20*time.Millisecond)
	return res
}

func messageIDs(msgs []rooms.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

// TestAPollWhoseCursorWasTrimmedSaysSo: a REST session polls 10 messages;
// 20 more pass and the history is trimmed to the latest 5, past the
// session's cursor. The next poll returns those 5 and names the room in
// "gaps" (the 15 between are gone), and the gap is counted. It used to
// return the 5 as if they followed the 10.
func TestAPollWhoseCursorWasTrimmedSaysSo(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	reg := prometheus.NewRegistry()
	n := realtimetest.StartNode(t, r, "n1", func(c *realtime.Config) { c.Registerer = reg })
	ctx := context.Background()
	p := realtime.Principal{User: "polly", Session: "poll-gap-session"}
	joined, err := n.REST.JoinREST(ctx, p, "trim")
	require.NoError(t, err)
	_, err = n.Polls.Poll(ctx, p, 0) // the join's marks
	require.NoError(t, err)
	w, fw := n.Connect(t, "wes")
	room := n.JoinRoom(t, w, fw, "trim")
	require.Equal(t, joined.ID, room)
	for i := range 10 {
		n.Say(t, w, fw, room, fmt.Sprint("a", i), fmt.Sprint("a", i))
	}
	res := pollMessages(t, n, p, room)
	require.Len(t, res.Data["messages"].(map[string][]rooms.Message)[room], 10)
	assert.Empty(t, res.Gaps)

	var sent []string
	for i := range 20 {
		sent = append(sent, n.Say(t, w, fw, room, fmt.Sprint("b", i), fmt.Sprint("b", i)))
	}
	keys, err := r.Client.Keys(ctx, r.Prefix+"*history*").Result()
	require.NoError(t, err)
	require.Len(t, keys, 1)
	require.NoError(t, r.Client.XTrimMaxLen(ctx, keys[0], 5).Err()) // past the session's cursor

	res = pollMessages(t, n, p, room)
	assert.Equal(t, sent[15:], messageIDs(res.Data["messages"].(map[string][]rooms.Message)[room]), "what is left after the cursor")
	assert.Equal(t, []string{room}, res.Gaps, "the poll says the room's messages since the last poll are not all there")
	assert.Equal(t, float64(1), counterValue(t, reg, "chatd_room_gaps_unfilled_total"))

	last := n.Say(t, w, fw, room, "after", "c")
	res = pollMessages(t, n, p, room)
	assert.Equal(t, []string{last}, messageIDs(res.Data["messages"].(map[string][]rooms.Message)[room]))
	assert.Empty(t, res.Gaps, "told once")
}
