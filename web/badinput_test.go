package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/wsclient"
	"github.com/chatd/chatd/protocol"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/settings"
)

// badNames are names no endpoint may turn into a Redis key: key and
// pattern injection, separators, unicode, the empty name, and one too long.
var badNames = []string{
	"a}{b", "{x}", "*", "x:y", "a b", "ü", "名前", "a/b", "a\\b", "a?b", "a[b]", "\x00",
	"a\nb", "%2A", strings.Repeat("a", 65), "a\u202eb",
}

// nested returns a JSON value nested depth levels deep, inside an object.
func nested(depth int) string {
	return `{"x":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
}

// badHTTP is one bad request and its documented answer.
type badHTTP struct {
	name   string
	method string
	path   string
	auth   string // "user", "admin", "" (none) or a raw header value
	body   string
	status int
	code   string // "" = success expected (status < 300)
}

func TestBadInputs(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	c := newCluster(t, r, 1, nodeOpts{configure: func(cfg *nodeConfig) { cfg.MaxConnsPerUser = 3 }})
	n := c.nodes[0]
	var tried atomic.Int64

	t.Run("http", func(t *testing.T) { tried.Add(int64(badHTTPInputs(t, c, n))) })
	t.Run("websocket frames", func(t *testing.T) { tried.Add(int64(badFrames(t, c, n))) })
	t.Run("websocket limits", func(t *testing.T) { tried.Add(int64(wsLimits(t, c, n))) })
	t.Run("origins", func(t *testing.T) { tried.Add(int64(badOrigins(t, c, n))) })
	t.Run("the same server still serves a normal join and say", func(t *testing.T) { stillServes(t, c, n) })
	t.Logf("%d bad inputs tried over HTTP and WebSocket", tried.Load())
}

func badHTTPInputs(t *testing.T, c *cluster, n *testNode) int {
	alice := c.session(n, "alice")
	var joined struct{ Room struct{ ID string } }
	require.Equal(t, 200, c.do(n, "POST", "/api/v1/lobbies/bad/join", alice, nil, &joined))
	room := joined.Room.ID
	require.Equal(t, 200, c.do(n, "POST", "/api/v1/lobbies/other/join", c.session(n, "olive"), nil, &joined))
	other := joined.Room.ID
	// Bad room names must not meet the rate limit first (see the report on
	// say's order of checks): many of these posts name a bad room.
	c.putSetting("rate.messages_per_second", 10000)
	defer c.resetSetting("rate.messages_per_second")
	require.Equal(t, 200, c.do(n, "POST", "/api/v1/shop/items", testAdmin, map[string]any{"item": "sword", "stock": 10, "price": 100}, nil))

	cases := []badHTTP{
		// session
		{"empty body", "POST", "/api/v1/session", "", "", 400, "bad_json"},
		{"blank body", "POST", "/api/v1/session", "", " \n\t ", 400, "bad_json"},
		{"truncated object", "POST", "/api/v1/session", "", `{"user":`, 400, "bad_json"},
		{"not JSON", "POST", "/api/v1/session", "", `user=alice`, 400, "bad_json"},
		{"an array", "POST", "/api/v1/session", "", `["alice"]`, 400, "bad_request"},
		{"a string", "POST", "/api/v1/session", "", `"alice"`, 400, "bad_request"},
		{"null", "POST", "/api/v1/session", "", `null`, 400, "bad_name"},
		{"user a number", "POST", "/api/v1/session", "", `{"user": 5}`, 400, "bad_request"},
		{"user an object", "POST", "/api/v1/session", "", `{"user": {"$ne": ""}}`, 400, "bad_request"},
		{"user NaN", "POST", "/api/v1/session", "", `{"user": NaN}`, 400, "bad_json"},
		{"two values", "POST", "/api/v1/session", "", `{"user":"a"}{"user":"b"}`, 400, "bad_json"},
		{"trailing garbage", "POST", "/api/v1/session", "", `{"user":"a"}x`, 400, "bad_json"},
		{"trailing bracket", "POST", "/api/v1/session", "", `{"user":"a"}]`, 400, "bad_json"},
		{"invalid UTF-8", "POST", "/api/v1/session", "", "{\"user\": \"\xff\xfe\"}", 400, "bad_name"},
		{"nesting 33 deep", "POST", "/api/v1/session", "", nested(33), 400, "bad_json"},
		{"nesting 10000 deep", "POST", "/api/v1/session", "", nested(10000), 400, "bad_json"},
		{"a huge user name", "POST", "/api/v1/session", "", `{"user":"` + strings.Repeat("a", 900_000) + `"}`, 400, "bad_name"},
		{"a huge number", "POST", "/api/v1/session", "", `{"user":1e999999}`, 400, "bad_request"},
		{"a huge number in an unknown field is ignored", "POST", "/api/v1/session", "", `{"user":"a","n":1e999999}`, 200, ""},
		// messages
		{"text a number", "POST", "/api/v1/rooms/" + room + "/messages", "user", `{"text": 5}`, 400, "bad_request"},
		{"text null", "POST", "/api/v1/rooms/" + room + "/messages", "user", `{"text": null}`, 400, "bad_request"},
		{"text empty", "POST", "/api/v1/rooms/" + room + "/messages", "user", `{"text": ""}`, 400, "bad_request"},
		{"text too long", "POST", "/api/v1/rooms/" + room + "/messages", "user", `{"text":"` + strings.Repeat("é", 2001) + `"}`, 400, "too_long"},
		{"text NaN", "POST", "/api/v1/rooms/" + room + "/messages", "user", `{"text": NaN}`, 400, "bad_json"},
		{"message to a room not held", "POST", "/api/v1/rooms/" + other + "/messages", "user", `{"text":"hi"}`, 403, "not_seated"},
		{"message to an unknown room", "POST", "/api/v1/rooms/bad-77/messages", "user", `{"text":"hi"}`, 404, "unknown_room"},
		{"history limit not a number", "GET", "/api/v1/rooms/" + room + "/messages?limit=abc", "user", "", 400, "bad_request"},
		{"history limit 0", "GET", "/api/v1/rooms/" + room + "/messages?limit=0", "user", "", 400, "bad_request"},
		{"history limit negative", "GET", "/api/v1/rooms/" + room + "/messages?limit=-5", "user", "", 400, "bad_request"},
		{"history limit huge", "GET", "/api/v1/rooms/" + room + "/messages?limit=99999999999999999999999", "user", "", 400, "bad_request"},
		{"history after garbage", "GET", "/api/v1/rooms/" + room + "/messages?after=x}{y", "user", "", 400, "bad_request"},
		{"history after NaN", "GET", "/api/v1/rooms/" + room + "/messages?after=NaN", "user", "", 400, "bad_request"},
		{"poll wait not a number", "GET", "/api/v1/poll?wait=soon", "user", "", 400, "bad_request"},
		{"poll wait negative", "GET", "/api/v1/poll?wait=-1", "user", "", 400, "bad_request"},
		{"poll wait huge", "GET", "/api/v1/poll?wait=1e99", "user", "", 400, "bad_request"},
		// leaderboards
		{"score NaN", "POST", "/api/v1/leaderboards/b/scores", "user", `{"player":"p","score":NaN}`, 400, "bad_json"},
		{"score Infinity", "POST", "/api/v1/leaderboards/b/scores", "user", `{"player":"p","score":Infinity}`, 400, "bad_json"},
		{"score the string NaN", "POST", "/api/v1/leaderboards/b/scores", "user", `{"player":"p","score":"NaN"}`, 400, "bad_value"},
		{"score a string", "POST", "/api/v1/leaderboards/b/scores", "user", `{"player":"p","score":"12"}`, 400, "bad_value"},
		{"score true", "POST", "/api/v1/leaderboards/b/scores", "user", `{"player":"p","score":true}`, 400, "bad_value"},
		{"score an array", "POST", "/api/v1/leaderboards/b/scores", "user", `{"player":"p","score":[1]}`, 400, "bad_value"},
		{"score an object", "POST", "/api/v1/leaderboards/b/scores", "user", `{"player":"p","score":{"$gt":1}}`, 400, "bad_value"},
		{"score null", "POST", "/api/v1/leaderboards/b/scores", "user", `{"player":"p","score":null}`, 400, "bad_value"},
		{"score 1e400", "POST", "/api/v1/leaderboards/b/scores", "user", `{"player":"p","score":1e400}`, 400, "bad_value"},
		{"score with 400 digits", "POST", "/api/v1/leaderboards/b/scores", "user", `{"player":"p","score":` + strings.Repeat("9", 400) + `}`, 400, "bad_value"},
		{"score missing", "POST", "/api/v1/leaderboards/b/scores", "user", `{"player":"p"}`, 400, "bad_request"},
		{"mode unknown", "POST", "/api/v1/leaderboards/b/scores", "user", `{"player":"p","score":1,"mode":"max"}`, 400, "bad_value"},
		{"mode a number", "POST", "/api/v1/leaderboards/b/scores", "user", `{"player":"p","score":1,"mode":1}`, 400, "bad_request"},
		{"player a number", "POST", "/api/v1/leaderboards/b/scores", "user", `{"player":1,"score":1}`, 400, "bad_request"},
		{"board period unknown", "POST", "/api/v1/leaderboards/b@monthly/scores", "user", `{"player":"p","score":1}`, 400, "bad_name"},
		{"top limit 0", "GET", "/api/v1/leaderboards/b/top?limit=0", "user", "", 400, "bad_request"},
		{"top limit 1001", "GET", "/api/v1/leaderboards/b/top?limit=1001", "user", "", 400, "bad_request"},
		{"top limit a float", "GET", "/api/v1/leaderboards/b/top?limit=1.5", "user", "", 400, "bad_request"},
		{"around radius negative", "GET", "/api/v1/leaderboards/b/around/p?radius=-1", "user", "", 400, "bad_request"},
		{"range min NaN", "GET", "/api/v1/leaderboards/b/range?min=NaN", "user", "", 400, "bad_value"},
		{"range max Inf", "GET", "/api/v1/leaderboards/b/range?max=Inf", "user", "", 400, "bad_value"},
		{"range min garbage", "GET", "/api/v1/leaderboards/b/range?min=1x", "user", "", 400, "bad_value"},
		{"ranks players a string", "POST", "/api/v1/leaderboards/b/ranks", "user", `{"players":"p"}`, 400, "bad_request"},
		{"ranks players numbers", "POST", "/api/v1/leaderboards/b/ranks", "user", `{"players":[1,2]}`, 400, "bad_request"},
		{"ranks too many players", "POST", "/api/v1/leaderboards/b/ranks", "user", `{"players":[` + strings.Repeat(`"p",`, 100_000) + `"p"]}`, 413, "too_large"},
		{"player unknown", "GET", "/api/v1/leaderboards/b/players/nobody", "user", "", 404, "unknown_player"},
		// seen
		{"seen items a string", "POST", "/api/v1/seen", "user", `{"items":"x"}`, 400, "bad_request"},
		{"seen items numbers", "POST", "/api/v1/seen", "user", `{"items":[1]}`, 400, "bad_request"},
		{"seen item empty", "POST", "/api/v1/seen", "user", `{"items":[""]}`, 400, "bad_value"},
		{"seen item huge", "POST", "/api/v1/seen/filter", "user", `{"items":["` + strings.Repeat("x", 100_000) + `"]}`, 400, "bad_value"},
		{"seen too many items", "POST", "/api/v1/seen", "user", `{"items":[` + strings.Repeat(`"i",`, 100_000) + `"i"]}`, 413, "too_large"},
		// shop and wallet
		{"buy qty 0", "POST", "/api/v1/shop/buy", "user", `{"item":"sword","qty":0}`, 400, "bad_value"},
		{"buy qty negative", "POST", "/api/v1/shop/buy", "user", `{"item":"sword","qty":-3}`, 400, "bad_value"},
		{"buy qty a fraction", "POST", "/api/v1/shop/buy", "user", `{"item":"sword","qty":1.5}`, 400, "bad_request"},
		{"buy qty beyond int64", "POST", "/api/v1/shop/buy", "user", `{"item":"sword","qty":1e30}`, 400, "bad_request"},
		{"buy qty a string", "POST", "/api/v1/shop/buy", "user", `{"item":"sword","qty":"1"}`, 400, "bad_request"},
		{"buy unknown item", "POST", "/api/v1/shop/buy", "user", `{"item":"axe"}`, 404, "unknown_item"},
		{"buy without funds", "POST", "/api/v1/shop/buy", "user", `{"item":"sword"}`, 409, "insufficient_funds"},
		{"stock negative", "POST", "/api/v1/shop/items", "admin", `{"item":"s","stock":-1,"price":1}`, 400, "bad_value"},
		{"stock price beyond int64", "POST", "/api/v1/shop/items", "admin", `{"item":"s","stock":1,"price":1e30}`, 400, "bad_request"},
		{"stock without price", "POST", "/api/v1/shop/items", "admin", `{"item":"s","stock":1}`, 400, "bad_request"},
		{"grant negative", "POST", "/api/v1/wallet/grant", "admin", `{"user":"alice","amount":-5}`, 400, "bad_value"},
		{"grant the largest int64", "POST", "/api/v1/wallet/grant", "admin", `{"user":"carol","amount":9223372036854775807}`, 400, "bad_value"},
		{"grant a fraction", "POST", "/api/v1/wallet/grant", "admin", `{"user":"alice","amount":0.5}`, 400, "bad_request"},
		// settings and notices
		{"setting unknown", "PUT", "/api/v1/settings/room.colour", "admin", `{"value":1}`, 400, "unknown_setting"},
		{"setting key injection", "PUT", "/api/v1/settings/a}{b", "admin", `{"value":1}`, 400, "unknown_setting"},
		{"setting wrong type", "PUT", "/api/v1/settings/room.capacity", "admin", `{"value":"50"}`, 400, "bad_value"},
		{"setting a fraction for an int", "PUT", "/api/v1/settings/room.capacity", "admin", `{"value":2.5}`, 400, "bad_value"},
		{"setting out of range", "PUT", "/api/v1/settings/room.capacity", "admin", `{"value":0}`, 400, "bad_value"},
		{"setting huge", "PUT", "/api/v1/settings/room.capacity", "admin", `{"value":1e400}`, 400, "bad_value"},
		{"setting NaN", "PUT", "/api/v1/settings/rate.messages_per_second", "admin", `{"value":NaN}`, 400, "bad_json"},
		{"setting rate 0", "PUT", "/api/v1/settings/rate.messages_per_second", "admin", `{"value":0}`, 400, "bad_value"},
		{"setting motd too long", "PUT", "/api/v1/settings/motd", "admin", `{"value":"` + strings.Repeat("m", 1001) + `"}`, 400, "bad_value"},
		{"setting without value", "PUT", "/api/v1/settings/motd", "admin", `{}`, 400, "bad_request"},
		{"setting value null", "PUT", "/api/v1/settings/motd", "admin", `{"value":null}`, 400, "bad_request"},
		{"setting reset unknown", "DELETE", "/api/v1/settings/nope", "admin", "", 400, "unknown_setting"},
		{"notice empty", "POST", "/api/v1/notices", "admin", `{"text":""}`, 400, "bad_value"},
		{"notice a number", "POST", "/api/v1/notices", "admin", `{"text":1}`, 400, "bad_request"},
		// routing and transport
		{"unknown endpoint", "GET", "/api/v1/nope", "user", "", 404, "not_found"},
		{"wrong method", "PUT", "/api/v1/session", "", "", 405, "method_not_allowed"},
		{"websocket endpoint without upgrade", "GET", "/ws", "", "", 426, "bad_request"},
		{"a huge header", "GET", "/api/v1/settings", "Bearer " + strings.Repeat("x", 16<<10), "", 431, "too_large"},
	}
	for _, name := range badNames {
		q := jsonString(name)
		p := pathEscape(name)
		cases = append(cases,
			badHTTP{"session user " + q, "POST", "/api/v1/session", "", `{"user":` + q + `}`, 400, "bad_name"},
			badHTTP{"join lobby " + q, "POST", "/api/v1/lobbies/" + p + "/join", "user", "", 400, "bad_name"},
			badHTTP{"rooms of lobby " + q, "GET", "/api/v1/lobbies/" + p + "/rooms", "user", "", 400, "bad_name"},
			badHTTP{"room " + q, "GET", "/api/v1/rooms/" + p + "-1", "user", "", 400, "bad_name"},
			badHTTP{"post to room " + q, "POST", "/api/v1/rooms/" + p + "-1/messages", "user", `{"text":"hi"}`, 400, "bad_name"},
			badHTTP{"history of room " + q, "GET", "/api/v1/rooms/" + p + "-1/messages", "user", "", 400, "bad_name"},
			badHTTP{"leave room " + q, "POST", "/api/v1/rooms/" + p + "-1/leave", "user", "", 400, "bad_name"},
			badHTTP{"presence of " + q, "GET", "/api/v1/presence/" + p, "user", "", 400, "bad_name"},
			badHTTP{"top of board " + q, "GET", "/api/v1/leaderboards/" + p + "/top", "user", "", 400, "bad_name"},
			badHTTP{"score on board " + q, "POST", "/api/v1/leaderboards/" + p + "/scores", "user", `{"player":"p","score":1}`, 400, "bad_name"},
			badHTTP{"score for player " + q, "POST", "/api/v1/leaderboards/b/scores", "user", `{"player":` + q + `,"score":1}`, 400, "bad_name"},
			badHTTP{"player " + q, "GET", "/api/v1/leaderboards/b/players/" + p, "user", "", 400, "bad_name"},
			badHTTP{"around " + q, "GET", "/api/v1/leaderboards/b/around/" + p, "user", "", 400, "bad_name"},
			badHTTP{"ranks of " + q, "POST", "/api/v1/leaderboards/b/ranks", "user", `{"players":[` + q + `]}`, 400, "bad_name"},
			badHTTP{"buy item " + q, "POST", "/api/v1/shop/buy", "user", `{"item":` + q + `}`, 400, "bad_name"},
			badHTTP{"stock item " + q, "POST", "/api/v1/shop/items", "admin", `{"item":` + q + `,"stock":1,"price":1}`, 400, "bad_name"},
			badHTTP{"grant to user " + q, "POST", "/api/v1/wallet/grant", "admin", `{"user":` + q + `,"amount":1}`, 400, "bad_name"},
		)
	}
	for _, bc := range cases {
		auth := bc.auth
		switch auth {
		case "user":
			auth = "Bearer " + alice
		case "admin":
			auth = "Bearer " + testAdmin
		}
		h := map[string]string{}
		if auth != "" {
			h["Authorization"] = auth
		}
		var body []byte
		if bc.body != "" {
			body = []byte(bc.body)
		}
		var out map[string]any
		st := c.doRaw(n, bc.method, bc.path, h, body, &out)
		if bc.code == "" {
			assert.Less(t, st, 300, "%s: %v", bc.name, out)
			continue
		}
		assertAPIError(t, bc.status, bc.code, st, out, bc.name)
	}
	// Bodies over 1 MiB: the server answers from the Content-Length alone
	// and closes, so a client still writing the body may see a reset; send
	// the head and a little of the body by hand.
	for _, path := range []string{"/api/v1/session", "/api/v1/rooms/" + room + "/messages", "/api/v1/seen"} {
		st, out := rawPost(t, n, path, "Bearer "+alice, 1<<20+1)
		assertAPIError(t, 413, "too_large", st, out, "body over 1 MiB to %s", path)
	}
	t.Logf("%d bad HTTP requests", len(cases)+3)
	return len(cases) + 3
}

// rawPost sends the head of a POST whose Content-Length is size, and the
// first bytes of its body, then reads the answer.
func rawPost(t testing.TB, n *testNode, path, auth string, size int) (int, map[string]any) {
	t.Helper()
	host := strings.TrimPrefix(n.url, "http://")
	conn, err := net.Dial("tcp", host)
	require.NoError(t, err)
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"user\":\"aaaa", path, host, auth, size)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

// badFrame is one bad client frame and the error code it must get back,
// with the connection left open.
type badFrame struct {
	name  string
	frame string
	code  string
	ref   string // echoed ref, if the frame carried one the server could read
}

func badFrames(t *testing.T, c *cluster, n *testNode) int {
	w := dialAs(t, c, n, "bob")
	room := w.join("frames")
	var joined struct{ Room struct{ ID string } }
	require.Equal(t, 200, c.do(n, "POST", "/api/v1/lobbies/wsother/join", c.session(n, "olive"), nil, &joined))
	other := joined.Room.ID
	c.putSetting("rate.messages_per_second", 10000) // see badHTTPInputs
	defer c.resetSetting("rate.messages_per_second")
	big := strings.Repeat("x", 60_000)
	frames := []badFrame{
		{"not JSON", `hello`, "bad_json", ""},
		{"truncated", `{"type":"say"`, "bad_json", ""},
		{"empty object", `{}`, "bad_request", ""},
		{"null", `null`, "bad_request", ""},
		{"an array", `[{"type":"ping"}]`, "bad_request", ""},
		{"a string", `"ping"`, "bad_request", ""},
		{"a number", `42`, "bad_request", ""},
		{"type a number", `{"type":5,"ref":"t1"}`, "bad_request", "t1"},
		{"type an object", `{"type":{"a":1},"ref":"t2"}`, "bad_request", "t2"},
		{"type unknown", `{"type":"dance","ref":"t3"}`, "unknown_type", "t3"},
		{"type huge", `{"type":"` + big + `","ref":"t4"}`, "unknown_type", "t4"},
		{"room a number", `{"type":"say","room":5,"text":"hi","ref":"t5"}`, "bad_request", "t5"},
		{"text an array", `{"type":"say","room":"` + room + `","text":["hi"],"ref":"t6"}`, "bad_request", "t6"},
		{"text NaN", `{"type":"say","room":"` + room + `","text":NaN,"ref":"t7"}`, "bad_json", ""},
		{"text empty", `{"type":"say","room":"` + room + `","text":"","ref":"t8"}`, "bad_request", "t8"},
		{"text too long", `{"type":"say","room":"` + room + `","text":"` + big + `","ref":"t9"}`, "too_long", "t9"},
		{"ref a number", `{"type":"say","room":"` + room + `","text":"hi","ref":7}`, "bad_request", ""},
		{"ref too long", `{"type":"ping","ref":"` + strings.Repeat("r", 65) + `"}`, "bad_request", ""},
		{"nesting 33 deep", `{"type":"ping","x":` + strings.Repeat("[", 32) + strings.Repeat("]", 32) + `}`, "bad_json", ""},
		{"nesting 5000 deep", `{"type":"ping","x":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}`, "bad_json", ""},
		{"two objects", `{"type":"ping"}{"type":"ping"}`, "bad_json", ""},
		{"invalid UTF-8", "{\"type\":\"say\",\"room\":\"" + room + "\",\"text\":\"\xff\xfe\",\"ref\":\"u\"}", "bad_json", ""},
		{"a huge number", `{"type":"say","room":"` + room + `","text":1e999999,"ref":"hn"}`, "bad_request", "hn"},
		{"say to a room not held", `{"type":"say","room":"` + other + `","text":"hi","ref":"t10"}`, "not_seated", "t10"},
		{"say to an unknown room", `{"type":"say","room":"frames-77","text":"hi","ref":"t10b"}`, "unknown_room", "t10b"},
		{"say without room", `{"type":"say","text":"hi","ref":"t11"}`, "bad_name", "t11"},
		{"join without lobby", `{"type":"join","ref":"t12"}`, "bad_name", "t12"},
		{"resume after garbage", `{"type":"resume","room":"` + room + `","after":"x}{y","ref":"t13"}`, "bad_request", "t13"},
	}
	for i, name := range badNames {
		q := jsonString(name)
		ref := fmt.Sprintf("n%d", i)
		frames = append(frames,
			badFrame{"join " + q, `{"type":"join","lobby":` + q + `,"ref":"` + ref + `j"}`, "bad_name", ref + "j"},
			badFrame{"say in " + q, `{"type":"say","room":` + jsonString(name+"-1") + `,"text":"hi","ref":"` + ref + `s"}`, "bad_name", ref + "s"},
			badFrame{"leave " + q, `{"type":"leave","room":` + jsonString(name+"-1") + `,"ref":"` + ref + `l"}`, "bad_name", ref + "l"},
			badFrame{"resume " + q, `{"type":"resume","room":` + jsonString(name+"-1") + `,"ref":"` + ref + `r"}`, "bad_name", ref + "r"},
		)
	}
	for _, bf := range frames {
		require.NoError(t, w.conn.WriteMessage(websocket.TextMessage, []byte(bf.frame)), bf.name)
		errs := w.errorsUntilPong()
		if !assert.Len(t, errs, 1, "%s: error frames before the pong", bf.name) {
			continue
		}
		e := errs[0]
		assert.Equal(t, bf.code, e["code"], bf.name)
		assert.NotEmpty(t, e["message"], bf.name)
		if bf.ref != "" {
			assert.Equal(t, bf.ref, e["ref"], "%s: ref echoed", bf.name)
		}
	}

	// binary frames are refused, the connection stays
	require.NoError(t, w.conn.WriteMessage(websocket.BinaryMessage, []byte(`{"type":"ping"}`)))
	errs := w.errorsUntilPong()
	if assert.Len(t, errs, 1, "binary frame") {
		assert.Equal(t, "bad_json", errs[0]["code"])
	}
	// a 64 KiB frame exactly is read (and refused for its content)
	at := `{"type":"say","room":"` + room + `","ref":"edge","text":"`
	edge := at + strings.Repeat("y", maxFrame-len(at)-2) + `"}`
	require.Len(t, edge, maxFrame)
	require.NoError(t, w.conn.WriteMessage(websocket.TextMessage, []byte(edge)))
	assert.Equal(t, "too_long", w.waitFor("error", "edge")["code"])

	w.send(protocol.Say{Room: room, Text: "still here", Ref: "ok"})
	w.waitFor("ack", "ok")
	n1 := len(frames) + 2
	t.Logf("%d bad WebSocket frames", n1)
	return n1
}

// errorsUntilPong sends a ping and returns the error frames that arrive
// before its pong: the answer to whatever was sent before the ping.
func (w *wsClient) errorsUntilPong() []map[string]any {
	w.t.Helper()
	w.send(protocol.Ping{})
	var errs []map[string]any
	for {
		f := w.nextOf("error", "pong")
		if f["type"] == "pong" {
			return errs
		}
		errs = append(errs, f)
	}
}

func wsLimits(t *testing.T, c *cluster, n *testNode) int {
	tried := 0

	t.Run("a frame over 64 KiB closes with 1009", func(t *testing.T) {
		for _, size := range []int{maxFrame + 1, 1 << 20} {
			tried++
			w := dialAs(t, c, n, "carol")
			// the server may close before a large frame is all written
			_ = w.conn.WriteMessage(websocket.TextMessage, []byte(`{"type":"ping","x":"`+strings.Repeat("z", size)+`"}`))
			w.waitClosed(t)
			assert.Equal(t, websocket.CloseMessageTooBig, w.closeCode(), "size %d", size)
		}
	})

	t.Run("a flood gets rate_limited with the ref, then close 1008", func(t *testing.T) {
		c.putSetting("rate.messages_per_second", 1)
		defer c.resetSetting("rate.messages_per_second")
		w := dialAs(t, c, n, "dave")
		room := w.join("flood")
		const sent = 40
		for i := 0; i < sent; i++ {
			// a failed write is the server closing: that is the point
			if w.conn.WriteMessage(websocket.TextMessage, []byte(fmt.Sprintf(`{"type":"say","room":%q,"text":"spam","ref":"f%d"}`, room, i))) != nil {
				break
			}
		}
		tried += sent
		limited, acked := 0, 0
		deadline := time.After(10 * time.Second)
	read:
		for {
			select {
			case f := <-w.frames:
				switch f["type"] {
				case "error":
					assert.Equal(t, "rate_limited", f["code"])
					assert.Regexp(t, `^f\d+$`, f["ref"], "the ref is echoed")
					limited++
				case "ack":
					acked++
				}
			case <-w.closed:
				break read
			case <-deadline:
				t.Fatal("the flooding connection was not closed")
			}
		}
		for len(w.frames) > 0 {
			switch f := <-w.frames; f["type"] {
			case "error":
				limited++
			case "ack":
				acked++
			}
		}
		assert.Equal(t, websocket.ClosePolicyViolation, w.closeCode())
		assert.Equal(t, realtime.AbuseLimit, limited, "closed after %d rate-limited frames in a row", realtime.AbuseLimit)
		// The burst got through: its says are stored. Their acks wait for
		// Redis while the refusals do not, so on a busy machine the close
		// can overtake them.
		var page struct {
			Messages []struct {
				From string `json:"from"`
			} `json:"messages"`
		}
		require.Equal(t, 200, c.do(n, "GET", "/api/v1/rooms/"+room+"/messages", c.session(n, "dave"), nil, &page))
		require.NotEmpty(t, page.Messages, "the burst got through (acked %d)", acked)
		assert.Equal(t, "dave", page.Messages[0].From)
	})

	t.Run("too many connections of one user are refused before the upgrade", func(t *testing.T) {
		tok := c.session(n, "erin")
		var ws []*wsClient
		for i := 0; i < 3; i++ {
			ws = append(ws, dialToken(t, n, "erin", tok))
		}
		tried++
		st, body := wsRefusal(t, n, tok, nil)
		assertAPIError(t, 429, "rate_limited", st, body)
		_ = ws[0].conn.Close()
		require.Eventually(t, func() bool {
			conn, resp, err := wsclient.Dial(context.Background(), wsURL(n, tok), nil)
			if resp != nil && resp.Body != nil {
				resp.Body.Close()
			}
			if err != nil {
				return false
			}
			_ = conn.Close()
			return true
		}, 10*time.Second, 20*time.Millisecond, "a slot frees when a connection closes")
	})

	t.Run("failed upgrades do not use up a user's connections", func(t *testing.T) {
		tok := c.session(n, "frank")
		for i := 0; i < 5; i++ {
			tried++
			st := rawUpgrade(t, n, "/ws?token="+tok, "Connection: Upgrade\r\nUpgrade: websocket\r\n")
			assert.Equal(t, 426, st, "an upgrade without Sec-WebSocket-Key is refused")
		}
		w := dialToken(t, n, "frank", tok)
		w.send(protocol.Ping{})
		w.next("pong")
	})
	return tried
}

func badOrigins(t *testing.T, c *cluster, n *testNode) int {
	tok := c.session(n, "grace")
	host := strings.TrimPrefix(n.url, "http://")
	_, port, _ := net.SplitHostPort(host)
	origin := func(o string) http.Header { return http.Header{"Origin": {o}} }
	tried := 0
	refused := []string{
		"http://evil.example", "https://evil.example:" + port, "http://localhost:" + port, "null", "",
		"http://127.0.0.1:1", "http://127.0.0.1", "file://", "http://127.0.0.1:" + port + ".evil.example",
		"http://evil.example/" + host, "http://" + host + "@evil.example", "javascript:alert(1)",
	}
	for _, o := range refused {
		if o == "" {
			continue
		}
		tried++
		st, body := wsRefusal(t, n, tok, origin(o))
		assertAPIError(t, 403, "forbidden", st, body, "Origin %q", o)
	}
	// This node allows 3 connections per user, and a close is cleaned up
	// on the server after the client's Close returns: wait for it.
	gone := func() {
		require.Eventually(t, func() bool { return n.node.Reads.Connections("grace") == 0 }, 10*time.Second, 5*time.Millisecond)
	}
	for _, o := range []string{"http://" + host, "https://" + host, "HTTP://" + strings.ToUpper(host)} {
		w := dialHeaders(t, n, "grace", tok, origin(o))
		_ = w.conn.Close()
	}
	gone()
	_ = dialHeaders(t, n, "grace", tok, nil).conn.Close() // no Origin: not a browser
	gone()

	t.Run("with an allow-list only listed origins", func(t *testing.T) {
		listed := newCluster(t, c.r, 1, nodeOpts{configure: func(cfg *nodeConfig) {
			cfg.AllowedOrigins = []string{"https://chat.example.com", "http://127.0.0.1:8443"}
		}}).nodes[0]
		lhost := strings.TrimPrefix(listed.url, "http://")
		for _, o := range []string{"http://" + lhost, "http://chat.example.com", "https://chat.example.com:444", "https://evil.example", "https://chat.example.com.evil.example"} {
			tried++
			st, body := wsRefusal(t, listed, tok, origin(o))
			assertAPIError(t, 403, "forbidden", st, body, "Origin %q", o)
		}
		for _, o := range []string{"https://chat.example.com", "http://127.0.0.1:8443"} {
			_ = dialHeaders(t, listed, "grace", tok, origin(o)).conn.Close()
		}
	})
	return tried
}

func stillServes(t *testing.T, c *cluster, n *testNode) {
	a := dialAs(t, c, n, "zed")
	room := a.join("after")
	b := dialAs(t, c, n, "yves")
	require.Equal(t, room, b.join("after"))
	a.send(protocol.Say{Room: room, Text: "all good", Ref: "z1"})
	id := a.waitFor("ack", "z1")["id"]
	for {
		gotID, text := msgOf(b.next("message"))
		if gotID == id {
			assert.Equal(t, "all good", text)
			break
		}
	}
	tok := c.session(n, "xena")
	var joined struct{ Room struct{ ID string } }
	require.Equal(t, 200, c.do(n, "POST", "/api/v1/lobbies/after/join", tok, nil, &joined))
	assert.Equal(t, room, joined.Room.ID)
	assert.Equal(t, 200, c.do(n, "POST", "/api/v1/rooms/"+room+"/messages", tok, map[string]string{"text": "and REST"}, nil))
	for {
		if _, text := msgOf(a.next("message")); text == "and REST" {
			break
		}
	}
}

// resetSetting puts a setting back to its default on every node.
func (c *cluster) resetSetting(key string) {
	c.t.Helper()
	var out struct{ Version int64 }
	require.Equal(c.t, 200, c.do(c.nodes[0], "DELETE", "/api/v1/settings/"+key, testAdmin, nil, &out))
	for _, n := range c.nodes {
		require.Eventually(c.t, func() bool { return settingsVersion(n) >= out.Version }, 5*time.Second, 5*time.Millisecond)
	}
}

// waitClosed waits until the server closed w.
func (w *wsClient) waitClosed(t testing.TB) {
	t.Helper()
	select {
	case <-w.closed:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the connection was not closed within 10s", w.user)
	}
}

// dialAs opens a WebSocket for a new session of user, failing t (not the
// cluster's test) on errors.
func dialAs(t testing.TB, c *cluster, n *testNode, user string) *wsClient {
	t.Helper()
	return dialToken(t, n, user, c.session(n, user))
}

func wsURL(n *testNode, tok string) string {
	return "ws" + strings.TrimPrefix(n.url, "http") + "/ws?token=" + tok
}

// dialHeaders dials with extra headers and expects the upgrade to succeed.
func dialHeaders(t testing.TB, n *testNode, user, tok string, h http.Header) *wsClient {
	t.Helper()
	w, resp, err := openWS(t, user, wsURL(n, tok), h)
	status, body := 0, ""
	if resp != nil {
		status = resp.StatusCode
		if err != nil && resp.Body != nil {
			p, _ := io.ReadAll(resp.Body)
			body = string(p)
			resp.Body.Close()
		}
	}
	require.NoError(t, err, "headers %v: status %d %s", h, status, body)
	return w
}

// rawUpgrade sends a hand-written GET with extra header lines and returns
// the status.
func rawUpgrade(t testing.TB, n *testNode, path, extra string) int {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(n.url, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", path, strings.TrimPrefix(n.url, "http://"), extra)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func jsonString(s string) string {
	p, _ := json.Marshal(s)
	return string(p)
}

// pathEscape escapes what a URL path can not carry raw; the rest goes as is,
// so the server sees "a}{b", "*" and "x:y" themselves.
func pathEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch <= ' ' || ch >= 0x7f || strings.IndexByte("/?#%\\", ch) >= 0 {
			fmt.Fprintf(&b, "%%%02X", ch)
			continue
		}
		b.WriteByte(ch)
	}
	return b.String()
}

// TestRequestStringsOutliveTheRequest: a value a handler takes from the
// request (a path parameter here) and keeps after answering must not change
// when the connection's buffer serves the next request. Fiber's strings
// point into that buffer unless the app is Immutable.
func TestRequestStringsOutliveTheRequest(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	c := newCluster(t, r, 1)
	n := c.nodes[0]
	// Whether the write's own apply keeps the handler's string depends on
	// when the change comes back over pub/sub: try a few times.
	for round := 0; round < 8; round++ {
		want := 500.0 + float64(round)
		require.Equal(t, 200, c.do(n, "PUT", "/api/v1/settings/rate.messages_per_second", testAdmin, map[string]any{"value": want}, nil))
		// reuse the keep-alive connection for requests that overwrite its buffer
		for i := 0; i < 5; i++ {
			for _, p := range []string{"/api/v1/session", "/api/v1/settings/sxxx.xxxxxxxxxxxxxxxxxxx", "/api/v1/lobbies/xxxxxxxxxxxxxxxxxxxxxxxxxxxxx/join"} {
				c.do(n, "POST", p, testAdmin, map[string]any{"user": "x"}, nil)
				c.do(n, "PUT", p, testAdmin, map[string]any{"value": 1}, nil)
			}
		}
		require.Eventually(t, func() bool { return settingValue(n, "rate.messages_per_second") == want }, 2*time.Second, 5*time.Millisecond,
			"round %d: the value set is lost from the node that set it", round)
		_, vals := n.srv.admin.admin.Settings()
		require.Len(t, vals, len(settings.Defs()), "settings keys: %v", vals)
	}
}

// TestRefusalsSpreadBeyondTheWindowDoNotAddUp: the close with 1008 is for
// realtime.AbuseLimit rate-limited frames within realtime.AbuseWindow; a
// client a little over its rate, whose refusals are spread out, stays
// connected.
func TestRefusalsSpreadBeyondTheWindowDoNotAddUp(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	var offset atomic.Int64
	base := time.Now()
	c := newCluster(t, r, 1, nodeOpts{configure: func(cfg *nodeConfig) {
		cfg.Now = func() time.Time { return base.Add(time.Since(base) + time.Duration(offset.Load())) }
	}})
	n := c.nodes[0]
	c.putSetting("rate.messages_per_second", 1)
	w := dialAs(t, c, n, "gina")
	room := w.join("abuse")
	for round := 0; round < 3; round++ {
		offset.Add(int64(realtime.AbuseWindow + time.Second)) // a token is back, the window moved on
		w.send(protocol.Say{Room: room, Text: "ok", Ref: fmt.Sprint("ok", round)})
		require.Equal(t, "ack", w.outcome(fmt.Sprint("ok", round))["type"], "round %d", round)
		for i := 0; i < realtime.AbuseLimit-1; i++ {
			ref := fmt.Sprintf("r%d-%d", round, i)
			w.send(protocol.Say{Room: room, Text: "too fast", Ref: ref})
			require.Equal(t, "rate_limited", w.outcome(ref)["code"], ref)
		}
	}
	w.send(protocol.Ping{})
	w.next("pong")
}

// TestPingsBetweenRefusalsDoNotResetTheCount: a ping every few frames used
// to reset the "refused frames in a row" count (2,000 frames, 1,885
// refusals, no close); refusals now count in a time window, whatever
// comes between them.
func TestPingsBetweenRefusalsDoNotResetTheCount(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	c := newCluster(t, r, 1)
	n := c.nodes[0]
	c.putSetting("rate.messages_per_second", 1)
	w := dialAs(t, c, n, "hank")
	room := w.join("dodge")
	for i := 0; i < 2000; i++ {
		// The server may close at any frame, a ping included: a write
		// after its close fails (a reset), which is the outcome sought.
		var f protocol.ClientFrame = protocol.Say{Room: room, Text: "spam", Ref: fmt.Sprint("s", i)}
		if i%19 == 18 {
			f = protocol.Ping{}
		}
		if !w.trySend(f) {
			break // closed
		}
	}
	limited := 0
	deadline := time.After(10 * time.Second)
read:
	for {
		select {
		case f := <-w.frames:
			if f["type"] == "error" && f["code"] == "rate_limited" {
				limited++
			}
		case <-w.closed:
			break read
		case <-deadline:
			t.Fatal("the dodging connection was not closed")
		}
	}
	assert.Equal(t, websocket.ClosePolicyViolation, w.closeCode())
	assert.LessOrEqual(t, limited, realtime.AbuseLimit, "closed at the %d-th refusal", realtime.AbuseLimit)
}
