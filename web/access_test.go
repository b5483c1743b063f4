package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/protocol"
)

// accessRoles are the roles of the access matrix, in the order
// docs/openapi.json's x-access lists them (see PROTOCOL.md, "Access").
var accessRoles = []string{"none", "other", "member", "player", "admin-read", "admin"}

// serverKeyRoles are the server API's roles (PROTOCOL.md, "Server API for
// backends"): an API key without the operation's scope (x-scope), and one
// with it. The server API's operations document both; on every other
// operation a key is no token, and is answered as "none" is.
var serverKeyRoles = []string{"key-unscoped", "key"}

// accessOp is one operation of docs/openapi.json with its documented
// answer per role.
type accessOp struct {
	method, path string
	access       map[string]string
	scope        string // x-scope: the server API key's scope it needs ("" = none)
}

// accessOps reads every operation of docs/openapi.json and its x-access;
// an operation without one, or without a role, fails the test.
func accessOps(t *testing.T) []accessOp {
	t.Helper()
	raw, err := os.ReadFile("../docs/openapi.json")
	require.NoError(t, err)
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	var ops []accessOp
	for path, item := range doc.Paths {
		for method, op := range item {
			if method != "get" && method != "post" && method != "put" && method != "delete" && method != "patch" {
				continue
			}
			var o struct {
				Access map[string]string `json:"x-access"`
				Scope  string            `json:"x-scope"`
			}
			require.NoError(t, json.Unmarshal(op, &o))
			require.NotNil(t, o.Access, "%s %s has no x-access in docs/openapi.json", method, path)
			for _, r := range accessRoles {
				require.NotEmpty(t, o.Access[r], "%s %s: x-access says nothing of role %s", method, path, r)
			}
			if strings.HasPrefix(path, "/api/v1/server/") {
				for _, r := range serverKeyRoles {
					require.NotEmpty(t, o.Access[r], "%s %s: x-access says nothing of role %s", method, path, r)
				}
				require.NotEmpty(t, o.Scope, "%s %s: no x-scope", method, path)
			}
			ops = append(ops, accessOp{method: strings.ToUpper(method), path: path, access: o.Access, scope: o.Scope})
		}
	}
	// Ending a seat or the session comes last, so that every other
	// operation finds each role as it was set up.
	last := func(o accessOp) int {
		switch {
		case o.method == "DELETE" && o.path == "/api/v1/session":
			return 2
		case strings.HasSuffix(o.path, "/leave"):
			return 1
		}
		return 0
	}
	sort.Slice(ops, func(i, j int) bool {
		if last(ops[i]) != last(ops[j]) {
			return last(ops[i]) < last(ops[j])
		}
		return ops[i].method+" "+ops[i].path < ops[j].method+" "+ops[j].path
	})
	return ops
}

