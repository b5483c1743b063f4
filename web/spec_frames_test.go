package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/docs"
	"github.com/chatd/chatd/internal/redistest"
)

// specWS is a WebSocket client that checks every frame both ways against
// docs/ws-frames.schema.json: what it sends with send must be a valid
// ClientFrame (so the script also checks the schema admits what the server
// takes), every event it receives must be a valid ServerEvent.
type specWS struct {
	t     *testing.T
	s     *spec
	name  string
	conn  *websocket.Conn
	batch bool

	mu     sync.Mutex
	events []map[string]any
	bad    []error
	code   int
	notify chan struct{}
	done   chan struct{}
	pos    int // next event next() looks at (test goroutine only)
	sent   map[string]bool
}

func wsURLOf(n *testNode, tok string, batch bool) string {
	u := "ws" + strings.TrimPrefix(n.url, "http") + "/ws?token=" + url.QueryEscape(tok)
	if batch {
		u += "&batch=1"
	}
	return u
}

// dialSpec opens a WebSocket and checks the 101 answer against
// docs/openapi.json's GET /ws.
func dialSpec(t *testing.T, s *spec, n *testNode, tok string, batch bool) *specWS {
	t.Helper()
	u := wsURLOf(n, tok, batch)
	conn, resp, err := websocket.DefaultDialer.Dial(u, nil)
	require.NoError(t, err)
	resp.Body.Close()
	hu, _ := url.Parse(strings.Replace(u, "ws", "http", 1))
	_, err = s.check(exchange{method: "GET", url: hu, header: http.Header{}, status: resp.StatusCode, rheader: resp.Header}, true)
	assert.NoError(t, err)
	w := &specWS{t: t, s: s, conn: conn, batch: batch, notify: make(chan struct{}, 1), done: make(chan struct{}), sent: map[string]bool{}}
	go w.read()
	t.Cleanup(func() { _ = conn.Close() })
	w.name = w.next("hello")["user"].(string)
	return w
}

// refusedUpgrade opens a WebSocket that the server must refuse, checks the
// refusal against docs/openapi.json and returns its status and code.
func refusedUpgrade(t *testing.T, s *spec, n *testNode, tok string) (int, string) {
	t.Helper()
	u := wsURLOf(n, tok, false)
	conn, resp, err := websocket.DefaultDialer.Dial(u, nil)
	if conn != nil {
		conn.Close()
	}
	require.ErrorIs(t, err, websocket.ErrBadHandshake)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	hu, _ := url.Parse(strings.Replace(u, "ws", "http", 1))
	_, err = s.check(exchange{method: "GET", url: hu, header: http.Header{}, status: resp.StatusCode, rheader: resp.Header, rbody: body}, true)
	assert.NoError(t, err)
	var e struct{ Error APIError }
	_ = json.Unmarshal(body, &e)
	return resp.StatusCode, string(e.Error.Code)
}

func (w *specWS) read() {
	defer close(w.done)
	for {
		typ, p, err := w.conn.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			w.mu.Lock()
			if errors.As(err, &ce) {
				w.code = ce.Code
			}
			w.mu.Unlock()
			return
		}
		lines := [][]byte{p}
		if w.batch {
			lines = bytes.Split(p, []byte("\n"))
		}
		w.mu.Lock()
		if typ != websocket.TextMessage {
			w.bad = append(w.bad, fmt.Errorf("a frame of type %d, not text", typ))
		}
		for _, line := range lines {
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			if err := w.s.validateEvent(line); err != nil {
				w.bad = append(w.bad, err)
			}
			var ev map[string]any
			if err := json.Unmarshal(line, &ev); err != nil {
				w.bad = append(w.bad, err)
				continue
			}
			w.events = append(w.events, ev)
		}
		w.mu.Unlock()
		select {
		case w.notify <- struct{}{}:
		default:
		}
	}
}

// send sends v, which must be a valid ClientFrame.
func (w *specWS) send(v any) {
	w.t.Helper()
	p, err := json.Marshal(v)
	require.NoError(w.t, err)
	require.NoError(w.t, w.s.validateClientFrame(p), "the script sends a frame the schema refuses")
	var f struct{ Type string }
	_ = json.Unmarshal(p, &f)
	w.sent[f.Type] = true
	require.NoError(w.t, w.conn.WriteMessage(websocket.TextMessage, p))
}

