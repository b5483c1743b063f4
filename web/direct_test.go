package web

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/protocol"
)

// untilPong sends a ping and returns every frame that arrives before its
// pong: what the connection got for whatever came before.
func (w *wsClient) untilPong() []map[string]any {
	w.t.Helper()
	w.send(protocol.Ping{})
	var got []map[string]any
	for {
		f := w.nextOf("dm", "dm_typing", "dm_read", "dm_sent", "dm_opened", "dm_resumed", "party_invite", "error", "pong")
		if f["type"] == "pong" {
			return got
		}
		got = append(got, f)
	}
}

// ofType returns the frames of type typ.
func ofType(fs []map[string]any, typ string) []map[string]any {
	var out []map[string]any
	for _, f := range fs {
		if f["type"] == typ {
			out = append(out, f)
		}
	}
	return out
}

// dmTexts returns the texts of the dm frames of fs, in order.
func dmTexts(fs []map[string]any) []string {
	var out []string
	for _, f := range ofType(fs, "dm") {
		out = append(out, f["text"].(string))
	}
	return out
}

// TestDirectMessagesAcrossNodesResumeBlockAndOutsiders is issue 45's
// acceptance, on three nodes with their own Redis clients on one real
// redis-server: two users on different nodes whisper over WebSocket; one
// reconnects to a third node and resumes with nothing missed or doubled
// while the other keeps writing; a REST client's poll shows the direct
// section dirty and reads the conversation; a block stops the blocked
// user's messages, typing and party invitation from reaching the blocker
// on any node (documented code blocked), and unblock restores them; an
// outsider (another user, no token) reading the conversation gets 404/401.
func TestDirectMessagesAcrossNodesResumeBlockAndOutsiders(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, redistest.Real(t), 3)
	n1, n2, n3 := cl.nodes[0], cl.nodes[1], cl.nodes[2]
	cl.putSetting("matchmaking.queues", `{"duo":{"min":2,"max":2,"window":1000,"reserve_seconds":120,"max_party":2}}`)

	alice := cl.dial(n1, "Alice")
	alice3 := cl.dial(n3, "Alice") // a second connection of hers, on another node
	bob := cl.dial(n2, "bob")

	// whispering: the case of the name does not matter; both of Alice's
	// connections and Bob's get each message once
	alice.send(protocol.DMSend{To: "BOB", Text: "psst", Ref: "a1"})
	got := alice.await("dm_sent", "dm")
	conv, _ := got["dm_sent"]["conversation"].(string)
	require.Regexp(t, `^dm-[0-9a-f]{32}$`, conv)
	assert.Equal(t, "psst", got["dm"]["text"])
	m := bob.next("dm")
	assert.Equal(t, "psst", m["text"])
	assert.Equal(t, "Alice", m["from"])
	assert.Equal(t, conv, m["conversation"])
	assert.Equal(t, "psst", alice3.next("dm")["text"])
	bob.send(protocol.DMSend{To: "alice", Text: "hi back", Ref: "b1"})
	got = bob.await("dm_sent", "dm") // the answer, and his own echo
	assert.Equal(t, conv, got["dm_sent"]["conversation"], "one conversation per pair, from both sides")
	lastSeen := got["dm"]["id"].(string)
	assert.Equal(t, "hi back", alice.next("dm")["text"])
	// a retry of a send (same session, same ref) is answered, not sent again
	alice.send(protocol.DMSend{To: "bob", Text: "psst", Ref: "a1"})
	rep := alice.next("dm_sent")
	assert.Equal(t, true, rep["repeated"])
	assert.Empty(t, dmTexts(bob.untilPong()), "a retried send reaches nobody again")

	// bob drops; alice writes; bob comes back on a third node and resumes
	// while alice goes on writing: every message once
	_ = bob.ws.Close()
	<-bob.closed
	for i := 1; i <= 3; i++ {
		alice.send(protocol.DMSend{To: "bob", Text: fmt.Sprintf("away %d", i), Ref: fmt.Sprintf("w%d", i)})
		alice.next("dm_sent")
	}
	bob = dialToken(t, n3, "bob", cl.session(n3, "bob"))
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 1; i <= 5; i++ {
			alice.send(protocol.DMSend{To: "bob", Text: fmt.Sprintf("live %d", i), Ref: fmt.Sprintf("l%d", i)})
		}
	})
	bob.send(protocol.DMResume{To: conv, After: lastSeen, Ref: "res"})
	wg.Wait()
	for range 5 {
		alice.next("dm_sent")
	}
	var texts []string
	resumed := false
	for len(texts) < 8 || !resumed {
		f := bob.nextOf("dm", "dm_resumed")
		if f["type"] == "dm_resumed" {
			resumed = true
			assert.Equal(t, false, f["gap"])
			continue
		}
		texts = append(texts, f["text"].(string))
	}
	texts = append(texts, dmTexts(bob.untilPong())...)
	assert.ElementsMatch(t, []string{"away 1", "away 2", "away 3", "live 1", "live 2", "live 3", "live 4", "live 5"}, texts,
		"after a reconnect to another node: nothing missed, nothing doubled")

	// a REST client: its poll shows the direct section dirty; it reads
	// its conversations and the history
	rex := cl.session(n2, "rex")
	var poll struct{ Dirty []string }
	require.Equal(t, 200, cl.do(n2, "GET", "/api/v1/poll?wait=0", rex, nil, &poll))
	alice.send(protocol.DMSend{To: "rex", Text: "for rex", Ref: "r1"})
	alice.next("dm_sent")
	require.Equal(t, 200, cl.do(n1, "GET", "/api/v1/poll?wait=5", rex, nil, &poll))
	assert.Contains(t, poll.Dirty, "direct")
	var list struct {
		Conversations []struct {
			ID     string
			With   string
			Unread int
		}
	}
	require.Equal(t, 200, cl.do(n3, "GET", "/api/v1/direct", rex, nil, &list))
	require.Len(t, list.Conversations, 1)
	assert.Equal(t, "Alice", list.Conversations[0].With)
	assert.Equal(t, 1, list.Conversations[0].Unread)
	var hist struct {
		Messages []struct{ ID, From, Text string }
	}
	require.Equal(t, 200, cl.do(n2, "GET", "/api/v1/direct/"+list.Conversations[0].ID+"/messages", rex, nil, &hist))
	require.Len(t, hist.Messages, 1)
	assert.Equal(t, "for rex", hist.Messages[0].Text)
	var unread struct{ Unread int }
	require.Equal(t, 200, cl.do(n1, "POST", "/api/v1/direct/alice/read", rex, map[string]string{"id": hist.Messages[0].ID}, &unread))
	assert.Equal(t, 0, unread.Unread)

	// an outsider: another user, and no token
	carol := cl.session(n1, "carol")
	var e struct{ Error struct{ Code string } }
	assert.Equal(t, 404, cl.do(n1, "GET", "/api/v1/direct/"+conv+"/messages", carol, nil, &e))
	assert.Equal(t, "not_found", e.Error.Code)
	assert.Equal(t, 404, cl.do(n2, "POST", "/api/v1/direct/"+conv+"/messages", carol, map[string]string{"text": "x"}, &e))
	assert.Equal(t, 401, cl.do(n3, "GET", "/api/v1/direct/"+conv+"/messages", "", nil, &e))
	assert.Equal(t, 401, cl.do(n3, "GET", "/api/v1/direct", "", nil, &e))

	// alice blocks bob (by any case of his name): his messages, typing and
	// party invitation reach her on no node; opening is refused with blocked
	alice.untilPong() // what came before
	alice3.untilPong()
	aliceTok := cl.session(n2, "Alice")
	require.Equal(t, 200, cl.do(n2, "PUT", "/api/v1/blocks/BOB", aliceTok, nil, nil))
	bob.send(protocol.DMSend{To: "alice", Text: "are you there", Ref: "b2"})
	bob.send(protocol.DMTyping{To: "alice"})
	bob.send(protocol.DMOpen{To: "Alice", Ref: "b3"})
	bob.send(protocol.Invite{Queue: "duo", Skill: skill(100), Party: []string{"alice"}, Ref: "b4"})
	errs := ofType(bob.untilPong(), "error")
	require.Len(t, errs, 4)
	for _, f := range errs {
		assert.Equal(t, "blocked", f["code"], "%v", f)
	}
	assert.Equal(t, 403, cl.do(n1, "POST", "/api/v1/direct/alice", cl.session(n1, "bob"), nil, &e))
	assert.Equal(t, "blocked", e.Error.Code)
	for _, w := range []*wsClient{alice, alice3} {
		fs := w.untilPong()
		assert.Empty(t, ofType(fs, "dm"), "a blocked user's message reaches the blocker nowhere")
		assert.Empty(t, ofType(fs, "dm_typing"), "nor their typing")
		assert.Empty(t, ofType(fs, "party_invite"), "nor their invitation")
	}
	var blocks struct{ Blocks []string }
	require.Equal(t, 200, cl.do(n3, "GET", "/api/v1/blocks", aliceTok, nil, &blocks))
	assert.Equal(t, []string{"bob"}, blocks.Blocks)

	// unblock restores the conversation
	require.Equal(t, 200, cl.do(n3, "DELETE", "/api/v1/blocks/bob", aliceTok, nil, nil))
	bob.send(protocol.DMSend{To: "alice", Text: "back again", Ref: "b5"})
	assert.Equal(t, "back again", alice.next("dm")["text"])
	assert.Equal(t, "back again", alice3.next("dm")["text"])
	bob.send(protocol.DMTyping{To: "alice"})
	assert.Equal(t, "bob", alice.next("dm_typing")["from"])
	bob.send(protocol.Invite{Queue: "duo", Skill: skill(100), Party: []string{"alice"}, Ref: "b6"})
	assert.Equal(t, "bob", alice3.next("party_invite")["leader"])
}