// TestAccessMatrix asks every operation of docs/openapi.json as every role
// — no token, another user, a member of a public room, a player of a
// match's private room, the read-only admin, the admin — over three nodes,
// and checks the answer its x-access documents: "allow" (past the access
// rule: neither 401 nor 403, nor the 404 unknown_room an outsider of a
// private room gets), or the exact status and code. The rooms of
// {room}/{lobby} are the private room of a match for every role but
// "member", who is asked of their public room: an outsider reading a
// match's history is the leak this guards.
func TestAccessMatrix(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, redistest.Real(t), 3)
	n1, n2, n3 := cl.nodes[0], cl.nodes[1], cl.nodes[2]
	cl.putSetting("matchmaking.queues", `{"duo":{"min":2,"max":2,"window":1000,"reserve_seconds":120}}`)

	// a match: ann over the WebSocket on n1, bob over REST on n2
	ann := cl.dial(n1, "ann")
	bob := cl.session(n2, "bob")
	ann.send(protocol.Queue{Queue: "duo", Skill: skill(100)})
	ann.next("queued")
	require.Equal(t, 200, cl.do(n2, "POST", "/api/v1/matchmaking/duo/tickets", bob, map[string]any{"skill": 100}, nil))
	private, _ := ann.next("matched")["room"].(string)
	require.NotEmpty(t, private)
	ann.send(protocol.Resume{Room: private})
	ann.next("joined")
	require.Equal(t, 200, cl.do(n2, "POST", "/api/v1/rooms/"+private+"/join", bob, nil, nil))
	cl.say(n3, bob, private, "the plan is secret")
	privateLobby := private[:strings.LastIndexByte(private, '-')]
	// the room's number is 12 digits of an HMAC of the match's id (with the
	// nodes' secret), not 1: ids of matches are sequential, their rooms'
	// are not
	assert.Regexp(t, `^[1-9][0-9]{11}$`, private[len(privateLobby)+1:])
	var gone struct{ Error struct{ Code string } }
	assert.Equal(t, 404, cl.do(n1, "GET", "/api/v1/rooms/"+privateLobby+"-1", bob, nil, &gone), "room 1 of the match's lobby")
	assert.Equal(t, "unknown_room", gone.Error.Code)

	// a public room with its member, and an outsider
	mia := cl.session(n3, "mia")
	public := cl.join(n3, mia, "pub").ID
	cl.say(n1, mia, public, "hello all")
	eve := cl.session(n1, "eve")
	// a direct conversation of the player with ann: only the two read it
	var dm struct{ Conversation struct{ ID string } }
	require.Equal(t, 200, cl.do(n2, "POST", "/api/v1/direct/ann", bob, nil, &dm))

	tokens := map[string]string{"none": "", "other": eve, "member": mia, "player": bob,
		"admin-read": testAdminRead, "admin": testAdmin}
	params := func(role string) map[string]string {
		room, lobby := private, privateLobby
		if role == "member" {
			room, lobby = public, "pub"
		}
		return map[string]string{"room": room, "lobby": lobby, "user": "ann", "board": "acc", "player": "ann",
			"key": "nosuch", "file": "nosuch.js", "id": "1-1", "queue": "nosuch",
			"with": dm.Conversation.ID, "conversation": dm.Conversation.ID}
	}
	// what the answers hold: an outsider sees no trace of the room in a
	// player's presence or in its lobby's listing; a player and an admin do
	require.Eventually(t, func() bool { return contains(cl.presence(n3, bob, "ann").Rooms, private) }, 10*time.Second, 20*time.Millisecond)
	assert.Contains(t, cl.presence(n1, testAdmin, "ann").Rooms, private)
	assert.NotContains(t, cl.presence(n2, eve, "ann").Rooms, private)
	var listed struct{ Rooms []roomJSON }
	require.Equal(t, 200, cl.do(n1, "GET", "/api/v1/lobbies/"+privateLobby+"/rooms", eve, nil, &listed))
	assert.Empty(t, listed.Rooms, "an outsider lists no room of a private lobby")
	require.Equal(t, 200, cl.do(n2, "GET", "/api/v1/lobbies/"+privateLobby+"/rooms", bob, nil, &listed))
	assert.Len(t, listed.Rooms, 1, "a player lists the match's room")

	// the WebSocket's frames, as each user role (a WebSocket takes a user
	// token: the other roles are the rows of GET /ws)
	frames := accessFrames(t)
	cells := 0
	for _, role := range []string{"other", "member", "player"} {
		user := map[string]string{"other": "eve", "member": "mia", "player": "bob"}[role]
		w := dialToken(t, cl.nodes[len(role)%len(cl.nodes)], user, tokens[role])
		p := params(role)
		for i, fr := range frames {
			ref := fmt.Sprintf("f%d", i)
			// one frame of each type from the table: sent as JSON on purpose
			w.sendJSON(map[string]string{"type": fr.typ, "ref": ref, "room": p["room"], "lobby": p["lobby"], "text": "hi", "id": "1-1"})
			w.send(protocol.Ping{})
			code := ""
			for f := w.nextOf("error", "pong"); f["type"] != "pong"; f = w.nextOf("error", "pong") {
				if f["ref"] == ref {
					code, _ = f["code"].(string)
				}
			}
			want := fr.access[role]
			if want == "allow" {
				assert.True(t, code != "forbidden" && code != "not_seated" && code != "unknown_room",
					"frame %s as %s: documented allow, answered %s", fr.typ, role, code)
			} else {
				assert.Equal(t, want, code, "frame %s as %s", fr.typ, role)
			}
			cells++
		}
	}

	ops := accessOps(t)
	tokens["key"] = testKeyAll
	for _, role := range append(accessRoles, serverKeyRoles...) {
		for i, op := range ops {
			n := cl.nodes[(i+len(role))%len(cl.nodes)]
			path := op.path
			for k, v := range params(role) {
				path = strings.ReplaceAll(path, "{"+k+"}", v)
			}
			tok, want := tokens[role], op.access[role]
			if role == "key-unscoped" {
				tok = testKeyPresence // a key of one scope: another op's
				if op.scope == ScopePresence {
					tok = testKeyPublish
				}
			}
			if want == "" && slices.Contains(serverKeyRoles, role) {
				want = op.access["none"] // a key is no token outside the server API
			}
			status, code := accessCall(t, n, op.method, path, tok, accessBodies[op.method+" "+op.path])
			if want == "allow" {
				assert.True(t, status != 401 && status != 403 && code != "unknown_room",
					"%s %s as %s: documented allow, answered %d %s", op.method, op.path, role, status, code)
			} else {
				assert.Equal(t, want, fmt.Sprintf("%d %s", status, code), "%s %s as %s", op.method, op.path, role)
			}
			cells++
		}
	}
	t.Logf("access matrix: %d operations × %d roles + %d frames × 3 user roles = %d cells",
		len(ops), len(accessRoles)+len(serverKeyRoles), len(frames), cells)
}

