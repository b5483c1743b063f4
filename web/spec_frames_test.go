package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/docs"
	"github.com/chatd/chatd/hooks"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/wsclient"
	"github.com/chatd/chatd/protocol"
)

// specWS is a WebSocket client that checks every frame both ways against
// docs/ws-frames.schema.json: what it sends with send must be a valid
// ClientFrame (so the script also checks the schema admits what the server
// takes), every event it receives must be a valid ServerEvent (and decode
// as a protocol event: internal/wsclient checks that).
type specWS struct {
	t    *testing.T
	s    *spec
	name string
	ws   *wsclient.Conn
	sent map[string]bool
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
	ws, resp, err := wsclient.Dial(context.Background(), u, &wsclient.Options{Check: s.validateEvent})
	require.NoError(t, err)
	resp.Body.Close()
	hu, _ := url.Parse(strings.Replace(u, "ws", "http", 1))
	_, err = s.check(exchange{method: "GET", url: hu, header: http.Header{}, status: resp.StatusCode, rheader: resp.Header}, true)
	assert.NoError(t, err)
	w := &specWS{t: t, s: s, ws: ws, sent: map[string]bool{}}
	t.Cleanup(func() { _ = ws.Close() })
	w.name = w.next("hello")["user"].(string)
	return w
}