// specDirect asks every direct-message operation of docs/openapi.json
// (TestSpecOpenAPIEveryOperation): alice and bob whisper, carol is the
// outsider; each answer is checked against the document.
func specDirect(t *testing.T, c *specClient, alice, bob, carol string) {
	var opened struct{ Conversation struct{ ID string } }
	c.json(call{method: "POST", path: "/api/v1/direct/BOB", token: alice, status: 200}, &opened)
	conv := opened.Conversation.ID
	c.do(call{method: "POST", path: "/api/v1/direct/alice", token: alice, status: 400, code: "bad_request"})
	var sent struct{ Message struct{ ID string } }
	c.json(call{method: "POST", path: "/api/v1/direct/bob/messages", token: alice, header: map[string]string{"Idempotency-Key": "dm-1"}, body: map[string]string{"text": "psst"}, status: 200}, &sent)
	c.do(call{method: "POST", path: "/api/v1/direct/" + conv + "/messages", token: bob, body: map[string]string{"text": "hi"}, status: 200})
	c.do(call{method: "POST", path: "/api/v1/direct/" + conv + "/messages", token: carol, body: map[string]string{"text": "hi"}, status: 404, code: "not_found"})
	c.do(call{method: "GET", path: "/api/v1/direct", token: bob, status: 200})
	c.do(call{method: "GET", path: "/api/v1/direct/alice/messages?limit=10", token: bob, status: 200})
	c.do(call{method: "GET", path: "/api/v1/direct/" + conv + "/messages?after=" + sent.Message.ID, token: alice, status: 200})
	c.do(call{method: "GET", path: "/api/v1/direct/" + conv + "/messages", token: carol, status: 404, code: "not_found"})
	c.do(call{method: "POST", path: "/api/v1/direct/alice/read", token: bob, body: map[string]string{"id": sent.Message.ID}, status: 200})
	c.do(call{method: "POST", path: "/api/v1/direct/alice/typing", token: bob, status: 200})
	c.do(call{method: "PUT", path: "/api/v1/blocks/Alice", token: bob, status: 200})
	c.do(call{method: "GET", path: "/api/v1/blocks", token: bob, status: 200})
	c.do(call{method: "POST", path: "/api/v1/direct/bob/messages", token: alice, body: map[string]string{"text": "hello?"}, status: 403, code: "blocked"})
	c.do(call{method: "DELETE", path: "/api/v1/blocks/alice", token: bob, status: 200})
	c.do(call{method: "GET", path: "/api/v1/admin/direct/" + conv + "/messages", token: testAdmin, status: 200})
	c.do(call{method: "GET", path: "/api/v1/admin/direct/" + conv + "/messages", token: testAdminRead, status: 403, code: "forbidden", invalid: true})
	c.do(call{method: "DELETE", path: "/api/v1/admin/direct/" + conv + "/messages/" + sent.Message.ID, token: testAdmin, status: 200})
	c.do(call{method: "DELETE", path: "/api/v1/admin/direct/" + conv + "/messages/" + sent.Message.ID, token: testAdmin, status: 404, code: "unknown_message"})
}

