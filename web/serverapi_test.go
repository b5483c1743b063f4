package web

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/protocol"
)

// The server API keys of every test node (testServerKeys).
const (
	testKeyAll      = "key-all-0123456789abcdefghij"      // every scope
	testKeyPresence = "key-presence-0123456789abcdefghij" // presence only
	testKeyPublish  = "key-publish-0123456789abcdefghij"  // publish only
	testKeyDuel     = "key-duel-0123456789abcdefghij"     // publish and grant, in lobbies mm.duel.* and duel
	testKeySlow     = "key-slow-0123456789abcdefghij"     // publish, one request per 100 s
)

// testServerKeys are the keys of every test node, as --server-keys gives
// them.
func testServerKeys() []ServerKey {
	var out []ServerKey
	for _, spec := range []string{
		"game:" + testKeyAll + ":*",
		"watcher:" + testKeyPresence + ":presence",
		"poster:" + testKeyPublish + ":publish",
		"duel:" + testKeyDuel + ":publish+grant:lobbies=mm.duel.*+duel",
		"slow:" + testKeySlow + ":publish:rate=0.01",
	} {
		k, err := ParseServerKey(spec)
		if err != nil {
			panic(err)
		}
		out = append(out, k)
	}
	return out
}

// srv sends a server API request with key and extra headers, checks the
// answer against docs/openapi.json, decodes it into out (if not nil) and
// returns the status and the error code ("" for none).
func (c *cluster) srv(n *testNode, method, path, key string, body any, hdr map[string]string, out any) (int, string) {
	c.t.Helper()
	status, p := c.send(n, method, path, key, body, hdr)
	if out != nil && status == 200 {
		require.NoError(c.t, json.Unmarshal(p, out), "body: %s", p)
	}
	return status, errCode(p)
}

// TestHookServerAPIPublishReachesMembersOnThreeNodes: a backend's publish,
// taken by one node, reaches the room's members on every node (WebSockets
// on two, a REST session polling the third), as the system or as a named
// user; it is stored with an id, counts for unread, and a retry with the
// same Idempotency-Key on another node answers the same message and
// stores nothing. A room that does not exist is 404.
func TestHookServerAPIPublishReachesMembersOnThreeNodes(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, redistest.Real(t), 3)
	n1, n2, n3 := cl.nodes[0], cl.nodes[1], cl.nodes[2]
	ann := cl.dial(n1, "ann")
	room := ann.join("srv")
	bob := cl.dial(n2, "bob")
	require.Equal(t, room, bob.join("srv"))
	cat := cl.session(n3, "cat")
	require.Equal(t, room, cl.join(n3, cat, "srv").ID)
	cl.poll(n3, cat, "") // the session's cursor: what it has seen so far

	var sys, as struct{ Message messageJSON }
	st, code := cl.srv(n3, "POST", "/api/v1/server/rooms/"+room+"/messages", testKeyAll, map[string]string{"text": "round 2 starts"},
		map[string]string{"Idempotency-Key": "round-2"}, &sys)
	require.Equal(t, 200, st, code)
	assert.Equal(t, "@system", sys.Message.From)
	assert.NotEmpty(t, sys.Message.ID)
	st, code = cl.srv(n1, "POST", "/api/v1/server/rooms/"+room+"/messages", testKeyAll, map[string]string{"text": "gg", "user": "narrator"}, nil, &as)
	require.Equal(t, 200, st, code)
	assert.Equal(t, "narrator", as.Message.From, "narrator holds no seat: a backend speaks for whom it names")

	for _, w := range []*wsClient{ann, bob} {
		f := w.next("message")
		id, text := msgOf(f)
		assert.Equal(t, sys.Message.ID, id, w.user)
		assert.Equal(t, "round 2 starts", text, w.user)
		id, text = msgOf(w.next("message"))
		assert.Equal(t, as.Message.ID, id, w.user)
		assert.Equal(t, "gg", text, w.user)
	}
	got := map[string]bool{}
	cl.pollUntil(cat, func(a pollAnswer) bool {
		var msgs map[string][]messageJSON
		if a.section(t, "messages", &msgs) {
			for _, m := range msgs[room] {
				got[m.ID] = true
			}
		}
		return got[sys.Message.ID] && got[as.Message.ID]
	})

	// a retry of the first publish, on another node: the same message, stored once
	var again struct{ Message messageJSON }
	st, code = cl.srv(n2, "POST", "/api/v1/server/rooms/"+room+"/messages", testKeyAll, map[string]string{"text": "round 2 starts"},
		map[string]string{"Idempotency-Key": "round-2"}, &again)
	require.Equal(t, 200, st, code)
	assert.Equal(t, sys.Message, again.Message)
	var hist struct{ Messages []messageJSON }
	require.Equal(t, 200, cl.do(n2, "GET", "/api/v1/rooms/"+room+"/messages?limit=100", cat, nil, &hist))
	n := 0
	for _, m := range hist.Messages {
		if m.Text == "round 2 starts" {
			n++
		}
	}
	assert.Equal(t, 1, n, "a retried publish is stored once")
	// the same key from another API key is another message
	st, _ = cl.srv(n2, "POST", "/api/v1/server/rooms/"+room+"/messages", testKeyPublish, map[string]string{"text": "round 2 starts"},
		map[string]string{"Idempotency-Key": "round-2"}, &again)
	require.Equal(t, 200, st)
	assert.NotEqual(t, sys.Message.ID, again.Message.ID)

	// it counts for unread
	var unread struct{ Rooms map[string]int }
	require.Equal(t, 200, cl.do(n3, "GET", "/api/v1/unread", cl.session(n1, "ann"), nil, &unread))
	assert.GreaterOrEqual(t, unread.Rooms[room], 3)

	// a room that does not exist
	st, code = cl.srv(n1, "POST", "/api/v1/server/rooms/srv-999/messages", testKeyAll, map[string]string{"text": "hello?"}, nil, nil)
	assert.Equal(t, 404, st)
	assert.Equal(t, "unknown_room", code)
}

