package web

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/protocol"
)

// roomUntil returns the message and typing frames w gets up to and
// including the message whose text is last: a room's messages and its
// typing come in one order, so it is the barrier for everything the room
// carried before it.
func (w *wsClient) roomUntil(last string) []string {
	w.t.Helper()
	var out []string
	for {
		f := w.nextOf("message", "typing")
		if f["type"] == "typing" {
			out = append(out, "typing:"+f["user"].(string))
			continue
		}
		m := f["message"].(map[string]any)
		out = append(out, fmt.Sprintf("%s:%s", m["from"], m["text"]))
		if m["text"] == last {
			return out
		}
	}
}

// roomUntil is wsClient.roomUntil for an event stream.
func (s *sseClient) roomUntil(last string) []string {
	s.t.Helper()
	var out []string
	deadline := time.After(frameWait)
	for {
		select {
		case r := <-s.records:
			switch r.typ() {
			case "typing":
				out = append(out, "typing:"+r.data["user"].(string))
			case "message":
				m := r.data["message"].(map[string]any)
				out = append(out, fmt.Sprintf("%s:%s", m["from"], m["text"]))
				if m["text"] == last {
					return out
				}
			}
		case <-deadline:
			s.t.Fatalf("%s: no message %q within %s; got %v", s.user, last, frameWait, out)
			return nil
		}
	}
}

// syncDirect makes w (one of user's connections) send a direct message
// to peer and waits for its echo on every one of ws: the direct channel
// carries a block's change and the messages in one order, so every node
// of ws has applied every change made before.
func syncDirect(t *testing.T, w *wsClient, peer, ref string, ws ...*wsClient) {
	t.Helper()
	w.send(protocol.DMSend{To: peer, Text: "sync " + ref, Ref: ref})
	for _, c := range ws {
		for {
			if f := c.next("dm"); f["text"] == "sync "+ref {
				break
			}
		}
	}
}

// texts returns the "from:text" of each message of a history or poll page.
func texts(ms []struct{ ID, From, Text string }) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.From+":"+m.Text)
	}
	return out
}