// scriptDirect is the direct-message part of TestSpecFramesScriptedSession:
// every dm_* frame sent and every dm_* event received, each validated
// against docs/ws-frames.schema.json. alice (a1, node 1) and bob (b, node
// 2) whisper; the bus's pub/sub connections are cut to provoke dm_gap.
func scriptDirect(t *testing.T, cl *cluster, a1, b *specWS) {
	a1.send(protocol.DMOpen{To: "Bob", Ref: "d1"})
	opened := a1.next("dm_opened")
	conv := opened["conversation"].(map[string]any)["id"].(string)
	a1.send(protocol.DMSend{To: conv, Text: "psst", Ref: "d2"})
	sent := a1.next("dm_sent")
	assert.Equal(t, "d2", sent["ref"])
	first := b.next("dm")
	assert.Equal(t, sent["id"], first["id"])
	b.send(protocol.DMTyping{To: "alice"})
	assert.Equal(t, "bob", a1.next("dm_typing")["from"])
	b.send(protocol.DMRead{To: "alice", ID: first["id"].(string)})
	assert.EqualValues(t, 0, b.next("dm_read")["unread"])
	a1.send(protocol.DMSend{To: "bob", Text: "again", Ref: "d3"})
	a1.next("dm_sent")
	b.send(protocol.DMResume{To: conv, After: first["id"].(string), Ref: "d4"})
	assert.EqualValues(t, 0, b.next("dm_resumed")["count"], "the message after it came live: not replayed twice")
	require.Equal(t, 200, cl.do(cl.nodes[1], "DELETE", "/api/v1/admin/direct/"+conv+"/messages/"+first["id"].(string), testAdmin, nil, nil))
	assert.Equal(t, first["id"], b.next("dm_removed")["id"])
	// every node's pub/sub connection cut: each reconnects and tells its
	// connections that have direct state
	rdb := cl.nodes[0].rdb
	require.NoError(t, rdb.ClientKillByFilter(context.Background(), "TYPE", "pubsub").Err())
	b.next("dm_gap")
}

