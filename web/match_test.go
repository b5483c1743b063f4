package web

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/protocol"
)

type ticketAnswer struct {
	Ticket struct {
		ID, State, Room string
		Players         []string
	}
}

type matchEvent struct {
	Type, Ticket, Room string
	Players            []string
}

// TestQuickMatchAcrossThreeNodes: two WebSocket players and one REST
// player queue on three nodes, a match forms, each learns of it (the
// matched event, the match poll section), they meet in its room and chat.
func TestQuickMatchAcrossThreeNodes(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, redistest.Real(t), 3)
	n1, n2, n3 := cl.nodes[0], cl.nodes[1], cl.nodes[2]
	cl.putSetting("matchmaking.queues", `{"trio":{"min":3,"max":3,"window":1000,"reserve_seconds":60}}`)

	ann := cl.dial(n1, "ann")
	bob := cl.dial(n2, "bob")
	cy := cl.session(n3, "cy")
	cl.poll(n3, cy, "") // the first poll: every section, the match one empty
	ann.send(protocol.Queue{Queue: "trio", Skill: skill(100), Ref: "q"})
	assert.Equal(t, "waiting", ann.next("queued")["ticket"].(map[string]any)["state"])
	bob.send(protocol.Queue{Queue: "trio", Skill: skill(120)})
	bob.next("queued")
	var tk ticketAnswer
	require.Equal(t, 200, cl.do(n3, "POST", "/api/v1/matchmaking/trio/tickets", cy, map[string]any{"skill": 90}, &tk))
	require.Equal(t, "waiting", tk.Ticket.State)

	room, _ := ann.next("matched")["room"].(string)
	require.NotEmpty(t, room)
	assert.Equal(t, room, bob.next("matched")["room"])
	a := cl.pollUntil(cy, func(a pollAnswer) bool { return contains(a.Dirty, "match") })
	var evs []matchEvent
	require.True(t, a.section(t, "match", &evs))
	require.NotEmpty(t, evs)
	assert.Equal(t, "matched", evs[0].Type)
	assert.Equal(t, room, evs[0].Room)
	assert.Equal(t, tk.Ticket.ID, evs[0].Ticket)
	assert.ElementsMatch(t, []string{"ann", "bob", "cy"}, evs[0].Players)
	require.Equal(t, 200, cl.do(n1, "GET", "/api/v1/matchmaking/trio/tickets/"+tk.Ticket.ID, cy, nil, &tk))
	assert.Equal(t, "matched", tk.Ticket.State)
	assert.Equal(t, room, tk.Ticket.Room)

	// the metrics: tickets submitted on each node, the match and its waits on
	// the node whose matcher formed it
	submitted, matched := 0.0, 0.0
	for _, n := range cl.nodes {
		submitted += metricValue(t, n, `chatd_matchmaking_tickets_total{event="submitted",queue="trio"}`)
		matched += metricValue(t, n, `chatd_matchmaking_matches_total{queue="trio"}`)
	}
	assert.Equal(t, 3.0, submitted)
	assert.Equal(t, 1.0, matched)

	// they meet in the room: a resume over the WebSocket, a join by id over REST
	ann.send(protocol.Resume{Room: room})
	ann.next("joined")
	bob.send(protocol.Resume{Room: room})
	bob.next("joined")
	var joined struct{ Room roomJSON }
	require.Equal(t, 200, cl.do(n2, "POST", "/api/v1/rooms/"+room+"/join", cy, nil, &joined))
	assert.ElementsMatch(t, []string{"ann", "bob", "cy"}, joined.Room.Members)
	ann.send(protocol.Say{Room: room, Text: "glhf", Ref: "s"})
	ann.next("ack")
	_, text := msgOf(bob.next("message"))
	assert.Equal(t, "glhf", text)
	cl.say(n3, cy, room, "gg")
	a = cl.pollUntil(cy, func(a pollAnswer) bool { return contains(a.Dirty, "messages") })
	var msgs map[string][]messageJSON
	require.True(t, a.section(t, "messages", &msgs))
	assert.NotEmpty(t, msgs[room])

	// nobody else gets in, by the room or by its lobby
	eve := cl.dial(n1, "eve")
	eve.send(protocol.Resume{Room: room, Ref: "r"})
	assert.Equal(t, "unknown_room", eve.next("error")["code"], "as for a room that does not exist")
	lobby := room[:strings.LastIndexByte(room, '-')]
	eve.send(protocol.Join{Lobby: lobby, Ref: "j"})
	assert.Equal(t, "forbidden", eve.next("error")["code"])
}

// metricValue is the value of one series on n's /metrics (0 when absent).
func metricValue(t *testing.T, n *testNode, series string) float64 {
	t.Helper()
	resp, err := http.Get(n.url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err, line)
			return f
		}
	}
	return 0
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
