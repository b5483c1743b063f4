package deploy

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/chatdtest"
)

// floodRSSBoundMiB bounds how much a chatd node's resident memory may grow
// while one WebSocket floods it with 4 KB says that Redis (paused) does
// not take: the say queue of a connection is bounded (128 says, 512 KiB,
// realtime/client.go) plus one batch of 64 in flight, and the reader
// stops reading beyond it, so the rest waits in the kernel's socket
// buffers and the flooder's own process. Measured on a loaded 2-core
// machine: 4.0 MiB of growth (1,372 says written before the socket stopped
// taking them). The bound leaves four times that for the GC's lag; an
// unbounded queue would read all 5,000 says (20 MB of text, and a decoded
// copy of each) and pass it.
const floodRSSBoundMiB = 16

// TestFloodIntoAPausedRedisIsBoundedAndDropped: while Redis is stopped
// (SIGSTOP), one guest writes thousands of 4 KB says as fast as its
// socket takes them. The node's RSS grows by less than floodRSSBoundMiB,
// the node still answers the room's other members (a ping), and once the
// flooder closes its socket none of its queued, unacknowledged says
// reaches Redis when it resumes: at most the one batch that was already
// on the wire (64 says) is stored, each once. The other members' chat
// then goes on across both nodes. realtime's
// TestQueuedSaysAreBoundedAndDroppedWhenTheClientCloses checks the same
// queue in-process; this is the real process, its memory and its peers.
func TestFloodIntoAPausedRedisIsBoundedAndDropped(t *testing.T) {
	skipShort(t)
	t.Parallel()
	c := chatdtest.Start(t, chatdtest.Options{Nodes: 2})
	n1, n2 := c.Nodes[0], c.Nodes[1]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm := sdkAdmin(t, c)
	for k, v := range map[string]any{"rate.messages_per_second": 10000, "message.max_length": 4096} {
		_, err := adm.SetSetting(ctx, k, v)
		require.NoError(t, err, k)
	}
	bob := connectMember(ctx, t, sdkUser(ctx, t, []string{n1.URL}, "bob"))
	carol := connectMember(ctx, t, sdkUser(ctx, t, []string{n2.URL}, "carol"))
	room, err := bob.conn.Join(ctx, "flood")
	require.NoError(t, err)
	r, err := carol.conn.Join(ctx, "flood")
	require.NoError(t, err)
	require.Equal(t, room.ID, r.ID)

	// the flooder is a raw WebSocket: an abusive client, not the SDK
	flooder := sdkUser(ctx, t, []string{n1.URL}, "flooder")
	u := url.URL{Scheme: "ws", Host: n1.Addr(), Path: "/ws", RawQuery: "token=" + url.QueryEscape(flooder.Token())}
	ws, resp, err := websocket.DefaultDialer.DialContext(ctx, u.String(), nil)
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	require.NoError(t, err)
	defer ws.Close()
	var inbound atomic.Int64
	go func() { // read (and count) whatever comes, so the node never sees a slow reader
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
			inbound.Add(1)
		}
	}()
	require.NoError(t, ws.WriteJSON(map[string]string{"type": "join", "lobby": "flood", "ref": "j"}))
	require.Eventually(t, func() bool {
		rm, err := bob.cl.Room(ctx, room.ID)
		return err == nil && len(rm.Members) == 3
	}, 30*time.Second, 50*time.Millisecond, "the flooder is seated")
	_, err = bob.conn.Say(ctx, room.ID, "before")
	require.NoError(t, err)
	carol.waitTexts(t, room.ID, []string{"before"}, 30*time.Second)

	base, err := rssKB(n1.PID())
	require.NoError(t, err)
	var peak atomic.Int64
	peak.Store(int64(base))
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if kb, err := rssKB(n1.PID()); err == nil && int64(kb) > peak.Load() {
				peak.Store(int64(kb))
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()

	c.Redis.Server.Pause(t)
	resumed := false
	defer func() {
		if !resumed {
			c.Redis.Server.Resume(t)
		}
	}()
	const flood, size = 5000, 4096
	pad := strings.Repeat("x", size-16)
	sent := 0
	start := time.Now()
	for ; sent < flood && time.Since(start) < 10*time.Second; sent++ {
		_ = ws.SetWriteDeadline(time.Now().Add(time.Second))
		f := fmt.Sprintf(`{"type":"say","room":%q,"ref":"f%d","text":"flood-%05d-%s"}`, room.ID, sent, sent, pad)
		if err := ws.WriteMessage(websocket.TextMessage, []byte(f)); err != nil {
			break // the node stopped reading: TCP pushes back
		}
	}
	t.Logf("the flooder wrote %d of %d 4 KB says in %s before its socket stopped taking them", sent, flood, time.Since(start).Round(time.Millisecond))
	require.Greater(t, sent, 128+64, "more than the queue and a batch were written")

	pingCtx, pingCancel := context.WithTimeout(ctx, 20*time.Second)
	_, err = bob.conn.Ping(pingCtx)
	pingCancel()
	assert.NoError(t, err, "the flooded node still answers bob")

	_ = ws.Close() // the flooder goes: its queued says must go with it
	time.Sleep(time.Second)
	close(stopSampling)
	<-sampled
	c.Redis.Server.Resume(t)
	resumed = true
	grewMiB := float64(peak.Load()-int64(base)) / 1024
	t.Logf("n1 RSS: %d KiB before the flood, peak %d KiB: grew %.1f MiB (bound %d MiB)", base, peak.Load(), grewMiB, floodRSSBoundMiB)
	assert.Less(t, grewMiB, float64(floodRSSBoundMiB), "the node's memory stays bounded under the flood")

	t.Log("the others' chat goes on")
	{
		_, err := bob.conn.Say(ctx, room.ID, "bob after")
		require.NoError(t, err)
		_, err = carol.conn.Say(ctx, room.ID, "carol after")
		require.NoError(t, err)
		bob.waitTexts(t, room.ID, []string{"carol after"}, 30*time.Second)
		carol.waitTexts(t, room.ID, []string{"bob after"}, 30*time.Second)
	}
	t.Log("none of the dropped says reached Redis")
	{
		time.Sleep(time.Second) // a batch still in flight lands
		hist, err := bob.cl.History(ctx, room.ID, client.HistoryOptions{Limit: 1000})
		require.NoError(t, err)
		stored := map[string]int{}
		for _, m := range hist {
			if strings.HasPrefix(m.Text, "flood-") {
				stored[m.Text[:11]]++
			}
		}
		t.Logf("%d of the %d written flood says are in the history (the batches that were on the wire)", len(stored), sent)
		// The worker sends a batch (at most 64 says) and waits for its
		// answer; on a paused Redis that answer is a read timeout (2 s,
		// then go-redis's one retry), after which the worker sends the next
		// batch. A loaded machine can take that long before the flooder's
		// close drops the queue: the first batch (often a single say, the
		// one that arrived alone) and one more may be on the wire. The rest
		// of the 128 queued never are.
		assert.LessOrEqual(t, len(stored), 2*64, "at most the batches in flight: the queue was dropped")
		assert.Less(t, len(stored), sent, "not everything the flooder wrote reached Redis")
		for text, n := range stored {
			assert.Equal(t, 1, n, "%s stored once", text)
		}
	}
}
