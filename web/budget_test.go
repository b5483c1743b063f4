package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/realtime/polls"
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
	var total int64
	for _, n := range redistest.CallsByCommand(t, r.Client) {
		total += n
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
		"invite":  {"type": "invite", "queue": "duo", "skill": 100, "party": []string{"nobody"}},
		"accept":  {"type": "accept", "queue": "duo", "ticket": "t"},
		"decline": {"type": "decline", "queue": "duo", "ticket": "t"},
		"ping":    {"type": "ping"},
		"bogus":   {"type": "bogus"},
		// an rpc call on a node without an rpc hook (not_found)
		"rpc": {"type": "rpc", "method": "roll"},
		// direct messages: to a user who never signed in (a conversation
		// needs no online peer)
		"dm_open":   {"type": "dm_open", "to": "nobody"},
		"dm_send":   {"type": "dm_send", "to": "nobody", "text": "hi"},
		"dm_typing": {"type": "dm_typing", "to": "nobody"},
		"dm_read":   {"type": "dm_read", "to": "nobody", "id": "1-0"},
		"dm_resume": {"type": "dm_resume", "to": "nobody", "after": "1-0"},
	}
	require.Len(t, frames, len(realtime.FrameRates), "one flood per frame type")
	for typ, frame := range frames {
		t.Run(typ+" flood closes with 1008", func(t *testing.T) {
			w := c.dial(n, "flooder"+typ)
			closes := metricValue(t, n, "chatd_ws_flood_closes_total")
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
			// the server closed it for the flood; the client sees 1008 unless
			// its own writes, still in flight, made the close frame a reset (1006)
			assert.Equal(t, closes+1, metricValue(t, n, "chatd_ws_flood_closes_total"), "closed as a flood")
			if code := w.closeCode(); code != 0 && code != websocket.CloseAbnormalClosure {
				assert.Equal(t, realtime.ClosePolicy, code)
			}
			assert.Less(t, calls, int64(2000))
		})
	}
}

// TestSessionsPerAddressNeverExceedTheSettingInAnyMinute signs in a guest
// from one address every simulated second for three minutes, round-robin
// over three nodes, with limit.sessions_per_ip_per_minute 10: no 60 s
// window holds more than 10 sessions (a bucket of 10 refilling at 10/60
// let about 20 through in the first minute), and sign-ins resume as the
// window moves on.
func TestSessionsPerAddressNeverExceedTheSettingInAnyMinuteBudget(t *testing.T) {
	r := redistest.Real(t)
	var offset atomic.Int64
	base := time.Now()
	clock := func() time.Time { return base.Add(time.Since(base) + time.Duration(offset.Load())) }
	c := newCluster(t, r, 3, nodeOpts{configure: func(cfg *nodeConfig) { cfg.Now = clock }})
	const perMinute = 10
	c.putSetting("limit.sessions_per_ip_per_minute", perMinute)
	var admitted []time.Time
	for i := 0; i < 180; i++ {
		n := c.nodes[i%len(c.nodes)]
		st, body, _, err := c.call(n, "POST", "/api/v1/session", "", map[string]string{"user": fmt.Sprintf("g%03d", i)}, nil)
		require.NoError(t, err)
		switch st {
		case 200:
			admitted = append(admitted, clock())
		case 429:
			assert.Contains(t, string(body), "rate_limited")
		default:
			t.Fatalf("sign-in %d: %d %s", i, st, body)
		}
		offset.Add(int64(time.Second))
	}
	for i := range admitted {
		in := 0
		for _, at := range admitted[i:] {
			if at.Sub(admitted[i]) < time.Minute {
				in++
			}
		}
		assert.LessOrEqual(t, in, perMinute, "sessions in the 60 s from admission %d", i)
	}
	assert.GreaterOrEqual(t, len(admitted), 3*perMinute-1, "sign-ins resume as the window moves on")
}

// parkPolls starts n long polls (wait=5) on node n, each with a token of
// toks in turn, all at once, and returns how many were answered 200 and
// how many 429 rate_limited once all have answered.
func parkPolls(t *testing.T, c *cluster, n *testNode, toks []string, count int) (ok, refused int) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < count; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, body, _, err := c.call(n, "GET", "/api/v1/poll?wait=5", toks[i%len(toks)], nil, nil)
			assert.NoError(t, err)
			mu.Lock()
			defer mu.Unlock()
			switch st {
			case 200:
				ok++
			case 429:
				refused++
				assert.Contains(t, string(body), `"code":"rate_limited"`)
			default:
				t.Errorf("poll: %d %s", st, body)
			}
		}()
	}
	wg.Wait()
	return ok, refused
}

