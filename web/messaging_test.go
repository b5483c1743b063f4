package web

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/protocol"
)

// putSetting sets a live setting through the admin API and waits until
// every node of c applied it.
func (c *cluster) putSetting(key string, value any) {
	c.t.Helper()
	var out struct{ Version int64 }
	require.Equal(c.t, 200, c.do(c.nodes[0], "PUT", "/api/v1/settings/"+key, testAdmin, map[string]any{"value": value}, &out))
	for _, n := range c.nodes {
		require.Eventually(c.t, func() bool { return settingsVersion(n) >= out.Version }, 5*time.Second, 5*time.Millisecond)
	}
}

// collect reads message frames from w until it has n of them.
func (w *wsClient) collect(n int) []string {
	w.t.Helper()
	var ids []string
	for len(ids) < n {
		f := w.next("message")
		id, _ := msgOf(f)
		ids = append(ids, id)
	}
	return ids
}

func TestFanOutAcrossThreeNodesOnceInOrder(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	c := newCluster(t, r, 3)
	c.putSetting("rate.messages_per_second", 1000)

	const members, each = 12, 20
	var clients []*wsClient
	room := ""
	for i := 0; i < members; i++ {
		w := c.dial(c.nodes[i%3], fmt.Sprintf("u%02d", i))
		got := w.join("fanout")
		if room == "" {
			room = got
		}
		require.Equal(t, room, got, "12 members fit one 50-seat room")
		clients = append(clients, w)
	}
	// everyone is subscribed before anyone speaks: each has its joined frame
	var wg sync.WaitGroup
	for i, w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < each; k++ {
				w.send(protocol.Say{Room: room, Text: fmt.Sprintf("m %d %d", i, k), Ref: fmt.Sprint(k)})
			}
		}()
	}
	wg.Wait()

	var first []string
	for i, w := range clients {
		ids := w.collect(members * each)
		seen := map[string]bool{}
		for _, id := range ids {
			assert.False(t, seen[id], "member %d got %s twice", i, id)
			seen[id] = true
		}
		if first == nil {
			first = ids
			continue
		}
		assert.Equal(t, first, ids, "member %d saw another order", i)
	}
	for i := 1; i < len(first); i++ {
		assert.Less(t, first[i-1], first[i], "ids sort in send order as strings")
	}
}

func TestAckEchoesRefAndErrorsKeepConnectionOpen(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	c := newCluster(t, r, 1)
	w := c.dial(c.nodes[0], "alice")
	room := w.join("general")

	w.send(protocol.Say{Room: room, Text: "hi", Ref: "c-1"})
	got := w.await("ack", "message")
	ack := got["ack"]
	assert.Equal(t, "c-1", ack["ref"])
	id, text := msgOf(got["message"])
	assert.Equal(t, ack["id"], id)
	assert.Equal(t, "hi", text)

	w.send(protocol.Say{Room: "general-99", Text: "x", Ref: "c-2"})
	e := w.next("error")
	assert.Equal(t, "c-2", e["ref"])
	assert.Contains(t, []any{"not_seated", "unknown_room"}, e["code"])

	w.sendJSON(map[string]string{"type": "dance"}) // a type the protocol lacks, on purpose
	assert.Equal(t, "unknown_type", w.next("error")["code"])

	w.send(protocol.Ping{})
	w.next("pong")
}