// TestHookServerAPIBroadcastReachesEveryRoomOfTheLobby: a broadcast is
// one message in each room of the lobby, members of each get theirs, and
// a retry with the same Idempotency-Key answers the same ids.
func TestHookServerAPIBroadcastReachesEveryRoomOfTheLobby(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, redistest.Real(t), 3)
	cl.putSetting("room.capacity", 1)
	ann := cl.dial(cl.nodes[0], "ann")
	r1 := ann.join("bc")
	bob := cl.dial(cl.nodes[1], "bob")
	r2 := bob.join("bc")
	require.NotEqual(t, r1, r2)

	var out, again struct {
		Messages []struct{ Room, ID string }
	}
	hdr := map[string]string{"Idempotency-Key": "maintenance-1"}
	st, code := cl.srv(cl.nodes[2], "POST", "/api/v1/server/lobbies/bc/messages", testKeyAll, map[string]string{"text": "restart in 5 min"}, hdr, &out)
	require.Equal(t, 200, st, code)
	require.Len(t, out.Messages, 2)
	assert.ElementsMatch(t, []string{r1, r2}, []string{out.Messages[0].Room, out.Messages[1].Room})
	for _, w := range []*wsClient{ann, bob} {
		_, text := msgOf(w.next("message"))
		assert.Equal(t, "restart in 5 min", text)
	}
	st, _ = cl.srv(cl.nodes[0], "POST", "/api/v1/server/lobbies/bc/messages", testKeyAll, map[string]string{"text": "restart in 5 min"}, hdr, &again)
	require.Equal(t, 200, st)
	assert.Equal(t, out.Messages, again.Messages, "a retry answers the same messages")

	st, code = cl.srv(cl.nodes[0], "POST", "/api/v1/server/lobbies/nosuchlobby/messages", testKeyAll, map[string]string{"text": "x"}, nil, nil)
	assert.Equal(t, 404, st)
	assert.Equal(t, "not_found", code)
}

