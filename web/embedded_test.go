package web

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/embedded"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/protocol"
)

// TestEmbeddedRedisServesTheWholeProduct runs one node on the embedded
// in-process Redis — what `go run ./cmd/chatd` starts — through every part
// of the API, so no script or command the product uses is missing there.
func TestEmbeddedRedisServesTheWholeProduct(t *testing.T) {
	t.Parallel()
	c := newEmbeddedCluster(t)
	n := c.nodes[0]

	w := c.dial(n, "alice")
	room := w.join("general")
	w.send(protocol.Say{Room: room, Text: "hello", Ref: "1"})
	got := w.await("ack", "message")
	_, text := msgOf(got["message"])
	assert.Equal(t, "hello", text)

	tok := c.session(n, "bob")
	var joined struct{ Room struct{ ID string } }
	require.Equal(t, 200, c.do(n, "POST", "/api/v1/lobbies/general/join", tok, nil, &joined))
	assert.Equal(t, room, joined.Room.ID)
	var poll struct {
		Dirty []string
		Data  map[string]any
	}
	require.Equal(t, 200, c.do(n, "GET", "/api/v1/poll", tok, nil, &poll))
	assert.ElementsMatch(t, []string{"rooms", "messages", "leaderboards", "settings", "wallet", "notices", "match", "direct"}, poll.Dirty)
	require.Equal(t, 200, c.do(n, "POST", "/api/v1/rooms/"+room+"/messages", tok, map[string]string{"text": "hi alice"}, nil))
	_, text = msgOf(w.next("message"))
	assert.Equal(t, "hi alice", text)

	var entry struct{ Entry struct{ Rank int64 } }
	require.Equal(t, 200, c.do(n, "POST", "/api/v1/leaderboards/clicks@daily/scores", tok, map[string]any{"player": "bob", "score": 12.5}, &entry))
	assert.Equal(t, int64(0), entry.Entry.Rank)
	require.Equal(t, 200, c.do(n, "POST", "/api/v1/seen", tok, map[string]any{"items": []string{"a", "b"}}, nil))
	var unseen struct{ Unseen []string }
	require.Equal(t, 200, c.do(n, "POST", "/api/v1/seen/filter", tok, map[string]any{"items": []string{"a", "c"}}, &unseen))
	assert.Equal(t, []string{"c"}, unseen.Unseen)

	require.Equal(t, 200, c.do(n, "POST", "/api/v1/shop/items", testAdmin, map[string]any{"item": "sword", "stock": 1, "price": 10}, nil))
	require.Equal(t, 200, c.do(n, "POST", "/api/v1/wallet/grant", testAdmin, map[string]any{"user": "bob", "amount": 15}, nil))
	var wallet struct {
		Balance int64
		Items   map[string]int64
	}
	require.Equal(t, 200, c.do(n, "POST", "/api/v1/shop/buy", tok, map[string]any{"item": "sword"}, &wallet))
	assert.Equal(t, int64(5), wallet.Balance)
	assert.Equal(t, int64(1), wallet.Items["sword"])

	c.putSetting("motd", "hi all")
	assert.Equal(t, "hi all", w.next("settings")["value"])
	require.Equal(t, 200, c.do(n, "POST", "/api/v1/notices", testAdmin, map[string]string{"text": "news"}, nil))
	assert.Equal(t, "news", w.next("notice")["text"])
	require.Equal(t, 200, c.do(n, "GET", "/readyz", "", nil, nil))
	var stats struct {
		MessagesTotal int64 `json:"messages_total"`
		Online        int64
	}
	require.Equal(t, 200, c.do(n, "GET", "/api/v1/stats", tok, nil, &stats))
	assert.Equal(t, int64(2), stats.MessagesTotal)
}

// TestEmbeddedRedisMatchesPlayers: on the embedded Redis of `go run
// ./cmd/chatd`, two players who queue are matched within 5 s. Every
// matcher round failed there once (queue_pick.lua called struct.pack,
// which the embedded Lua lacks) and the page said "Looking for players…"
// forever.
func TestEmbeddedRedisMatchesPlayers(t *testing.T) {
	t.Parallel()
	c := newEmbeddedCluster(t)
	n := c.nodes[0]
	c.putSetting("matchmaking.queues", `{"duel":{"min":2,"max":2,"window":1e9,"widen_per_second":0.5,"reserve_seconds":60}}`)

	ann := c.dial(n, "ann")
	bob := c.session(n, "bob")
	ann.send(protocol.Queue{Queue: "duel", Skill: skill(100), Ref: "q"})
	ann.next("queued")
	var tk ticketAnswer
	require.Equal(t, 200, c.do(n, "POST", "/api/v1/matchmaking/duel/tickets", bob, map[string]any{"skill": 1200.5}, &tk))
	queued := time.Now()
	room, _ := ann.next("matched")["room"].(string)
	took := time.Since(queued)
	require.NotEmpty(t, room)
	assert.Less(t, took, 5*time.Second, "matched after %v", took)
	require.Equal(t, 200, c.do(n, "GET", "/api/v1/matchmaking/duel/tickets/"+tk.Ticket.ID, bob, nil, &tk))
	assert.Equal(t, "matched", tk.Ticket.State)
	assert.Equal(t, room, tk.Ticket.Room)
	t.Logf("matched %v after the second ticket", took)
}

// newEmbeddedCluster is one node on the embedded Redis that `go run
// ./cmd/chatd` uses (internal/embedded), with the default prefix.
func newEmbeddedCluster(t *testing.T) *cluster {
	t.Helper()
	emb, err := embedded.Start()
	require.NoError(t, err)
	t.Cleanup(emb.Close)
	r := &redistest.Redis{Addrs: []string{emb.Addr()}, Prefix: "chatd", Kind: redistest.Embedded}
	r.Client = redis.NewClient(&redis.Options{Addr: emb.Addr()})
	t.Cleanup(func() { _ = r.Client.Close() })
	return newCluster(t, r, 1)
}
