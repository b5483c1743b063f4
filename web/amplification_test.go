package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
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
	jssdk "github.com/chatd/chatd/sdk/js"
)

// xCost is an operation's or a client frame's documented cost (x-cost in
// docs/openapi.json and docs/ws-frames.schema.json; PROTOCOL.md's Cost
// model says what each figure counts).
type xCost struct {
	MaxResponseBytes int64  `json:"maxResponseBytes"`
	MaxRedisCommands int64  `json:"maxRedisCommands"`
	RetainedAfter    string `json:"retainedAfter"`
}

// specCosts returns the x-cost of every operation of docs/openapi.json by
// "METHOD /path", and of every client frame of docs/ws-frames.schema.json
// by frame type; a missing one is absent from the map.
func specCosts(t testing.TB) (ops map[string]*xCost, opIDs map[string]string, frames map[string]*xCost, clientFrames []string) {
	t.Helper()
	var api struct {
		Paths map[string]map[string]json.RawMessage
	}
	require.NoError(t, json.Unmarshal(docs.OpenAPI, &api))
	ops, opIDs = map[string]*xCost{}, map[string]string{}
	for path, items := range api.Paths {
		for method, raw := range items {
			switch method {
			case "get", "put", "post", "delete", "patch":
			default:
				continue
			}
			var op struct {
				OperationID string `json:"operationId"`
				Cost        *xCost `json:"x-cost"`
			}
			require.NoError(t, json.Unmarshal(raw, &op))
			key := strings.ToUpper(method) + " " + path
			ops[key], opIDs[key] = op.Cost, op.OperationID
		}
	}
	var schema struct {
		Defs map[string]struct {
			Properties struct {
				Type struct {
					Const string `json:"const"`
				} `json:"type"`
			} `json:"properties"`
			Cost *xCost `json:"x-cost"`
		} `json:"$defs"`
	}
	require.NoError(t, json.Unmarshal(docs.WSFrames, &schema))
	var client struct {
		OneOf []struct {
			Ref string `json:"$ref"`
		} `json:"oneOf"`
	}
	require.NoError(t, json.Unmarshal(mustRaw(t, docs.WSFrames, "$defs", "ClientFrame"), &client))
	frames = map[string]*xCost{}
	for _, r := range client.OneOf {
		def := schema.Defs[strings.TrimPrefix(r.Ref, "#/$defs/")]
		typ := def.Properties.Type.Const
		require.NotEmpty(t, typ, "client frame %s has a const type", r.Ref)
		frames[typ] = def.Cost
		clientFrames = append(clientFrames, typ)
	}
	sort.Strings(clientFrames)
	return ops, opIDs, frames, clientFrames
}

// mustRaw is the raw JSON at path in doc.
func mustRaw(t testing.TB, doc []byte, path ...string) json.RawMessage {
	t.Helper()
	raw := json.RawMessage(doc)
	for _, p := range path {
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(raw, &m))
		raw = m[p]
		require.NotNil(t, raw, "%v", path)
	}
	return raw
}

// TestEveryOperationAndClientFrameHasACost: every operation of
// docs/openapi.json and every client frame of docs/ws-frames.schema.json
// states its cost (x-cost), with a positive byte and command bound and
// what it leaves behind.
func TestEveryOperationAndClientFrameHasACost(t *testing.T) {
	t.Parallel()
	ops, ids, frames, types := specCosts(t)
	check := func(what string, c *xCost) {
		if !assert.NotNil(t, c, "%s has no x-cost", what) {
			return
		}
		assert.Positive(t, c.MaxResponseBytes, "%s: x-cost.maxResponseBytes", what)
		assert.GreaterOrEqual(t, c.MaxRedisCommands, int64(0), "%s: x-cost.maxRedisCommands", what)
		assert.NotEmpty(t, c.RetainedAfter, "%s: x-cost.retainedAfter", what)
	}
	for op, c := range ops {
		check(op+" ("+ids[op]+")", c)
	}
	for _, typ := range types {
		check("client frame "+typ, frames[typ])
	}
}

// ampSettle is how long a measurement waits after an answer for the work
// the call deferred (the coalesced marks, the presence write of a
// connect) to reach Redis.
const ampSettle = 80 * time.Millisecond

// ampTries is how often a call is measured; the dearest counts. The
// node's own loops (a heartbeat every 5 s: a few commands) may land in a
// measurement: the documented figures leave room for them.
const ampTries = 2

// ampRetries is how many more times a call whose least command count
// exceeded its cost is measured before the test fails it (remeasure, in
// the test).
const ampRetries = 3

