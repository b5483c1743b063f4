package web

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/protocol"
)

// TestKeyspaceAudit: nothing a client does leaves a key without a TTL,
// except the kinds keyspace.Permanent declares. It drives every operation
// of docs/openapi.json and every client frame of docs/ws-frames.schema.json
// on two nodes — guest sessions, REST and WebSocket joins, says, typing,
// read marks, resume, leave, long and short polls, daily, all-time and
// declared-permanent boards, seen marks, shop stock, grant and idempotent
// grant and buy, notices, mute, ban, kick, unban, message removal, settings, sign-out
// and the per-user and per-address refusals — then SCANs the whole prefix
// twice: while users are still seated (a lobby's keys may lack a TTL while
// it has a seat), and after everyone left and signed out (no seated lobby
// is left to excuse anything). Each key's TYPE and PTTL are read; the test
// logs the inventory (kind → count, type, TTL range) and fails on every key
// without a TTL that no Permanent kind allows, and on a Permanent kind no
// key matched (a stale entry).
func TestKeyspaceAudit(t *testing.T) {
	t.Parallel()
	s := mustSpec(t)
	r := redistest.Real(t)
	cl := newCluster(t, r, 2)
	n1, n2 := cl.nodes[0], cl.nodes[1]
	covered := map[string]map[int]bool{}
	c1 := &specClient{t: t, s: s, n: n1, http: cl.http, covered: covered}
	c2 := &specClient{t: t, s: s, n: n2, http: cl.http, covered: covered}
	au := newAudit(t, r)

	// a declared permanent board; short seat leases so that a seat left
	// by a closed connection goes within seconds
	cl.putSetting("boards.permanent", "audit-hall")
	cl.putSetting("seat.lease_seconds", 2)
	cl.putSetting("rate.messages_per_second", 100)

	// probes and the browser client
	c1.do(call{method: "GET", path: "/healthz", status: 200})
	c1.do(call{method: "GET", path: "/readyz", status: 200})
	c1.do(call{method: "GET", path: "/metrics", status: 200})
	c1.do(call{method: "GET", path: "/", status: 200})
	c1.do(call{method: "GET", path: "/api/v1/openapi.json", status: 200})
	c1.do(call{method: "GET", path: "/api/v1/ws-frames.schema.json", status: 200})
	c1.do(call{method: "GET", path: "/admin", status: 200})
	c1.do(call{method: "GET", path: "/api", status: 200})
	c1.do(call{method: "GET", path: "/sdk/index.js", status: 200})

	// guest sessions: a claim, a second device, a refused claim
	var tok struct{ Token string }
	c1.json(call{method: "POST", path: "/api/v1/session", body: map[string]string{"user": "alice"}, status: 200}, &tok)
	alice := tok.Token
	c2.json(call{method: "POST", path: "/api/v1/session", token: alice, body: map[string]string{"user": "alice"}, status: 200}, &tok)
	alice2 := tok.Token
	c2.do(call{method: "POST", path: "/api/v1/session", body: map[string]string{"user": "alice"}, status: 409, code: "name_taken"})
	c2.json(call{method: "POST", path: "/api/v1/session", body: map[string]string{"user": "bob"}, status: 200}, &tok)
	bob := tok.Token
	c1.json(call{method: "POST", path: "/api/v1/session", body: map[string]string{"user": "carol"}, status: 200}, &tok)
	carol := tok.Token
	c2.json(call{method: "POST", path: "/api/v1/session", body: map[string]string{"user": "dave"}, status: 200}, &tok)
	dave := tok.Token
	au.names("alice", "bob", "carol", "dave", "audit", "sword", "buy-1", "main")

	// REST joins and says, on both nodes
	var joined struct{ Room struct{ ID string } }
	c1.json(call{method: "POST", path: "/api/v1/lobbies/audit/join", token: alice, status: 200}, &joined)
	room := joined.Room.ID
	c2.do(call{method: "POST", path: "/api/v1/lobbies/audit/join", token: dave, status: 200})
	var posted struct{ Message struct{ ID string } }
	c1.json(call{method: "POST", path: "/api/v1/rooms/" + room + "/messages", token: alice, body: map[string]string{"text": "hi"}, status: 200}, &posted)
	first := posted.Message.ID
	c2.json(call{method: "POST", path: "/api/v1/rooms/" + room + "/messages", token: dave, body: map[string]string{"text": "hello"}, status: 200}, &posted)
	c1.do(call{method: "POST", path: "/api/v1/rooms/" + room + "/messages", token: carol, body: map[string]string{"text": "x"}, status: 403, code: "not_seated"})
	c1.do(call{method: "GET", path: "/api/v1/lobbies?limit=10", token: alice, status: 200})
	c2.do(call{method: "GET", path: "/api/v1/lobbies/audit/rooms", token: alice, status: 200})
	c1.do(call{method: "GET", path: "/api/v1/rooms/" + room, token: alice, status: 200})
	c2.do(call{method: "GET", path: "/api/v1/rooms/" + room + "/messages?limit=10", token: dave, status: 200})
	c1.do(call{method: "GET", path: "/api/v1/rooms/" + room + "/messages?after=" + first, token: alice, status: 200})
	c2.do(call{method: "POST", path: "/api/v1/rooms/" + room + "/read", token: dave, body: map[string]string{"id": first}, status: 200})
	c1.do(call{method: "POST", path: "/api/v1/rooms/" + room + "/typing", token: dave, status: 200})
	c1.do(call{method: "GET", path: "/api/v1/unread", token: dave, status: 200})

	// the server API: a publish as the system and as a user (idempotent), a
	// broadcast, presence, a grant and revoke in a private room of short
	// reservations, a disconnect of nobody connected
	c1.do(call{method: "POST", path: "/api/v1/server/rooms/" + room + "/messages", token: testKeyAll, body: map[string]string{"text": "from the backend"}, header: map[string]string{"Idempotency-Key": "audit-1"}, status: 200})
	c2.do(call{method: "POST", path: "/api/v1/server/rooms/" + room + "/messages", token: testKeyAll, body: map[string]string{"text": "as dave", "user": "dave"}, status: 200})
	c2.do(call{method: "POST", path: "/api/v1/server/lobbies/audit/messages", token: testKeyAll, body: map[string]string{"text": "to all"}, header: map[string]string{"Idempotency-Key": "audit-2"}, status: 200})
	c1.do(call{method: "GET", path: "/api/v1/server/presence/dave", token: testKeyAll, status: 200})
	_, err := n1.node.Services.Rooms.Private.Create(context.Background(), "mm.audit.1", []string{"alice", "dave"}, 2*time.Second)
	require.NoError(t, err)
	c2.do(call{method: "PUT", path: "/api/v1/server/rooms/mm.audit.1-1/access/carol", token: testKeyAll, status: 200})
	c1.do(call{method: "DELETE", path: "/api/v1/server/rooms/mm.audit.1-1/access/carol", token: testKeyAll, status: 200})
	c2.do(call{method: "POST", path: "/api/v1/server/users/nobody/disconnect", token: testKeyAll, status: 200})

	// the event stream: alice's session follows its REST room on n2 (held
	// open until everyone leaves)
	c2.streamHead(alice)
	st := openStream(t, n2, "alice", alice, streamOpts{query: true})
	st.next("joined")

	// WebSocket: join, say, typing, read, resume, leave, ping on both nodes
	wb := dialSpec(t, s, n2, bob, false)
	wc := dialSpec(t, s, n1, carol, true)
	wb.send(protocol.Join{Lobby: "audit", Ref: "j1"})
	require.Equal(t, room, wb.next("joined")["room"].(map[string]any)["id"])
	wc.send(protocol.Join{Lobby: "audit"})
	require.Equal(t, room, wc.next("joined")["room"].(map[string]any)["id"])
	wb.send(protocol.Say{Room: room, Text: "from bob", Ref: "s1"})
	wsMsg := wb.next("ack")["id"].(string)
	wc.send(protocol.Typing{Room: room})
	assert.Equal(t, "carol", wb.next("typing")["user"])
	wc.send(protocol.Read{Room: room, ID: wsMsg})
	wc.send(protocol.Ping{Ref: "p1"})
	wc.next("pong")
	// an rpc call on a node without an rpc hook: refused, and no key written
	wc.send(protocol.RPC{Method: "roll", Ref: "r1"})
	assert.Equal(t, "not_found", wc.next("error")["code"])
	c1.do(call{method: "POST", path: "/api/v1/rpc/roll", token: dave, status: 404})
	wc.send(protocol.Resume{Room: room, After: first})
	wc.next("joined")
	wc.send(protocol.Join{Lobby: "audit-ws"})
	wsRoom := wc.next("joined")["room"].(map[string]any)["id"].(string)
	wc.send(protocol.Leave{Room: wsRoom, Ref: "l1"})
	wc.send(protocol.Ping{Ref: "p2"})
	wc.next("pong")

	// presence, nodes, stats, settings
	c2.do(call{method: "GET", path: "/api/v1/presence/bob", token: alice, status: 200})
	c1.do(call{method: "GET", path: "/api/v1/presence/nobody", token: alice, status: 200})
	c1.do(call{method: "GET", path: "/api/v1/nodes", token: testAdmin, status: 200})
	c2.do(call{method: "GET", path: "/api/v1/stats", token: alice, status: 200})
	c1.do(call{method: "GET", path: "/api/v1/settings", token: alice, status: 200})
	c2.do(call{method: "GET", path: "/api/v1/settings/defs", token: alice, status: 200})
	c1.do(call{method: "PUT", path: "/api/v1/settings/motd", token: testAdmin, body: map[string]string{"value": "audit"}, status: 200})
	c2.do(call{method: "DELETE", path: "/api/v1/settings/motd", token: testAdmin, status: 200})
	c1.do(call{method: "POST", path: "/api/v1/notices", token: testAdmin, body: map[string]string{"text": "audit notice"}, status: 200})
	wb.next("notice")

	// leaderboards: all-time, daily, weekly, a declared permanent one
	for _, b := range []string{"audit-board", "audit-board@daily", "audit-board@weekly", "audit-hall"} {
		c1.do(call{method: "POST", path: "/api/v1/leaderboards/" + b + "/scores", token: alice, body: map[string]any{"player": "alice", "score": 12.5}, status: 200})
		c2.do(call{method: "POST", path: "/api/v1/leaderboards/" + b + "/scores", token: bob, body: map[string]any{"player": "bob", "score": 3, "mode": "incr"}, status: 200})
	}
	au.names("audit-board", "audit-hall")
	c1.do(call{method: "GET", path: "/api/v1/leaderboards/audit-board/top?limit=5", token: alice, status: 200})
	c2.do(call{method: "GET", path: "/api/v1/leaderboards/audit-board/players/alice", token: alice, status: 200})
	c1.do(call{method: "GET", path: "/api/v1/leaderboards/audit-board/around/alice?radius=2", token: alice, status: 200})
	c2.do(call{method: "GET", path: "/api/v1/leaderboards/audit-hall/range?min=0&max=100&limit=10", token: alice, status: 200})
	c1.do(call{method: "POST", path: "/api/v1/leaderboards/audit-board@daily/ranks", token: alice, body: map[string][]string{"players": {"alice", "nobody"}}, status: 200})

	// seen marks
	c1.do(call{method: "POST", path: "/api/v1/seen", token: alice, body: map[string][]string{"items": {"a", "b"}}, status: 200})
	c2.do(call{method: "POST", path: "/api/v1/seen/filter", token: alice, body: map[string][]string{"items": {"a", "c"}}, status: 200})
	c2.do(call{method: "POST", path: "/api/v1/seen/filter", token: carol, body: map[string][]string{"items": {"a"}}, status: 200})

	// shop: stock, grant, an idempotent buy twice
	c1.do(call{method: "POST", path: "/api/v1/shop/items", token: testAdmin, body: map[string]any{"item": "sword", "stock": 5, "price": 10}, status: 200})
	c2.do(call{method: "GET", path: "/api/v1/shop/items", token: alice, status: 200})
	c2.do(call{method: "POST", path: "/api/v1/wallet/grant", token: testAdmin, body: map[string]any{"user": "alice", "amount": 15}, status: 200})
	for _, c := range []*specClient{c1, c2} { // a keyed grant twice: once
		c.do(call{method: "POST", path: "/api/v1/wallet/grant", token: testAdmin, header: map[string]string{"Idempotency-Key": "grant-1"}, body: map[string]any{"user": "bob", "amount": 3}, status: 200})
	}
	c1.do(call{method: "GET", path: "/api/v1/wallet", token: alice, status: 200})
	for _, c := range []*specClient{c1, c2} {
		c.do(call{method: "POST", path: "/api/v1/shop/buy", token: alice, header: map[string]string{"Idempotency-Key": "buy-1"}, body: map[string]any{"item": "sword", "qty": 1}, status: 200})
	}
	c1.do(call{method: "POST", path: "/api/v1/shop/buy", token: alice, body: map[string]any{"item": "sword"}, status: 409, code: "insufficient_funds"})
	c2.do(call{method: "GET", path: "/api/v1/wallet", token: bob, status: 200})

	// polls: short and long, on both nodes
	c1.do(call{method: "GET", path: "/api/v1/poll?wait=0", token: dave, status: 200})
	c2.do(call{method: "GET", path: "/api/v1/poll", token: dave, status: 200})
	c1.do(call{method: "GET", path: "/api/v1/poll?wait=1", token: dave, status: 200})
	c2.do(call{method: "GET", path: "/api/v1/poll?wait=1", token: alice2, status: 200})

	// matchmaking: a ticket cancelled, an expiry, a match of alice and
	// dave whose room alice joins over REST, the frames, the admin listing
	cl.putSetting("matchmaking.queues", `{"audit-q":{"min":2,"max":2,"window":100,"reserve_seconds":2},"audit-x":{"min":2,"max":2,"window":0,"max_wait_seconds":1},"audit-p":{"min":3,"max":3,"window":0,"max_party":2}}`)
	au.names("audit-q", "audit-x", "audit-p")
	var tk struct{ Ticket struct{ ID, Room string } }
	c1.json(call{method: "POST", path: "/api/v1/matchmaking/audit-q/tickets", token: alice, body: map[string]any{"skill": 1}, status: 200}, &tk)
	c2.do(call{method: "GET", path: "/api/v1/matchmaking/audit-q/tickets/" + tk.Ticket.ID, token: alice, status: 200})
	c2.do(call{method: "DELETE", path: "/api/v1/matchmaking/audit-q/tickets/" + tk.Ticket.ID, token: alice, status: 200})
	c1.do(call{method: "POST", path: "/api/v1/matchmaking/audit-x/tickets", token: dave, body: map[string]any{"skill": 1}, status: 200})
	c1.json(call{method: "POST", path: "/api/v1/matchmaking/audit-q/tickets", token: alice, body: map[string]any{"skill": 1}, status: 200}, &tk)
	c2.do(call{method: "POST", path: "/api/v1/matchmaking/audit-q/tickets", token: dave, body: map[string]any{"skill": 2, "attributes": map[string]string{}}, status: 200})
	require.Eventually(t, func() bool {
		c1.json(call{method: "GET", path: "/api/v1/matchmaking/audit-q/tickets/" + tk.Ticket.ID, token: alice, status: 200}, &tk)
		return tk.Ticket.Room != ""
	}, 30*time.Second, 20*time.Millisecond)
	c2.do(call{method: "POST", path: "/api/v1/rooms/" + tk.Ticket.Room + "/join", token: alice, status: 200})
	c1.do(call{method: "GET", path: "/api/v1/matchmaking/queues", token: testAdmin, status: 200})
	wb.send(protocol.Queue{Queue: "audit-q", Skill: skill(500)})
	q := wb.next("queued")["ticket"].(map[string]any)["id"].(string)
	wb.send(protocol.Dequeue{Queue: "audit-q", Ticket: q})
	wb.next("dequeued")
	c2.do(call{method: "GET", path: "/api/v1/poll", token: dave, status: 200})
	// parties: bob's invitation left pending (its ticket and the pending
	// index expire); alice's declined, then accepted, over bob's
	// WebSocket; carol's declined and accepted over REST
	wb.send(protocol.Invite{Queue: "audit-p", Skill: skill(1), Party: []string{"dave"}})
	wb.next("party")
	for _, answer := range []string{"decline", "accept"} {
		c1.do(call{method: "POST", path: "/api/v1/matchmaking/audit-p/parties", token: alice, body: map[string]any{"skill": 1, "party": []string{"bob"}}, status: 200})
		inv := wb.next("party_invite")
		wb.send(partyAnswer(answer, "audit-p", inv["ticket"].(string), ""))
		wb.next("party")
	}
	var party struct{ Ticket struct{ ID string } }
	for _, answer := range []string{"decline", "accept"} {
		c1.json(call{method: "POST", path: "/api/v1/matchmaking/audit-p/parties", token: carol, body: map[string]any{"skill": 1, "party": []string{"dave"}}, status: 200}, &party)
		c2.do(call{method: "POST", path: "/api/v1/matchmaking/audit-p/tickets/" + party.Ticket.ID + "/" + answer, token: dave, status: 200})
	}

	// direct messages: every route (alice, bob, carol), and bob's frames
	specDirect(t, c1, alice, bob, carol)
	wb.send(protocol.DMOpen{To: "alice"})
	conv := wb.next("dm_opened")["conversation"].(map[string]any)["id"].(string)
	wb.send(protocol.DMSend{To: conv, Text: "audit", Ref: "dm1"})
	dmID := wb.next("dm_sent")["id"].(string)
	wb.send(protocol.DMTyping{To: conv})
	wb.send(protocol.DMRead{To: conv, ID: dmID})
	wb.next("dm_read")
	wb.send(protocol.DMResume{To: conv, After: dmID})
	wb.next("dm_resumed")

	// message removal
	c2.do(call{method: "DELETE", path: "/api/v1/rooms/" + room + "/messages/" + first, token: testAdmin, status: 200})
	wb.next("message_removed")

	// moderation: a mute and a ban lifted, a kick, a mute left running
	c1.do(call{method: "POST", path: "/api/v1/moderation/mute", token: testAdmin, body: map[string]any{"user": "dave", "seconds": 60, "reason": "spam"}, status: 200})
	c2.do(call{method: "POST", path: "/api/v1/rooms/" + room + "/messages", token: dave, body: map[string]string{"text": "x"}, status: 403, code: "muted", eventually: true})
	c1.do(call{method: "GET", path: "/api/v1/moderation", token: testAdmin, status: 200})
	c2.do(call{method: "DELETE", path: "/api/v1/moderation/mute/dave", token: testAdmin, status: 200})
	c1.do(call{method: "POST", path: "/api/v1/moderation/mute", token: testAdmin, body: map[string]any{"user": "erin", "seconds": 600}, status: 200})
	c1.do(call{method: "POST", path: "/api/v1/moderation/kick", token: testAdmin, body: map[string]any{"user": "carol", "reason": "audit"}, status: 200})
	assert.Equal(t, 4001, wc.closed())
	c2.do(call{method: "POST", path: "/api/v1/moderation/ban", token: testAdmin, body: map[string]any{"user": "carol", "seconds": 60}, status: 200})
	c1.do(call{method: "GET", path: "/api/v1/wallet", token: carol, status: 403, code: "banned", eventually: true})
	c1.do(call{method: "DELETE", path: "/api/v1/moderation/ban/carol", token: testAdmin, status: 200})
	c2.do(call{method: "GET", path: "/api/v1/wallet", token: carol, status: 200, eventually: true})
	au.names("erin")

	// the admin console: its reads, a message from the system, a
	// disconnect, a refused try of the read-only token — the audit log
	// (with its TTL) holds every action above
	c2.do(call{method: "GET", path: "/api/v1/admin/whoami", token: testAdminRead, status: 200})
	c1.do(call{method: "GET", path: "/api/v1/admin/rooms", token: testAdminRead, status: 200})
	c2.do(call{method: "GET", path: "/api/v1/admin/rooms/" + room, token: testAdmin, status: 200})
	c1.do(call{method: "POST", path: "/api/v1/admin/rooms/" + room + "/messages", token: testAdmin, body: map[string]string{"text": "audit"}, status: 200})
	c1.do(call{method: "POST", path: "/api/v1/admin/rooms/" + room + "/messages", token: testAdminRead, body: map[string]string{"text": "no"}, status: 403, code: "forbidden", invalid: true})
	c2.do(call{method: "GET", path: "/api/v1/admin/users?prefix=a", token: testAdminRead, status: 200})
	c2.do(call{method: "POST", path: "/api/v1/admin/disconnect", token: testAdmin, body: map[string]string{"user": "erin"}, status: 200})
	c1.do(call{method: "GET", path: "/api/v1/admin/audit", token: testAdminRead, status: 200})

	// refusals that count: new boards per user, sessions and connections
	// per address (their buckets and leases are keys too)
	cl.putSetting("limit.new_boards_per_user_per_minute", 1)
	c1.do(call{method: "POST", path: "/api/v1/leaderboards/audit-new-1/scores", token: dave, body: map[string]any{"player": "dave", "score": 1}, status: 200})
	c2.do(call{method: "POST", path: "/api/v1/leaderboards/audit-new-2/scores", token: dave, body: map[string]any{"player": "dave", "score": 1}, status: 429, code: "rate_limited"})
	au.names("audit-new-1", "audit-new-2")
	cl.putSetting("limit.connections_per_ip", 3) // bob's WebSocket, alice's stream, dave's below
	extra := dialSpec(t, s, n1, dave, false)
	status, code := refusedUpgrade(t, s, n2, dave)
	assert.Equal(t, 429, status)
	assert.Equal(t, "too_many_connections", code)
	if covered["GET /ws"] == nil {
		covered["GET /ws"] = map[int]bool{}
	}
	covered["GET /ws"][101] = true
	cl.putSetting("limit.sessions_per_ip_per_minute", 1)
	c1.do(call{method: "POST", path: "/api/v1/session", body: map[string]string{"user": "frank"}, status: 429, code: "rate_limited", eventually: true})
	au.names("frank")

	// first scan: users are seated (bob by WebSocket, alice and dave by REST)
	time.Sleep(2 * time.Second) // the nodes' loops: seat renewal (lease/3), presence, sweeper (1 s)
	mid := au.scan("while seated")

	// everyone leaves: a closed stream, a REST leave, a closed WebSocket, a
	// WebSocket leave, sign-outs; the seats of closed connections go with
	// their lease
	st.close()
	c1.do(call{method: "POST", path: "/api/v1/rooms/" + room + "/leave", token: alice, status: 200})
	c2.do(call{method: "POST", path: "/api/v1/rooms/" + room + "/leave", token: dave, status: 200})
	wb.send(protocol.Leave{Room: room})
	wb.send(protocol.Ping{Ref: "p3"})
	wb.next("pong")
	wb.close()
	extra.close()
	c1.do(call{method: "DELETE", path: "/api/v1/session", token: alice2, status: 200})
	c2.do(call{method: "DELETE", path: "/api/v1/session", token: bob, status: 200})
	c1.do(call{method: "DELETE", path: "/api/v1/session", token: dave, status: 200})
	for _, lobby := range []string{"audit", "audit-ws"} {
		users := r.Prefix + ":" + keyspace.Tag("lobby", lobby) + ":members"
		require.Eventually(t, func() bool { return r.Client.Exists(context.Background(), users).Val() == 0 }, 20*time.Second, 50*time.Millisecond,
			"lobby %s keeps a seat", lobby)
	}
	time.Sleep(2 * time.Second) // the sweeper and the renewal loops run at least once more
	end := au.scan("after everyone left")

	// every operation and every client frame was used once
	var missing []string
	for op, id := range s.operationIDs {
		if len(covered[op]) == 0 {
			missing = append(missing, op+" ("+id+")")
		}
	}
	sort.Strings(missing)
	assert.Empty(t, missing, "operations the audit never drove")
	sent := map[string]bool{}
	for _, w := range []*specWS{wb, wc, extra} {
		for typ := range w.sent {
			sent[typ] = true
		}
	}
	for _, typ := range frameTypes(t, "ClientFrame") {
		assert.True(t, sent[typ], "the audit never sent a %q frame", typ)
	}

	// every permanent kind is one chatd writes (the list is not stale)
	for _, k := range keyspace.Permanent {
		if !mid.matched[k.Pattern] && !end.matched[k.Pattern] {
			t.Errorf("keyspace.Permanent kind %q (%s) matched no key: stale, or the audit does not drive it", k.Pattern, k.Owner)
		}
	}
}

