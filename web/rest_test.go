package web

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

type presenceJSON struct {
	User     string   `json:"user"`
	Online   bool     `json:"online"`
	Node     string   `json:"node"`
	Rooms    []string `json:"rooms"`
	LastSeen *string  `json:"last_seen"`
}

func (c *cluster) presence(n *testNode, tok, user string) presenceJSON {
	c.t.Helper()
	var out presenceJSON
	require.Equal(c.t, 200, c.do(n, "GET", "/api/v1/presence/"+user, tok, nil, &out))
	return out
}

func TestRoomsOverREST(t *testing.T) {
	t.Parallel()
	c := newCluster(t, redistest.Real(t), 3)
	n0, n1, n2 := c.nodes[0], c.nodes[1], c.nodes[2]
	alice := c.session(n0, "alice")
	bob := c.session(n1, "bob")
	carol := c.session(n2, "carol")

	room := c.join(n0, alice, "lob")
	t.Run("a join answers the first room, and a repeat the same room", func(t *testing.T) {
		assert.Equal(t, roomJSON{ID: "lob-1", Lobby: "lob", Seq: 1, Capacity: 50, Members: []string{"alice"}}, room)
		assert.Equal(t, room.ID, c.join(n1, alice, "lob").ID, "same room on a repeat, from another node")
		assert.Equal(t, room.ID, c.join(n2, c.session(n2, "alice"), "lob").ID, "same room for another session of the user")
		assert.Equal(t, []string{"alice", "bob"}, c.join(n2, bob, "lob").Members)
	})

	t.Run("rooms and room list the members", func(t *testing.T) {
		var list struct{ Rooms []roomJSON }
		require.Equal(t, 200, c.do(n1, "GET", "/api/v1/lobbies/lob/rooms", carol, nil, &list))
		assert.Equal(t, []roomJSON{{ID: room.ID, Lobby: "lob", Seq: 1, Capacity: 50, Members: []string{"alice", "bob"}}}, list.Rooms)
		require.Equal(t, 200, c.do(n1, "GET", "/api/v1/lobbies/empty/rooms", carol, nil, &list))
		assert.NotNil(t, list.Rooms)
		assert.Empty(t, list.Rooms)
		var one struct{ Room roomJSON }
		require.Equal(t, 200, c.do(n2, "GET", "/api/v1/rooms/"+room.ID, carol, nil, &one))
		assert.Equal(t, []string{"alice", "bob"}, one.Room.Members)
	})

	var sent []messageJSON
	t.Run("messages post and list oldest first with after and limit", func(t *testing.T) {
		start := time.Now().UTC().Add(-time.Second)
		for i := 0; i < 5; i++ {
			tok := []string{alice, bob}[i%2]
			m := c.say(c.nodes[i%3], tok, room.ID, fmt.Sprint("hello ", i))
			assert.Equal(t, room.ID, m.Room)
			assert.Equal(t, []string{"alice", "bob"}[i%2], m.From)
			assert.Equal(t, fmt.Sprint("hello ", i), m.Text)
			ts, err := time.Parse(time.RFC3339Nano, m.TS)
			if assert.NoError(t, err) {
				assert.True(t, ts.After(start), "ts %s", m.TS)
				assert.Regexp(t, `\.\d{3}Z$`, m.TS, "RFC 3339 with ms")
			}
			if len(sent) > 0 {
				assert.Less(t, sent[len(sent)-1].ID, m.ID, "ids sort in send order")
			}
			sent = append(sent, m)
		}
		list := func(n *testNode, query string) []messageJSON {
			t.Helper()
			var out struct{ Messages []messageJSON }
			require.Equal(t, 200, c.do(n, "GET", "/api/v1/rooms/"+room.ID+"/messages"+query, carol, nil, &out))
			require.NotNil(t, out.Messages)
			return out.Messages
		}
		assert.Equal(t, sent, list(n0, ""))
		assert.Equal(t, sent[3:], list(n1, "?limit=2"), "the latest ones, oldest first")
		assert.Equal(t, sent[2:], list(n2, "?after="+sent[1].ID))
		assert.Equal(t, sent[2:4], list(n0, "?after="+sent[1].ID+"&limit=2"))
		assert.Empty(t, list(n1, "?after="+sent[4].ID))
		for _, q := range []string{"?limit=0", "?limit=1001", "?limit=x", "?after=nonsense"} {
			c.expect(n2, "GET", "/api/v1/rooms/"+room.ID+"/messages"+q, carol, nil, 400, "")
		}
	})

	t.Run("a sender without a seat is refused with not_seated", func(t *testing.T) {
		c.expect(n1, "POST", "/api/v1/rooms/"+room.ID+"/messages", carol, map[string]string{"text": "hi"}, 403, "not_seated")
	})

	t.Run("an unknown room is 404 unknown_room, a bad room name 400", func(t *testing.T) {
		c.expect(n0, "GET", "/api/v1/rooms/lob-99", carol, nil, 404, "unknown_room")
		c.expect(n0, "GET", "/api/v1/rooms/nowhere-1/messages", carol, nil, 404, "unknown_room")
		c.expect(n1, "POST", "/api/v1/rooms/lob-99/messages", alice, map[string]string{"text": "hi"}, 404, "unknown_room")
		c.expect(n2, "GET", "/api/v1/rooms/lob", carol, nil, 400, "bad_name")
		c.expect(n2, "GET", "/api/v1/rooms/a%20b-1", carol, nil, 400, "bad_name")
		c.expect(n2, "POST", "/api/v1/lobbies/a%7Bb%7D/join", carol, nil, 400, "bad_name")
		c.expect(n2, "POST", "/api/v1/rooms/"+room.ID+"/messages", alice, map[string]string{"text": ""}, 400, "bad_request")
		c.expect(n2, "POST", "/api/v1/rooms/"+room.ID+"/messages", alice, `{"text": 5}`, 400, "bad_request")
		c.expect(n2, "POST", "/api/v1/lobbies/lob/join", "", nil, 401, "bad_token")
		c.expect(n2, "POST", "/api/v1/lobbies/lob/join", "garbage", nil, 401, "bad_token")
	})

	t.Run("a message longer than message.max_length is too_long", func(t *testing.T) {
		c.putSetting("message.max_length", 10)
		c.expect(n0, "POST", "/api/v1/rooms/"+room.ID+"/messages", alice, map[string]string{"text": strings.Repeat("x", 11)}, 400, "too_long")
		m := c.say(n1, alice, room.ID, strings.Repeat("é", 10))
		assert.Equal(t, strings.Repeat("é", 10), m.Text, "the length is in characters")
		sent = append(sent, m)
		c.putSetting("message.max_length", 2000)
	})

	t.Run("a sender past the rate is 429 rate_limited with Retry-After, across nodes", func(t *testing.T) {
		spammer := c.session(n2, "spammer")
		require.Equal(t, room.ID, c.join(n2, spammer, "lob").ID)
		c.putSetting("rate.messages_per_second", 0.5)
		var limited bool
		for i := 0; i < 3 && !limited; i++ {
			status, body, hdr, err := c.call(c.nodes[i%3], "POST", "/api/v1/rooms/"+room.ID+"/messages", spammer, map[string]string{"text": "spam"}, nil)
			require.NoError(t, err)
			if status == 200 {
				continue
			}
			limited = true
			assert.Equal(t, 429, status, "%s", body)
			assert.Equal(t, "rate_limited", errCode(body))
			assert.NotEmpty(t, hdr.Get("Retry-After"))
		}
		assert.True(t, limited, "a burst of 1 at 0.5/s admits one message of three")
		c.putSetting("rate.messages_per_second", 10)
	})

	t.Run("leave frees the seat at once", func(t *testing.T) {
		var ok struct{ OK bool }
		require.Equal(t, 200, c.do(n2, "POST", "/api/v1/rooms/"+room.ID+"/leave", bob, nil, &ok))
		assert.True(t, ok.OK)
		var one struct{ Room roomJSON }
		require.Equal(t, 200, c.do(n0, "GET", "/api/v1/rooms/"+room.ID, carol, nil, &one))
		assert.Equal(t, []string{"alice", "spammer"}, one.Room.Members)
		c.expect(n1, "POST", "/api/v1/rooms/"+room.ID+"/messages", bob, map[string]string{"text": "hi"}, 403, "not_seated")
		require.Equal(t, 200, c.do(n1, "POST", "/api/v1/rooms/"+room.ID+"/leave", bob, nil, &ok), "a second leave is fine")
		c.expect(n1, "POST", "/api/v1/rooms/a%20b/leave", bob, nil, 400, "bad_name")
		assert.Equal(t, room.ID, c.join(n1, carol, "lob").ID, "the freed seat is filled first")
	})

	t.Run("presence of a WebSocket user, a polling user and an unknown user", func(t *testing.T) {
		w := c.dial(n1, "dave")
		wsRoom := w.join("lob")
		var p presenceJSON
		require.Eventually(t, func() bool {
			status, body, _, err := c.call(n2, "GET", "/api/v1/presence/dave", alice, nil, nil)
			return err == nil && status == 200 && json.Unmarshal(body, &p) == nil && p.Online && len(p.Rooms) == 1
		}, 15*time.Second, 50*time.Millisecond, "dave shows online in his room")
		assert.Equal(t, "n2", p.Node)
		assert.Equal(t, []string{wsRoom}, p.Rooms)
		require.NotNil(t, p.LastSeen)
		_, err := time.Parse(time.RFC3339, *p.LastSeen)
		assert.NoError(t, err)

		erin := c.session(n0, "erin")
		c.poll(n0, erin, "")
		p = c.presence(n1, alice, "erin")
		assert.True(t, p.Online, "a polling REST user is online")
		assert.Equal(t, "n1", p.Node)

		p = c.presence(n0, alice, "nobody")
		assert.Equal(t, presenceJSON{User: "nobody", Rooms: []string{}}, p)
		c.expect(n0, "GET", "/api/v1/presence/a%20b", alice, nil, 400, "bad_name")
	})

	t.Run("nodes lists the three nodes", func(t *testing.T) {
		var out struct {
			Nodes []struct {
				ID            string
				Addr          string
				Connections   int
				LastHeartbeat string `json:"last_heartbeat"`
			}
		}
		require.Eventually(t, func() bool {
			status, body, _, err := c.call(n0, "GET", "/api/v1/nodes", testAdmin, nil, nil)
			return err == nil && status == 200 && json.Unmarshal(body, &out) == nil && len(out.Nodes) == 3
		}, 10*time.Second, 20*time.Millisecond)
		var ids []string
		for _, n := range out.Nodes {
			ids = append(ids, n.ID)
			_, err := time.Parse(time.RFC3339, n.LastHeartbeat)
			assert.NoError(t, err)
		}
		slices.Sort(ids)
		assert.Equal(t, []string{"n1", "n2", "n3"}, ids)
	})

	t.Run("stats count messages, rooms, online users and nodes", func(t *testing.T) {
		var st struct {
			MessagesTotal int64 `json:"messages_total"`
			RoomsTotal    int64 `json:"rooms_total"`
			Online        int64 `json:"online"`
			Nodes         int64 `json:"nodes"`
		}
		require.Equal(t, 200, c.do(n2, "GET", "/api/v1/stats", alice, nil, &st))
		assert.EqualValues(t, len(sent)+1, st.MessagesTotal, "every accepted message, the rate test's one included")
		assert.EqualValues(t, 1, st.RoomsTotal)
		assert.GreaterOrEqual(t, st.Online, int64(2), "dave and erin at least")
		assert.EqualValues(t, 3, st.Nodes)
		c.say(n0, alice, room.ID, "one more")
		other := c.session(n1, "frank")
		c.join(n1, other, "lob2")
		var after struct {
			MessagesTotal int64 `json:"messages_total"`
			RoomsTotal    int64 `json:"rooms_total"`
		}
		require.Equal(t, 200, c.do(n1, "GET", "/api/v1/stats", alice, nil, &after))
		assert.Equal(t, st.MessagesTotal+1, after.MessagesTotal)
		assert.Equal(t, st.RoomsTotal+1, after.RoomsTotal)
	})
}

