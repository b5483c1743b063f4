package web

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/wsclient"
	"github.com/chatd/chatd/protocol"
)

// mintWith signs claims with method and key, as an external login service
// (or an attacker) would.
func mintWith(t testing.TB, method jwt.SigningMethod, key any, c jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, c).SignedString(key)
	require.NoError(t, err)
	return s
}

// goodClaims are the claims of a valid token for alice at now.
func goodClaims(now time.Time) jwt.MapClaims {
	return jwt.MapClaims{
		"sub": "alice",
		"sid": "s0123456789abcdef",
		"iss": "chatd",
		"iat": now.Unix(),
		"exp": now.Add(time.Hour).Unix(),
	}
}

func with(c jwt.MapClaims, key string, v any) jwt.MapClaims {
	out := jwt.MapClaims{}
	for k, x := range c {
		out[k] = x
	}
	if v == nil {
		delete(out, key)
	} else {
		out[key] = v
	}
	return out
}

// badTokens are tokens every node must refuse with 401 bad_token, by why.
func badTokens(t testing.TB, secret []byte, now time.Time) map[string]string {
	t.Helper()
	good := goodClaims(now)
	hs256 := func(c jwt.MapClaims) string { return mintWith(t, jwt.SigningMethodHS256, secret, c) }
	valid := hs256(good)
	parts := strings.Split(valid, ".")
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	require.NoError(t, err)
	sig[0] ^= 0xff
	forged := parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(sig)
	// a payload that claims to be bob under alice's signature
	bobPayload, err := jwt.NewWithClaims(jwt.SigningMethodHS256, with(good, "sub", "bob")).SigningString()
	require.NoError(t, err)
	swapped := bobPayload + "." + parts[2]

	return map[string]string{
		"empty":                             "",
		"garbage":                           "not-a-token",
		"three dots of nothing":             "..",
		"forged signature":                  forged,
		"payload swapped under a signature": swapped,
		"signature stripped":                parts[0] + "." + parts[1] + ".",
		"alg none":                          mintWith(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, good),
		"alg HS512 with the same secret":    mintWith(t, jwt.SigningMethodHS512, secret, good),
		"alg HS384 with the same secret":    mintWith(t, jwt.SigningMethodHS384, secret, good),
		"minted by another secret":          mintWith(t, jwt.SigningMethodHS256, []byte("another-secret-0123456789abcdef"), good),
		"expired":                           hs256(with(good, "exp", now.Add(-time.Minute).Unix())),
		"issued in the future":              hs256(with(good, "iat", now.Add(time.Hour).Unix())),
		"without expiry":                    hs256(with(good, "exp", nil)),
		"wrong issuer":                      hs256(with(good, "iss", "evil")),
		"without issuer":                    hs256(with(good, "iss", nil)),
		"without sid":                       hs256(with(good, "sid", nil)),
		"empty sid":                         hs256(with(good, "sid", "")),
		"sid with key injection":            hs256(with(good, "sid", "a}{b")),
		"without sub":                       hs256(with(good, "sub", nil)),
		"sub with key injection":            hs256(with(good, "sub", "a}{b")),
		"sub pattern":                       hs256(with(good, "sub", "*")),
		"sub too long":                      hs256(with(good, "sub", strings.Repeat("a", 33))),
		"sub of the wrong type":             hs256(with(good, "sub", 42)),
		"exp of the wrong type":             hs256(with(good, "exp", "tomorrow")),
	}
}