// audit scans one test's prefix and classifies its keys.
type audit struct {
	t     *testing.T
	r     *redistest.Redis
	space keyspace.Space
	ids   map[string]bool // names the test chose: a key part equal to one is a variable
}

func newAudit(t *testing.T, r *redistest.Redis) *audit {
	return &audit{t: t, r: r, space: keyspace.New(r.Prefix), ids: map[string]bool{}}
}

func (a *audit) names(ns ...string) {
	for _, n := range ns {
		a.ids[n] = true
	}
}

// scanResult is what one scan found.
type scanResult struct {
	matched map[string]bool // Permanent patterns some key without TTL matched
}

var digits = regexp.MustCompile(`[0-9]`)

// kindOf names a key's kind for the inventory: the unit id and every part
// that is a name the test chose or holds a digit become '*'.
func (a *audit) kindOf(name string) string {
	if i := strings.IndexByte(name, '{'); i >= 0 {
		if j := strings.IndexByte(name[i:], '}'); j > 0 {
			if c := strings.IndexByte(name[i:i+j], ':'); c > 0 {
				name = name[:i+c+1] + "*" + name[i+j:]
			}
		}
	}
	parts := strings.Split(name, ":")
	for i, p := range parts {
		if strings.ContainsAny(p, "{}") {
			continue
		}
		if a.ids[p] || digits.MatchString(p) {
			parts[i] = "*"
		}
	}
	return strings.Join(parts, ":")
}

