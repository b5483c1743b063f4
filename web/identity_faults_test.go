package web

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/protocol"
)

// TestGuestsSurviveAnEmptyRedisRestart is issue #28's acceptance, from
// outside on three nodes: 20 guests chat, one more signs out, then Redis is
// SIGKILLed and restarted with nothing (no persistence). Every guest keeps
// working on every node with the token it had — no 401: a validly signed
// token whose name is free takes it back —, opens a new WebSocket, joins
// and says again, and the name is still theirs (a newcomer asking for it
// gets name_taken). The guest who signed out before the restart stays out
// on every node: the nodes remember the revocation and write it back.
// Before, every guest's next request on a node that asked Redis answered
// 401 "this session has ended", while nodes with a fresh cache still took
// the same token.
func TestGuestsSurviveAnEmptyRedisRestart(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{}) // no AOF: a restart is empty
	c := newCluster(t, r, 3, shortTimeouts)
	const guests = 20
	names := make([]string, guests)
	tokens := make([]string, guests)
	for i := range guests {
		names[i] = fmt.Sprintf("Surv%02d", i) // displayed as typed; claimed as surv00…
		tokens[i] = c.session(c.nodes[i%3], names[i])
		w := dialToken(t, c.nodes[i%3], names[i], tokens[i])
		room := w.join("survive")
		w.send(protocol.Say{Room: room, Text: "before", Ref: "b"})
		w.waitFor("ack", "b")
	}
	gone := c.session(c.nodes[0], "Leaver")
	c.expect(c.nodes[1], "DELETE", "/api/v1/session", gone, nil, 200, "")
	for _, n := range c.nodes { // every node hears of the sign-out within a second (identity's doc: one pub/sub hop)
		require.Eventually(t, func() bool {
			st, _, _, err := c.call(n, "GET", "/api/v1/unread", gone, nil, nil)
			return err == nil && st == 401
		}, time.Second, 10*time.Millisecond, "the sign-out reaches %s", n.url)
	}

	r.Server.Restart(t)
	t.Logf("keys right after the restart: %d (the nodes write back what they remember)", r.Client.DBSize(t.Context()).Val())

	// every guest, on every node, with the token it had: 200, never 401 (a
	// 503 while the nodes reconnect is retried)
	for i := range guests {
		for _, n := range c.nodes {
			var last string
			require.Eventually(t, func() bool {
				st, body, _, err := c.call(n, "GET", "/api/v1/unread", tokens[i], nil, nil)
				require.NoError(t, err)
				require.NotEqual(t, 401, st, "%s on %s after the restart: %s", names[i], n.url, body)
				last = fmt.Sprintf("%d %s", st, body)
				return st == 200
			}, 20*time.Second, 50*time.Millisecond, "%s on %s: last %s", names[i], n.url, last)
		}
	}
	// sockets reopen with the same token, on another node, and chat
	for i := range guests {
		w := dialToken(t, c.nodes[(i+1)%3], names[i], tokens[i])
		room := w.join("survive")
		w.send(protocol.Say{Room: room, Text: "after", Ref: "a"})
		ack := w.waitFor("ack", "a")
		assert.NotEmpty(t, ack["id"])
	}
	// the names are still theirs, whatever the case a newcomer types
	for i := range guests {
		c.expect(c.nodes[(i+2)%3], "POST", "/api/v1/session", "",
			map[string]string{"user": fmt.Sprintf("SURV%02d", i)}, 409, "name_taken")
	}
	// the guest who signed out stays out, on every node
	for _, n := range c.nodes {
		c.expect(n, "GET", "/api/v1/unread", gone, nil, 401, "bad_token")
	}
	st, _ := wsRefusal(t, c.nodes[2], gone, nil)
	assert.Equal(t, 401, st, "the signed-out token opens no WebSocket")
}