// sendInvalid sends a frame the schema must refuse (the server answers it
// with an error event).
func (w *specWS) sendInvalid(typ int, p []byte) {
	w.t.Helper()
	if typ == websocket.TextMessage {
		require.Error(w.t, w.s.validateClientFrame(p), "%s should not be a valid ClientFrame", p)
	}
	require.NoError(w.t, w.conn.WriteMessage(typ, p))
}

// next returns the next event of one of types, skipping others.
func (w *specWS) next(types ...string) map[string]any {
	w.t.Helper()
	deadline := time.After(frameWait)
	for {
		w.mu.Lock()
		for w.pos < len(w.events) {
			ev := w.events[w.pos]
			w.pos++
			for _, typ := range types {
				if ev["type"] == typ {
					w.mu.Unlock()
					return ev
				}
			}
		}
		w.mu.Unlock()
		select {
		case <-w.notify:
		case <-w.done:
			w.mu.Lock()
			more := w.pos < len(w.events)
			w.mu.Unlock()
			if !more {
				w.t.Fatalf("%s: closed (code %d) before a %v event", w.name, w.closeCode(), types)
			}
		case <-deadline:
			w.t.Fatalf("%s: no %v event within %s", w.name, types, frameWait)
		}
	}
}

// closed waits for the server to close the connection and returns the code.
func (w *specWS) closed() int {
	w.t.Helper()
	select {
	case <-w.done:
	case <-time.After(frameWait):
		w.t.Fatalf("%s: not closed within %s", w.name, frameWait)
	}
	code := w.closeCode()
	assert.True(w.t, w.s.closeCodes[code], "close code %d is not in ws-frames.schema.json's CloseCode", code)
	return code
}

func (w *specWS) closeCode() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.code
}

// close ends the connection and reports every event that did not conform.
func (w *specWS) close() {
	w.t.Helper()
	_ = w.conn.Close()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, err := range w.bad {
		w.t.Errorf("%s: %v", w.name, err)
	}
}

func (w *specWS) types() map[string]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]bool{}
	for _, ev := range w.events {
		out[ev["type"].(string)] = true
	}
	return out
}

// frameTypes returns the type of every frame of a oneOf group of the schema.
func frameTypes(t *testing.T, group string) []string {
	var doc struct {
		Defs map[string]json.RawMessage `json:"$defs"`
	}
	require.NoError(t, json.Unmarshal(docs.WSFrames, &doc))
	var g struct {
		OneOf []struct {
			Ref string `json:"$ref"`
		} `json:"oneOf"`
	}
	require.NoError(t, json.Unmarshal(doc.Defs[group], &g))
	var out []string
	for _, r := range g.OneOf {
		var f struct {
			Properties struct {
				Type struct {
					Const string `json:"const"`
				} `json:"type"`
			} `json:"properties"`
		}
		require.NoError(t, json.Unmarshal(doc.Defs[strings.TrimPrefix(r.Ref, "#/$defs/")], &f))
		out = append(out, f.Properties.Type.Const)
	}
	sort.Strings(out)
	return out
}