func TestTokensVerify(t *testing.T) {
	t.Parallel()
	secret := []byte(testSecret)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tk := &tokens{secret: secret, ttl: time.Hour, now: func() time.Time { return now }}

	t.Run("a minted token verifies as its user and session", func(t *testing.T) {
		raw, sess, err := tk.mint("alice", "")
		require.NoError(t, err)
		got, err := tk.verify(raw)
		require.NoError(t, err)
		assert.Equal(t, sess, got)
		assert.Equal(t, "alice", got.User)
	})
	t.Run("a token minted elsewhere with the shared secret verifies", func(t *testing.T) {
		got, err := tk.verify(mintWith(t, jwt.SigningMethodHS256, secret, goodClaims(now)))
		require.NoError(t, err)
		assert.Equal(t, "alice", got.User)
		assert.Equal(t, "s0123456789abcdef", got.Session)
	})
	t.Run("a token expired by less than the leeway still verifies", func(t *testing.T) {
		_, err := tk.verify(mintWith(t, jwt.SigningMethodHS256, secret, with(goodClaims(now), "exp", now.Add(-2*time.Second).Unix())))
		assert.NoError(t, err)
	})
	t.Run("each session token has its own session id", func(t *testing.T) {
		a, sa, err := tk.mint("alice", "")
		require.NoError(t, err)
		b, sb, err := tk.mint("alice", "")
		require.NoError(t, err)
		assert.NotEqual(t, a, b)
		assert.NotEqual(t, sa.Session, sb.Session)
	})
	for why, raw := range badTokens(t, secret, now) {
		t.Run(why+" is refused", func(t *testing.T) {
			_, err := tk.verify(raw)
			assert.ErrorIs(t, err, errBadToken)
		})
	}
	t.Run("a token is refused once its expiry passed", func(t *testing.T) {
		raw, _, err := tk.mint("alice", "")
		require.NoError(t, err)
		later := &tokens{secret: secret, ttl: time.Hour, now: func() time.Time { return now.Add(time.Hour + time.Minute) }}
		_, err = later.verify(raw)
		assert.ErrorIs(t, err, errBadToken)
	})
}

// assertAPIError checks the documented error shape, status and code of a
// raw answer.
func assertAPIError(t testing.TB, status int, code string, gotStatus int, body map[string]any, msgAndArgs ...any) {
	t.Helper()
	assert.Equal(t, status, gotStatus, msgAndArgs...)
	e, ok := body["error"].(map[string]any)
	if !assert.True(t, ok, "error shape: %v %v", body, msgAndArgs) {
		return
	}
	assert.Equal(t, code, e["code"], msgAndArgs...)
	msg, _ := e["message"].(string)
	assert.NotEmpty(t, msg, msgAndArgs...)
}

func TestBadTokensAreRefusedOverHTTPAndWebSocket(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	c := newCluster(t, r, 1)
	n := c.nodes[0]
	for why, raw := range badTokens(t, []byte(testSecret), time.Now()) {
		t.Run(why+" is 401 bad_token", func(t *testing.T) {
			var body map[string]any
			st := c.doRaw(n, "GET", "/api/v1/settings", map[string]string{"Authorization": "Bearer " + raw}, nil, &body)
			assertAPIError(t, 401, "bad_token", st, body)

			st, body = wsRefusal(t, n, raw, nil)
			assertAPIError(t, 401, "bad_token", st, body, "websocket")
		})
	}
	t.Run("no Authorization header is 401 bad_token", func(t *testing.T) {
		var body map[string]any
		st := c.doRaw(n, "GET", "/api/v1/settings", nil, nil, &body)
		assertAPIError(t, 401, "bad_token", st, body)
	})
	t.Run("another scheme than Bearer is 401 bad_token", func(t *testing.T) {
		tok := c.session(n, "alice")
		var body map[string]any
		st := c.doRaw(n, "GET", "/api/v1/settings", map[string]string{"Authorization": "Basic " + tok}, nil, &body)
		assertAPIError(t, 401, "bad_token", st, body)
	})
	t.Run("the admin token is not a user token", func(t *testing.T) {
		// it reads what needs no user (an admin console reads settings) …
		var body map[string]any
		st := c.doRaw(n, "GET", "/api/v1/settings", map[string]string{"Authorization": "Bearer " + testAdmin}, nil, &body)
		assert.Equal(t, 200, st)
		// … but acts as nobody
		body = nil
		st = c.doRaw(n, "GET", "/api/v1/wallet", map[string]string{"Authorization": "Bearer " + testAdmin}, nil, &body)
		assertAPIError(t, 401, "bad_token", st, body)
		body = nil
		st = c.doRaw(n, "POST", "/api/v1/lobbies/x/join", map[string]string{"Authorization": "Bearer " + testAdmin}, nil, &body)
		assertAPIError(t, 401, "bad_token", st, body)
	})
}