// TestServerAPIScopesAndRoles: only a server key opens the server API,
// and only for its scopes and lobbies: no key or an unknown one is 401, a
// user's or an admin's token 403, a key without the scope 403, a key
// outside its lobbies 403.
func TestServerAPIScopesAndRoles(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, redistest.Real(t), 1)
	n := cl.nodes[0]
	user := cl.session(n, "ann")
	room := cl.join(n, user, "duel").ID
	other := cl.join(n, user, "arena").ID
	body := map[string]string{"text": "hi"}
	for _, tc := range []struct {
		name, method, path, key string
		status                  int
		code                    string
	}{
		{"no key", "POST", "/api/v1/server/rooms/" + room + "/messages", "", 401, "bad_token"},
		{"an unknown key", "POST", "/api/v1/server/rooms/" + room + "/messages", "key-nosuch-0123456789abcdefghij", 401, "bad_token"},
		{"a user's token", "POST", "/api/v1/server/rooms/" + room + "/messages", user, 403, "forbidden"},
		{"the admin token", "POST", "/api/v1/server/rooms/" + room + "/messages", testAdmin, 403, "forbidden"},
		{"the read-only admin token", "GET", "/api/v1/server/presence/ann", testAdminRead, 403, "forbidden"},
		{"a key without the publish scope", "POST", "/api/v1/server/rooms/" + room + "/messages", testKeyPresence, 403, "forbidden"},
		{"a key without the presence scope", "GET", "/api/v1/server/presence/ann", testKeyPublish, 403, "forbidden"},
		{"a key without the broadcast scope", "POST", "/api/v1/server/lobbies/duel/messages", testKeyDuel, 403, "forbidden"},
		{"a key without the disconnect scope", "POST", "/api/v1/server/users/ann/disconnect", testKeyDuel, 403, "forbidden"},
		{"a key without the grant scope", "PUT", "/api/v1/server/rooms/" + room + "/access/bob", testKeyPublish, 403, "forbidden"},
		{"a key outside its lobbies", "POST", "/api/v1/server/rooms/" + other + "/messages", testKeyDuel, 403, "forbidden"},
		{"a key in its lobbies", "POST", "/api/v1/server/rooms/" + room + "/messages", testKeyDuel, 200, ""},
		{"a key with the scope", "POST", "/api/v1/server/rooms/" + other + "/messages", testKeyPublish, 200, ""},
		{"a presence key", "GET", "/api/v1/server/presence/ann", testKeyPresence, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b any
			if tc.method != "GET" {
				b = body
			}
			st, code := cl.srv(n, tc.method, tc.path, tc.key, b, nil, nil)
			assert.Equal(t, tc.status, st)
			assert.Equal(t, tc.code, code)
		})
	}
	cl.poll(n, user, "") // a REST user is online by polling
	var p presenceJSON
	require.Eventually(t, func() bool {
		st, _ := cl.srv(n, "GET", "/api/v1/server/presence/ann", testKeyPresence, nil, nil, &p)
		return st == 200 && p.Online && len(p.Rooms) == 2
	}, 10*time.Second, 20*time.Millisecond)
	assert.ElementsMatch(t, []string{room, other}, p.Rooms)
}

// TestServerAPIDisconnectClosesTheUserOnEveryNode: a disconnect taken by
// one node closes every connection of the user on every node with 4001
// and the reason; other users stay.
func TestServerAPIDisconnectClosesTheUserOnEveryNode(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, redistest.Real(t), 3)
	a1 := cl.dial(cl.nodes[0], "ann")
	a2 := cl.dial(cl.nodes[1], "ann")
	bob := cl.dial(cl.nodes[1], "bob")
	st, code := cl.srv(cl.nodes[2], "POST", "/api/v1/server/users/ann/disconnect", testKeyAll, map[string]string{"reason": "account suspended"}, nil, nil)
	require.Equal(t, 200, st, code)
	for _, w := range []*wsClient{a1, a2} {
		w.waitClosed(t)
		assert.Equal(t, 4001, w.closeCode())
		assert.Equal(t, "account suspended", w.ws.CloseReason())
	}
	bob.send(protocol.Ping{})
	bob.next("pong")

	// without a body: the documented default reason
	a3 := cl.dial(cl.nodes[0], "ann")
	st, _ = cl.srv(cl.nodes[1], "POST", "/api/v1/server/users/ann/disconnect", testKeyAll, nil, nil, nil)
	require.Equal(t, 200, st)
	a3.waitClosed(t)
	assert.Equal(t, 4001, a3.closeCode())
	assert.Equal(t, "disconnected by the application", a3.ws.CloseReason())
}