// TestDirectBlockHidesTheBlockedUsersRoomMessagesOnEveryNode is issue 45's
// last gap, on three nodes: Alice, with WebSockets on n1 and n2 and a REST
// session, blocks bob (on n3) while both sit in one room with carol, the
// control. From then on bob's says and typing reach carol and not Alice
// on either node; Alice's history read (from the latest, and after an id,
// filled past the hidden ones), her resume on a new connection and her
// REST poll lack them; after the unblock bob's live messages and typing
// reach her again and her history shows them.
func TestDirectBlockHidesTheBlockedUsersRoomMessagesOnEveryNode(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, redistest.Real(t), 3)
	n1, n2, n3 := cl.nodes[0], cl.nodes[1], cl.nodes[2]

	alice1 := cl.dial(n1, "Alice")
	alice2 := cl.dial(n2, "Alice")
	bob := cl.dial(n3, "bob")
	carol := cl.dial(n1, "carol")
	room := alice1.join("blk")
	for _, w := range []*wsClient{alice2, bob, carol} {
		require.Equal(t, room, w.join("blk"), "%s: one room", w.user)
	}
	aliceTok := cl.session(n2, "Alice")
	var joined struct{ Room struct{ ID string } }
	require.Equal(t, 200, cl.do(n2, "POST", "/api/v1/lobbies/blk/join", aliceTok, nil, &joined))
	require.Equal(t, room, joined.Room.ID)
	require.Equal(t, 200, cl.do(n2, "GET", "/api/v1/poll?wait=0", aliceTok, nil, nil))
	stream := openStream(t, n3, "Alice", aliceTok, streamOpts{}) // her session's event stream, on bob's node

	// before the block bob reaches everyone
	bob.send(protocol.Say{Room: room, Text: "before", Ref: "b0"})
	for _, w := range []*wsClient{alice1, alice2, carol} {
		assert.Equal(t, []string{"bob:before"}, w.roomUntil("before"), w.user)
	}
	assert.Equal(t, []string{"bob:before"}, stream.roomUntil("before"), "the stream")
	var page struct {
		Messages []struct{ ID, From, Text string }
	}
	require.Equal(t, 200, cl.do(n3, "GET", "/api/v1/rooms/"+room+"/messages", aliceTok, nil, &page))
	require.Equal(t, []string{"bob:before"}, texts(page.Messages))
	beforeID := page.Messages[0].ID

	// Alice blocks bob (any case of his name) over REST on n2
	require.Equal(t, 200, cl.do(n2, "PUT", "/api/v1/blocks/BOB", aliceTok, nil, nil))
	syncDirect(t, alice1, "carol", "s1", alice1, alice2)
	for stream.next("dm").data["text"] != "sync s1" {
	}

	// a client's frames take effect in the order sent; carol starts
	// once bob's last say is stored
	bob.send(protocol.Say{Room: room, Text: "hidden 1", Ref: "b1"})
	bob.send(protocol.Typing{Room: room})
	bob.send(protocol.Say{Room: room, Text: "hidden 2", Ref: "b2"})
	bob.waitFor("ack", "b2")
	carol.send(protocol.Say{Room: room, Text: "control", Ref: "c1"})
	carol.send(protocol.Typing{Room: room})
	carol.send(protocol.Say{Room: room, Text: "end", Ref: "c2"})

	assert.Equal(t, []string{"bob:hidden 1", "typing:bob", "bob:hidden 2", "carol:control", "carol:end"},
		carol.roomUntil("end"), "the control gets everything (not her own typing)")
	for _, w := range []*wsClient{alice1, alice2} {
		assert.Equal(t, []string{"carol:control", "typing:carol", "carol:end"}, w.roomUntil("end"),
			"%s: bob's says and typing reach the blocker on no node", w.user)
	}
	assert.Equal(t, []string{"carol:control", "typing:carol", "carol:end"}, stream.roomUntil("end"),
		"nor her event stream")

	// her history: from the latest, and after an id (a page of one
	// filled past bob's hidden message); the control's has everything
	require.Equal(t, 200, cl.do(n1, "GET", "/api/v1/rooms/"+room+"/messages", aliceTok, nil, &page))
	assert.Equal(t, []string{"carol:control", "carol:end"}, texts(page.Messages), "Alice's history")
	require.Equal(t, 200, cl.do(n3, "GET", "/api/v1/rooms/"+room+"/messages?limit=1&after="+url.QueryEscape(beforeID), aliceTok, nil, &page))
	assert.Equal(t, []string{"carol:control"}, texts(page.Messages), "a page after an id is filled past the hidden ones")
	require.Equal(t, 200, cl.do(n2, "GET", "/api/v1/rooms/"+room+"/messages", cl.session(n2, "carol"), nil, &page))
	assert.Equal(t, []string{"bob:before", "bob:hidden 1", "bob:hidden 2", "carol:control", "carol:end"}, texts(page.Messages),
		"the control's history")

	// her REST poll
	var poll struct {
		Data struct {
			Messages map[string][]struct{ ID, From, Text string }
		}
	}
	require.Equal(t, 200, cl.do(n1, "GET", "/api/v1/poll?wait=0", aliceTok, nil, &poll))
	assert.Equal(t, []string{"carol:control", "carol:end"}, texts(poll.Data.Messages[room]), "Alice's poll")

	// a new connection of hers resumes after "before": the replay lacks
	// bob's, and nothing comes twice
	alice3 := cl.dial(n3, "Alice")
	alice3.send(protocol.Resume{Room: room, After: beforeID, Ref: "r1"})
	alice3.next("joined")
	assert.Equal(t, []string{"carol:control", "carol:end"}, alice3.roomUntil("end"), "Alice's resume")
	carol.send(protocol.Say{Room: room, Text: "end 2", Ref: "c3"})
	assert.Equal(t, []string{"carol:end 2"}, alice3.roomUntil("end 2"), "nothing replayed twice")

	// unblock: bob's live messages and typing reach her again, and her
	// history shows his messages
	require.Equal(t, 200, cl.do(n1, "DELETE", "/api/v1/blocks/bob", aliceTok, nil, nil))
	syncDirect(t, alice2, "carol", "s2", alice1, alice2, alice3)
	bob.send(protocol.Say{Room: room, Text: "after", Ref: "b3"})
	bob.waitFor("ack", "b3")
	carol.send(protocol.Say{Room: room, Text: "end 3", Ref: "c4"})
	for _, w := range []*wsClient{alice1, alice2, alice3} {
		got := w.roomUntil("end 3")
		assert.Contains(t, got, "bob:after", w.user)
		assert.Contains(t, got, "carol:end 3", w.user)
	}
	require.Equal(t, 200, cl.do(n2, "GET", "/api/v1/rooms/"+room+"/messages", aliceTok, nil, &page))
	assert.Contains(t, texts(page.Messages), "bob:hidden 1", "after the unblock her history shows his messages")
	assert.Contains(t, texts(page.Messages), "bob:hidden 2")
}