// refusedUpgrade opens a WebSocket that the server must refuse, checks the
// refusal against docs/openapi.json and returns its status and code.
func refusedUpgrade(t *testing.T, s *spec, n *testNode, tok string) (int, string) {
	t.Helper()
	u := wsURLOf(n, tok, false)
	ws, resp, err := wsclient.Dial(context.Background(), u, nil)
	if ws != nil {
		_ = ws.Close()
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

// send sends f, which must be a valid ClientFrame.
func (w *specWS) send(f protocol.ClientFrame) {
	w.t.Helper()
	p, err := protocol.EncodeFrame(f)
	require.NoError(w.t, err)
	require.NoError(w.t, w.s.validateClientFrame(p), "the script sends a frame the schema refuses")
	w.sent[f.FrameType()] = true
	require.NoError(w.t, w.ws.Send(f))
}

// sendInvalid sends a frame the schema must refuse (the server answers it
// with an error event): raw on purpose.
func (w *specWS) sendInvalid(typ int, p []byte) {
	w.t.Helper()
	if typ == websocket.TextMessage {
		require.Error(w.t, w.s.validateClientFrame(p), "%s should not be a valid ClientFrame", p)
	}
	require.NoError(w.t, w.ws.SendRaw(typ, p))
}

// next returns the next event of one of types, skipping others.
func (w *specWS) next(types ...string) map[string]any {
	w.t.Helper()
	ev, err := w.ws.Next(frameWait, types...)
	switch {
	case errors.Is(err, wsclient.ErrClosed):
		w.t.Fatalf("%s: closed (code %d) before a %v event", w.name, w.ws.CloseCode(), types)
	case err != nil:
		w.t.Fatalf("%s: no %v event within %s", w.name, types, frameWait)
	}
	return ev.Map()
}

// closed waits for the server to close the connection and returns the code.
func (w *specWS) closed() int {
	w.t.Helper()
	select {
	case <-w.ws.Done():
	case <-time.After(frameWait):
		w.t.Fatalf("%s: not closed within %s", w.name, frameWait)
	}
	code := w.ws.CloseCode()
	assert.True(w.t, w.s.closeCodes[code], "close code %d is not in ws-frames.schema.json's CloseCode", code)
	return code
}

// close ends the connection and reports every event that did not conform.
func (w *specWS) close() {
	w.t.Helper()
	_ = w.ws.Close()
	for _, err := range w.ws.Bad() {
		w.t.Errorf("%s: %v", w.name, err)
	}
}

func (w *specWS) types() map[string]bool { return w.ws.Types() }

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
	// the application's backend: its rpc hook answers every call
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"data":{"rolled":4}}`)
	}))
	t.Cleanup(backend.Close)
	cl := newCluster(t, redistest.Real(t), 2, nodeOpts{configure: func(cfg *nodeConfig) {
		cfg.Hooks = &hooks.Config{Secrets: []string{"spec-hook-secret-0123"}, Hooks: map[hooks.Name]hooks.HookConfig{hooks.RPC: {URL: backend.URL}}}
	}})
	n1, n2 := cl.nodes[0], cl.nodes[1]
	aliceTok := cl.session(n1, "alice")
	a1 := dialSpec(t, s, n1, aliceTok, true) // batched
	a2 := dialSpec(t, s, n1, aliceTok, false)
	b := dialSpec(t, s, n2, cl.session(n2, "bob"), false)
	carol := dialSpec(t, s, n1, cl.session(n1, "carol"), false)
	all := []*specWS{a1, a2, b, carol}

	// join: joined, then presence to the others
	a1.send(protocol.Join{Lobby: "wsf", Ref: "j1"})
	room := a1.next("joined")["room"].(map[string]any)["id"].(string)
	b.send(protocol.Join{Lobby: "wsf"})
	require.Equal(t, room, b.next("joined")["room"].(map[string]any)["id"])
	assert.Equal(t, "bob", a1.next("presence")["user"])
	a2.send(protocol.Join{Lobby: "wsf"})
	require.Equal(t, room, a2.next("joined")["room"].(map[string]any)["id"], "a second connection of alice gets her seat")

	// say: ack with room and ref, the message to every member
	a1.send(protocol.Say{Room: room, Text: "one", Ref: "s1"})
	ack := a1.next("ack")
	assert.Equal(t, "s1", ack["ref"])
	assert.Equal(t, room, ack["room"])
	first := ack["id"].(string)
	id, _ := msgOf(b.next("message"))
	assert.Equal(t, first, id)

	// typing from another node reaches alice's connections, not bob's own
	b.send(protocol.Typing{Room: room})
	ty := a1.next("typing")
	assert.Equal(t, "bob", ty["user"])
	assert.Equal(t, room, ty["room"])
	a2.next("typing")

	// read answers nothing: the pong after it comes first
	b.send(protocol.Read{Room: room, ID: first})
	b.send(protocol.Ping{Ref: "p1"})
	assert.Equal(t, "pong", b.next("pong", "error")["type"])

	// refusals: error events with the room of the frame and its ref
	a1.send(protocol.Say{Room: "wsf-99", Text: "x", Ref: "e1"})
	e := a1.next("error")
	assert.Equal(t, "wsf-99", e["room"])
	assert.Equal(t, "e1", e["ref"])
	a1.send(protocol.Typing{Room: "wsf-98", Ref: "e2"})
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
	b.send(protocol.Say{Room: room, Text: "two", Ref: "b1"})
	b.send(protocol.Say{Room: room, Text: "three", Ref: "b2"})
	assert.Equal(t, "b1", b.next("ack")["ref"])
	assert.Equal(t, "b2", b.next("ack")["ref"])

	// a leave on one connection: left to the other connection on the node,
	// presence left to the room
	a2.send(protocol.Leave{Room: room, Ref: "l1"})
	assert.Equal(t, room, a1.next("left")["room"])
	p := b.next("presence")
	assert.Equal(t, "left", p["state"])

	// resume after the first message: joined, then the two after it
	a1.send(protocol.Resume{Room: room, After: first, Ref: "r1"})
	a1.next("joined")
	_, text := msgOf(a1.next("message"))
	assert.Equal(t, "two", text)
	_, text = msgOf(a1.next("message"))
	assert.Equal(t, "three", text)
	// rpc: the backend's answer with the frame's ref
	a1.send(protocol.RPC{Method: "roll", Data: json.RawMessage(`{"sides":6}`), Ref: "c1"})
	res := a1.next("rpc_result")
	assert.Equal(t, "c1", res["ref"])
	assert.Equal(t, map[string]any{"rolled": float64(4)}, res["data"])
	// resume after an id the history no longer holds: resume_gap, then the latest
	a1.send(protocol.Resume{Room: room, After: "1-1"})
	a1.next("joined")

	// matchmaking: queued and dequeued answers, a match of bob and carol
	// (matched to each), and an expiry in a queue whose tickets wait 1 s
	queues := `{"quick":{"min":2,"max":2,"window":100},"wsfx":{"min":2,"max":2,"window":0,"max_wait_seconds":1},"wsparty":{"min":3,"max":3,"window":0,"max_party":2}}`
	require.Equal(t, 200, cl.do(n1, "PUT", "/api/v1/settings/matchmaking.queues", testAdmin, map[string]string{"value": queues}, nil))
	carol.next("settings")
	b.next("settings")
	carol.send(protocol.Queue{Queue: "quick", Skill: skill(1), Ref: "q1"})
	q := carol.next("queued")
	assert.Equal(t, "q1", q["ref"])
	ticket := q["ticket"].(map[string]any)["id"].(string)
	carol.send(protocol.Dequeue{Queue: "quick", Ticket: ticket, Ref: "q2"})
	assert.Equal(t, "cancelled", carol.next("dequeued")["ticket"].(map[string]any)["state"])
	b.send(protocol.Queue{Queue: "quick", Skill: skill(10), Attributes: map[string]string{"mode": "any"}})
	b.next("queued")
	carol.send(protocol.Queue{Queue: "quick", Skill: skill(20), Attributes: map[string]string{"mode": "any"}})
	carol.next("queued")
	mb, mc := b.next("matched"), carol.next("matched")
	assert.Equal(t, mb["room"], mc["room"])
	carol.send(protocol.Queue{Queue: "wsfx", Skill: skill(1)})
	carol.next("queued")
	assert.Equal(t, "wsfx", carol.next("ticket_expired")["queue"])
	// a party: bob invites carol, who declines, then accepts a second
	// invitation (party answers, party_invite and party_update events)
	for _, answer := range []string{"decline", "accept"} {
		b.send(protocol.Invite{Queue: "wsparty", Skill: skill(1), Party: []string{"carol"}, Ref: "p1"})
		pending := b.next("party")["ticket"].(map[string]any)
		assert.Equal(t, "pending", pending["state"])
		inv := carol.next("party_invite")
		assert.Equal(t, pending["id"], inv["ticket"])
		carol.send(partyAnswer(answer, "wsparty", inv["ticket"].(string), "p2"))
		after := carol.next("party")["ticket"].(map[string]any)
		upd := b.next("party_update")
		assert.Equal(t, map[string]string{"decline": "cancelled", "accept": "waiting"}[answer], after["state"])
		assert.Equal(t, after["state"], upd["state"])
	}

	scriptDirect(t, cl, a1, b)

	// a kick closes with 4001, a sign-out with 4000, a frame over 64 KiB with 1009
	require.Equal(t, 200, cl.do(n2, "POST", "/api/v1/moderation/kick", testAdmin, map[string]string{"user": "carol", "reason": "calm down"}, nil))
	assert.Equal(t, 4001, carol.closed())
	require.Equal(t, 200, cl.do(n1, "DELETE", "/api/v1/session", aliceTok, nil, nil))
	assert.Equal(t, 4000, a1.closed())
	assert.Equal(t, 4000, a2.closed())
	// the client writes the frame in fragments; the server closes once 64 KiB
	// are in, and the client may learn of that before its last fragment
	// (then its write ends with ErrCloseSent): either way the code is 1009
	if err := b.ws.SendRaw(websocket.TextMessage, bytes.Repeat([]byte("x"), 70<<10)); err != nil {
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

func skill(v float64) *float64 { return &v }

// partyAnswer is the accept or decline frame (answer) of a party
// invitation.
func partyAnswer(answer, queue, ticket, ref string) protocol.ClientFrame {
	if answer == "accept" {
		return protocol.Accept{Queue: queue, Ticket: ticket, Ref: ref}
	}
	return protocol.Decline{Queue: queue, Ticket: ticket, Ref: ref}
}