func TestTokenMintedOnOneNodeWorksOnAnother(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	c := newCluster(t, r, 2)
	tok := c.session(c.nodes[0], "alice")

	var out map[string]any
	assert.Equal(t, 200, c.do(c.nodes[1], "GET", "/api/v1/settings", tok, nil, &out), "%v", out)
	w := dialToken(t, c.nodes[1], "alice", tok)
	room := w.join("tokens")
	w.send(protocol.Say{Room: room, Text: "hi from node 2", Ref: "r1"})
	ack := w.waitFor("ack", "r1")
	assert.Equal(t, "r1", ack["ref"])

	t.Run("a node with another secret refuses it", func(t *testing.T) {
		other := newCluster(t, r, 1, nodeOpts{configure: func(cfg *nodeConfig) { cfg.Secret = []byte("another-secret-0123456789abcdef") }})
		var body map[string]any
		st := c.doRaw(other.nodes[0], "GET", "/api/v1/settings", map[string]string{"Authorization": "Bearer " + tok}, nil, &body)
		assertAPIError(t, 401, "bad_token", st, body)
	})
}

func TestAdminEndpoints(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	c := newCluster(t, r, 1)
	n := c.nodes[0]
	noAdmin := newCluster(t, r, 1, nodeOpts{configure: func(cfg *nodeConfig) { cfg.AdminToken = "" }}).nodes[0]
	userTok := c.session(n, "alice")
	put := func(n *testNode, auth string) (int, map[string]any) {
		var body map[string]any
		h := map[string]string{}
		if auth != "" {
			h["Authorization"] = auth
		}
		st := c.doRaw(n, "PUT", "/api/v1/settings/motd", h, []byte(`{"value": "hello"}`), &body)
		return st, body
	}

	t.Run("the admin token is admitted", func(t *testing.T) {
		st, body := put(n, "Bearer "+testAdmin)
		assert.Equal(t, 200, st, "%v", body)
	})
	t.Run("a valid user token is 403 forbidden", func(t *testing.T) {
		st, body := put(n, "Bearer "+userTok)
		assertAPIError(t, 403, "forbidden", st, body)
	})
	for why, auth := range map[string]string{
		"garbage":                       "Bearer garbage",
		"no header":                     "",
		"the admin token with a suffix": "Bearer " + testAdmin + "x",
		"a prefix of the admin token":   "Bearer " + testAdmin[:len(testAdmin)-1],
		"the admin token in upper case": "Bearer " + strings.ToUpper(testAdmin),
		"the admin token as Basic":      "Basic " + testAdmin,
		"a forged user token":           "Bearer " + badTokens(t, []byte(testSecret), time.Now())["forged signature"],
	} {
		t.Run(why+" is 401 bad_token", func(t *testing.T) {
			st, body := put(n, auth)
			assertAPIError(t, 401, "bad_token", st, body)
		})
	}
	t.Run("without a configured admin token every call is 403 forbidden", func(t *testing.T) {
		for _, auth := range []string{"", "Bearer ", "Bearer " + testAdmin, "Bearer " + userTok, "Bearer garbage"} {
			st, body := put(noAdmin, auth)
			assertAPIError(t, 403, "forbidden", st, body, "auth %q", auth)
		}
	})
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestLogsHoldNoSecrets(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	var logs syncBuffer
	c := newCluster(t, r, 1, nodeOpts{configure: func(cfg *nodeConfig) {
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}})
	n := c.nodes[0]
	tok := c.session(n, "alice")
	w := dialToken(t, n, "alice", tok)
	room := w.join("logs")
	w.send(protocol.Say{Room: room, Text: "hi", Ref: "r1"})
	w.waitFor("ack", "r1")
	w.send(protocol.Say{Room: "nope-1", Text: "hi", Ref: "r2"})
	w.waitFor("error", "r2")
	for _, auth := range []string{"Bearer " + testAdmin, "Bearer " + tok, "Bearer " + testAdmin + "x", "Bearer " + tok + "x"} {
		c.doRaw(n, "PUT", "/api/v1/settings/motd", map[string]string{"Authorization": auth}, []byte(`{"value": "m"}`), nil)
		c.doRaw(n, "GET", "/api/v1/settings", map[string]string{"Authorization": auth}, nil, nil)
	}
	st, _ := wsRefusal(t, n, tok+"x", nil)
	assert.Equal(t, 401, st)
	_ = w.conn.Close()
	require.Eventually(t, func() bool { return n.node.Core.Clients() == 0 }, 10*time.Second, 10*time.Millisecond)

	out := logs.String()
	require.Contains(t, out, "level=DEBUG", "debug logging was on")
	sig := tok[strings.LastIndexByte(tok, '.')+1:]
	for what, secret := range map[string]string{"secret": testSecret, "admin token": testAdmin, "session token": tok, "token signature": sig} {
		assert.NotContains(t, out, secret, "the %s appears in the log", what)
	}
}

// doRaw sends a request with the given headers and body and decodes the JSON
// answer into out (if not nil); it returns the status.
func (c *cluster) doRaw(n *testNode, method, path string, headers map[string]string, body []byte, out any) int {
	c.t.Helper()
	req, err := http.NewRequest(method, n.url+path, bytes.NewReader(body))
	require.NoError(c.t, err)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(resp.Body)
	require.NoError(c.t, err)
	if out != nil && buf.Len() > 0 {
		require.NoError(c.t, json.Unmarshal(buf.Bytes(), out), "body: %s", buf.String())
	}
	return resp.StatusCode
}

// wsRefusal dials /ws with token and headers and expects the upgrade to be
// refused: it returns the HTTP status and the decoded error body.
func wsRefusal(t testing.TB, n *testNode, token string, h http.Header) (int, map[string]any) {
	t.Helper()
	conn, resp, err := wsclient.Dial(context.Background(), wsURL(n, token), &wsclient.Options{Header: h})
	if err == nil {
		_ = conn.Close()
		t.Errorf("the upgrade was accepted")
		return 101, nil
	}
	require.NotNil(t, resp, "dial error: %v", err)
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	var body map[string]any
	_ = json.Unmarshal(buf.Bytes(), &body)
	return resp.StatusCode, body
}

// waitFor returns the next frame of type typ whose ref is ref, skipping
// others; it fails after 10s.
func (w *wsClient) waitFor(typ, ref string) map[string]any {
	w.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case f := <-w.frames:
			if f["type"] == typ && f["ref"] == ref {
				return f
			}
		case <-deadline:
			w.t.Fatalf("%s: no %q frame with ref %q within 10s", w.user, typ, ref)
			return nil
		}
	}
}