// TestServerAPIGrantLetsAUserIntoAPrivateRoomAndRevokeTakesThemOut: a
// match's private room refuses an outsider; a grant lets them resume it
// and read it; a revoke takes their connection out of the room (a "left"
// event) on whatever node it is, frees their seat, and the room is again
// unknown to them. Each is idempotent; a public room is 409 not_private.
func TestServerAPIGrantLetsAUserIntoAPrivateRoomAndRevokeTakesThemOut(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, redistest.Real(t), 3)
	n1, n2, n3 := cl.nodes[0], cl.nodes[1], cl.nodes[2]
	ctx := context.Background()
	r, err := n1.node.Services.Rooms.Private.Create(ctx, "mm.duel.7", []string{"ann", "bob"}, time.Minute)
	require.NoError(t, err)
	room := r.ID
	eve := cl.dial(n2, "eve")
	eveTok := cl.session(n2, "eve")
	eve.send(protocol.Resume{Room: room, Ref: "r1"})
	assert.Equal(t, "unknown_room", eve.waitFor("error", "r1")["code"])

	var g struct {
		Room, User      string
		Access, Changed bool
	}
	st, code := cl.srv(n3, "PUT", "/api/v1/server/rooms/"+room+"/access/eve", testKeyDuel, nil, nil, &g)
	require.Equal(t, 200, st, code)
	assert.True(t, g.Access)
	assert.True(t, g.Changed)
	st, _ = cl.srv(n1, "PUT", "/api/v1/server/rooms/"+room+"/access/eve", testKeyDuel, nil, nil, &g)
	require.Equal(t, 200, st)
	assert.False(t, g.Changed, "a retried grant changes nothing")

	eve.send(protocol.Resume{Room: room, Ref: "r2"})
	eve.next("joined")
	require.Equal(t, 200, cl.do(n1, "GET", "/api/v1/rooms/"+room+"/messages", eveTok, nil, nil))
	// the match's own players are still in
	ann := cl.dial(n1, "ann")
	ann.send(protocol.Resume{Room: room})
	ann.next("joined")

	st, code = cl.srv(n3, "DELETE", "/api/v1/server/rooms/"+room+"/access/eve", testKeyDuel, nil, nil, &g)
	require.Equal(t, 200, st, code)
	assert.False(t, g.Access)
	assert.True(t, g.Changed)
	left := eve.next("left")
	assert.Equal(t, room, left["room"])
	assert.Equal(t, "eve", ann.next("presence")["user"], "the others see eve leave")
	var gone struct{ Error struct{ Code string } }
	assert.Equal(t, 404, cl.do(n2, "GET", "/api/v1/rooms/"+room+"/messages", eveTok, nil, &gone))
	assert.Equal(t, "unknown_room", gone.Error.Code)
	eve.send(protocol.Say{Room: room, Text: "still here?", Ref: "s1"})
	assert.Equal(t, "not_seated", eve.waitFor("error", "s1")["code"])
	eve.send(protocol.Resume{Room: room, Ref: "r3"})
	assert.Equal(t, "unknown_room", eve.waitFor("error", "r3")["code"])
	st, _ = cl.srv(n1, "DELETE", "/api/v1/server/rooms/"+room+"/access/eve", testKeyDuel, nil, nil, &g)
	require.Equal(t, 200, st)
	assert.False(t, g.Changed, "a retried revoke changes nothing")

	// the room's creation, retried, still answers the same room
	again, err := n2.node.Services.Rooms.Private.Create(ctx, "mm.duel.7", []string{"ann", "bob"}, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, room, again.ID)

	pub := cl.join(n1, cl.session(n1, "mia"), "duel").ID
	st, code = cl.srv(n1, "PUT", "/api/v1/server/rooms/"+pub+"/access/eve", testKeyDuel, nil, nil, nil)
	assert.Equal(t, 409, st)
	assert.Equal(t, "not_private", code)
	st, code = cl.srv(n1, "PUT", "/api/v1/server/rooms/mm.duel.8-1/access/eve", testKeyDuel, nil, nil, nil)
	assert.Equal(t, 404, st)
	assert.Equal(t, "unknown_room", code)
}