// TestAmplificationOfEveryOperationAndFrameStaysWithinItsCost walks every
// operation of docs/openapi.json and every client frame type with the
// worst inputs the contract allows (the largest limits, a room of
// messages of 2,000 control characters — 12 KB each as JSON —, the most
// rooms a user may hold, 1,000-item lists) against one node on a private
// redis-server, and fails when an answer's bytes or the Redis commands it
// caused (INFO commandstats, scripts' own commands included) exceed the
// operation's documented x-cost.
func TestAmplificationOfEveryOperationAndFrameStaysWithinItsCost(t *testing.T) {
	ops, ids, frameCosts, frameTypes := specCosts(t)
	r := redistest.Own(t, redistest.Options{})
	c := newCluster(t, r, 1)
	n := c.nodes[0]
	ctx := context.Background()

	measured := map[string][2]int64{} // op or frame → bytes, commands
	// measure runs setup, then call, ampTries times: it records the
	// largest answer of call and its least command count (the node's own
	// loops only ever add commands; setup makes every try a worst case);
	// teardown, if setup returns one, runs after.
	// calls keeps each measured call's setup and call, for remeasure: on
	// a loaded machine a loop's burst (a presence tick writing its offline
	// users, a seat renewal) can land in every one of the first tries; a
	// call that costs more than its budget exceeds it in every try however
	// often it is measured.
	type measuredCall struct {
		setup func() func()
		call  func() int64
	}
	calls := map[string]measuredCall{}
	measure := func(what string, setup func() func(), call func() int64) {
		t.Helper()
		calls[what] = measuredCall{setup, call}
		for range ampTries {
			var teardown func()
			if setup != nil {
				teardown = setup()
				time.Sleep(ampSettle)
			}
			before := redisCalls(t, r)
			b := call()
			time.Sleep(ampSettle)
			cmds := redisCalls(t, r) - before - 1 // -1: the first INFO
			if teardown != nil {
				teardown()
			}
			m, seen := measured[what]
			if !seen || cmds < m[1] {
				m[1] = cmds
			}
			m[0] = max(m[0], b)
			measured[what] = m
		}
	}
	send := func(method, path, tok string, body any, header map[string]string) (int, []byte) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			p, err := json.Marshal(body)
			require.NoError(t, err)
			rd = bytes.NewReader(p)
		}
		req, err := http.NewRequest(method, n.url+path, rd)
		require.NoError(t, err)
		if rd != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		for h, v := range header {
			req.Header.Set(h, v)
		}
		resp, err := c.http.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		p, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, p
	}
	// op measures one call of the operation key (method and path template).
	op := func(key, path, tok string, body any, header map[string]string, want int) {
		t.Helper()
		method, _, _ := strings.Cut(key, " ")
		measure(key, nil, func() int64 {
			st, p := send(method, path, tok, body, header)
			require.Equal(t, want, st, "%s %s: %.300s", method, path, p)
			return int64(len(p))
		})
	}

	// the caps on how often are not what is measured here
	for key, v := range map[string]any{"limit.new_lobbies_per_user_per_minute": 1000000, "limit.score_posts_per_user_per_minute": 1000000,
		"limit.sessions_per_ip_per_minute": 1000000, "limit.new_boards_per_user_per_minute": 1000000, "limit.new_boards_per_ip_per_minute": 1000000,
		"rate.messages_per_second": 10000} {
		require.Equal(t, 200, c.do(n, "PUT", "/api/v1/settings/"+key, testAdmin, map[string]any{"value": v}, nil), key)
	}

	// The worst case to read: a room of 100 messages of 2,000 control
	// characters (1.2 MB as JSON, past the 1 MiB budget), and a reader in
	// the most rooms a user may hold, each with something new.
	reader := c.session(n, "reader")
	var joined struct{ Room struct{ ID string } }
	require.Equal(t, 200, c.do(n, "POST", "/api/v1/lobbies/amp/join", reader, nil, &joined))
	room := joined.Room.ID
	fillWorstCase(t, c, room, 100)
	roomsHeld := []string{room}
	for i := 1; i < 20; i++ {
		var j struct{ Room struct{ ID string } }
		require.Equal(t, 200, c.do(n, "POST", fmt.Sprintf("/api/v1/lobbies/amp%d/join", i), reader, nil, &j))
		roomsHeld = append(roomsHeld, j.Room.ID)
		require.Equal(t, 200, c.do(n, "POST", "/api/v1/rooms/"+j.Room.ID+"/messages", reader, map[string]string{"text": strings.Repeat("\x01", 2000)}, nil))
	}
	writer := c.session(n, "writer")
	require.Equal(t, 200, c.do(n, "POST", "/api/v1/lobbies/amp/join", writer, nil, nil))
	var first struct{ Messages []struct{ ID string } }
	require.Equal(t, 200, c.do(n, "GET", "/api/v1/rooms/"+room+"/messages?limit=1", reader, nil, &first))
	lastID := first.Messages[0].ID
	// 1,000 players on a board, the 100 notices kept (notices.MaxKept) of
	// 1,000 control characters, 1,000 seen items of 150
	players := make([]string, 1000)
	for i := range players {
		players[i] = fmt.Sprintf("p%04d", i)
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for j := w; j < len(players); j += 8 {
				st, _ := send("POST", "/api/v1/leaderboards/amp/scores", reader, map[string]any{"player": players[j], "score": j}, nil)
				assert.Equal(t, 200, st)
			}
		})
	}
	wg.Wait()
	long := strings.Repeat("\x01", 1000)
	for range 100 {
		require.Equal(t, 200, c.do(n, "POST", "/api/v1/notices", testAdmin, map[string]string{"text": long}, nil))
	}
	items := make([]string, 1000)
	for i := range items {
		items[i] = strings.Repeat("\x01", 150) + fmt.Sprintf("%05d", i) // 1 MiB of body at most
	}

	// static and process operations
	op("GET /", "/", "", nil, nil, 200)
	op("GET /admin", "/admin", "", nil, nil, 200)
	op("GET /api", "/api", "", nil, nil, 200)
	sdkFiles, err := fs.Glob(jssdk.FS(), "*.js")
	require.NoError(t, err)
	require.NotEmpty(t, sdkFiles)
	for _, f := range sdkFiles { // the largest decides
		op("GET /sdk/{file}", "/sdk/"+f, "", nil, nil, 200)
	}
	op("GET /healthz", "/healthz", "", nil, nil, 200)
	op("GET /readyz", "/readyz", "", nil, nil, 200)
	op("GET /metrics", "/metrics", "", nil, nil, 200)
	op("GET /api/v1/openapi.json", "/api/v1/openapi.json", "", nil, nil, 200)
	op("GET /api/v1/ws-frames.schema.json", "/api/v1/ws-frames.schema.json", "", nil, nil, 200)

	// sessions: a new guest each time (a second device of a guest reads more)
	guest := 0
	op("POST /api/v1/session", "/api/v1/session", reader, map[string]string{"user": "reader"}, nil, 200)
	var gone string
	measure("DELETE /api/v1/session", func() func() {
		guest++
		var s struct{ Token string }
		require.Equal(t, 200, c.do(n, "POST", "/api/v1/session", "", map[string]string{"user": fmt.Sprintf("gone%d", guest)}, &s))
		gone = s.Token
		return nil
	}, func() int64 {
		st, p := send("DELETE", "/api/v1/session", gone, nil, nil)
		require.Equal(t, 200, st)
		return int64(len(p))
	})

	// rooms and messages
	leaveFirst := func() func() {
		require.Equal(t, 200, c.do(n, "POST", "/api/v1/rooms/"+room+"/leave", writer, nil, nil))
		return nil
	}
	measure("POST /api/v1/lobbies/{lobby}/join", leaveFirst, func() int64 {
		st, p := send("POST", "/api/v1/lobbies/amp/join", writer, nil, nil)
		require.Equal(t, 200, st, "%s", p)
		return int64(len(p))
	})
	op("GET /api/v1/lobbies/{lobby}/rooms", "/api/v1/lobbies/amp/rooms", reader, nil, nil, 200)
	op("GET /api/v1/lobbies", "/api/v1/lobbies?limit=500", reader, nil, nil, 200)
	op("GET /api/v1/rooms/{room}", "/api/v1/rooms/"+room, reader, nil, nil, 200)
	op("POST /api/v1/rooms/{room}/messages", "/api/v1/rooms/"+room+"/messages", writer, map[string]string{"text": strings.Repeat("\x01", 2000)}, map[string]string{"Idempotency-Key": strings.Repeat("k", 64)}, 200)
	op("GET /api/v1/rooms/{room}/messages", "/api/v1/rooms/"+room+"/messages?limit=1000&after=0-0", reader, nil, nil, 200)
	op("POST /api/v1/rooms/{room}/read", "/api/v1/rooms/"+room+"/read", reader, map[string]string{"id": lastID}, nil, 200)
	op("POST /api/v1/rooms/{room}/typing", "/api/v1/rooms/"+room+"/typing", reader, nil, nil, 200)
	op("GET /api/v1/unread", "/api/v1/unread", reader, nil, nil, 200)
	// no rpc hook here: what chatd itself answers (a backend's answer is
	// bounded by hooks.MaxReply, which the x-cost allows for)
	op("POST /api/v1/rpc/{method}", "/api/v1/rpc/"+strings.Repeat("m", 64), reader, map[string]string{"x": strings.Repeat("\x01", 2000)}, nil, 404)
	measure("GET /api/v1/poll", func() func() {
		// something new in every room the reader holds: the poll reads them all
		for _, id := range roomsHeld {
			require.Equal(t, 200, c.do(n, "POST", "/api/v1/admin/rooms/"+id+"/messages", testAdmin, map[string]string{"text": strings.Repeat("\x01", 2000)}, nil))
		}
		return nil
	}, func() int64 {
		st, p := send("GET", "/api/v1/poll?wait=0", reader, nil, nil)
		require.Equal(t, 200, st)
		return int64(len(p))
	})
	op("POST /api/v1/rooms/{room}/leave", "/api/v1/rooms/"+room+"/leave", writer, nil, nil, 200)
	measure("POST /api/v1/rooms/{room}/join", leaveFirst, func() int64 {
		st, p := send("POST", "/api/v1/rooms/"+room+"/join", writer, nil, nil)
		require.Equal(t, 200, st, "%s", p)
		return int64(len(p))
	})

	// presence, nodes, stats, settings, notices
	op("GET /api/v1/presence/{user}", "/api/v1/presence/reader", writer, nil, nil, 200)
	op("GET /api/v1/nodes", "/api/v1/nodes", testAdminRead, nil, nil, 200)
	op("GET /api/v1/stats", "/api/v1/stats", reader, nil, nil, 200)
	op("GET /api/v1/settings", "/api/v1/settings", reader, nil, nil, 200)
	op("GET /api/v1/settings/defs", "/api/v1/settings/defs", reader, nil, nil, 200)
	op("PUT /api/v1/settings/{key}", "/api/v1/settings/motd", testAdmin, map[string]string{"value": strings.Repeat("\x01", 500)}, nil, 200)
	op("DELETE /api/v1/settings/{key}", "/api/v1/settings/motd", testAdmin, nil, nil, 200)
	op("POST /api/v1/notices", "/api/v1/notices", testAdmin, map[string]string{"text": long}, nil, 200)

	// leaderboards
	op("POST /api/v1/leaderboards/{board}/scores", "/api/v1/leaderboards/amp/scores", reader, map[string]any{"player": "reader", "score": 1e9, "mode": "incr"}, nil, 200)
	op("GET /api/v1/leaderboards/{board}/top", "/api/v1/leaderboards/amp/top?limit=100", reader, nil, nil, 200)
	op("GET /api/v1/leaderboards/{board}/players/{player}", "/api/v1/leaderboards/amp/players/p0500", reader, nil, nil, 200)
	op("GET /api/v1/leaderboards/{board}/around/{player}", "/api/v1/leaderboards/amp/around/p0500?radius=500", reader, nil, nil, 200)
	op("GET /api/v1/leaderboards/{board}/range", "/api/v1/leaderboards/amp/range?min=0&max=1000000&limit=1000", reader, nil, nil, 200)
	op("POST /api/v1/leaderboards/{board}/ranks", "/api/v1/leaderboards/amp/ranks", reader, map[string][]string{"players": players}, nil, 200)

	// seen filter
	op("POST /api/v1/seen/filter", "/api/v1/seen/filter", reader, map[string][]string{"items": items}, nil, 200)
	op("POST /api/v1/seen", "/api/v1/seen", reader, map[string][]string{"items": items}, nil, 200)

	// shop and wallet
	op("POST /api/v1/shop/items", "/api/v1/shop/items", testAdmin, map[string]any{"item": strings.Repeat("s", 64), "stock": 1000000, "price": 1}, nil, 200)
	op("GET /api/v1/shop/items", "/api/v1/shop/items", reader, nil, nil, 200)
	op("POST /api/v1/wallet/grant", "/api/v1/wallet/grant", testAdmin, map[string]any{"user": "reader", "amount": 1000}, nil, 200)
	op("GET /api/v1/wallet", "/api/v1/wallet", reader, nil, nil, 200)
	buys := 0
	measure("POST /api/v1/shop/buy", nil, func() int64 {
		buys++
		st, p := send("POST", "/api/v1/shop/buy", reader, map[string]any{"item": strings.Repeat("s", 64), "qty": 1}, map[string]string{"Idempotency-Key": fmt.Sprintf("%064d", buys)})
		require.Equal(t, 200, st, "%s", p)
		return int64(len(p))
	})

	// moderation and the admin console
	var said struct{ Message struct{ ID string } }
	measure("DELETE /api/v1/rooms/{room}/messages/{id}", func() func() {
		require.Equal(t, 200, c.do(n, "POST", "/api/v1/rooms/"+room+"/messages", writer, map[string]string{"text": "x"}, &said))
		return nil
	}, func() int64 {
		st, p := send("DELETE", "/api/v1/rooms/"+room+"/messages/"+said.Message.ID, testAdmin, nil, nil)
		require.Equal(t, 200, st, "%s", p)
		return int64(len(p))
	})
	reason := strings.Repeat("\x01", 500)
	op("POST /api/v1/moderation/mute", "/api/v1/moderation/mute", testAdmin, map[string]any{"user": "victim", "seconds": 31536000, "reason": reason}, nil, 200)
	op("GET /api/v1/moderation", "/api/v1/moderation", testAdminRead, nil, nil, 200)
	op("DELETE /api/v1/moderation/mute/{user}", "/api/v1/moderation/mute/victim", testAdmin, nil, nil, 200)
	op("POST /api/v1/moderation/ban", "/api/v1/moderation/ban", testAdmin, map[string]any{"user": "victim", "seconds": 31536000, "reason": reason}, nil, 200)
	op("DELETE /api/v1/moderation/ban/{user}", "/api/v1/moderation/ban/victim", testAdmin, nil, nil, 200)
	op("POST /api/v1/moderation/kick", "/api/v1/moderation/kick", testAdmin, map[string]any{"user": "victim", "reason": reason}, nil, 200)
	op("GET /api/v1/admin/whoami", "/api/v1/admin/whoami", testAdminRead, nil, nil, 200)
	op("GET /api/v1/admin/rooms", "/api/v1/admin/rooms?limit=500", testAdminRead, nil, nil, 200)
	op("GET /api/v1/admin/rooms/{room}", "/api/v1/admin/rooms/"+room+"?limit=1000", testAdminRead, nil, nil, 200)
	op("POST /api/v1/admin/rooms/{room}/messages", "/api/v1/admin/rooms/"+room+"/messages", testAdmin, map[string]string{"text": strings.Repeat("\x01", 2000)}, nil, 200)
	op("POST /api/v1/admin/disconnect", "/api/v1/admin/disconnect", testAdmin, map[string]string{"user": "reader", "reason": reason}, nil, 200)
	op("GET /api/v1/admin/users", "/api/v1/admin/users?prefix=p&limit=100", testAdminRead, nil, nil, 200)
	op("GET /api/v1/admin/audit", "/api/v1/admin/audit?limit=1000", testAdminRead, nil, nil, 200)

	// the server API: the longest text and key, a broadcast to every room
	// of a lobby, the presence of the user in the most rooms
	op("POST /api/v1/server/rooms/{room}/messages", "/api/v1/server/rooms/"+room+"/messages", testKeyAll, map[string]string{"text": strings.Repeat("\x01", 2000), "user": strings.Repeat("u", 32)}, map[string]string{"Idempotency-Key": strings.Repeat("k", 128)}, 200)
	op("POST /api/v1/server/lobbies/{lobby}/messages", "/api/v1/server/lobbies/amp/messages", testKeyAll, map[string]string{"text": strings.Repeat("\x01", 2000)}, map[string]string{"Idempotency-Key": strings.Repeat("b", 128)}, 200)
	op("GET /api/v1/server/presence/{user}", "/api/v1/server/presence/reader", testKeyAll, nil, nil, 200)
	op("POST /api/v1/server/users/{user}/disconnect", "/api/v1/server/users/reader/disconnect", testKeyAll, map[string]string{"reason": reason}, nil, 200)
	_, err = n.node.Services.Rooms.Private.Create(ctx, "mm.amp.1", players[:100], time.Minute)
	require.NoError(t, err)
	measure("PUT /api/v1/server/rooms/{room}/access/{user}", func() func() {
		st, p := send("DELETE", "/api/v1/server/rooms/mm.amp.1-1/access/p0000", testKeyAll, nil, nil)
		require.Equal(t, 200, st, "%s", p)
		return nil
	}, func() int64 {
		st, p := send("PUT", "/api/v1/server/rooms/mm.amp.1-1/access/p0000", testKeyAll, nil, nil)
		require.Equal(t, 200, st, "%s", p)
		return int64(len(p))
	})
	measure("DELETE /api/v1/server/rooms/{room}/access/{user}", func() func() {
		st, p := send("PUT", "/api/v1/server/rooms/mm.amp.1-1/access/p0001", testKeyAll, nil, nil)
		require.Equal(t, 200, st, "%s", p)
		return nil
	}, func() int64 {
		st, p := send("DELETE", "/api/v1/server/rooms/mm.amp.1-1/access/p0001", testKeyAll, nil, nil)
		require.Equal(t, 200, st, "%s", p)
		return int64(len(p))
	})

	// matchmaking: a full party of attributes, then its status and cancel
	var tk struct{ Ticket struct{ ID string } }
	tickets := 0
	var mm string
	measure("POST /api/v1/matchmaking/{queue}/tickets", func() func() {
		tickets++
		mm = c.session(n, fmt.Sprintf("mm%d", tickets))
		return nil
	}, func() int64 {
		st, p := send("POST", "/api/v1/matchmaking/quick/tickets", mm, map[string]any{"skill": -1e9}, nil)
		require.Equal(t, 200, st, "%s", p)
		require.NoError(t, json.Unmarshal(p, &tk))
		return int64(len(p))
	})
	op("GET /api/v1/matchmaking/{queue}/tickets/{id}", "/api/v1/matchmaking/quick/tickets/"+tk.Ticket.ID, mm, nil, nil, 200)
	op("DELETE /api/v1/matchmaking/{queue}/tickets/{id}", "/api/v1/matchmaking/quick/tickets/"+tk.Ticket.ID, mm, nil, nil, 200)
	op("GET /api/v1/matchmaking/queues", "/api/v1/matchmaking/queues", testAdminRead, nil, nil, 200)

	// parties: a leader invites a fresh invitee (the default queue's
	// max_party is 2), who accepts or declines a fresh invitation
	parties := 0
	var leader, invitee string
	newParty := func() func() {
		parties++
		leader = c.session(n, fmt.Sprintf("lead%d", parties))
		invitee = c.session(n, fmt.Sprintf("guest%d", parties))
		for _, tok := range []string{leader, invitee} { // online: a party forms of online users only
			st, p := send("GET", "/api/v1/poll?wait=0", tok, nil, nil)
			require.Equal(t, 200, st, "%s", p)
		}
		return nil
	}
	invite := func() (int, []byte) {
		return send("POST", "/api/v1/matchmaking/quick/parties", leader, map[string]any{"skill": -1e9, "party": []string{fmt.Sprintf("guest%d", parties)}}, nil)
	}
	measure("POST /api/v1/matchmaking/{queue}/parties", newParty, func() int64 {
		st, p := invite()
		require.Equal(t, 200, st, "%s", p)
		return int64(len(p))
	})
	for _, answer := range []string{"accept", "decline"} {
		measure("POST /api/v1/matchmaking/{queue}/tickets/{id}/"+answer, func() func() {
			newParty()
			st, p := invite()
			require.Equal(t, 200, st, "%s", p)
			require.NoError(t, json.Unmarshal(p, &tk))
			return nil
		}, func() int64 {
			st, p := send("POST", "/api/v1/matchmaking/quick/tickets/"+tk.Ticket.ID+"/"+answer, invitee, nil, nil)
			require.Equal(t, 200, st, "%s", p)
			return int64(len(p))
		})
	}

	// direct messages: a reader with 50 conversations (its budget of new
	// ones an hour), each with a message of 2,000 control characters; one
	// of them holds 1,000 of those
	for i := range 49 {
		require.Equal(t, 200, c.do(n, "POST", fmt.Sprintf("/api/v1/direct/d%02d/messages", i), reader, map[string]string{"text": strings.Repeat("\x01", 2000)}, nil))
	}
	var full struct{ Conversation struct{ ID string } }
	require.Equal(t, 200, c.do(n, "POST", "/api/v1/direct/writer", reader, nil, &full))
	dmConv := full.Conversation.ID
	wg = sync.WaitGroup{}
	for w := range 8 {
		wg.Go(func() {
			for j := w; j < 1000; j += 8 {
				st, p := send("POST", "/api/v1/direct/"+dmConv+"/messages", writer, map[string]string{"text": strings.Repeat("\x01", 2000)}, nil)
				assert.Equal(t, 200, st, "%s", p)
			}
		})
	}
	wg.Wait()
	var dmFirst struct{ Messages []struct{ ID string } }
	require.Equal(t, 200, c.do(n, "GET", "/api/v1/direct/"+dmConv+"/messages?limit=1", reader, nil, &dmFirst))
	dmLast := dmFirst.Messages[0].ID
	op("GET /api/v1/direct", "/api/v1/direct?limit=50", reader, nil, nil, 200)
	opens := 0
	opener := c.session(n, "opener")
	measure("POST /api/v1/direct/{with}", nil, func() int64 {
		opens++
		st, p := send("POST", fmt.Sprintf("/api/v1/direct/peer%d", opens), opener, nil, nil)
		require.Equal(t, 200, st, "%s", p)
		return int64(len(p))
	})
	op("GET /api/v1/direct/{with}/messages", "/api/v1/direct/"+dmConv+"/messages?limit=1000&after=0-0", reader, nil, nil, 200)
	op("POST /api/v1/direct/{with}/messages", "/api/v1/direct/"+dmConv+"/messages", writer, map[string]string{"text": strings.Repeat("\x01", 2000)}, map[string]string{"Idempotency-Key": strings.Repeat("k", 128)}, 200)
	op("POST /api/v1/direct/{with}/read", "/api/v1/direct/"+dmConv+"/read", reader, map[string]string{"id": dmLast}, nil, 200)
	op("POST /api/v1/direct/{with}/typing", "/api/v1/direct/"+dmConv+"/typing", reader, nil, nil, 200)
	op("PUT /api/v1/blocks/{user}", "/api/v1/blocks/victim", reader, nil, nil, 200)
	op("GET /api/v1/blocks", "/api/v1/blocks", reader, nil, nil, 200)
	op("DELETE /api/v1/blocks/{user}", "/api/v1/blocks/victim", reader, nil, nil, 200)
	op("GET /api/v1/admin/direct/{conversation}/messages", "/api/v1/admin/direct/"+dmConv+"/messages?limit=1000&after=0-0", testAdmin, nil, nil, 200)
	var dmSaid struct{ Message struct{ ID string } }
	measure("DELETE /api/v1/admin/direct/{conversation}/messages/{id}", func() func() {
		require.Equal(t, 200, c.do(n, "POST", "/api/v1/direct/"+dmConv+"/messages", writer, map[string]string{"text": "x"}, &dmSaid))
		return nil
	}, func() int64 {
		st, p := send("DELETE", "/api/v1/admin/direct/"+dmConv+"/messages/"+dmSaid.Message.ID, testAdmin, nil, nil)
		require.Equal(t, 200, st, "%s", p)
		return int64(len(p))
	})

	// the event stream and the WebSocket: opening one, up to its hello and
	// the unseen notices, then hanging up
	measure("GET /api/v1/events", nil, func() int64 {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, "GET", n.url+"/api/v1/events", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+writer)
		resp, err := c.http.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode)
		var head []byte
		buf := make([]byte, 64<<10)
		deadline := time.Now().Add(ampSettle * 4)
		go func() { time.Sleep(time.Until(deadline)); cancel() }()
		for {
			k, err := resp.Body.Read(buf)
			head = append(head, buf[:k]...)
			if err != nil {
				break
			}
		}
		return int64(len(head))
	})
	wsOpen := func(tok string) (*websocket.Conn, chan []byte) {
		u := "ws" + strings.TrimPrefix(n.url, "http") + "/ws?token=" + tok
		conn, resp, err := websocket.DefaultDialer.Dial(u, nil)
		require.NoError(t, err)
		resp.Body.Close()
		in := make(chan []byte, 4096)
		go func() {
			defer close(in)
			for {
				_, p, err := conn.ReadMessage()
				if err != nil {
					return
				}
				in <- p
			}
		}()
		return conn, in
	}
	// drain counts the bytes that arrive until quiet for ampSettle*2.
	drain := func(in chan []byte) (total int64) {
		for {
			select {
			case p, ok := <-in:
				if !ok {
					return
				}
				total += int64(len(p))
			case <-time.After(ampSettle * 2):
				return
			}
		}
	}
	// settle waits until everything the connection's opening and prepare
	// queued has arrived, then for quiet: a ping is answered after every
	// frame read before it (a join's history replay included), so quiet
	// alone is not trusted on a loaded machine, where a replay can pause
	// for longer than ampSettle*2 and spill into the measured frame.
	settle := func(conn *websocket.Conn, in chan []byte) {
		t.Helper()
		require.NoError(t, conn.WriteJSON(map[string]string{"type": "ping"}))
		deadline := time.After(10 * time.Second)
		for pong := false; !pong; {
			select {
			case p, ok := <-in:
				require.True(t, ok, "the connection closed before its pong")
				pong = bytes.Contains(p, []byte(`"type":"pong"`))
			case <-deadline:
				t.Fatal("no pong within 10 s")
			}
		}
		drain(in)
	}
	// a new user each time: every notice kept is unseen
	fresh := 0
	var wsUser string
	measure("GET /ws", func() func() {
		fresh++
		wsUser = c.session(n, fmt.Sprintf("fresh%d", fresh))
		return nil
	}, func() int64 {
		conn, in := wsOpen(wsUser)
		b := drain(in)
		_ = conn.Close()
		return b
	})

	// client frames, each on a connection of its own that has drained its
	// opening events (and done what prepare does)
	frame := func(typ string, tok func() string, f map[string]any, prepare func(conn *websocket.Conn)) {
		t.Helper()
		var conn *websocket.Conn
		var in chan []byte
		measure("frame "+typ, func() func() {
			conn, in = wsOpen(tok())
			if prepare != nil {
				prepare(conn)
			}
			settle(conn, in)
			return func() { _ = conn.Close(); drain(in) }
		}, func() int64 {
			require.NoError(t, conn.WriteJSON(f))
			b := drain(in)
			return b
		})
	}
	joinAmp := func(conn *websocket.Conn) {
		require.NoError(t, conn.WriteJSON(map[string]string{"type": "join", "lobby": "amp"}))
	}
	ref := strings.Repeat("r", 64)
	wr := func() string { return writer }
	newUser := func() string { fresh++; return c.session(n, fmt.Sprintf("fresh%d", fresh)) }
	frame("join", wr, map[string]any{"type": "join", "lobby": "amp", "ref": ref}, nil)
	frame("resume", wr, map[string]any{"type": "resume", "room": room, "after": "0-0", "ref": ref}, nil)
	frame("say", wr, map[string]any{"type": "say", "room": room, "text": strings.Repeat("\x01", 2000), "ref": ref}, joinAmp)
	frame("typing", wr, map[string]any{"type": "typing", "room": room, "ref": ref}, joinAmp)
	frame("read", wr, map[string]any{"type": "read", "room": room, "id": lastID, "ref": ref}, joinAmp)
	frame("leave", wr, map[string]any{"type": "leave", "room": room, "ref": ref}, joinAmp)
	frame("ping", wr, map[string]any{"type": "ping", "ref": ref}, nil)
	frame("rpc", wr, map[string]any{"type": "rpc", "method": strings.Repeat("m", 64), "data": map[string]string{"x": strings.Repeat("\x01", 2000)}, "ref": ref}, nil)
	frame("queue", newUser, map[string]any{"type": "queue", "queue": "quick", "skill": 1e9, "ref": ref}, nil)
	frame("dequeue", wr, map[string]any{"type": "dequeue", "queue": "quick", "ticket": strings.Repeat("t", 32), "ref": ref}, nil)
	// the party frames: a fresh leader invites a fresh guest; a fresh
	// invitee answers a fresh invitation
	frame("invite", func() string {
		newParty()
		return leader
	}, map[string]any{"type": "invite", "queue": "quick", "skill": 1e9, "party": []string{"guest-ws"}, "ref": ref}, func(*websocket.Conn) {
		st, p := send("GET", "/api/v1/poll?wait=0", c.session(n, "guest-ws"), nil, nil)
		require.Equal(t, 200, st, "%s", p)
	})
	for _, answer := range []string{"accept", "decline"} {
		answer := answer
		f := map[string]any{"type": answer, "queue": "quick", "ref": ref}
		frame(answer, func() string {
			newParty()
			st, p := invite()
			require.Equal(t, 200, st, "%s", p)
			require.NoError(t, json.Unmarshal(p, &tk))
			f["ticket"] = tk.Ticket.ID // the frame map is sent after this
			return invitee
		}, f, nil)
	}

	// the direct frames: a send echoes the message to the sender's own
	// connection; a resume after 0-0 replays the 1,000 kept
	dmOpen := map[string]any{"type": "dm_open", "ref": ref}
	frame("dm_open", func() string { opens++; dmOpen["to"] = fmt.Sprintf("peer%d", opens); return opener }, dmOpen, nil)
	frame("dm_send", wr, map[string]any{"type": "dm_send", "to": dmConv, "text": strings.Repeat("\x01", 2000), "ref": ref}, nil)
	frame("dm_typing", wr, map[string]any{"type": "dm_typing", "to": dmConv, "ref": ref}, nil)
	frame("dm_read", wr, map[string]any{"type": "dm_read", "to": dmConv, "id": dmLast, "ref": ref}, nil)
	frame("dm_resume", wr, map[string]any{"type": "dm_resume", "to": dmConv, "after": "0-0", "ref": ref}, nil)

	// remeasure measures what again while its least command count is
	// over budget, at most ampRetries times, and returns its figures.
	remeasure := func(what string, m [2]int64, budget int64) [2]int64 {
		for i := 0; i < ampRetries && m[1] > budget; i++ {
			t.Logf("%s: %d commands, over its %d: measured again", what, m[1], budget)
			mc := calls[what]
			measure(what, mc.setup, mc.call)
			m = measured[what]
		}
		return m
	}
	// every operation and frame measured, and within its cost
	for key, cost := range ops {
		m, ok := measured[key]
		if !assert.True(t, ok, "%s (%s): no worst case measured", key, ids[key]) || cost == nil {
			continue
		}
		m = remeasure(key, m, cost.MaxRedisCommands)
		t.Logf("%-52s %9d bytes (x-cost %9d) %5d commands (x-cost %5d)", key, m[0], cost.MaxResponseBytes, m[1], cost.MaxRedisCommands)
		assert.LessOrEqual(t, m[0], cost.MaxResponseBytes, "%s: answered more bytes than its x-cost.maxResponseBytes", key)
		assert.LessOrEqual(t, m[1], cost.MaxRedisCommands, "%s: caused more Redis commands than its x-cost.maxRedisCommands", key)
	}
	for _, typ := range frameTypes {
		m, ok := measured["frame "+typ]
		cost := frameCosts[typ]
		if !assert.True(t, ok, "client frame %s: no worst case measured", typ) || cost == nil {
			continue
		}
		m = remeasure("frame "+typ, m, cost.MaxRedisCommands)
		t.Logf("frame %-46s %9d bytes (x-cost %9d) %5d commands (x-cost %5d)", typ, m[0], cost.MaxResponseBytes, m[1], cost.MaxRedisCommands)
		assert.LessOrEqual(t, m[0], cost.MaxResponseBytes, "frame %s: answered more bytes than its x-cost.maxResponseBytes", typ)
		assert.LessOrEqual(t, m[1], cost.MaxRedisCommands, "frame %s: caused more Redis commands than its x-cost.maxRedisCommands", typ)
	}
	if os.Getenv("CHATD_AMP_PRINT") != "" {
		out, _ := json.Marshal(measured)
		t.Logf("measured: %s", out)
	}
}
