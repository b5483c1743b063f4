package web

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/wsclient"
	"github.com/chatd/chatd/protocol"
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
	require.Eventually(t, func() bool { return n.node.Reads.Connections("uma") == 0 }, 10*time.Second, 10*time.Millisecond,
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
		sender.send(protocol.Say{Room: room, Text: fmt.Sprint(k, big), Ref: ref})
		ids = append(ids, sender.waitFor("ack", ref)["id"].(string))
	}

	// a buffer of one event: the client reads no faster than the test
	tok := c.session(n, "slow")
	conn, resp, err := wsclient.Dial(context.Background(), wsURL(n, tok), &wsclient.Options{Buffer: 1})
	require.NoError(t, err)
	resp.Body.Close()
	defer conn.Close()
	require.NoError(t, conn.Send(protocol.Join{Lobby: "replay"}))
	// the join's own replay first (the latest 50), then the resume's
	// "joined" and its replay
	var got []string
	joined := 0
	for len(got) < len(ids)-1 {
		ev, err := conn.Next(30 * time.Second)
		require.NoError(t, err, "got %d of %d", len(got), len(ids)-1)
		switch f := ev.ServerEvent.(type) {
		case protocol.Joined:
			if joined++; joined == 1 {
				require.NoError(t, conn.Send(protocol.Resume{Room: room, After: ids[0]}))
			}
		case protocol.MessageEvent:
			if joined == 2 {
				got = append(got, f.Message.ID)
				if len(got)%100 == 0 {
					time.Sleep(200 * time.Millisecond) // a slow reader: 20 s for all, at this pace
				}
			}
		case protocol.ErrorEvent:
			t.Fatalf("error frame %s", f.Code)
		}
	}
	checkIDs(t, got, ids[1:])
	require.NoError(t, conn.Send(protocol.Ping{}))
	_, err = conn.Next(30*time.Second, protocol.TypePong)
	require.NoError(t, err, "the connection is still open")
	assert.Empty(t, conn.Bad())
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

// TestRefusalsNameTheFieldAndTheRange: every 4xx message says which field
// or thing was wrong and what is allowed, or the state that refused it.
func TestRefusalsNameTheFieldAndTheRange(t *testing.T) {
	t.Parallel()
	c := newCluster(t, redistest.Real(t), 1)
	n := c.nodes[0]
	tok := c.session(n, "quinn")
	require.Equal(t, 200, c.do(n, "POST", "/api/v1/shop/items", testAdmin, map[string]any{"item": "sword", "stock": 1, "price": 7}, nil))
	for _, tc := range []struct {
		method, path, token string
		body                any
		status              int
		code, message       string
	}{
		{"POST", "/api/v1/shop/buy", tok, map[string]any{"item": "sword", "qty": 0}, 400, "bad_value", "Qty must be an integer from 1 to 1000000; got 0"},
		{"POST", "/api/v1/shop/buy", tok, map[string]any{"item": "sword"}, 409, "insufficient_funds", "Not enough coins: balance 0, price 7"},
		{"POST", "/api/v1/shop/buy", tok, map[string]any{"item": "shield"}, 404, "unknown_item", `"shield" was never stocked`},
		{"POST", "/api/v1/wallet/grant", testAdmin, map[string]any{"user": "quinn", "amount": -5}, 400, "bad_value", "Amount must be an integer from 1 to"},
		{"POST", "/api/v1/shop/items", testAdmin, map[string]any{"item": "axe", "stock": -1, "price": 1}, 400, "bad_value", "Stock must be an integer from 0 to"},
		{"POST", "/api/v1/leaderboards/b/scores", tok, map[string]any{"player": "quinn", "score": "12"}, 400, "bad_value", `score must be a JSON number such as 12.5, not a string; got "12"`},
		{"GET", "/api/v1/poll?wait=abc", tok, nil, 400, "bad_request", `wait must be a whole number of seconds from 0 to 30; got "abc"`},
		{"GET", "/api/v1/leaderboards/b/top?limit=0", tok, nil, 400, "bad_request", "limit must be an integer from 1 to 1000"},
		{"POST", "/api/v1/moderation/mute", testAdmin, map[string]any{"user": "quinn", "seconds": 0}, 400, "bad_request", "seconds must be an integer from 1 to 31536000; got 0"},
	} {
		var out struct {
			Error struct{ Code, Message string }
		}
		status := c.do(n, tc.method, tc.path, tc.token, tc.body, &out)
		assert.Equal(t, tc.status, status, "%s %s", tc.method, tc.path)
		assert.Equal(t, tc.code, out.Error.Code, "%s %s", tc.method, tc.path)
		assert.Contains(t, out.Error.Message, tc.message, "%s %s", tc.method, tc.path)
	}
	// a buy that the stock refuses names the stock
	c.grant(n, "quinn", 100)
	var out struct {
		Error struct{ Code, Message string }
	}
	require.Equal(t, 409, c.do(n, "POST", "/api/v1/shop/buy", tok, map[string]any{"item": "sword", "qty": 2}, &out))
	assert.Equal(t, "sold_out", out.Error.Code)
	assert.Contains(t, out.Error.Message, "1 sword in stock, 2 asked for")
}

// TestSeatAndNodeCaps: limit.seats_per_user bounds the lobbies one user
// holds seats in (a join of one more is refused, a join of a lobby already
// held is not); limit.connections_per_node bounds one node's WebSockets.
func TestSeatAndNodeCaps(t *testing.T) {
	t.Parallel()
	c := newCluster(t, redistest.Real(t), 1)
	n := c.nodes[0]
	c.putSetting("limit.seats_per_user", 2)
	w := dialAs(t, c, n, "sam")
	w.join("cap1")
	w.join("cap2")
	w.send(protocol.Join{Lobby: "cap3", Ref: "j3"})
	e := w.waitFor("error", "j3")
	assert.Equal(t, "rate_limited", e["code"])
	assert.Contains(t, e["message"], "seats in 2 lobbies")
	w.join("cap2") // a lobby already held is fine

	c.putSetting("limit.connections_per_node", 2) // sam holds one; one more fits
	dialAs(t, c, n, "tia")
	st, body := wsRefusal(t, n, c.session(n, "uwe"), nil)
	assert.Equal(t, 429, st)
	assert.Contains(t, fmt.Sprint(body), "too_many_connections")
}