// TestServerAPIBadInputGetsTheDocumentedErrors: malformed bodies, names,
// texts, keys and reasons are 400 with their codes; nothing is stored.
func TestServerAPIBadInputGetsTheDocumentedErrors(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, redistest.Real(t), 1)
	n := cl.nodes[0]
	tok := cl.session(n, "ann")
	room := cl.join(n, tok, "bad").ID
	pub := "/api/v1/server/rooms/" + room + "/messages"
	require.Equal(t, 200, func() int {
		st, _ := cl.srv(n, "POST", pub, testKeyAll, map[string]string{"text": "first"}, map[string]string{"Idempotency-Key": "k1"}, nil)
		return st
	}())
	for _, tc := range []struct {
		name, method, path string
		body               any
		hdr                map[string]string
		status             int
		code               string
	}{
		{"not JSON", "POST", pub, "{", nil, 400, "bad_json"},
		{"an empty text", "POST", pub, map[string]string{"text": ""}, nil, 400, "bad_request"},
		{"a text too long", "POST", pub, map[string]string{"text": strings.Repeat("a", 5000)}, nil, 400, "too_long"},
		{"a bad user name", "POST", pub, map[string]string{"text": "x", "user": "a b"}, nil, 400, "bad_name"},
		{"the system's name as a user", "POST", pub, map[string]string{"text": "x", "user": "@system"}, nil, 400, "bad_name"},
		{"a bad room id", "POST", "/api/v1/server/rooms/no-room-id!/messages", map[string]string{"text": "x"}, nil, 400, "bad_name"},
		{"a bad Idempotency-Key", "POST", pub, map[string]string{"text": "x"}, map[string]string{"Idempotency-Key": strings.Repeat("k", 129)}, 400, "bad_request"},
		{"a key reused for another text", "POST", pub, map[string]string{"text": "second"}, map[string]string{"Idempotency-Key": "k1"}, 400, "bad_request"},
		{"a bad lobby name", "POST", "/api/v1/server/lobbies/a%20b/messages", map[string]string{"text": "x"}, nil, 400, "bad_name"},
		{"a bad user to read", "GET", "/api/v1/server/presence/a%20b", nil, nil, 400, "bad_name"},
		{"a reason too long", "POST", "/api/v1/server/users/ann/disconnect", map[string]string{"reason": strings.Repeat("r", 501)}, nil, 400, "bad_request"},
		{"a bad user to disconnect", "POST", "/api/v1/server/users/a%20b/disconnect", nil, nil, 400, "bad_name"},
		{"a bad user to grant", "PUT", "/api/v1/server/rooms/" + room + "/access/a%20b", nil, nil, 400, "bad_name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, code := cl.srv(n, tc.method, tc.path, testKeyAll, tc.body, tc.hdr, nil)
			assert.Equal(t, tc.status, st)
			assert.Equal(t, tc.code, code)
		})
	}
	var hist struct{ Messages []messageJSON }
	require.Equal(t, 200, cl.do(n, "GET", "/api/v1/rooms/"+room+"/messages", tok, nil, &hist))
	require.Len(t, hist.Messages, 1, "only the first publish was stored")
}

// TestServerAPIRateLimitAppliesPerKey: a key past its rate is 429
// rate_limited with a Retry-After, on every node (the bucket is shared);
// another key is not affected.
func TestServerAPIRateLimitAppliesPerKey(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, redistest.Real(t), 2)
	tok := cl.session(cl.nodes[0], "ann")
	room := cl.join(cl.nodes[0], tok, "rl").ID
	path := "/api/v1/server/rooms/" + room + "/messages"
	st, _ := cl.srv(cl.nodes[0], "POST", path, testKeySlow, map[string]string{"text": "one"}, nil, nil)
	require.Equal(t, 200, st)
	st, code := cl.srv(cl.nodes[1], "POST", path, testKeySlow, map[string]string{"text": "two"}, nil, nil)
	assert.Equal(t, 429, st)
	assert.Equal(t, "rate_limited", code)
	status, _, hdr, err := cl.call(cl.nodes[0], "POST", path, testKeySlow, map[string]string{"text": "three"}, nil)
	require.NoError(t, err)
	assert.Equal(t, 429, status)
	assert.NotEmpty(t, hdr.Get("Retry-After"))
	st, _ = cl.srv(cl.nodes[1], "POST", path, testKeyPublish, map[string]string{"text": "other key"}, nil, nil)
	assert.Equal(t, 200, st)
}