// TestRESTTypingReachesTheRoomOnEveryNode: a REST (or event-stream)
// session's typing indicator, POSTed to any node, reaches a WebSocket
// member on another node as the typing frame's would; a second one within
// TypingEvery is answered ok and relayed not.
func TestRESTTypingReachesTheRoomOnEveryNode(t *testing.T) {
	t.Parallel()
	c := newCluster(t, redistest.Real(t), 2)
	tok := c.session(c.nodes[0], "rita")
	var joined struct{ Room struct{ ID string } }
	require.Equal(t, 200, c.do(c.nodes[0], "POST", "/api/v1/lobbies/typing/join", tok, nil, &joined))
	w := c.dial(c.nodes[1], "wes")
	require.Equal(t, joined.Room.ID, w.join("typing"))
	c.expect(c.nodes[1], "POST", "/api/v1/rooms/"+joined.Room.ID+"/typing", tok, nil, 200, "")
	f := w.next("typing")
	assert.Equal(t, "rita", f["user"])
	assert.Equal(t, joined.Room.ID, f["room"])
	c.expect(c.nodes[0], "POST", "/api/v1/rooms/"+joined.Room.ID+"/typing", tok, nil, 200, "") // throttled: ok, not relayed
	c.expect(c.nodes[0], "POST", "/api/v1/rooms/typing-99/typing", tok, nil, 403, "not_seated")
}