type inventoryRow struct {
	typ          string
	count        int
	noTTL        int
	minTTL       time.Duration
	maxTTL       time.Duration
	permanentVia string
}

// scan SCANs prefix:*, reads TYPE and PTTL of each key, logs the
// inventory and reports every key without a TTL that Permanent does not
// allow.
func (a *audit) scan(label string) scanResult {
	t := a.t
	t.Helper()
	ctx := context.Background()
	rdb := a.r.Client
	var keys []string
	iter := rdb.Scan(ctx, 0, a.r.Prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	require.NoError(t, iter.Err())
	slices.Sort(keys)
	keys = slices.Compact(keys)

	types := make([]string, len(keys))
	ttls := make([]time.Duration, len(keys))
	pipe := rdb.Pipeline()
	tc := make([]interface{ Val() string }, len(keys))
	pc := make([]interface{ Val() time.Duration }, len(keys))
	for i, k := range keys {
		tc[i] = pipe.Type(ctx, k)
		pc[i] = pipe.PTTL(ctx, k)
	}
	_, err := pipe.Exec(ctx)
	require.NoError(t, err)
	for i := range keys {
		types[i], ttls[i] = tc[i].Val(), pc[i].Val()
	}

	res := scanResult{matched: map[string]bool{}}
	rows := map[string]*inventoryRow{}
	var bad []string
	for i, key := range keys {
		if ttls[i] == -2 {
			continue // expired between SCAN and PTTL
		}
		name, ok := a.space.Strip(key)
		require.True(t, ok, key)
		kind := a.kindOf(name)
		row := rows[kind]
		if row == nil {
			row = &inventoryRow{typ: types[i], minTTL: -1, maxTTL: -1}
			rows[kind] = row
		}
		row.count++
		if ttls[i] == -1 {
			row.noTTL++
			via, why := a.permanent(ctx, name)
			if via == "" {
				bad = append(bad, fmt.Sprintf("%s (%s, kind %s): %s", name, types[i], kind, why))
				continue
			}
			res.matched[via] = true
			row.permanentVia = via
			continue
		}
		if row.minTTL < 0 || ttls[i] < row.minTTL {
			row.minTTL = ttls[i]
		}
		if ttls[i] > row.maxTTL {
			row.maxTTL = ttls[i]
		}
	}

	kinds := make([]string, 0, len(rows))
	for k := range rows {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var b strings.Builder
	fmt.Fprintf(&b, "keyspace %s: %d keys, %d kinds\n", label, len(keys), len(kinds))
	fmt.Fprintf(&b, "%-42s %-7s %5s %5s  %s\n", "kind", "type", "count", "noTTL", "TTL range / permanent as")
	for _, k := range kinds {
		row := rows[k]
		ttl := "-"
		if row.minTTL >= 0 {
			ttl = fmt.Sprintf("%s .. %s", row.minTTL.Round(time.Second), row.maxTTL.Round(time.Second))
		}
		if row.permanentVia != "" {
			ttl += "; permanent as " + row.permanentVia
		}
		fmt.Fprintf(&b, "%-42s %-7s %5d %5d  %s\n", k, row.typ, row.count, row.noTTL, ttl)
	}
	t.Log(b.String())
	for _, k := range bad {
		t.Errorf("%s: key without a TTL that keyspace.Permanent does not allow: %s", label, k)
	}
	return res
}

// permanent returns the Pattern of the first Permanent kind that allows
// name to lack a TTL now, or "" and why none does.
func (a *audit) permanent(ctx context.Context, name string) (string, string) {
	kinds := keyspace.PermanentKinds(name)
	if len(kinds) == 0 {
		return "", "no Permanent kind matches"
	}
	var why []string
	for _, k := range kinds {
		if k.Listed != "" {
			_, id, _ := keyspace.Unit(name)
			if !a.listed(ctx, k.Listed, id) {
				why = append(why, fmt.Sprintf("%s: %s does not list %q", k.Pattern, k.Listed, id))
				continue
			}
		}
		if h := k.HolderKey(name); h != "" {
			if a.r.Client.Exists(ctx, a.r.Prefix+":"+h).Val() == 0 {
				why = append(why, fmt.Sprintf("%s: its holder %s is gone", k.Pattern, h))
				continue
			}
		}
		return k.Pattern, ""
	}
	return "", strings.Join(why, "; ")
}

// listed reports whether the live setting key (a comma-separated list, as
// the settings hash holds it) names id.
func (a *audit) listed(ctx context.Context, key, id string) bool {
	raw, err := a.r.Client.HGet(ctx, a.r.Prefix+":"+keyspace.Tag("settings", "live")+":values", key).Result()
	if err != nil {
		return false
	}
	raw = strings.Trim(raw, `"`)
	for _, v := range strings.Split(raw, ",") {
		if strings.TrimSpace(v) == id {
			return true
		}
	}
	return false
}