// TestServerAPIAuditLogRecordsEachCall: every call of a key is in the
// audit log with the key's name (never its secret), the route, the target
// and the answer, refusals included.
func TestServerAPIAuditLogRecordsEachCall(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, redistest.Real(t), 2)
	n1, n2 := cl.nodes[0], cl.nodes[1]
	tok := cl.session(n1, "ann")
	room := cl.join(n1, tok, "aud").ID
	st, _ := cl.srv(n1, "POST", "/api/v1/server/rooms/"+room+"/messages", testKeyAll, map[string]string{"text": "audited"}, nil, nil)
	require.Equal(t, 200, st)
	st, _ = cl.srv(n2, "GET", "/api/v1/server/presence/ann", testKeyAll, nil, nil, nil)
	require.Equal(t, 200, st)
	st, _ = cl.srv(n2, "POST", "/api/v1/server/users/ann/disconnect", testKeyPresence, nil, nil, nil)
	require.Equal(t, 403, st)

	var out struct {
		Entries []struct {
			Actor, Role, Action, Target, Detail, Node string
			Status                                    int
		}
	}
	require.Equal(t, 200, cl.do(n2, "GET", "/api/v1/admin/audit", testAdminRead, nil, &out))
	type row struct {
		actor, action, target string
		status                int
	}
	var got []row
	for _, e := range out.Entries {
		if e.Role == "server" {
			got = append(got, row{e.Actor, e.Action, e.Target, e.Status})
		}
	}
	assert.ElementsMatch(t, []row{
		{"key game", "POST /server/rooms/{room}/messages", room, 200},
		{"key game", "GET /server/presence/{user}", "ann", 200},
		{"key watcher", "POST /server/users/{user}/disconnect", "ann", 403},
	}, got)
	raw, err := json.Marshal(out)
	require.NoError(t, err)
	for _, secret := range []string{testKeyAll, testKeyPresence} {
		assert.NotContains(t, string(raw), secret)
	}
}

// TestParseServerKey: the --server-keys syntax, and its refusals, which
// never quote the secret.
func TestServerAPIParseServerKey(t *testing.T) {
	k, err := ParseServerKey("game:" + testKeyAll + ":publish+grant:lobbies=mm.duel.*+lobby:rate=5")
	require.NoError(t, err)
	assert.Equal(t, ServerKey{Name: "game", Secret: testKeyAll, Scopes: []string{"grant", "publish"}, Lobbies: []string{"mm.duel.*", "lobby"}, Rate: 5}, k)
	assert.True(t, k.inLobby("mm.duel.7"))
	assert.False(t, k.inLobby("mm.duo.7"))
	k, err = ParseServerKey("all:" + testKeyAll + ":*")
	require.NoError(t, err)
	assert.Equal(t, []string{"broadcast", "disconnect", "grant", "presence", "publish"}, k.Scopes)
	for _, bad := range []string{
		"", "game", "game:" + testKeyAll, "ga me:" + testKeyAll + ":publish", "game:short:publish",
		"game:" + testKeyAll + ":publish+fly", "game:" + testKeyAll + ":publish:lobbies=a b", "game:" + testKeyAll + ":publish:rate=0",
		"game:" + testKeyAll + ":publish:color=red",
	} {
		_, err := ParseServerKey(bad)
		if assert.Error(t, err, bad) {
			assert.NotContains(t, err.Error(), testKeyAll)
		}
	}
}

// FuzzParseServerKey: a --server-keys entry never panics the parser; what
// it accepts is well formed (the checks a server makes of its keys pass)
// and an error never quotes the secret.
func FuzzParseServerKey(f *testing.F) {
	for _, s := range []string{
		"game:" + testKeyAll + ":*", "duel:" + testKeyDuel + ":publish+grant:lobbies=mm.duel.*+duel:rate=2.5",
		"a:b:c", "::", "game:" + testKeyAll + ":publish:rate=NaN", "game:" + testKeyAll + ":+:lobbies=*",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		k, err := ParseServerKey(spec)
		if err != nil {
			if parts := strings.Split(spec, ":"); len(parts) > 1 && len(parts[1]) >= 24 && strings.Contains(err.Error(), parts[1]) {
				t.Fatalf("ParseServerKey(%q): the error quotes the secret: %v", spec, err)
			}
			return
		}
		if err := CheckServerKeys([]ServerKey{k}); err != nil {
			t.Fatalf("ParseServerKey(%q) accepted a key the server refuses: %v", spec, err)
		}
		if k.rate() <= 0 {
			t.Fatalf("ParseServerKey(%q): rate %v", spec, k.rate())
		}
	})
}

// TestServerAPIDisabledWithoutKeys: a node started without --server-keys
// answers the server API 403, whatever the token.
func TestServerAPIDisabledWithoutKeys(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, redistest.Real(t), 1, nodeOpts{configure: func(c *nodeConfig) { c.ServerKeys = nil }})
	for _, key := range []string{"", testKeyAll, testAdmin} {
		st, code := cl.srv(cl.nodes[0], "GET", "/api/v1/server/presence/ann", key, nil, nil, nil)
		assert.Equal(t, 403, st)
		assert.Equal(t, "forbidden", code)
	}
}
