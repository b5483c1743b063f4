package web

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/protocol"
)

// The caps of issue #28 that sit in the core, tried from outside on three
// nodes: each was walked around before (three REST joins past the seat cap,
// 3,000 players posted in a second, 120 sessions × 10 boards a minute from
// one address).

func TestScorePostsPerUserAreRateLimitedAcrossNodes(t *testing.T) {
	t.Parallel()
	c := newCluster(t, redistest.Real(t), 3)
	c.putSetting("limit.score_posts_per_user_per_minute", 5)
	tok := c.session(c.nodes[0], "poster")
	ok, limited := 0, 0
	var retry string
	for i := 0; i < 12; i++ {
		status, body, hdr, err := c.call(c.nodes[i%3], "POST", "/api/v1/leaderboards/cap/scores", tok,
			map[string]any{"player": fmt.Sprint("p", i), "score": i}, nil)
		require.NoError(t, err)
		switch status {
		case 200:
			ok++
		case 429:
			limited++
			assert.Equal(t, "rate_limited", errCode(body))
			retry = hdr.Get("Retry-After")
		default:
			t.Fatalf("post %d: %d %s", i, status, body)
		}
	}
	assert.Equal(t, 5, ok, "the burst of the per-minute cap, whatever node takes the post")
	assert.Equal(t, 7, limited)
	n, err := strconv.Atoi(retry)
	require.NoError(t, err, "Retry-After %q", retry)
	assert.GreaterOrEqual(t, n, 10, "Retry-After is the time to the next token (60/5 s), not 1")
	assert.LessOrEqual(t, n, 12)
}

func TestNewBoardsAreCappedPerAddressWhateverTheUser(t *testing.T) {
	t.Parallel()
	c := newCluster(t, redistest.Real(t), 3)
	c.putSetting("limit.new_boards_per_ip_per_minute", 3)
	created := 0
	for u := 0; u < 3; u++ { // three users of one address, each under its own per-user cap
		tok := c.session(c.nodes[u], fmt.Sprint("maker", u))
		for b := 0; b < 3; b++ {
			status, body, _, err := c.call(c.nodes[(u+b)%3], "POST", fmt.Sprintf("/api/v1/leaderboards/nb-%d-%d/scores", u, b), tok,
				map[string]any{"player": "p", "score": 1}, nil)
			require.NoError(t, err)
			if status == 200 {
				created++
			} else {
				assert.Equal(t, 429, status, "%s", body)
				assert.Equal(t, "rate_limited", errCode(body))
			}
		}
	}
	assert.Equal(t, 3, created, "the address made 3 boards, then was refused whoever posted")
	tok := c.session(c.nodes[0], "maker0b")
	status, _, _, err := c.call(c.nodes[1], "POST", "/api/v1/leaderboards/nb-0-0/scores", tok, map[string]any{"player": "q", "score": 2}, nil)
	require.NoError(t, err)
	assert.Equal(t, 200, status, "posts to existing boards are not new boards")
}

// TestSeatCapCountsFromTheSeatData: limit.seats_per_user was counted from
// presence, which lags a seat by a renewal and which a resume skipped: with
// a cap of 2, three REST joins before any poll all passed, and a WebSocket
// at the cap resumed into a third lobby. The cap now comes from the seat
// data, on every path and every node.
func TestSeatCapCountsFromTheSeatData(t *testing.T) {
	t.Parallel()
	c := newCluster(t, redistest.Real(t), 3)
	c.putSetting("limit.seats_per_user", 2)

	t.Run("REST joins on three nodes before any poll", func(t *testing.T) {
		tok := c.session(c.nodes[0], "rex")
		c.expect(c.nodes[0], "POST", "/api/v1/lobbies/rcap1/join", tok, nil, 200, "")
		c.expect(c.nodes[1], "POST", "/api/v1/lobbies/rcap2/join", tok, nil, 200, "")
		c.expect(c.nodes[2], "POST", "/api/v1/lobbies/rcap3/join", tok, nil, 429, "rate_limited")
		c.expect(c.nodes[2], "POST", "/api/v1/lobbies/rcap1/join", tok, nil, 200, "") // a lobby held already
		c.expect(c.nodes[1], "POST", "/api/v1/rooms/rcap2-1/leave", tok, nil, 200, "")
		c.expect(c.nodes[0], "POST", "/api/v1/lobbies/rcap3/join", tok, nil, 200, "") // a place was freed
	})

	t.Run("a resume into a third lobby", func(t *testing.T) {
		// wes takes a seat in wcap3 and leaves it: the room exists, no seat
		w := c.dial(c.nodes[0], "wes")
		third := w.join("wcap3")
		c.expect(c.nodes[2], "POST", "/api/v1/rooms/"+third+"/leave", c.session(c.nodes[2], "wes"), nil, 200, "")
		w.join("wcap1")
		w.join("wcap2")
		w2 := c.dial(c.nodes[1], "wes") // a second connection, another node
		w2.send(protocol.Resume{Room: third, Ref: "r3"})
		e := w2.waitFor("error", "r3")
		assert.Equal(t, "rate_limited", e["code"], "%v", e)
		assert.Contains(t, e["message"], "seats in 2 lobbies")
		w2.send(protocol.Resume{Room: "wcap1-1", Ref: "r1"})
		j := w2.next("joined")
		assert.Equal(t, "wcap1-1", j["room"].(map[string]any)["id"], "a lobby held already resumes")
	})
}
