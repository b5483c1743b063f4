package web

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/names"
	"github.com/chatd/chatd/protocol"
)

// TestPresenceByAnyCaseOfTheName: "CaseTwo" online over a WebSocket on one
// node is online when asked as "casetwo" or "CASETWO" on the others (it
// answered offline: presence keyed the name as typed).
func TestPresenceByAnyCaseOfTheName(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, redistest.Real(t), 3)
	n1, n2, n3 := cl.nodes[0], cl.nodes[1], cl.nodes[2]
	w := cl.dial(n1, "CaseTwo")
	room := w.join("case-lobby")
	reader := cl.session(n2, "reader")
	for _, asked := range []string{"CaseTwo", "casetwo", "CASETWO"} {
		for _, n := range []*testNode{n2, n3} {
			var p presenceJSON
			require.Eventually(t, func() bool {
				p = cl.presence(n, reader, asked)
				return p.Online
			}, 10*time.Second, 20*time.Millisecond, "%s asked on %s", asked, n.url)
			assert.Equal(t, []string{room}, p.Rooms, asked)
		}
	}
}

// TestOwnNameInAnotherCaseWithOwnToken: a guest asking for its own name in
// another case, with its own token, gets a session of the same guest under
// its display name (it got 409 name_taken); without the token, or with
// another guest's, the name stays taken.
func TestOwnNameInAnotherCaseWithOwnToken(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, redistest.Real(t), 3)
	n1, n2, n3 := cl.nodes[0], cl.nodes[1], cl.nodes[2]
	own := cl.session(n1, "Misc7")
	var out struct{ Token, User string }
	require.Equal(t, 200, cl.do(n2, "POST", "/api/v1/session", own, map[string]string{"user": "misc7"}, &out))
	assert.Equal(t, "Misc7", out.User, "one guest, one display name")
	require.NotEmpty(t, out.Token)
	var who struct{ User string }
	require.Equal(t, 200, cl.do(n3, "GET", "/api/v1/wallet", out.Token, nil, &who), "the new session is admitted")

	other := cl.session(n3, "someone")
	var e struct{ Error struct{ Code string } }
	assert.Equal(t, 409, cl.do(n3, "POST", "/api/v1/session", "", map[string]string{"user": "MISC7"}, &e))
	assert.Equal(t, "name_taken", e.Error.Code)
	assert.Equal(t, 409, cl.do(n1, "POST", "/api/v1/session", other, map[string]string{"user": "mIsC7"}, &e))
	assert.Equal(t, "name_taken", e.Error.Code)
}