// TestDirectMessagesReachAnEventStream: a user on the event stream (SSE)
// of one node gets the direct messages and typing sent to them over REST
// on another node, and writes back over REST.
func TestDirectMessagesReachAnEventStream(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, redistest.Real(t), 2)
	n1, n2 := cl.nodes[0], cl.nodes[1]
	alice, bob := cl.session(n1, "alice"), cl.session(n2, "bob")
	s := openStream(t, n2, "bob", bob, streamOpts{}) // registered once its 200 is in
	var sent struct {
		Message struct{ ID, Conversation string }
	}
	require.Equal(t, 200, cl.do(n1, "POST", "/api/v1/direct/Bob/messages", alice, map[string]string{"text": "over sse"}, &sent))
	rec := s.next("dm")
	assert.Equal(t, "over sse", rec.data["text"])
	assert.Equal(t, sent.Message.ID, rec.data["id"])
	require.Equal(t, 200, cl.do(n1, "POST", "/api/v1/direct/bob/typing", alice, nil, nil))
	assert.Equal(t, "alice", s.next("dm_typing").data["from"])
	require.Equal(t, 200, cl.do(n2, "POST", "/api/v1/direct/"+sent.Message.Conversation+"/read", bob, map[string]string{"id": sent.Message.ID}, nil))
	assert.EqualValues(t, 0, s.next("dm_read").data["unread"])
}
