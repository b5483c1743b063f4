package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/hooks"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/wsclient"
	"github.com/chatd/chatd/protocol"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/realtime/app"
)

const (
	testSecret = "test-secret-0123456789abcdef0123"
	testAdmin  = "admin-token"
	// testAdminRead is the read-only admin token of every test node.
	testAdminRead = "admin-read-token"
)

// testNode is one chatd node running in the test process on its own Redis
// client and loopback listener.
type testNode struct {
	t    testing.TB
	srv  *Server
	node *app.App // the realtime core and the use cases srv serves
	url  string   // http://127.0.0.1:port
	rdb  redis.UniversalClient
	stop func()
}

// cluster is a set of nodes sharing one Redis and prefix.
type cluster struct {
	t     testing.TB
	r     *redistest.Redis
	nodes []*testNode
	http  *http.Client

	mu     sync.Mutex
	tokens map[string]string // user → first session token
}

type nodeOpts struct {
	configure func(*nodeConfig)
}

// nodeConfig is what a test may set of a node: the front's Config, and
// what the realtime core takes besides (Now, Node, Secret and Logger are
// the front's and the core's alike).
type nodeConfig struct {
	Config
	Redis           redis.UniversalClient
	Prefix          string
	MaxConnsPerUser int
	// Hooks, when set, are the node's hooks to the application's backend
	// (its Node, Redis, Prefix and Registerer are the node's).
	Hooks *hooks.Config
}

// composeNode builds a node as cmd/chatd does (cmd/chatd/compose, which
// this package's tests can not import): the realtime core and its use
// cases (realtime/app), started, then the front serving them. shutdown
// stops them in the reverse order: the front, draining the core's
// clients, then the use cases and the core.
func composeNode(t testing.TB, cfg nodeConfig) (srv *Server, core *app.App, shutdown func(context.Context) error) {
	t.Helper()
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry() // the core's and the front's
	}
	var hk *hooks.Hooks
	if cfg.Hooks != nil {
		hc := *cfg.Hooks
		hc.Node, hc.Redis, hc.Prefix, hc.Registerer = cfg.Node, cfg.Redis, cfg.Prefix, cfg.Registry
		var err error
		hk, err = hooks.New(hc)
		require.NoError(t, err)
	}
	core, err := app.New(realtime.Config{
		Redis: cfg.Redis, Node: cfg.Node, Prefix: cfg.Prefix, MatchRoomKey: cfg.Secret,
		MaxConnsPerUser: cfg.MaxConnsPerUser, Now: cfg.Now, Logger: cfg.Logger.With("node", cfg.Node), Registerer: cfg.Registry,
		Hooks: hk,
	})
	require.NoError(t, err)
	srv, err = New(UseCasesOf(core), cfg.Config)
	require.NoError(t, err)
	require.NoError(t, core.Start(context.Background()))
	return srv, core, func(ctx context.Context) error { return errors.Join(srv.Shutdown(ctx), core.Shutdown(ctx)) }
}

func newCluster(t testing.TB, r *redistest.Redis, n int, opts ...nodeOpts) *cluster {
	t.Helper()
	c := &cluster{t: t, r: r, http: &http.Client{Timeout: 40 * time.Second}}
	for i := 0; i < n; i++ {
		c.nodes = append(c.nodes, c.startNode(fmt.Sprintf("n%d", i+1), opts...))
	}
	return c
}

func (c *cluster) startNode(id string, opts ...nodeOpts) *testNode {
	t := c.t
	t.Helper()
	rdb := c.r.NewClient(t)
	level := slog.LevelWarn
	if os.Getenv("CHATD_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	cfg := nodeConfig{Redis: rdb, Prefix: c.r.Prefix, Config: Config{
		Node: id, Secret: []byte(testSecret), AdminToken: testAdmin, AdminReadToken: testAdminRead, ServerKeys: testServerKeys(),
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("test", t.Name()),
	}}
	for _, o := range opts {
		if o.configure != nil {
			o.configure(&cfg)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv, core, shutdown := composeNode(t, cfg)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	n := &testNode{t: t, srv: srv, node: core, url: "http://" + ln.Addr().String(), rdb: rdb}
	var once sync.Once
	n.stop = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = shutdown(ctx)
			<-done
		})
	}
	t.Cleanup(n.stop)
	return n
}

// do sends an HTTP request and decodes the JSON answer into out (if not nil).
func (c *cluster) do(n *testNode, method, path, token string, body any, out any) int {
	c.t.Helper()
	status, p := c.send(n, method, path, token, body, nil)
	if out != nil && len(p) > 0 {
		require.NoError(c.t, json.Unmarshal(p, out), "body: %s", p)
	}
	return status
}

// send sends an HTTP request with a bearer token (none: "") and the headers
// hdr, checks the answer against docs/openapi.json, and returns its status
// and body. A body is sent as it is (string, []byte) or as JSON.
func (c *cluster) send(n *testNode, method, path, token string, body any, hdr map[string]string) (int, []byte) {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		p, err := json.Marshal(b)
		require.NoError(c.t, err)
		rd = bytes.NewReader(p)
	}
	req, err := http.NewRequest(method, n.url+path, rd)
	require.NoError(c.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	p, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	validateHTTP(c.t, req, resp, p) // against docs/openapi.json (spec_test.go)
	return resp.StatusCode, p
}

func (c *cluster) session(n *testNode, user string) string {
	c.t.Helper()
	var out struct{ Token string }
	// a guest name is held by its first session: later sessions of the
	// same user show that one's token (a second device of the same guest)
	c.mu.Lock()
	prev := c.tokens[user]
	c.mu.Unlock()
	require.Equal(c.t, 200, c.do(n, "POST", "/api/v1/session", prev, map[string]string{"user": user}, &out))
	c.mu.Lock()
	if c.tokens == nil {
		c.tokens = map[string]string{}
	}
	if c.tokens[user] == "" {
		c.tokens[user] = out.Token
	}
	c.mu.Unlock()
	return out.Token
}