// TestTokensAudienceAndIssuer: with --jwt-audience set a token must name
// that audience (any aud was accepted before); with --jwt-issuer set the
// issuer must be that one; chatd's own tokens carry both.
func TestTokensAudienceAndIssuer(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	secret := []byte(testSecret)
	tk := &tokens{secret: secret, ttl: time.Hour, now: func() time.Time { return now }, issuer: "login.example", audience: "chatd-prod"}
	hs256 := func(c jwt.MapClaims) string { return mintWith(t, jwt.SigningMethodHS256, secret, c) }
	good := with(with(goodClaims(now), "iss", "login.example"), "aud", "chatd-prod")
	for why, c := range map[string]jwt.MapClaims{
		"another audience":         with(good, "aud", "chatd-staging"),
		"no audience":              with(good, "aud", nil),
		"the default issuer":       with(good, "iss", "chatd"),
		"an audience list without": with(good, "aud", []string{"a", "b"}),
	} {
		_, err := tk.verify(hs256(c))
		assert.ErrorIs(t, err, errBadToken, why)
	}
	_, err := tk.verify(hs256(good))
	assert.NoError(t, err, "the configured issuer and audience")
	_, err = tk.verify(hs256(with(good, "aud", []string{"other", "chatd-prod"})))
	assert.NoError(t, err, "an audience list that names it")
	raw, _, err := tk.mint("alice", "")
	require.NoError(t, err)
	_, err = tk.verify(raw)
	assert.NoError(t, err, "chatd's own tokens carry the issuer and audience")
	plain := &tokens{secret: secret, ttl: time.Hour, now: func() time.Time { return now }}
	_, err = plain.verify(raw)
	assert.ErrorIs(t, err, errBadToken, "a node with the default issuer refuses them")
}
