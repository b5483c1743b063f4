package web

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// TestClosingAWebSocketKeepsTheSameUsersRESTSeat: user uma is in a room
// over REST and polls; the same user opens a WebSocket on the same node,
// joins, and closes it. The seat is the REST session's as well (a second
// attachment), so it stays: she is still a member, still online, and the
// next message reaches her poll.
func TestClosingAWebSocketKeepsTheSameUsersRESTSeat(t *testing.T) {
	t.Parallel()
	c := newCluster(t, redistest.Real(t), 2)
	n := c.nodes[0]
	tok := c.session(n, "uma")
	room := c.join(n, tok, "mix")
	c.poll(n, tok, "") // the session is open and renewing

	ws := dialToken(t, n, "uma", c.session(n, "uma"))
	require.Equal(t, room.ID, ws.join("mix"))
	require.NoError(t, ws.conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")))
	<-ws.closed
	require.Eventually(t, func() bool { return len(n.srv.node.Hub().UserClients("uma")) == 0 }, 10*time.Second, 10*time.Millisecond,
		"the node has handled the close")

	var r struct{ Room roomJSON }
	require.Equal(t, 200, c.do(n, "GET", "/api/v1/rooms/"+room.ID, tok, nil, &r))
	assert.Equal(t, []string{"uma"}, r.Room.Members, "the REST session still holds the seat")
	var p struct{ Online bool }
	require.Equal(t, 200, c.do(c.nodes[1], "GET", "/api/v1/presence/uma", tok, nil, &p))
	assert.True(t, p.Online, "still online")

	other := c.session(c.nodes[1], "vic")
	require.Equal(t, room.ID, c.join(c.nodes[1], other, "mix").ID)
	sent := c.say(c.nodes[1], other, room.ID, "for uma's poll")
	a := c.pollUntil(tok, func(a pollAnswer) bool {
		var msgs map[string][]messageJSON
		_ = json.Unmarshal(a.Data["messages"], &msgs)
		for _, m := range msgs[room.ID] {
			if m.ID == sent.ID {
				return true
			}
		}
		return false
	})
	assert.Contains(t, a.Dirty, "messages")
}

// TestResumeOfAThousandToASlowReader: resume from the first of 1,000
// messages on a fresh connection that reads slowly delivers all 999 after
// it, once each and in order, and the connection stays open: a large
// replay goes page by page as the client reads, it never fills a queue.
func TestResumeOfAThousandToASlowReader(t *testing.T) {
	t.Parallel()
	c := newCluster(t, redistest.Real(t), 1)
	n := c.nodes[0]
	c.putSetting("rate.messages_per_second", 10000)
	c.putSetting("message.max_length", 4000)
	sender := dialAs(t, c, n, "sender")
	room := sender.join("replay")
	big := fmt.Sprintf("%04000d", 0)[:3900] // ~4 KB each: 1,000 are ~4 MB, past any byte cap of a queue
	var ids []string
	for k := range 1000 {
		ref := fmt.Sprint("s", k)
		sender.send(map[string]string{"type": "say", "room": room, "text": fmt.Sprint(k, big), "ref": ref})
		ids = append(ids, sender.waitFor("ack", ref)["id"].(string))
	}

	tok := c.session(n, "slow")
	u := "ws" + n.url[len("http"):] + "/ws?token=" + tok
	conn, resp, err := websocket.DefaultDialer.Dial(u, nil)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.WriteJSON(map[string]string{"type": "join", "lobby": "replay"}))
	// the join's own replay first (the latest 50), then the resume's
	// "joined" and its replay
	var got []string
	joined := 0
	for len(got) < len(ids)-1 {
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		var f struct {
			Type    string
			Code    string
			Message struct{ ID string }
		}
		require.NoError(t, conn.ReadJSON(&f), "got %d of %d", len(got), len(ids)-1)
		switch f.Type {
		case "joined":
			if joined++; joined == 1 {
				require.NoError(t, conn.WriteJSON(map[string]string{"type": "resume", "room": room, "after": ids[0]}))
			}
		case "message":
			if joined == 2 {
				got = append(got, f.Message.ID)
				if len(got)%100 == 0 {
					time.Sleep(200 * time.Millisecond) // a slow reader: 20 s for all, at this pace
				}
			}
		case "error":
			t.Fatalf("error frame %s", f.Code)
		}
	}
	checkIDs(t, got, ids[1:])
	require.NoError(t, conn.WriteJSON(map[string]string{"type": "ping"}))
	for {
		var f struct{ Type string }
		require.NoError(t, conn.ReadJSON(&f), "the connection is still open")
		if f.Type == "pong" {
			break
		}
	}
}

// checkIDs asserts got is exactly want: every id once, in order.
func checkIDs(t *testing.T, got, want []string) {
	t.Helper()
	require.Equal(t, len(want), len(got), "count")
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("at %d: got %s, want %s", i, got[i], want[i])
		}
	}
}
