package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/docs"
	"github.com/chatd/chatd/internal/redistest"
)

// The contract of docs/ checked against the running server: every HTTP
// exchange against docs/openapi.json (kin-openapi's openapi3filter) and
// every WebSocket frame against docs/ws-frames.schema.json (JSON Schema
// 2020-12). The harness calls validateHTTP and validateFrame on every
// request and frame of the whole web test suite; the tests below run a
// request of every operation and a scripted WebSocket session.

// spec is docs/openapi.json and docs/ws-frames.schema.json, loaded once.
type spec struct {
	doc          *openapi3.T
	router       routers.Router
	clientFrame  *jsonschema.Schema
	serverEvent  *jsonschema.Schema
	streamEvent  *jsonschema.Schema // an event stream record's data
	closeCodes   map[int]bool
	errorCodes   map[string]bool
	operationIDs map[string]string // "GET /api/v1/rooms/{room}" → operationId
}

var (
	specOnce   sync.Once
	loadedSpec *spec
	specErr    error
)

const wsSchemaID = "https://github.com/chatd/chatd/docs/ws-frames.schema.json"

func loadSpec() (*spec, error) {
	specOnce.Do(func() { loadedSpec, specErr = newSpec() })
	return loadedSpec, specErr
}

func newSpec() (*spec, error) {
	// The browser client is text/html: read as a plain string.
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
	// The event stream is text: its head is checked as a string (its
	// records against ws-frames.schema.json, sse_test.go).
	openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.PlainBodyDecoder)
	// The SDK's modules (GET /sdk/{file}) are text/javascript: a string too.
	openapi3filter.RegisterBodyDecoder("text/javascript", openapi3filter.PlainBodyDecoder)
	doc, err := openapi3.NewLoader().LoadFromData(docs.OpenAPI)
	if err != nil {
		return nil, fmt.Errorf("load docs/openapi.json: %w", err)
	}
	// Route by path alone: the test nodes listen on random loopback ports,
	// not on the document's example server.
	doc.Servers = nil
	router, err := legacy.NewRouter(doc) // validates the document first
	if err != nil {
		return nil, fmt.Errorf("docs/openapi.json: %w", err)
	}
	s := &spec{doc: doc, router: router, closeCodes: map[int]bool{}, errorCodes: map[string]bool{}, operationIDs: map[string]string{}}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			s.operationIDs[method+" "+path] = op.OperationID
		}
	}
	for _, c := range doc.Components.Schemas["ErrorCode"].Value.Enum {
		s.errorCodes[c.(string)] = true
	}

	c := jsonschema.NewCompiler()
	c.AssertFormat()
	ws, err := jsonschema.UnmarshalJSON(bytes.NewReader(docs.WSFrames))
	if err != nil {
		return nil, fmt.Errorf("docs/ws-frames.schema.json: %w", err)
	}
	if err := c.AddResource(wsSchemaID, ws); err != nil {
		return nil, err
	}
	if s.clientFrame, err = c.Compile(wsSchemaID + "#/$defs/ClientFrame"); err != nil {
		return nil, err
	}
	if s.serverEvent, err = c.Compile(wsSchemaID + "#/$defs/ServerEvent"); err != nil {
		return nil, err
	}
	if s.streamEvent, err = c.Compile(wsSchemaID + "#/$defs/StreamEvent"); err != nil {
		return nil, err
	}
	var raw struct {
		Defs struct {
			CloseCode struct {
				Enum []int `json:"enum"`
			} `json:"CloseCode"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(docs.WSFrames, &raw); err != nil {
		return nil, err
	}
	for _, code := range raw.Defs.CloseCode.Enum {
		s.closeCodes[code] = true
	}
	return s, nil
}

func mustSpec(t testing.TB) *spec {
	t.Helper()
	s, err := loadSpec()
	require.NoError(t, err)
	return s
}

// specAuth checks that a request carries the credential its operation's
// security scheme names: a JWT-shaped bearer token for userToken, the admin
// token for adminToken, a token query parameter for wsToken.
func specAuth(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	r := in.RequestValidationInput.Request
	h := r.Header.Get("Authorization")
	tok, isBearer := strings.CutPrefix(h, "Bearer ")
	switch in.SecuritySchemeName {
	case "userToken":
		if !isBearer || strings.Count(tok, ".") != 2 {
			return errors.New("no user token (Authorization: Bearer <JWT>)")
		}
	case "adminToken":
		if !isBearer || tok != testAdmin {
			return errors.New("no admin token")
		}
	case "adminReadToken":
		if !isBearer || tok != testAdminRead {
			return errors.New("no read-only admin token")
		}
	case "serverKey":
		if !isBearer || !strings.HasPrefix(tok, "key-") {
			return errors.New("no server API key")
		}
	case "wsToken":
		if r.URL.Query().Get("token") == "" {
			return errors.New("no token query parameter")
		}
	default:
		return fmt.Errorf("unknown security scheme %q", in.SecuritySchemeName)
	}
	return nil
}

// exchange is one HTTP request and its answer, as a client saw them.
type exchange struct {
	method  string
	url     *url.URL
	header  http.Header
	body    []byte // request body
	status  int
	rheader http.Header
	rbody   []byte
}

// check validates an exchange against docs/openapi.json and returns the
// operation ("GET /api/v1/rooms/{room}") it matched. The answer must be
// one the operation documents, status included; an error answer's code
// must be in ErrorCode. With strictRequest the request must conform too;
// without it, only requests the server accepted (2xx) are checked, since
// tests send malformed requests on purpose.
func (s *spec) check(x exchange, strictRequest bool) (string, error) {
	req, err := http.NewRequest(x.method, x.url.String(), bytes.NewReader(x.body))
	if err != nil {
		return "", err
	}
	req.Header = x.header.Clone()
	route, params, err := s.router.FindRoute(req)
	if err != nil {
		var re *routers.RouteError
		if errors.As(err, &re) && !strictRequest && (x.status == http.StatusNotFound || x.status == http.StatusMethodNotAllowed) {
			return "", s.checkErrorBody(x)
		}
		return "", fmt.Errorf("%s %s (answered %d): not in docs/openapi.json: %w", x.method, x.url.Path, x.status, err)
	}
	op := route.Method + " " + route.Path
	opts := &openapi3filter.Options{AuthenticationFunc: specAuth, MultiError: true, IncludeResponseStatus: true}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	if strictRequest || (x.status >= 200 && x.status < 300) {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			return op, fmt.Errorf("%s: request %s %s %s (answered %d) does not conform: %w", op, x.method, x.url.RequestURI(), clipText(string(x.body), 200), x.status, err)
		}
		// ValidateRequest consumed the body: the answer's check reads none
	}
	if x.status == http.StatusRequestHeaderFieldsTooLarge || x.status == http.StatusRequestTimeout {
		// transport-level refusals any route may answer (PROTOCOL.md, Conventions)
		return op, s.checkErrorBody(x)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: x.status, Header: x.rheader, Options: opts}
	out.SetBodyBytes(x.rbody)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		return op, fmt.Errorf("%s: answer %d %s does not conform: %w", op, x.status, clipText(string(x.rbody), 300), err)
	}
	if x.status >= 400 {
		return op, s.checkErrorBody(x)
	}
	return op, nil
}

// checkRequest validates only the request of x.
func (s *spec) checkRequest(x exchange) (string, *routers.Route, error) {
	req, err := http.NewRequest(x.method, x.url.String(), bytes.NewReader(x.body))
	if err != nil {
		return "", nil, err
	}
	req.Header = x.header.Clone()
	route, params, err := s.router.FindRoute(req)
	if err != nil {
		return "", nil, err
	}
	opts := &openapi3filter.Options{AuthenticationFunc: specAuth, MultiError: true}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	return route.Method + " " + route.Path, route, openapi3filter.ValidateRequest(context.Background(), in)
}

// checkErrorBody: an error answer is the error shape with a documented code.
func (s *spec) checkErrorBody(x exchange) error {
	var e struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(x.rbody, &e); err != nil || e.Error == nil || e.Error.Message == "" {
		return fmt.Errorf("%s %s answered %d without the error shape: %s", x.method, x.url.Path, x.status, clipText(string(x.rbody), 200))
	}
	if !s.errorCodes[e.Error.Code] {
		return fmt.Errorf("%s %s answered %d with code %q, which ErrorCode does not list", x.method, x.url.Path, x.status, e.Error.Code)
	}
	return nil
}

// validateHTTP is the harness's hook (cluster.do): every request of the web
// tests and its answer are checked against docs/openapi.json.
func validateHTTP(t testing.TB, req *http.Request, resp *http.Response, body []byte) {
	t.Helper()
	s := mustSpec(t)
	var reqBody []byte
	if req.GetBody != nil {
		rc, err := req.GetBody()
		require.NoError(t, err)
		reqBody, err = io.ReadAll(rc)
		require.NoError(t, err)
	}
	_, err := s.check(exchange{method: req.Method, url: req.URL, header: req.Header, body: reqBody,
		status: resp.StatusCode, rheader: resp.Header, rbody: body}, false)
	assert.NoError(t, err, "docs/openapi.json and the server disagree")
}

// reportBadFrames fails the test for every frame a harness client received
// that docs/ws-frames.schema.json refuses.
func (w *wsClient) reportBadFrames() {
	for _, e := range w.ws.Bad() {
		w.t.Errorf("%s: %s", w.user, e)
	}
}

// validateFrame is the harness's hook (the test WebSocket client): every
// server frame the web tests receive is checked against
// docs/ws-frames.schema.json, each line of it on a batched connection.
func validateFrame(frame []byte) error {
	s, err := loadSpec()
	if err != nil {
		return err
	}
	for _, line := range bytes.Split(frame, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := s.validateEvent(line); err != nil {
			return err
		}
	}
	return nil
}

func (s *spec) validateEvent(p []byte) error {
	return validateWith(s.serverEvent, p, "server event")
}

func (s *spec) validateClientFrame(p []byte) error {
	return validateWith(s.clientFrame, p, "client frame")
}

func validateWith(sch *jsonschema.Schema, p []byte, what string) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(p))
	if err != nil {
		return fmt.Errorf("%s %s is not JSON: %w", what, clipText(string(p), 200), err)
	}
	if err := sch.Validate(inst); err != nil {
		return fmt.Errorf("%s %s does not conform to docs/ws-frames.schema.json: %w", what, clipText(string(p), 300), err)
	}
	return nil
}

// specClient sends requests to one node and checks each exchange strictly.
type specClient struct {
	t       *testing.T
	s       *spec
	n       *testNode
	http    *http.Client
	covered map[string]map[int]bool // operation → statuses seen
}

type call struct {
	method, path, token string
	body                any
	header              map[string]string
	status              int    // expected
	code                string // expected error code, for status >= 400
	// invalid: the request breaks the document on purpose; the document
	// must refuse it too (what the server refuses, the spec refuses).
	invalid bool
	// eventually: the status may take a pub/sub hop to hold (a mute or ban
	// reaches the node's cache over the bus); retry for up to frameWait.
	eventually bool
}

// do runs one call, checks it against the contract and the expected status
// and code, and returns the answer body.
func (c *specClient) do(k call) []byte {
	c.t.Helper()
	if k.eventually {
		deadline := time.Now().Add(frameWait)
		for c.send(k).StatusCode != k.status && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	return c.checked(k)
}

func (c *specClient) send(k call) *http.Response {
	c.t.Helper()
	req, _ := c.request(k)
	resp, err := c.http.Do(req)
	require.NoError(c.t, err)
	resp.Body.Close()
	return resp
}

func (c *specClient) request(k call) (*http.Request, []byte) {
	c.t.Helper()
	var body []byte
	switch b := k.body.(type) {
	case nil:
	case string:
		body = []byte(b)
	default:
		var err error
		body, err = json.Marshal(b)
		require.NoError(c.t, err)
	}
	req, err := http.NewRequest(k.method, c.n.url+k.path, bytes.NewReader(body))
	require.NoError(c.t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if k.token != "" {
		req.Header.Set("Authorization", "Bearer "+k.token)
	}
	for h, v := range k.header {
		req.Header.Set(h, v)
	}
	return req, body
}

func (c *specClient) checked(k call) []byte {
	c.t.Helper()
	req, body := c.request(k)
	resp, err := c.http.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	rbody, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	require.Equal(c.t, k.status, resp.StatusCode, "%s %s: %s", k.method, k.path, rbody)
	x := exchange{method: k.method, url: req.URL, header: req.Header, body: body, status: resp.StatusCode, rheader: resp.Header, rbody: rbody}
	op, err := c.s.check(x, !k.invalid)
	assert.NoError(c.t, err)
	if k.invalid {
		_, _, err := c.s.checkRequest(x)
		assert.Error(c.t, err, "%s %s %s: the server refuses it, docs/openapi.json should too", k.method, k.path, body)
	}
	if k.code != "" {
		var e struct{ Error APIError }
		require.NoError(c.t, json.Unmarshal(rbody, &e), "%s", rbody)
		assert.Equal(c.t, k.code, e.Error.Code, "%s %s: %s", k.method, k.path, e.Error.Message)
	}
	if op != "" {
		if c.covered[op] == nil {
			c.covered[op] = map[int]bool{}
		}
		c.covered[op][resp.StatusCode] = true
	}
	return rbody
}

// streamHead opens GET /api/v1/events, reads the stream up to its hello
// record, hangs up, and checks the exchange (the body being what was read)
// against the document.
func (c *specClient) streamHead(tok string) {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := c.request(call{method: "GET", path: "/api/v1/events", token: tok})
	req = req.WithContext(ctx)
	resp, err := c.http.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	require.Equal(c.t, http.StatusOK, resp.StatusCode)
	var head []byte
	buf := make([]byte, 4096)
	for !bytes.Contains(head, []byte(`"type":"hello"`)) || !bytes.Contains(head, []byte("\n\n")) {
		n, err := resp.Body.Read(buf)
		head = append(head, buf[:n]...)
		require.NoError(c.t, err, "the stream ended before its hello: %s", head)
	}
	x := exchange{method: "GET", url: req.URL, header: req.Header, status: resp.StatusCode, rheader: resp.Header, rbody: head}
	op, err := c.s.check(x, true)
	assert.NoError(c.t, err)
	require.Equal(c.t, "GET /api/v1/events", op)
	if c.covered[op] == nil {
		c.covered[op] = map[int]bool{}
	}
	c.covered[op][resp.StatusCode] = true
}

func (c *specClient) json(k call, out any) {
	c.t.Helper()
	require.NoError(c.t, json.Unmarshal(c.do(k), out))
}

// TestSpecServed: GET /api/v1/openapi.json is the embedded document, open
// to anyone, cacheable and revalidated by ETag.
func TestSpecServed(t *testing.T) {
	t.Parallel()
	c := newCluster(t, redistest.Real(t), 1)
	n := c.nodes[0]
	resp, err := http.Get(n.url + "/api/v1/openapi.json")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, docs.OpenAPI, body)
	assert.Contains(t, resp.Header.Get("Content-Type"), "application/json")
	assert.Contains(t, resp.Header.Get("Cache-Control"), "max-age=")
	etag := resp.Header.Get("ETag")
	require.NotEmpty(t, etag)

	req, _ := http.NewRequest("GET", n.url+"/api/v1/openapi.json", nil)
	req.Header.Set("If-None-Match", etag)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotModified, resp.StatusCode)
	assert.Empty(t, body)

	req.Header.Set("If-None-Match", `"stale"`)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
}

// TestSpecOpenAPIEveryOperation sends a representative request of every
// operation of docs/openapi.json (and the documented refusals that a
// client must handle) to a real node, and validates each request and
// answer with openapi3filter. It fails on a mismatch, and on an operation
// of the document that no request reached.
func TestSpecOpenAPIEveryOperation(t *testing.T) {
	t.Parallel()
	s := mustSpec(t)
	cl := newCluster(t, redistest.Real(t), 1)
	c := &specClient{t: t, s: s, n: cl.nodes[0], http: cl.http, covered: map[string]map[int]bool{}}
	var tok struct{ Token string }

	// operations and the browser client
	c.do(call{method: "GET", path: "/healthz", status: 200})
	c.do(call{method: "GET", path: "/readyz", status: 200})
	c.do(call{method: "GET", path: "/metrics", status: 200})
	c.do(call{method: "GET", path: "/", status: 200})
	c.do(call{method: "GET", path: "/admin", status: 200})
	c.do(call{method: "GET", path: "/api", status: 200})
	c.do(call{method: "GET", path: "/sdk/index.js", status: 200})
	c.do(call{method: "GET", path: "/sdk/nope.js", status: 404, code: "not_found"})
	c.do(call{method: "GET", path: "/api/v1/openapi.json", status: 200})
	c.do(call{method: "GET", path: "/api/v1/ws-frames.schema.json", status: 200})
	c.do(call{method: "GET", path: "/ws", status: 426, code: "bad_request", invalid: true})

	// guest sessions: a claimed name, a second device, sign-out
	c.json(call{method: "POST", path: "/api/v1/session", body: map[string]string{"user": "alice"}, status: 200}, &tok)
	alice := tok.Token
	c.do(call{method: "POST", path: "/api/v1/session", body: map[string]string{"user": "alice"}, status: 409, code: "name_taken"})
	c.json(call{method: "POST", path: "/api/v1/session", token: alice, body: map[string]string{"user": "alice"}, status: 200}, &tok)
	alice2 := tok.Token
	c.do(call{method: "POST", path: "/api/v1/session", body: map[string]string{"user": "no spaces"}, status: 400, code: "bad_name", invalid: true})
	c.json(call{method: "POST", path: "/api/v1/session", body: map[string]string{"user": "bob"}, status: 200}, &tok)
	bob := tok.Token
	c.json(call{method: "POST", path: "/api/v1/session", body: map[string]string{"user": "carol"}, status: 200}, &tok)
	carol := tok.Token

	// rooms and messages
	var joined struct{ Room struct{ ID string } }
	c.json(call{method: "POST", path: "/api/v1/lobbies/spec/join", token: alice, status: 200}, &joined)
	room := joined.Room.ID
	c.do(call{method: "POST", path: "/api/v1/lobbies/spec/join", token: bob, status: 200})
	c.do(call{method: "GET", path: "/api/v1/lobbies?limit=10", token: alice, status: 200})
	c.do(call{method: "GET", path: "/api/v1/lobbies/spec/rooms", token: alice, status: 200})
	c.do(call{method: "GET", path: "/api/v1/rooms/" + room, token: alice, status: 200})
	c.do(call{method: "GET", path: "/api/v1/rooms/spec-999", token: alice, status: 404, code: "unknown_room"})
	var posted struct{ Message struct{ ID string } }
	c.json(call{method: "POST", path: "/api/v1/rooms/" + room + "/messages", token: alice, body: map[string]string{"text": "hi"}, status: 200}, &posted)
	first := posted.Message.ID
	c.json(call{method: "POST", path: "/api/v1/rooms/" + room + "/messages", token: bob, body: map[string]string{"text": "hello"}, status: 200}, &posted)
	c.do(call{method: "POST", path: "/api/v1/rooms/" + room + "/messages", token: carol, body: map[string]string{"text": "x"}, status: 403, code: "not_seated"})
	c.do(call{method: "GET", path: "/api/v1/rooms/" + room + "/messages?limit=10", token: alice, status: 200})
	c.do(call{method: "GET", path: "/api/v1/rooms/" + room + "/messages?after=" + first, token: alice, status: 200})
	c.do(call{method: "POST", path: "/api/v1/rooms/" + room + "/read", token: bob, body: map[string]string{"id": first}, status: 200})
	c.do(call{method: "POST", path: "/api/v1/rooms/" + room + "/typing", token: bob, status: 200})
	c.do(call{method: "POST", path: "/api/v1/rooms/" + room + "/typing", token: carol, status: 403, code: "not_seated"})
	var unread struct{ Rooms map[string]int }
	c.json(call{method: "GET", path: "/api/v1/unread", token: bob, status: 200}, &unread)
	c.do(call{method: "POST", path: "/api/v1/rpc/roll", token: bob, body: map[string]int{"sides": 6}, status: 404, code: "not_found"})
	assert.Equal(t, 1, unread.Rooms[room], "bob read up to the first of two messages")

	// presence, nodes, stats
	c.do(call{method: "GET", path: "/api/v1/presence/alice", token: bob, status: 200})
	c.do(call{method: "GET", path: "/api/v1/presence/nobody", token: bob, status: 200})
	c.do(call{method: "GET", path: "/api/v1/nodes", token: testAdmin, status: 200})
	c.do(call{method: "GET", path: "/api/v1/stats", token: bob, status: 200})

	// the admin console: reads with either admin token, actions with the
	// full one only
	c.do(call{method: "GET", path: "/api/v1/admin/whoami", token: testAdmin, status: 200})
	c.do(call{method: "GET", path: "/api/v1/admin/whoami", token: testAdminRead, status: 200})
	c.do(call{method: "GET", path: "/api/v1/admin/whoami", token: alice, status: 403, code: "forbidden", invalid: true})
	c.do(call{method: "GET", path: "/api/v1/nodes", token: testAdminRead, status: 200})
	c.do(call{method: "GET", path: "/api/v1/admin/rooms?limit=5", token: testAdminRead, status: 200})
	c.do(call{method: "GET", path: "/api/v1/admin/rooms?limit=0", token: testAdmin, status: 400, code: "bad_request", invalid: true})
	c.do(call{method: "GET", path: "/api/v1/admin/rooms/" + room + "?limit=5", token: testAdmin, status: 200})
	c.do(call{method: "GET", path: "/api/v1/admin/rooms/spec-999", token: testAdminRead, status: 404, code: "unknown_room"})
	c.do(call{method: "POST", path: "/api/v1/admin/rooms/" + room + "/messages", token: testAdmin, body: map[string]string{"text": "from the system"}, status: 200})
	c.do(call{method: "POST", path: "/api/v1/admin/rooms/" + room + "/messages", token: testAdminRead, body: map[string]string{"text": "no"}, status: 403, code: "forbidden", invalid: true})
	c.do(call{method: "POST", path: "/api/v1/admin/rooms/spec-999/messages", token: testAdmin, body: map[string]string{"text": "anyone?"}, status: 404, code: "unknown_room"})
	c.do(call{method: "GET", path: "/api/v1/admin/users?prefix=AL&limit=5", token: testAdminRead, status: 200})
	c.do(call{method: "GET", path: "/api/v1/admin/users?prefix=a*", token: testAdmin, status: 400, code: "bad_name", invalid: true})
	c.do(call{method: "POST", path: "/api/v1/admin/disconnect", token: testAdmin, body: map[string]string{"user": "carol", "reason": "testing"}, status: 200})
	c.do(call{method: "POST", path: "/api/v1/admin/disconnect", token: testAdmin, body: map[string]string{"user": "carol", "connection": "ws:n1:x:1"}, status: 400, code: "bad_request"})
	c.do(call{method: "POST", path: "/api/v1/admin/disconnect", token: testAdminRead, body: map[string]string{"user": "carol"}, status: 403, code: "forbidden", invalid: true})

	// the server API, with a key of every scope, one of too few, none
	srvRoom := "/api/v1/server/rooms/" + room + "/messages"
	c.do(call{method: "POST", path: srvRoom, token: testKeyAll, body: map[string]string{"text": "from the backend"}, header: map[string]string{"Idempotency-Key": "spec-1"}, status: 200})
	c.do(call{method: "POST", path: srvRoom, token: testKeyAll, body: map[string]string{"text": "as alice", "user": "alice"}, status: 200})
	c.do(call{method: "POST", path: srvRoom, token: testKeyAll, body: map[string]string{"text": ""}, status: 400, code: "bad_request", invalid: true})
	c.do(call{method: "POST", path: "/api/v1/server/rooms/spec-99/messages", token: testKeyAll, body: map[string]string{"text": "x"}, status: 404, code: "unknown_room"})
	c.do(call{method: "POST", path: srvRoom, token: testKeyPresence, body: map[string]string{"text": "x"}, status: 403, code: "forbidden"})
	c.do(call{method: "POST", path: srvRoom, body: map[string]string{"text": "x"}, status: 401, code: "bad_token", invalid: true})
	c.do(call{method: "POST", path: srvRoom, token: testKeySlow, body: map[string]string{"text": "x"}, status: 200})
	c.do(call{method: "POST", path: srvRoom, token: testKeySlow, body: map[string]string{"text": "y"}, status: 429, code: "rate_limited"})
	c.do(call{method: "POST", path: "/api/v1/server/lobbies/spec/messages", token: testKeyAll, body: map[string]string{"text": "to all"}, header: map[string]string{"Idempotency-Key": "spec-2"}, status: 200})
	c.do(call{method: "POST", path: "/api/v1/server/lobbies/nolobby/messages", token: testKeyAll, body: map[string]string{"text": "to all"}, status: 404, code: "not_found"})
	c.do(call{method: "GET", path: "/api/v1/server/presence/alice", token: testKeyAll, status: 200})
	c.do(call{method: "POST", path: "/api/v1/server/users/carol/disconnect", token: testKeyAll, body: map[string]string{"reason": "spec"}, status: 200})
	_, err := cl.nodes[0].node.Services.Rooms.Private.Create(context.Background(), "mm.spec.1", []string{"alice", "bob"}, time.Minute)
	require.NoError(t, err)
	c.do(call{method: "PUT", path: "/api/v1/server/rooms/mm.spec.1-1/access/carol", token: testKeyAll, status: 200})
	c.do(call{method: "DELETE", path: "/api/v1/server/rooms/mm.spec.1-1/access/carol", token: testKeyAll, status: 200})
	c.do(call{method: "PUT", path: "/api/v1/server/rooms/" + room + "/access/carol", token: testKeyAll, status: 409, code: "not_private"})
	c.do(call{method: "DELETE", path: "/api/v1/server/rooms/mm.spec.2-1/access/carol", token: testKeyAll, status: 404, code: "unknown_room"})
	c.do(call{method: "GET", path: "/api/v1/admin/audit?limit=10", token: testAdminRead, status: 200})

	// settings and notices
	c.do(call{method: "GET", path: "/api/v1/settings", token: bob, status: 200})
	c.do(call{method: "GET", path: "/api/v1/settings/defs", token: bob, status: 200})
	c.do(call{method: "PUT", path: "/api/v1/settings/motd", token: testAdmin, body: map[string]string{"value": "welcome"}, status: 200})
	c.do(call{method: "PUT", path: "/api/v1/settings/room.capacity", token: testAdmin, body: map[string]int{"value": 0}, status: 400, code: "bad_value"})
	c.do(call{method: "PUT", path: "/api/v1/settings/no.such", token: testAdmin, body: map[string]int{"value": 1}, status: 400, code: "unknown_setting"})
	c.do(call{method: "DELETE", path: "/api/v1/settings/motd", token: testAdmin, status: 200})
	c.do(call{method: "POST", path: "/api/v1/notices", token: testAdmin, body: map[string]string{"text": "maintenance at noon"}, status: 200})

	// leaderboards
	c.do(call{method: "POST", path: "/api/v1/leaderboards/spec/scores", token: alice, body: map[string]any{"player": "alice", "score": 12.5}, status: 200})
	c.do(call{method: "POST", path: "/api/v1/leaderboards/spec@daily/scores", token: alice, body: map[string]any{"player": "bob", "score": 3, "mode": "incr"}, status: 200})
	c.do(call{method: "GET", path: "/api/v1/leaderboards/spec/top?limit=5", token: alice, status: 200})
	c.do(call{method: "GET", path: "/api/v1/leaderboards/spec/players/alice", token: alice, status: 200})
	c.do(call{method: "GET", path: "/api/v1/leaderboards/spec/players/nobody", token: alice, status: 404, code: "unknown_player"})
	c.do(call{method: "GET", path: "/api/v1/leaderboards/spec/around/alice?radius=2", token: alice, status: 200})
	c.do(call{method: "GET", path: "/api/v1/leaderboards/spec/range?min=0&max=100&limit=10", token: alice, status: 200})
	c.do(call{method: "POST", path: "/api/v1/leaderboards/spec/ranks", token: alice, body: map[string][]string{"players": {"alice", "nobody"}}, status: 200})

	// seen filter
	c.do(call{method: "POST", path: "/api/v1/seen", token: alice, body: map[string][]string{"items": {"a", "b"}}, status: 200})
	c.do(call{method: "POST", path: "/api/v1/seen/filter", token: alice, body: map[string][]string{"items": {"a", "c"}}, status: 200})

	// shop and wallet
	c.do(call{method: "POST", path: "/api/v1/shop/items", token: testAdmin, body: map[string]any{"item": "sword", "stock": 5, "price": 10}, status: 200})
	c.do(call{method: "POST", path: "/api/v1/shop/items", token: alice, body: map[string]any{"item": "sword", "stock": 5, "price": 10}, status: 403, code: "forbidden", invalid: true})
	c.do(call{method: "GET", path: "/api/v1/shop/items", token: alice, status: 200})
	c.do(call{method: "POST", path: "/api/v1/wallet/grant", token: testAdmin, body: map[string]any{"user": "alice", "amount": 15}, status: 200})
	c.do(call{method: "GET", path: "/api/v1/wallet", token: alice, status: 200})
	c.do(call{method: "POST", path: "/api/v1/shop/buy", token: alice, header: map[string]string{"Idempotency-Key": "buy-1"}, body: map[string]any{"item": "sword", "qty": 1}, status: 200})
	c.do(call{method: "POST", path: "/api/v1/shop/buy", token: alice, header: map[string]string{"Idempotency-Key": "buy-1"}, body: map[string]any{"item": "sword", "qty": 1}, status: 200})
	c.do(call{method: "POST", path: "/api/v1/shop/buy", token: alice, body: map[string]any{"item": "sword"}, status: 409, code: "insufficient_funds"})
	c.do(call{method: "POST", path: "/api/v1/shop/buy", token: alice, body: map[string]any{"item": "shield"}, status: 404, code: "unknown_item"})

	// matchmaking (the default queue "quick": 2 players, skill window 100)
	var tk struct {
		Ticket struct{ ID, Room, State string }
	}
	c.json(call{method: "POST", path: "/api/v1/matchmaking/quick/tickets", token: alice, body: map[string]any{"skill": 1500}, status: 200}, &tk)
	c.do(call{method: "POST", path: "/api/v1/matchmaking/quick/tickets", token: alice, body: map[string]any{"skill": 1500}, status: 409, code: "ticket_open"})
	c.do(call{method: "POST", path: "/api/v1/matchmaking/nope/tickets", token: alice, body: map[string]any{"skill": 1}, status: 404, code: "unknown_queue"})
	c.do(call{method: "POST", path: "/api/v1/matchmaking/quick/tickets", token: bob, body: map[string]any{"skill": 1, "party": []string{"carol"}}, status: 403, code: "consent_required"})
	c.do(call{method: "POST", path: "/api/v1/matchmaking/quick/parties", token: bob, body: map[string]any{"skill": 1, "party": []string{"nobody"}}, status: 409, code: "conflict"})
	c.do(call{method: "POST", path: "/api/v1/matchmaking/quick/parties", token: bob, body: map[string]any{"skill": 1, "party": []string{"BOB"}}, status: 400, code: "bad_value"})
	var party struct{ Ticket struct{ ID, State string } }
	c.do(call{method: "GET", path: "/api/v1/poll", token: carol, status: 200}) // carol is online
	c.json(call{method: "POST", path: "/api/v1/matchmaking/quick/parties", token: bob, body: map[string]any{"skill": 1, "party": []string{"Carol"}}, status: 200}, &party)
	assert.Equal(t, "pending", party.Ticket.State)
	c.do(call{method: "POST", path: "/api/v1/matchmaking/quick/tickets/" + party.Ticket.ID + "/accept", token: alice, status: 404, code: "unknown_ticket"})
	c.json(call{method: "POST", path: "/api/v1/matchmaking/quick/tickets/" + party.Ticket.ID + "/decline", token: carol, status: 200}, &party)
	assert.Equal(t, "cancelled", party.Ticket.State)
	c.do(call{method: "POST", path: "/api/v1/matchmaking/quick/tickets/" + party.Ticket.ID + "/accept", token: carol, status: 409, code: "conflict"})
	c.do(call{method: "POST", path: "/api/v1/matchmaking/quick/tickets", token: bob, body: map[string]any{}, status: 400, code: "bad_request", invalid: true})
	c.do(call{method: "POST", path: "/api/v1/matchmaking/quick/tickets", token: bob, body: map[string]any{"skill": "high"}, status: 400, code: "bad_request", invalid: true})
	c.do(call{method: "POST", path: "/api/v1/matchmaking/quick/tickets", token: bob, body: map[string]any{"skill": 2e9}, status: 400, code: "bad_value", invalid: true})
	c.do(call{method: "GET", path: "/api/v1/matchmaking/quick/tickets/" + tk.Ticket.ID, token: alice, status: 200})
	c.do(call{method: "GET", path: "/api/v1/matchmaking/quick/tickets/" + tk.Ticket.ID, token: carol, status: 404, code: "unknown_ticket"})
	c.json(call{method: "DELETE", path: "/api/v1/matchmaking/quick/tickets/" + tk.Ticket.ID, token: alice, status: 200}, &tk)
	assert.Equal(t, "cancelled", tk.Ticket.State)
	c.json(call{method: "POST", path: "/api/v1/matchmaking/quick/tickets", token: alice, body: map[string]any{"skill": 1500}, status: 200}, &tk)
	c.do(call{method: "POST", path: "/api/v1/matchmaking/quick/tickets", token: carol, body: map[string]any{"skill": 1520, "attributes": map[string]string{}}, status: 200})
	require.Eventually(t, func() bool {
		c.json(call{method: "GET", path: "/api/v1/matchmaking/quick/tickets/" + tk.Ticket.ID, token: alice, status: 200}, &tk)
		return tk.Ticket.Room != ""
	}, 30*time.Second, 20*time.Millisecond)
	c.do(call{method: "POST", path: "/api/v1/rooms/" + tk.Ticket.Room + "/join", token: carol, status: 200})
	c.do(call{method: "POST", path: "/api/v1/rooms/" + tk.Ticket.Room + "/join", token: bob, status: 404, code: "unknown_room"})
	c.do(call{method: "POST", path: "/api/v1/rooms/spec-999/join", token: bob, status: 404, code: "unknown_room"})
	c.do(call{method: "GET", path: "/api/v1/matchmaking/queues", token: testAdmin, status: 200})

	specDirect(t, c, alice, bob, carol)

	// polling
	c.do(call{method: "GET", path: "/api/v1/poll", token: bob, status: 200})
	c.do(call{method: "GET", path: "/api/v1/poll?wait=0", token: bob, status: 200})

	// the event stream: its head (200), a bad token, a bad position
	c.streamHead(bob)
	c.do(call{method: "GET", path: "/api/v1/events", token: "not.a.token", status: 401, code: "bad_token"})
	c.do(call{method: "GET", path: "/api/v1/events?last_event_id=nonsense", token: bob, status: 400, code: "bad_request"})
	c.do(call{method: "GET", path: "/api/v1/events", token: bob, header: map[string]string{"Last-Event-ID": room + "@x-1"}, status: 400, code: "bad_request"})

	// message removal
	c.do(call{method: "DELETE", path: "/api/v1/rooms/" + room + "/messages/" + first, token: testAdmin, status: 200})
	c.do(call{method: "DELETE", path: "/api/v1/rooms/" + room + "/messages/" + first, token: testAdmin, status: 404, code: "unknown_message"})

	// moderation
	var until struct{ Until string }
	c.json(call{method: "POST", path: "/api/v1/moderation/mute", token: testAdmin, body: map[string]any{"user": "bob", "seconds": 60, "reason": "spam"}, status: 200}, &until)
	require.NotEmpty(t, until.Until)
	c.do(call{method: "POST", path: "/api/v1/rooms/" + room + "/messages", token: bob, body: map[string]string{"text": "x"}, status: 403, code: "muted", eventually: true})
	var mods struct{ Mutes, Bans []map[string]any }
	c.json(call{method: "GET", path: "/api/v1/moderation", token: testAdmin, status: 200}, &mods)
	require.Len(t, mods.Mutes, 1)
	c.do(call{method: "DELETE", path: "/api/v1/moderation/mute/bob", token: testAdmin, status: 200})
	c.do(call{method: "POST", path: "/api/v1/moderation/mute", token: testAdmin, body: map[string]any{"user": "bob", "seconds": 0}, status: 400, code: "bad_request", invalid: true})
	c.do(call{method: "POST", path: "/api/v1/moderation/kick", token: testAdmin, body: map[string]any{"user": "bob", "reason": "calm down"}, status: 200})
	c.do(call{method: "POST", path: "/api/v1/moderation/ban", token: testAdmin, body: map[string]any{"user": "carol", "seconds": 60}, status: 200})
	c.do(call{method: "GET", path: "/api/v1/wallet", token: carol, status: 403, code: "banned", eventually: true})
	c.do(call{method: "POST", path: "/api/v1/session", body: map[string]string{"user": "carol"}, status: 403, code: "banned"})
	c.do(call{method: "DELETE", path: "/api/v1/moderation/ban/carol", token: testAdmin, status: 200})
	c.do(call{method: "GET", path: "/api/v1/wallet", token: carol, status: 200, eventually: true})
	c.do(call{method: "GET", path: "/api/v1/moderation", token: alice, status: 403, code: "forbidden", invalid: true})

	// leave, sign out
	c.do(call{method: "POST", path: "/api/v1/rooms/" + room + "/leave", token: alice, status: 200})
	c.do(call{method: "DELETE", path: "/api/v1/session", token: alice2, status: 200})
	c.do(call{method: "GET", path: "/api/v1/wallet", token: alice, status: 401, code: "bad_token"})
	c.do(call{method: "POST", path: "/api/v1/session", body: map[string]string{"user": "alice"}, status: 200})

	// per-user and per-address caps
	c.do(call{method: "PUT", path: "/api/v1/settings/limit.new_boards_per_user_per_minute", token: testAdmin, body: map[string]int{"value": 1}, status: 200})
	c.do(call{method: "POST", path: "/api/v1/leaderboards/spec-new-1/scores", token: carol, body: map[string]any{"player": "carol", "score": 1}, status: 200})
	c.do(call{method: "POST", path: "/api/v1/leaderboards/spec-new-2/scores", token: carol, body: map[string]any{"player": "carol", "score": 1}, status: 429, code: "rate_limited"})
	c.do(call{method: "PUT", path: "/api/v1/settings/limit.sessions_per_ip_per_minute", token: testAdmin, body: map[string]int{"value": 1}, status: 200})
	limited := false
	for i := 0; i < 5 && !limited; i++ {
		req, _ := http.NewRequest("POST", c.n.url+"/api/v1/session", strings.NewReader(fmt.Sprintf(`{"user":"guest%d"}`, i)))
		resp, err := c.http.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		limited = resp.StatusCode == http.StatusTooManyRequests
	}
	require.True(t, limited, "limit.sessions_per_ip_per_minute = 1 never refused a session")
	c.do(call{method: "POST", path: "/api/v1/session", body: map[string]string{"user": "dave"}, status: 429, code: "rate_limited"})

	// --auth jwt turns guest sessions off
	jwt := newCluster(t, cl.r, 1, nodeOpts{configure: func(cfg *nodeConfig) { cfg.Auth = "jwt"; cfg.Node = "jwt1" }})
	cj := &specClient{t: t, s: s, n: jwt.nodes[0], http: cl.http, covered: c.covered}
	cj.do(call{method: "POST", path: "/api/v1/session", body: map[string]string{"user": "erin"}, status: 403, code: "forbidden"})

	// the WebSocket upgrade: 101, and the per-address cap before it
	c.do(call{method: "PUT", path: "/api/v1/settings/limit.connections_per_ip", token: testAdmin, body: map[string]int{"value": 1}, status: 200})
	ws := dialSpec(t, s, c.n, carol, false)
	c.covered["GET /ws"][http.StatusSwitchingProtocols] = true
	status, code := refusedUpgrade(t, s, c.n, carol)
	assert.Equal(t, http.StatusTooManyRequests, status)
	assert.Equal(t, "too_many_connections", code)
	ws.close()

	var missing []string
	for op, id := range s.operationIDs {
		if len(c.covered[op]) == 0 {
			missing = append(missing, op+" ("+id+")")
		}
	}
	sort.Strings(missing)
	assert.Empty(t, missing, "operations of docs/openapi.json no request reached")
}

// TestRoutesAreTheDocumentedOnes: every route the router serves is an
// operation of docs/openapi.json (the browser client's files by name
// aside), and every operation is a route; PROTOCOL.md's route tables name
// every one too.
func TestRoutesAreTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	s := mustSpec(t)
	cl := newCluster(t, redistest.Real(t), 1)
	files, err := fs.Sub(staticFiles, "static")
	require.NoError(t, err)
	static, err := loadStatic(files)
	require.NoError(t, err)
	proto, err := os.ReadFile("../docs/PROTOCOL.md")
	require.NoError(t, err)
	param := regexp.MustCompile(`:(\w+)`)
	routed := map[string]bool{}
	for _, r := range cl.nodes[0].srv.app.GetRoutes(true) {
		if r.Method == "HEAD" || r.Method == "TRACE" || r.Method == "CONNECT" || r.Method == "OPTIONS" {
			continue
		}
		path := param.ReplaceAllString(r.Path, "{$1}")
		if _, isFile := static[r.Path]; isFile && path != "/" && path != "/admin" && path != "/api" {
			continue // a file of the browser client, served by name
		}
		op := r.Method + " " + path
		routed[op] = true
		item := s.doc.Paths.Find(path)
		if !assert.NotNil(t, item, "%s is routed but not in openapi.json", op) {
			continue
		}
		assert.NotNil(t, item.GetOperation(r.Method), "%s is routed but not in openapi.json", op)
		short := strings.TrimPrefix(path, "/api/v1")
		assert.True(t, strings.Contains(string(proto), "`"+r.Method+" "+short) || strings.Contains(string(proto), "`"+r.Method+" "+path),
			"%s is routed but PROTOCOL.md's route tables do not name it", op)
	}
	require.Greater(t, len(routed), 40, "the router's routes were not read")
	for path, item := range s.doc.Paths.Map() {
		for method := range item.Operations() {
			assert.True(t, routed[method+" "+path], "openapi.json has %s %s, which the router does not serve", method, path)
		}
	}
}