// accessFrame is a client frame of docs/ws-frames.schema.json with its
// documented answer per user role: "allow" or the error event's code.
type accessFrame struct {
	typ    string
	access map[string]string
}

// accessFrames reads the client frames of docs/ws-frames.schema.json that
// carry an x-access, in the order a client meets a room: resume, join,
// say, typing, read, leave. Each must name the three user roles.
func accessFrames(t *testing.T) []accessFrame {
	t.Helper()
	raw, err := os.ReadFile("../docs/ws-frames.schema.json")
	require.NoError(t, err)
	var doc struct {
		Defs map[string]struct {
			Properties struct {
				Type struct {
					Const string `json:"const"`
				} `json:"type"`
			} `json:"properties"`
			Access map[string]string `json:"x-access"`
		} `json:"$defs"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	order := []string{"resume", "join", "say", "typing", "read", "leave"}
	var out []accessFrame
	for _, typ := range order {
		for name, def := range doc.Defs {
			if def.Properties.Type.Const != typ || def.Access == nil {
				continue
			}
			for _, r := range []string{"other", "member", "player"} {
				require.NotEmpty(t, def.Access[r], "frame %s: x-access says nothing of role %s", name, r)
			}
			out = append(out, accessFrame{typ: typ, access: def.Access})
		}
	}
	require.Len(t, out, len(order), "every room frame of docs/ws-frames.schema.json has an x-access")
	return out
}

// accessBodies are the bodies of the writes whose access rule comes after
// the body is read (a message's text, a read mark's id); every other write
// is sent "{}", which an allowed role gets past the rule and is refused
// (400) or answered without effect.
var accessBodies = map[string]string{
	"POST /api/v1/rooms/{room}/messages":  `{"text":"hi"}`,
	"POST /api/v1/rooms/{room}/read":      `{"id":"1-1"}`,
	"POST /api/v1/direct/{with}/messages": `{"text":"hi"}`,
	"POST /api/v1/direct/{with}/read":     `{"id":"1-1"}`,
}

// accessCall asks one operation: body (or "{}" for a write), the token as
// a bearer (and as ?token= for the WebSocket, which browsers cannot give a
// header; it is asked as an upgrade). A stream's answer is its status: its
// body is not read.
func accessCall(t *testing.T, n *testNode, method, path, token, payload string) (int, string) {
	t.Helper()
	var body io.Reader
	if payload == "" && method != "GET" {
		payload = "{}"
	}
	if payload != "" {
		body = strings.NewReader(payload)
	}
	url := n.url + path
	if path == "/ws" && token != "" {
		url += "?token=" + token
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if path == "/ws" {
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err, "%s %s", method, path)
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp.StatusCode, ""
	}
	p, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	require.NoError(t, err)
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(p, &e) // not every answer is JSON (the pages, the metrics)
	return resp.StatusCode, e.Error.Code
}