// TestParkedPollsAndRequestsPerAddressAreCappedBudget parks more long polls
// from one address than its caps allow: the polls past
// Config.MaxPollsPerAddr, then past Config.MaxRequestsPerAddr, are refused
// 429 rate_limited at once (3,000 parked polls from one address were all
// held), and the ones within the cap are held until their wait ends.
func TestParkedPollsAndRequestsPerAddressAreCappedBudget(t *testing.T) {
	r := redistest.Real(t)
	guests := func(c *cluster, name string, k int) []string {
		var toks []string
		for i := 0; i < k; i++ {
			tok := c.session(c.nodes[0], fmt.Sprintf("%s%02d", name, i))
			c.poll(c.nodes[0], tok, "") // the first answer is at once: every section is new
			toks = append(toks, tok)
		}
		return toks
	}
	t.Run("long polls past 64 from one address are refused", func(t *testing.T) {
		c := newCluster(t, r, 1)
		toks := guests(c, "poller", 40) // 2 polls a session, 8 a user: 80 within those caps
		ok, refused := parkPolls(t, c, c.nodes[0], toks, 80)
		assert.Equal(t, defaultMaxPollsPerAddr, ok)
		assert.Equal(t, 80-defaultMaxPollsPerAddr, refused)
	})
	t.Run("requests in flight past the cap from one address are refused", func(t *testing.T) {
		c := newCluster(t, r, 1, nodeOpts{configure: func(cfg *nodeConfig) {
			cfg.MaxRequestsPerAddr, cfg.MaxPollsPerAddr = 30, -1
		}})
		toks := guests(c, "asker", 20)
		ok, refused := parkPolls(t, c, c.nodes[0], toks, 40)
		assert.Equal(t, 30, ok)
		assert.Equal(t, 10, refused)
	})
	t.Run("requests in flight past the cap of one user are refused", func(t *testing.T) {
		c := newCluster(t, r, 1, nodeOpts{configure: func(cfg *nodeConfig) {
			cfg.MaxRequestsPerUser, cfg.MaxPollsPerUser = 5, -1
		}})
		// ten sessions (devices) of one guest: 2 polls a session, 20 in all
		var toks []string
		for range 10 {
			tok := c.session(c.nodes[0], "oneuser")
			c.poll(c.nodes[0], tok, "")
			toks = append(toks, tok)
		}
		ok, refused := parkPolls(t, c, c.nodes[0], toks, 20)
		assert.Equal(t, 5, ok)
		assert.Equal(t, 15, refused)
	})
}

// netOutput is r's total_net_output_bytes (INFO stats): every byte the
// server has sent its clients.
func netOutput(t testing.TB, r *redistest.Redis) int64 {
	t.Helper()
	info, err := r.Client.Info(context.Background(), "stats").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_net_output_bytes:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no total_net_output_bytes in INFO stats")
	return 0
}

// TestPollReadsRedisWithinItsByteBudget: a poll over a room of 500 new
// messages of 2,000 control characters (12 KB each as JSON, 6 MB in all)
// reads from Redis what its 1 MiB budget holds and one page
// (polls.PollPage) more, not the room's 1,000 latest: the bytes Redis
// sends (INFO stats of a private redis-server) stay under what the
// answered messages and one page take; before, one XRANGE of 1,000 read
// all 500.
func TestPollReadsRedisWithinItsByteBudget(t *testing.T) {
	r := redistest.Own(t, redistest.Options{})
	c := newCluster(t, r, 1)
	n := c.nodes[0]
	tok := c.session(n, "reader")
	var joined struct{ Room struct{ ID string } }
	require.Equal(t, 200, c.do(n, "POST", "/api/v1/lobbies/pollread/join", tok, nil, &joined))
	room := joined.Room.ID
	c.poll(n, tok, "") // the poll cursor starts here
	fillWorstCase(t, c, room, 500)

	before := netOutput(t, r)
	st, body := rawGet(t, n, "/api/v1/poll", tok)
	read := netOutput(t, r) - before
	require.Equal(t, 200, st, "%s", body)
	var a struct {
		Data struct {
			Messages map[string][]struct{ ID string }
		}
		More bool
	}
	require.NoError(t, json.Unmarshal(body, &a))
	got := len(a.Data.Messages[room])
	require.True(t, a.More, "500 messages of 12 KB do not fit in one poll")
	// a message is about 2,100 bytes from Redis (2,000 of text, its id,
	// sender and time); the rest of the poll (cursors, marks) a few KB
	perMessage := int64(2200)
	limit := int64(got+polls.PollPage)*perMessage + 16<<10
	t.Logf("poll answered %d messages (%d bytes); Redis sent %d bytes (bound %d)", got, len(body), read, limit)
	assert.LessOrEqual(t, read, limit, "Redis sent more than the poll's budget and one page")
}
