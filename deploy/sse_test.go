package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/protocol"
)

// streamEvent is one record of an event stream: its id and its data.
type streamEvent struct {
	id   string
	data map[string]any
}

// openEvents opens GET /api/v1/events at base (host:port) with the token
// in the query, as EventSource does, and sends its records on the channel
// until the stream ends.
func openEvents(ctx context.Context, t *testing.T, base, token, last string) <-chan streamEvent {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+base+"/api/v1/events?token="+token, nil)
	require.NoError(t, err)
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := (&http.Client{}).Do(req) // no timeout: a stream lasts
	require.NoError(t, err)
	if resp.StatusCode != http.StatusOK {
		p, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET /api/v1/events: %d %s", resp.StatusCode, p)
	}
	require.Equal(t, "text/event-stream; charset=utf-8", resp.Header.Get("Content-Type"))
	out := make(chan streamEvent, 10000)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		rr := protocol.NewRecordReader(resp.Body)
		for {
			rec, err := rr.Next()
			if err != nil {
				return
			}
			ev := streamEvent{id: rec.ID}
			_ = json.Unmarshal(rec.Data, &ev.data)
			out <- ev
		}
	}()
	return out
}

// nextEvent returns the next record of data type typ.
func nextEvent(t *testing.T, ch <-chan streamEvent, typ string) streamEvent {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			require.True(t, ok, "the stream ended before a %q event", typ)
			if ev.data["type"] == typ {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %q event within 30 s", typ)
		}
	}
}

// postsServed is how many message posts node n answered 200 (its
// request histogram on /metrics).
func postsServed(ctx context.Context, t *testing.T, n *node) int {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.addr()+"/metrics", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	re := regexp.MustCompile(`(?m)^chatd_http_request_duration_seconds_count\{([^}]*)\} (\d+)$`)
	total := 0
	for _, m := range re.FindAllStringSubmatch(string(body), -1) {
		if strings.Contains(m[1], `method="POST"`) && strings.Contains(m[1], `/messages"`) && strings.Contains(m[1], `status="200"`) {
			v, _ := strconv.Atoi(m[2])
			total += v
		}
	}
	return total
}

// TestE2EEventStreamThroughBalancer: a browser-like client opens the event
// stream through nginx and sends over plain HTTP through nginx too; the
// balancer puts the sends on other nodes than the stream's (no sticky
// sessions), and the stream gets every message once, in order, as it is
// sent (nginx buffers nothing: each message arrives before the next is
// sent). Cut, the stream reopens through the balancer with its
// Last-Event-ID and gets what it missed.
func TestE2EEventStreamThroughBalancer(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c.setSetting(ctx, "rate.messages_per_second", 1000)
	sam := c.session(ctx, "sam")
	var joined struct {
		Room roomInfo `json:"room"`
	}
	_, err := c.do(ctx, c.lb, http.MethodPost, "/api/v1/lobbies/sse/join", sam, nil, &joined)
	require.NoError(t, err)
	room := joined.Room.ID

	sctx, scut := context.WithCancel(ctx)
	events := openEvents(sctx, t, c.lb, sam, "")
	hello := nextEvent(t, events, "hello")
	streamNode, _ := hello.data["node"].(string)
	require.NotEmpty(t, streamNode)
	nextEvent(t, events, "joined")

	before := map[string]int{}
	for _, n := range c.nodes {
		before[n.id] = postsServed(ctx, t, n)
	}
	const sends = 20
	var ids []string
	for i := 0; i < sends; i++ {
		var out struct {
			Message struct {
				ID string `json:"id"`
			} `json:"message"`
		}
		_, err := c.do(ctx, c.lb, http.MethodPost, "/api/v1/rooms/"+room+"/messages", sam, map[string]string{"text": fmt.Sprintf("m-%d", i)}, &out)
		require.NoError(t, err)
		// each message arrives before the next is sent: nothing in the
		// path holds events back
		ev := nextEvent(t, events, "message")
		msg, _ := ev.data["message"].(map[string]any)
		require.Equal(t, out.Message.ID, msg["id"], "message %d", i)
		assert.Equal(t, room+"@"+out.Message.ID, ev.id)
		ids = append(ids, out.Message.ID)
	}
	elsewhere := 0
	for _, n := range c.nodes {
		if n.id != streamNode {
			elsewhere += postsServed(ctx, t, n) - before[n.id]
		}
	}
	assert.Positive(t, elsewhere, "every send landed on the stream's node %s: the test proves nothing", streamNode)
	t.Logf("%d of %d sends landed on other nodes than the stream's (%s)", elsewhere, sends, streamNode)

	// cut the stream, send, reopen through the balancer with Last-Event-ID
	scut()
	for range events {
	}
	var missed []string
	for i := 0; i < 5; i++ {
		var out struct {
			Message struct {
				ID string `json:"id"`
			} `json:"message"`
		}
		_, err := c.do(ctx, c.lb, http.MethodPost, "/api/v1/rooms/"+room+"/messages", sam, map[string]string{"text": fmt.Sprintf("away-%d", i)}, &out)
		require.NoError(t, err)
		missed = append(missed, out.Message.ID)
	}
	events = openEvents(ctx, t, c.lb, sam, room+"@"+ids[len(ids)-1])
	var got []string
	for len(got) < len(missed) {
		ev := nextEvent(t, events, "message")
		msg, _ := ev.data["message"].(map[string]any)
		got = append(got, msg["id"].(string))
	}
	assert.Equal(t, missed, got, "every missed message once, in order")
}
