package direct_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/realtime/realtimetest"
)

// dms returns the texts of the dm events f received, in order.
func dms(f *testkit.Transport) []string {
	var out []string
	for _, m := range f.All() {
		if m["type"] == "dm" {
			out = append(out, m["text"].(string))
		}
	}
	return out
}

// TestDirectResumeAfterALiveMessageMissesAndDoublesNothing drives the
// seam of a resume without a network: bob connects on another node than
// alice's, gets a live message before he asks to resume after an older
// one; the replay brings what he missed and not the live one again, a
// second resume brings nothing, and what follows comes live once.
func TestDirectResumeAfterALiveMessageMissesAndDoublesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := redistest.Real(t)
	n1, n2 := realtimetest.StartNode(t, r, "n1"), realtimetest.StartNode(t, r, "n2")
	alice := realtime.Principal{User: "Alice", Session: "s-alice"}
	var ids []string
	for i := 1; i <= 3; i++ {
		sent, err := n1.Direct.Send(ctx, alice, "bob", fmt.Sprintf("m%d", i), fmt.Sprintf("r%d", i))
		require.NoError(t, err)
		ids = append(ids, sent.Message.ID)
	}
	// n2 has let m1..m3 go by on the direct channel before bob connects
	// (they would reach him live otherwise): a message sent after them on
	// the same channel, to carol on n2, comes after them
	_, fc := n2.Connect(t, "carol")
	_, err := n1.Direct.Send(ctx, alice, "carol", "after m3", "rc")
	require.NoError(t, err)
	fc.Wait(t, "the message to carol", func(ms []map[string]any) bool { return len(dmsOf(ms)) == 1 })
	c, f := n2.Connect(t, "bob")
	_, err = n1.Direct.Send(ctx, alice, "BOB", "m4", "r4")
	require.NoError(t, err)
	f.Wait(t, "the live m4", func(ms []map[string]any) bool { return len(dmsOf(ms)) == 1 })

	require.NoError(t, n2.Direct.Resume(ctx, c, "alice", ids[0], "x"))
	done := f.First(t, "dm_resumed", nil)
	assert.EqualValues(t, 2, done["count"])
	assert.Equal(t, []string{"m4", "m2", "m3"}, dms(f), "m2 and m3 replayed, m4 not again")

	require.NoError(t, n2.Direct.Resume(ctx, c, "alice", ids[0], "y"))
	f.First(t, "dm_resumed", func(m map[string]any) bool { return m["ref"] == "y" })
	_, err = n1.Direct.Send(ctx, alice, "bob", "m5", "r5")
	require.NoError(t, err)
	f.Wait(t, "m5", func(ms []map[string]any) bool { return len(dmsOf(ms)) == 4 })
	time.Sleep(100 * time.Millisecond) // a double would have come by now
	assert.Equal(t, []string{"m4", "m2", "m3", "m5"}, dms(f), "each once")
}

func dmsOf(ms []map[string]any) []map[string]any {
	var out []map[string]any
	for _, m := range ms {
		if m["type"] == "dm" {
			out = append(out, m)
		}
	}
	return out
}