// wsClient is the web tests' WebSocket client: internal/wsclient (which
// reads, splits batches and decodes every event with the protocol
// package), with each event checked against docs/ws-frames.schema.json
// (validateFrame) and handed out as generic JSON for the tests that look
// at fields by name.
type wsClient struct {
	t      testing.TB
	user   string
	ws     *wsclient.Conn
	conn   *websocket.Conn // ws's socket, for tests that write raw frames on purpose
	frames chan map[string]any
	closed chan struct{} // the connection ended and every frame is in frames
}

func (c *cluster) dial(n *testNode, user string) *wsClient {
	c.t.Helper()
	tok := c.session(n, user)
	return dialToken(c.t, n, user, tok)
}

// openWS dials url with header and starts handing out its events; the
// response is the dialer's (nil error: already closed).
func openWS(t testing.TB, user, url string, header http.Header) (*wsClient, *http.Response, error) {
	ws, resp, err := wsclient.Dial(context.Background(), url, &wsclient.Options{Header: header, Check: validateFrame})
	if err != nil {
		return nil, resp, err
	}
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	w := &wsClient{t: t, user: user, ws: ws, conn: ws.WS(), frames: make(chan map[string]any, 10000), closed: make(chan struct{})}
	stop := make(chan struct{})
	go func() {
		defer close(w.closed)
		for ev := range ws.Events() {
			if m := ev.Map(); m != nil {
				select {
				case w.frames <- m:
				case <-stop:
					return
				}
			}
		}
	}()
	t.Cleanup(w.reportBadFrames) // runs after the close below
	t.Cleanup(func() {
		close(stop)
		_ = ws.Close()
	})
	return w, resp, nil
}

func dialToken(t testing.TB, n *testNode, user, tok string) *wsClient {
	t.Helper()
	w, _, err := openWS(t, user, wsURL(n, tok), nil)
	require.NoError(t, err)
	hello := w.next("hello")
	require.Equal(t, user, hello["user"])
	return w
}

func (w *wsClient) send(f protocol.ClientFrame) {
	w.t.Helper()
	require.NoError(w.t, w.ws.Send(f))
}

// sendJSON sends v as a frame as it is: for a frame the protocol refuses,
// or one a table builds for every frame type, on purpose.
func (w *wsClient) sendJSON(v any) {
	w.t.Helper()
	require.NoError(w.t, w.conn.WriteJSON(v))
}

// trySend sends v as JSON as it is (a flood's frames include types the
// protocol lacks, on purpose) and reports whether it could (false once the
// connection closed).
func (w *wsClient) trySend(v any) bool { return w.conn.WriteJSON(v) == nil }

// frameWait bounds every wait for a frame: generous, for -race on a
// loaded 2-core machine; only a lost frame takes that long.
const frameWait = 30 * time.Second

// next returns the next frame of type typ, skipping others; it fails after frameWait.
func (w *wsClient) next(typ string) map[string]any {
	w.t.Helper()
	deadline := time.After(frameWait)
	for {
		select {
		case f := <-w.frames:
			if f["type"] == typ {
				return f
			}
		case <-deadline:
			w.t.Fatalf("%s: no %q frame within %s", w.user, typ, frameWait)
			return nil
		}
	}
}

// nextOf returns the next frame whose type is one of types.
func (w *wsClient) nextOf(types ...string) map[string]any {
	w.t.Helper()
	deadline := time.After(frameWait)
	for {
		select {
		case f := <-w.frames:
			for _, typ := range types {
				if f["type"] == typ {
					return f
				}
			}
		case <-deadline:
			w.t.Fatalf("%s: no %v frame within %s", w.user, types, frameWait)
			return nil
		}
	}
}

// await returns the first frame of each of types, in whatever order they
// come (an ack and the echo of one's own message race each other); frames
// of other types are skipped.
func (w *wsClient) await(types ...string) map[string]map[string]any {
	w.t.Helper()
	got := map[string]map[string]any{}
	deadline := time.After(frameWait)
	for len(got) < len(types) {
		select {
		case f := <-w.frames:
			typ, _ := f["type"].(string)
			for _, want := range types {
				if typ == want && got[typ] == nil {
					got[typ] = f
				}
			}
		case <-deadline:
			w.t.Fatalf("%s: frames %v not all within %s; got %v", w.user, types, frameWait, got)
		}
	}
	return got
}

// join joins lobby and returns the room id, after the join history.
func (w *wsClient) join(lobby string) string {
	w.t.Helper()
	require.NoError(w.t, w.ws.Send(protocol.Join{Lobby: lobby}))
	f := w.next("joined")
	room := f["room"].(map[string]any)
	return room["id"].(string)
}

func (w *wsClient) closeCode() int { return w.ws.CloseCode() }

func msgOf(f map[string]any) (id, text string) {
	m, _ := f["message"].(map[string]any)
	id, _ = m["id"].(string)
	text, _ = m["text"].(string)
	return id, text
}

// settingsVersion is the settings version node n holds.
func settingsVersion(n *testNode) int64 {
	v, _ := n.srv.admin.admin.Settings()
	return v
}

// settingValue is a setting's value as a float on node n.
func settingValue(n *testNode, key string) float64 {
	_, vals := n.srv.admin.admin.Settings()
	switch v := vals[key].(type) {
	case int:
		return float64(v)
	case float64:
		return v
	}
	return -1
}