// TestSpecFramesScriptedSession runs a WebSocket session across two nodes
// that uses every client frame and provokes every server event — join,
// say, typing, read, resume, leave, errors, message removal, settings and
// notices, a kick, a sign-out, an oversized frame — and validates every
// frame both ways against docs/ws-frames.schema.json and every close code
// against its CloseCode.
func TestSpecFramesScriptedSession(t *testing.T) {
	t.Parallel()
	s := mustSpec(t)
	cl := newCluster(t, redistest.Real(t), 2)
	n1, n2 := cl.nodes[0], cl.nodes[1]
	aliceTok := cl.session(n1, "alice")
	a1 := dialSpec(t, s, n1, aliceTok, true) // batched
	a2 := dialSpec(t, s, n1, aliceTok, false)
	b := dialSpec(t, s, n2, cl.session(n2, "bob"), false)
	carol := dialSpec(t, s, n1, cl.session(n1, "carol"), false)
	all := []*specWS{a1, a2, b, carol}

	// join: joined, then presence to the others
	a1.send(map[string]string{"type": "join", "lobby": "wsf", "ref": "j1"})
	room := a1.next("joined")["room"].(map[string]any)["id"].(string)
	b.send(map[string]string{"type": "join", "lobby": "wsf"})
	require.Equal(t, room, b.next("joined")["room"].(map[string]any)["id"])
	assert.Equal(t, "bob", a1.next("presence")["user"])
	a2.send(map[string]string{"type": "join", "lobby": "wsf"})
	require.Equal(t, room, a2.next("joined")["room"].(map[string]any)["id"], "a second connection of alice gets her seat")

	// say: ack with room and ref, the message to every member
	a1.send(map[string]string{"type": "say", "room": room, "text": "one", "ref": "s1"})
	ack := a1.next("ack")
	assert.Equal(t, "s1", ack["ref"])
	assert.Equal(t, room, ack["room"])
	first := ack["id"].(string)
	id, _ := msgOf(b.next("message"))
	assert.Equal(t, first, id)

	// typing from another node reaches alice's connections, not bob's own
	b.send(map[string]string{"type": "typing", "room": room})
	ty := a1.next("typing")
	assert.Equal(t, "bob", ty["user"])
	assert.Equal(t, room, ty["room"])
	a2.next("typing")

	// read answers nothing: the pong after it comes first
	b.send(map[string]string{"type": "read", "room": room, "id": first})
	b.send(map[string]string{"type": "ping", "ref": "p1"})
	assert.Equal(t, "pong", b.next("pong", "error")["type"])

	// refusals: error events with the room of the frame and its ref
	a1.send(map[string]string{"type": "say", "room": "wsf-99", "text": "x", "ref": "e1"})
	e := a1.next("error")
	assert.Equal(t, "wsf-99", e["room"])
	assert.Equal(t, "e1", e["ref"])
	a1.send(map[string]string{"type": "typing", "room": "wsf-98", "ref": "e2"})
	e = a1.next("error")
	assert.Equal(t, "not_seated", e["code"])
	assert.Equal(t, "wsf-98", e["room"])
	for _, bad := range []struct {
		typ  int
		p    string
		code string
	}{
		{websocket.TextMessage, `{"type":"dance","ref":"e3"}`, "unknown_type"},
		{websocket.TextMessage, `{"type":`, "bad_json"},
		{websocket.BinaryMessage, `{"type":"ping"}`, "bad_json"},
		{websocket.TextMessage, `{"type":"resume","room":"` + room + `","after":"yesterday","ref":"e4"}`, "bad_request"},
		{websocket.TextMessage, `{"type":"say","room":"` + room + `","text":"","ref":"e5"}`, "bad_request"},
		{websocket.TextMessage, `{"type":"ping","ref":"` + strings.Repeat("r", 65) + `"}`, "bad_request"},
	} {
		a1.sendInvalid(bad.typ, []byte(bad.p))
		assert.Equal(t, bad.code, a1.next("error")["code"], "%s", bad.p)
	}

	// an admin removes a message; a setting and a notice go to everyone
	require.Equal(t, 200, cl.do(n2, "DELETE", "/api/v1/rooms/"+room+"/messages/"+first, testAdmin, nil, nil))
	assert.Equal(t, first, a1.next("message_removed")["id"])
	assert.Equal(t, first, b.next("message_removed")["id"])
	require.Equal(t, 200, cl.do(n1, "PUT", "/api/v1/settings/motd", testAdmin, map[string]string{"value": "hi all"}, nil))
	require.Equal(t, 200, cl.do(n2, "POST", "/api/v1/notices", testAdmin, map[string]string{"text": "restart at noon"}, nil))
	for _, w := range all {
		w.next("settings")
		w.next("notice")
	}

	// says of one connection are acked in order
	b.send(map[string]string{"type": "say", "room": room, "text": "two", "ref": "b1"})
	b.send(map[string]string{"type": "say", "room": room, "text": "three", "ref": "b2"})
	assert.Equal(t, "b1", b.next("ack")["ref"])
	assert.Equal(t, "b2", b.next("ack")["ref"])

	// a leave on one connection: left to the other connection on the node,
	// presence left to the room
	a2.send(map[string]string{"type": "leave", "room": room, "ref": "l1"})
	assert.Equal(t, room, a1.next("left")["room"])
	p := b.next("presence")
	assert.Equal(t, "left", p["state"])

	// resume after the first message: joined, then the two after it
	a1.send(map[string]string{"type": "resume", "room": room, "after": first, "ref": "r1"})
	a1.next("joined")
	_, text := msgOf(a1.next("message"))
	assert.Equal(t, "two", text)
	_, text = msgOf(a1.next("message"))
	assert.Equal(t, "three", text)
	// resume after an id the history no longer holds: resume_gap, then the latest
	a1.send(map[string]string{"type": "resume", "room": room, "after": "1-1"})
	a1.next("joined")

	// matchmaking: queued and dequeued answers, a match of bob and carol
	// (matched to each), and an expiry in a queue whose tickets wait 1 s
	queues := `{"quick":{"min":2,"max":2,"window":100},"wsfx":{"min":2,"max":2,"window":0,"max_wait_seconds":1},"wsparty":{"min":3,"max":3,"window":0,"max_party":2}}`
	require.Equal(t, 200, cl.do(n1, "PUT", "/api/v1/settings/matchmaking.queues", testAdmin, map[string]string{"value": queues}, nil))
	carol.next("settings")
	b.next("settings")
	carol.send(map[string]any{"type": "queue", "queue": "quick", "skill": 1, "ref": "q1"})
	q := carol.next("queued")
	assert.Equal(t, "q1", q["ref"])
	ticket := q["ticket"].(map[string]any)["id"].(string)
	carol.send(map[string]any{"type": "dequeue", "queue": "quick", "ticket": ticket, "ref": "q2"})
	assert.Equal(t, "cancelled", carol.next("dequeued")["ticket"].(map[string]any)["state"])
	b.send(map[string]any{"type": "queue", "queue": "quick", "skill": 10})
	b.next("queued")
	carol.send(map[string]any{"type": "queue", "queue": "quick", "skill": 20, "attributes": map[string]string{}})
	carol.next("queued")
	mb, mc := b.next("matched"), carol.next("matched")
	assert.Equal(t, mb["room"], mc["room"])
	carol.send(map[string]any{"type": "queue", "queue": "wsfx", "skill": 1})
	carol.next("queued")
	assert.Equal(t, "wsfx", carol.next("ticket_expired")["queue"])
	// a party: bob invites carol, who declines, then accepts a second
	// invitation (party answers, party_invite and party_update events)
	for _, answer := range []string{"decline", "accept"} {
		b.send(map[string]any{"type": "invite", "queue": "wsparty", "skill": 1, "party": []string{"carol"}, "ref": "p1"})
		pending := b.next("party")["ticket"].(map[string]any)
		assert.Equal(t, "pending", pending["state"])
		inv := carol.next("party_invite")
		assert.Equal(t, pending["id"], inv["ticket"])
		carol.send(map[string]any{"type": answer, "queue": "wsparty", "ticket": inv["ticket"], "ref": "p2"})
		after := carol.next("party")["ticket"].(map[string]any)
		upd := b.next("party_update")
		assert.Equal(t, map[string]string{"decline": "cancelled", "accept": "waiting"}[answer], after["state"])
		assert.Equal(t, after["state"], upd["state"])
	}

	// a kick closes with 4001, a sign-out with 4000, a frame over 64 KiB with 1009
	require.Equal(t, 200, cl.do(n2, "POST", "/api/v1/moderation/kick", testAdmin, map[string]string{"user": "carol", "reason": "calm down"}, nil))
	assert.Equal(t, 4001, carol.closed())
	require.Equal(t, 200, cl.do(n1, "DELETE", "/api/v1/session", aliceTok, nil, nil))
	assert.Equal(t, 4000, a1.closed())
	assert.Equal(t, 4000, a2.closed())
	// the client writes the frame in fragments; the server closes once 64 KiB
	// are in, and the client may learn of that before its last fragment
	// (then its write ends with ErrCloseSent): either way the code is 1009
	if err := b.conn.WriteMessage(websocket.TextMessage, bytes.Repeat([]byte("x"), 70<<10)); err != nil {
		require.ErrorIs(t, err, websocket.ErrCloseSent)
	}
	assert.Equal(t, 1009, b.closed())

	sent, got := map[string]bool{}, map[string]bool{}
	for _, w := range all {
		w.close()
		for typ := range w.sent {
			sent[typ] = true
		}
		for typ := range w.types() {
			got[typ] = true
		}
	}
	for _, typ := range frameTypes(t, "ClientFrame") {
		assert.True(t, sent[typ], "the script never sent a %q frame", typ)
	}
	for _, typ := range frameTypes(t, "ServerEvent") {
		assert.True(t, got[typ], "the script never received a %q event", typ)
	}
}