// TestARefReusedForAnotherRoomIsABadRequest: the contract says the same
// `ref` (WebSocket) or `Idempotency-Key` (REST) with another room or text
// is bad_request and stores nothing — in any lobby, not only the first
// message's (its send record lives in that lobby's slot).
func TestARefReusedForAnotherRoomIsABadRequest(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	c := newCluster(t, r, 1)
	history := func(tok, room string) int {
		var out struct{ Messages []any }
		require.Equal(t, 200, c.do(c.nodes[0], "GET", "/api/v1/rooms/"+room+"/messages", tok, nil, &out))
		return len(out.Messages)
	}

	t.Run("a say's ref", func(t *testing.T) {
		w := c.dial(c.nodes[0], "alice")
		general, other := w.join("general"), w.join("lounge")
		w.send(protocol.Say{Room: general, Text: "hi", Ref: "r-1"})
		w.next("ack")
		for _, f := range []protocol.Say{
			{Room: other, Text: "hi", Ref: "r-1"},
			{Room: general, Text: "other text", Ref: "r-1"},
		} {
			w.send(f)
			e := w.next("error")
			assert.Equal(t, "bad_request", e["code"], "%v", f)
			assert.Equal(t, "r-1", e["ref"])
		}
		tok := c.session(c.nodes[0], "reader1")
		assert.Equal(t, 1, history(tok, general))
		assert.Equal(t, 0, history(tok, other), "nothing stored in the other room")
	})

	t.Run("a post's Idempotency-Key", func(t *testing.T) {
		tok := c.session(c.nodes[0], "bob")
		var general, other struct{ Room struct{ ID string } }
		require.Equal(t, 200, c.do(c.nodes[0], "POST", "/api/v1/lobbies/kitchen/join", tok, nil, &general))
		require.Equal(t, 200, c.do(c.nodes[0], "POST", "/api/v1/lobbies/garden/join", tok, nil, &other))
		key := map[string]string{"Idempotency-Key": "k-1"}
		st, p, _, err := c.call(c.nodes[0], "POST", "/api/v1/rooms/"+general.Room.ID+"/messages", tok, map[string]any{"text": "hi"}, key)
		require.NoError(t, err)
		require.Equal(t, 200, st, "%s", p)
		st, p, _, err = c.call(c.nodes[0], "POST", "/api/v1/rooms/"+other.Room.ID+"/messages", tok, map[string]any{"text": "hi"}, key)
		require.NoError(t, err)
		assert.Equal(t, 400, st, "%s", p)
		assert.Contains(t, string(p), "bad_request")
		assert.Equal(t, 0, history(tok, other.Room.ID), "nothing stored in the other room")
	})
}

func TestResumeReplaysExactlyTheMissedMessages(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	c := newCluster(t, r, 2)
	c.putSetting("rate.messages_per_second", 1000)
	a := c.dial(c.nodes[0], "alice")
	room := a.join("resume")
	b := c.dial(c.nodes[1], "bob")
	require.Equal(t, room, b.join("resume"))

	for k := 0; k < 5; k++ {
		a.send(protocol.Say{Room: room, Text: fmt.Sprint("before ", k)})
	}
	ids := b.collect(5)
	last := ids[len(ids)-1]
	tok := c.session(c.nodes[1], "bob")
	_ = b.conn.Close()

	for k := 0; k < 7; k++ {
		a.send(protocol.Say{Room: room, Text: fmt.Sprint("missed ", k)})
	}
	a.collect(12)

	// bob comes back on the other node and resumes
	b2 := dialToken(t, c.nodes[0], "bob", tok)
	b2.send(protocol.Resume{Room: room, After: last})
	b2.next("joined")
	var texts []string
	for len(texts) < 7 {
		_, text := msgOf(b2.next("message"))
		texts = append(texts, text)
	}
	for k, text := range texts {
		assert.Equal(t, fmt.Sprint("missed ", k), text)
	}
	a.send(protocol.Say{Room: room, Text: "live"})
	_, text := msgOf(b2.next("message"))
	assert.Equal(t, "live", text, "then live, with nothing in between")
}

// TestClusterChatAndStats runs the product on a 3-master Redis Cluster:
// seating, fan-out across nodes (classic PUBLISH reaches every master),
// history, settings, counters.
func TestClusterChatAndStats(t *testing.T) {
	t.Parallel()
	r := redistest.Cluster(t)
	c := newCluster(t, r, 3)
	c.putSetting("rate.messages_per_second", 1000)

	var ws []*wsClient
	room := ""
	for i := 0; i < 6; i++ {
		w := c.dial(c.nodes[i%3], fmt.Sprintf("c%d", i))
		got := w.join("cluster")
		if room == "" {
			room = got
		}
		require.Equal(t, room, got)
		ws = append(ws, w)
	}
	for i, w := range ws {
		w.send(protocol.Say{Room: room, Text: fmt.Sprint("hello from ", i), Ref: "r"})
	}
	var first []string
	for i, w := range ws {
		ids := w.collect(6)
		if i == 0 {
			first = ids
		} else {
			assert.Equal(t, first, ids, "one order on every node")
		}
	}
	tok := c.session(c.nodes[1], "c0")
	var hist struct{ Messages []struct{ ID string } }
	require.Equal(t, 200, c.do(c.nodes[2], "GET", "/api/v1/rooms/"+room+"/messages?limit=10", tok, nil, &hist))
	require.Len(t, hist.Messages, 6)
	var stats struct {
		MessagesTotal int64 `json:"messages_total"`
		RoomsTotal    int64 `json:"rooms_total"`
	}
	require.Equal(t, 200, c.do(c.nodes[0], "GET", "/api/v1/stats", tok, nil, &stats))
	assert.Equal(t, int64(6), stats.MessagesTotal)
	assert.Equal(t, int64(1), stats.RoomsTotal)
}