// TestKeyspaceFoldsUserNames: every Redis key a user can create is made of
// the canonical name (names.Canonical). One guest, "MiXeD", and its
// second session asked as "MIXED", do what makes per-user keys — a seat
// over WebSocket and REST, says, typing, read marks, polls, a board score
// and rank, seen marks, a wallet grant and an idempotent buy, a mute and a
// rate-limited post — across three nodes; then a SCAN of the whole prefix
// fails on any key part that is a case variant of the name other than the
// canonical "mixed" (two variants of one name reaching two keys), and
// requires the canonical form in keys of each kind it made. Matchmaking's
// keys are left out: that package folds its own and is covered by its own
// package tests.
func TestKeyspaceFoldsUserNames(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	cl := newCluster(t, r, 3)
	n1, n2, n3 := cl.nodes[0], cl.nodes[1], cl.nodes[2]
	// The say's bucket lives until it is full again: 1/rate after one say,
	// 100 ms at the default rate, which a loaded machine outlasts before
	// the SCAN. At 0.05 says/s it lives 20 s.
	cl.putSetting("rate.messages_per_second", 0.05)

	w := cl.dial(n1, "MiXeD")
	tok := cl.tokens["MiXeD"]
	var second struct{ Token string }
	require.Equal(t, 200, cl.do(n2, "POST", "/api/v1/session", tok, map[string]string{"user": "MIXED"}, &second))
	tok2 := second.Token

	room := w.join("fold")
	w.send(protocol.Say{Room: room, Text: "hi", Ref: "s1"})
	id, _ := w.next("ack")["id"].(string)
	require.NotEmpty(t, id)
	w.send(protocol.Typing{Room: room})
	w.send(protocol.Read{Room: room, ID: id})
	cl.join(n2, tok2, "fold-rest")
	require.Equal(t, 200, cl.do(n3, "POST", "/api/v1/rooms/"+room+"/read", tok2, map[string]string{"id": id}, nil))
	require.Equal(t, 200, cl.do(n3, "GET", "/api/v1/unread", tok2, nil, nil))
	require.Equal(t, 200, cl.do(n2, "GET", "/api/v1/poll?wait=0", tok2, nil, nil))
	require.Equal(t, 200, cl.do(n1, "POST", "/api/v1/leaderboards/fold-board/scores", tok, map[string]any{"player": "MiXeD", "score": 5}, nil))
	require.Equal(t, 200, cl.do(n2, "POST", "/api/v1/leaderboards/fold-board/scores", tok2, map[string]any{"player": "mixed", "score": 7}, nil))
	require.Equal(t, 200, cl.do(n1, "POST", "/api/v1/seen", tok, map[string][]string{"items": {"a"}}, nil))
	require.Equal(t, 200, cl.do(n3, "POST", "/api/v1/seen/filter", tok2, map[string][]string{"items": {"a", "b"}}, nil))
	require.Equal(t, 200, cl.do(n1, "POST", "/api/v1/shop/items", testAdmin, map[string]any{"item": "fold-item", "stock": 5, "price": 1}, nil))
	require.Equal(t, 200, cl.do(n2, "POST", "/api/v1/wallet/grant", testAdmin, map[string]any{"user": "mIxEd", "amount": 5}, nil))
	for _, n := range []*testNode{n1, n3} {
		assert.Equal(t, 200, cl.call2(n, "POST", "/api/v1/shop/buy", tok, map[string]any{"item": "fold-item"}, "fold-buy"), "the grant to mIxEd is MiXeD's")
	}
	require.Equal(t, 200, cl.do(n3, "POST", "/api/v1/moderation/mute", testAdmin, map[string]any{"user": "MIXED", "seconds": 60}, nil))

	ctx := context.Background()
	var keys []string
	iter := r.Client.Scan(ctx, 0, r.Prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	require.NoError(t, iter.Err())
	canonical := map[string]bool{}
	for _, k := range keys {
		for _, part := range strings.FieldsFunc(strings.TrimPrefix(k, r.Prefix+":"), func(c rune) bool { return c == ':' || c == '{' || c == '}' }) {
			if !strings.EqualFold(part, "mixed") {
				continue
			}
			if assert.Equal(t, names.Canonical(part), part, "key %s holds the name as %q, not its canonical form", k, part) {
				canonical[kindOfUserKey(k, r.Prefix)] = true
			}
		}
	}
	t.Logf("keys holding the canonical name, by kind: %v", canonical)
	for _, kind := range []string{"presence", "lobbies", "read", "rate", "dirty", "seen", "balance", "inv", "idem", "mute", "claim"} {
		found := false
		for k := range canonical {
			found = found || strings.Contains(k, kind)
		}
		assert.True(t, found, "no key of kind %q holds the canonical name: %v", kind, canonical)
	}
}

// kindOfUserKey is a key with its prefix and the name cut out, for the log.
func kindOfUserKey(k, prefix string) string {
	return strings.ReplaceAll(strings.TrimPrefix(k, prefix+":"), "mixed", "*")
}

// call2 posts body with an Idempotency-Key and returns the status.
func (c *cluster) call2(n *testNode, method, path, tok string, body any, key string) int {
	c.t.Helper()
	status, _, _, err := c.call(n, method, path, tok, body, map[string]string{"Idempotency-Key": key})
	require.NoError(c.t, err)
	return status
}
