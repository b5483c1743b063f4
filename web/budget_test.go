package web

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/realtime"
)

// budgetSlack is what a body may hold beyond its message budget: the
// envelope ({"messages":[ ... ],"more":false}).
const budgetSlack = 64

// fillWorstCase posts n messages of 2,000 control characters (12 KB each as
// JSON) into room as the system, 8 at a time.
func fillWorstCase(t *testing.T, c *cluster, room string, n int) {
	t.Helper()
	text := strings.Repeat("\x01", 2000)
	var wg sync.WaitGroup
	next := make(chan struct{})
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				st, _, _, err := c.call(c.nodes[0], "POST", "/api/v1/admin/rooms/"+room+"/messages", testAdmin, map[string]string{"text": text}, nil)
				assert.NoError(t, err)
				assert.Equal(t, 200, st)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
}

// rawGet answers the status and body of a GET of path with tok.
func rawGet(t *testing.T, n *testNode, path, tok string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", n.url+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	validateHTTP(t, req, resp, body)
	return resp.StatusCode, body
}

// TestHistoryAndPollStayWithinTheirByteBudget fills a room with 200
// messages of 2,000 control characters (2.4 MB as JSON) and reads it with
// the largest limit: each history page and each poll stays within 1 MiB of
// message JSON, says "more" while messages are left, and paging with after
// (or polling again) returns every message once, in order.
func TestHistoryAndPollStayWithinTheirByteBudget(t *testing.T) {
	r := redistest.Real(t)
	c := newCluster(t, r, 1)
	n := c.nodes[0]
	tok := c.session(n, "reader")
	var joined struct{ Room struct{ ID string } }
	require.Equal(t, 200, c.do(n, "POST", "/api/v1/lobbies/budget/join", tok, nil, &joined))
	room := joined.Room.ID
	c.poll(n, tok, "") // the poll cursor starts here
	const total = 200
	fillWorstCase(t, c, room, total)

	t.Run("history pages end at 1 MiB and say more", func(t *testing.T) {
		var ids []string
		after, pages := "", 0
		for {
			path := "/api/v1/rooms/" + room + "/messages?limit=1000"
			if after != "" {
				path += "&after=" + after
			}
			st, body := rawGet(t, n, path, tok)
			require.Equal(t, 200, st, "%s", body)
			assert.LessOrEqual(t, len(body), realtime.MaxHistoryBytes+budgetSlack, "page %d", pages)
			var page struct {
				Messages []struct{ ID string }
				More     bool
			}
			require.NoError(t, json.Unmarshal(body, &page))
			require.NotEmpty(t, page.Messages)
			for _, m := range page.Messages {
				ids = append(ids, m.ID)
			}
			after = page.Messages[len(page.Messages)-1].ID
			pages++
			if !page.More {
				break
			}
			require.Less(t, pages, 10, "paging must end")
		}
		assert.Greater(t, pages, 1, "2.4 MB of history takes more than one page")
		assert.Len(t, ids, total)
		assert.IsIncreasing(t, ids)
	})

	t.Run("polls end at 1 MiB and leave the rest dirty", func(t *testing.T) {
		var ids []string
		for polls := 0; ; polls++ {
			require.Less(t, polls, 10, "polling must end")
			st, body := rawGet(t, n, "/api/v1/poll", tok)
			require.Equal(t, 200, st, "%s", body)
			assert.LessOrEqual(t, len(body), realtime.MaxPollMessageBytes+4096, "poll %d", polls)
			var a struct {
				Data struct {
					Messages map[string][]struct{ ID string }
				}
				More bool
			}
			require.NoError(t, json.Unmarshal(body, &a))
			for _, m := range a.Data.Messages[room] {
				ids = append(ids, m.ID)
			}
			if !a.More {
				break
			}
		}
		assert.Len(t, ids, total)
		assert.IsIncreasing(t, ids)
	})
}

// redisCalls is the total of every command's calls in r's INFO
// commandstats.
func redisCalls(t testing.TB, r *redistest.Redis) int64 {
	t.Helper()
	info, err := r.Client.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	var total int64
	for _, line := range strings.Split(info, "\n") {
		_, rest, ok := strings.Cut(line, ":calls=")
		if !ok || !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		if i := strings.IndexByte(rest, ','); i > 0 {
			n, _ := strconv.ParseInt(rest[:i], 10, 64)
			total += n
		}
	}
	return total
}

// TestFrameFloodOfEveryTypeIsClosedWithinItsBudget floods one WebSocket
// with each client frame type in turn (and a bogus one) for up to 3 s:
// every flood is refused past the type's rate (realtime.FrameRates) and
// closes the connection with 1008, as a say flood does, and the whole
// flood costs Redis fewer than 2,000 commands (INFO commandstats of a
// private redis-server).
func TestFrameFloodOfEveryTypeIsClosedWithinItsBudget(t *testing.T) {
	r := redistest.Own(t, redistest.Options{})
	c := newCluster(t, r, 1)
	n := c.nodes[0]
	c.putSetting("matchmaking.queues", `{"duo":{"min":2,"max":2,"window":1000,"reserve_seconds":60}}`)
	frames := map[string]map[string]any{
		"say":     {"type": "say", "room": "flood-1", "text": "hi"},
		"join":    {"type": "join", "lobby": "flood"},
		"leave":   {"type": "leave", "room": "flood-1"},
		"resume":  {"type": "resume", "room": "flood-1", "after": "1-0"},
		"typing":  {"type": "typing", "room": "flood-1"},
		"read":    {"type": "read", "room": "flood-1", "id": "1-0"},
		"queue":   {"type": "queue", "queue": "duo", "skill": 100},
		"dequeue": {"type": "dequeue", "queue": "duo", "ticket": "t"},
		"ping":    {"type": "ping"},
		"bogus":   {"type": "bogus"},
	}
	require.Len(t, frames, len(realtime.FrameRates), "one flood per frame type")
	for typ, frame := range frames {
		t.Run(typ+" flood closes with 1008", func(t *testing.T) {
			w := c.dial(n, "flooder"+typ)
			before := redisCalls(t, r)
			sent := 0
			for end := time.Now().Add(3 * time.Second); time.Now().Before(end); sent++ {
				if !w.trySend(frame) {
					break
				}
			}
			select {
			case <-w.closed:
			case <-time.After(frameWait):
				t.Fatalf("the %s flood (%d frames) was not closed", typ, sent)
			}
			calls := redisCalls(t, r) - before
			t.Logf("%s: %d frames sent, %d Redis commands", typ, sent, calls)
			assert.Equal(t, realtime.ClosePolicy, w.closeCode())
			assert.Less(t, calls, int64(2000))
		})
	}
}
