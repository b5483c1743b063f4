package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	_ "embed"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/cmd/chatd/compose"
	"github.com/chatd/chatd/docs"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/realtime"
	jssdk "github.com/chatd/chatd/sdk/js"
	"github.com/chatd/chatd/web"
)

// TestBrowserClient drives the browser client in headless Chromium against
// two chatd nodes on one Redis: alice's page talks to n1 at 1280 px, bob's
// page to n2 at 360 px (a phone) through a TCP proxy the test can cut, like
// a network failure.
func TestBrowserClient(t *testing.T) {
	t.Parallel()
	n1, n2, browser := browserOnTwoNodes(t, 150*time.Second)
	proxy := newCutProxy(t, n2)
	shots := artifactDir(t)

	alice := openPage(t, browser, "http://"+n1.addr+"/", 1280, 800)
	bob := openPage(t, browser, "http://"+proxy.addr()+"/", 360, 740) // a phone

	t.Run("a name in use is refused with a clear message", func(t *testing.T) {
		bob.do(t, chromedp.WaitVisible(`[data-testid="signin-name"]`))
		bob.screenshot(t, filepath.Join(shots, "chat-signin-360.png"))
		alice.signIn(t, "alice", "general")
		bob.expectErrors(func() { // the 409 is logged by the browser
			bob.do(t,
				chromedp.SendKeys(`[data-testid="signin-name"]`, "alice"),
				chromedp.Click(`[data-testid="signin-submit"]`))
			bob.waitJS(t, `/in use by another guest/.test(text('signin-error'))`, "name_taken is explained")
		})
		bob.clear(t, `[data-testid="signin-name"]`)
		bob.signIn(t, "bob", "general")
	})

	t.Run("two pages on two nodes share a room and a lobby list", func(t *testing.T) {
		alice.waitJS(t, `text('room-label') === 'general · room 1 · 2/50'`, "alice sees the room with 2 of 50 seats taken")
		bob.waitJS(t, `text('room-label') === 'general · room 1 · 2/50'`, "bob sees the same room")
		alice.waitJS(t, `text('conn-node') === 'n1'`, "alice is served by n1")
		bob.waitJS(t, `text('conn-node') === 'n2'`, "bob is served by n2")
		alice.waitJS(t, `document.getElementById('conn-details').hidden`, "connection details stay behind the status control")
		alice.waitJS(t, `members().join() === 'alice,bob'`, "alice sees bob in presence")
		bob.waitJS(t, `members().join() === 'bob,alice'`, "bob sees alice in presence")
		alice.waitJS(t, `text2('[data-lobby="general"] [data-testid="lobby-online"]') === '2 online'`, "the lobby list counts both")
		assert.True(t, alice.eval(t, `!document.querySelector('[data-testid="tab-admin"]')`), "the chat page has no admin tab")
	})

	t.Run("messages go both ways, with marks and links but never markup", func(t *testing.T) {
		evil := `<img src=x onerror="document.body.dataset.pwned=1"><b>hi bob</b>`
		alice.say(t, evil)
		bob.waitJS(t, fmt.Sprintf(`texts().includes(%q)`, evil), "bob sees alice's text as text")
		alice.waitJS(t, fmt.Sprintf(`sent(%q)`, evil), "alice's message is acked")
		rich := "**bold** and _it_ `<i>code</i>` at https://example.com/a?b=1. javascript:alert(1)"
		alice.say(t, rich)
		bob.waitJS(t, `texts().length === 2`, "bob gets the marked-up message")
		bob.waitJS(t, `(m => m.querySelector('strong').textContent === 'bold' && m.querySelector('em').textContent === 'it' &&
			m.querySelector('code').textContent === '<i>code</i>' && !m.querySelector('i') &&
			m.querySelector('a').href === 'https://example.com/a?b=1' && m.querySelector('a').rel === 'noopener noreferrer' &&
			m.querySelectorAll('a').length === 1)(document.querySelectorAll('[data-testid="message-text"]')[1])`,
			"bold, italic, code and one http(s) link are rendered as elements made by the client")
		assert.True(t, alice.eval(t, `[...document.querySelectorAll('[data-testid="message"]')].slice(-1)[0].classList.contains('cont')`),
			"alice's second message is grouped under the first")
		bob.say(t, "hi alice")
		alice.waitJS(t, `texts().includes('hi alice')`, "alice sees bob's message")
		for _, p := range []*page{alice, bob} {
			assert.True(t, p.eval(t, `!document.querySelector('#messages img, #messages b, #messages i') && !document.body.dataset.pwned`),
				"%s: user text never becomes markup", p.name)
			assert.Equal(t, []string{evil, "bold and it <i>code</i> at https://example.com/a?b=1. javascript:alert(1)", "hi alice"}, p.texts(t), "%s: each message once, in order", p.name)
		}
	})

	t.Run("typing shows on the other node for a few seconds, sent at most every 2 s", func(t *testing.T) {
		before := bob.evalInt(t, `sentTypes().filter(t => t === 'typing').length`)
		start := time.Now()
		bob.do(t, chromedp.SendKeys(`[data-testid="composer-input"]`, "typing slowly here"))
		typed := time.Since(start)
		alice.waitJS(t, `text('typing') === 'bob is typing…'`, "alice sees bob typing")
		assert.LessOrEqual(t, bob.evalInt(t, `sentTypes().filter(t => t === 'typing').length`)-before, 1+int(typed/(2*time.Second)),
			"at most one typing frame per 2 s of typing (%s of keys)", typed)
		alice.waitJS(t, `text('typing') === ''`, "the indicator goes away by itself")
		bob.clear(t, `[data-testid="composer-input"]`)
	})

	t.Run("unread counts while the page is hidden, and a read mark clears them", func(t *testing.T) {
		bob.do(t, chromedp.Evaluate[chromedp.Void](`Object.defineProperty(document, 'visibilityState', {configurable: true, get: () => 'hidden'}); document.dispatchEvent(new Event('visibilitychange'))`))
		for _, m := range []string{"unread 1", "unread 2", "unread 3"} {
			alice.say(t, m)
		}
		bob.waitJS(t, `texts().length === 6`, "bob's hidden page still receives")
		bob.waitJS(t, `text2('[data-lobby="general"] [data-testid="lobby-unread"]') === '3' && text('people-count') === '3' && document.title.startsWith('(3)')`,
			"the lobby badge, the tab and the title say 3 unread")
		bob.waitJS(t, `unreadTotal() === 3`, "GET /unread counts 3 for bob")
		bob.screenshot(t, filepath.Join(shots, "chat-unread-360.png"))
		bob.do(t, chromedp.Evaluate[chromedp.Void](`window.readsBefore = window.__sent.filter(t => t === 'read').length; delete document.visibilityState; document.dispatchEvent(new Event('visibilitychange'))`))
		bob.waitJS(t, `sentTypes().filter(t => t === 'read').length > window.readsBefore && document.getElementById('people-count').hidden && !document.title.startsWith('(')`, "seen: a read frame goes out and the badges clear")
		bob.waitJS(t, `unreadTotal() === 0`, "GET /unread counts 0 after the read mark")
	})

	t.Run("a page whose connection is cut reconnects and shows what it missed, once each", func(t *testing.T) {
		bob.expectErrors(func() {
			proxy.cut()
			bob.waitJS(t, `document.getElementById('conn-status').dataset.state !== 'open'`, "bob's page notices the cut")
			missed := []string{"missed 1", "missed 2"}
			for _, m := range missed {
				alice.say(t, m)
			}
			for _, m := range missed {
				alice.waitJS(t, fmt.Sprintf(`sent(%q)`, m), "alice's message is acked while bob is away")
			}
			bob.say(t, "typed while offline")
			bob.waitJS(t, `document.querySelector('[data-testid="message"][data-state="queued"]') !== null`, "bob's message waits for the connection")
			proxy.restore()
			bob.waitJS(t, `document.getElementById('conn-status').dataset.state === 'open'`, "bob's page reconnects")
		})
		bob.waitJS(t, `texts().length === 9 && sent('typed while offline')`, "bob sees what he missed and sends what he typed")
		alice.waitJS(t, `texts().length === 9`, "alice gets bob's offline message")
		want := alice.texts(t)
		assert.Equal(t, want, bob.texts(t), "every message once, in the same order")
		assert.Equal(t, []string{"missed 1", "missed 2", "typed while offline"}, want[6:])
		alice.waitJS(t, `members().join() === 'alice,bob'`, "bob is back in alice's presence list")
		assert.True(t, bob.eval(t, `text('conn-via') === 'WebSocket'`), "an outage after a WebSocket worked is not a fallback to SSE")
	})

	t.Run("the length limit shows as you type and holds the message back", func(t *testing.T) {
		admin(t, n1, http.MethodPut, "message.max_length", `{"value": 12}`)
		alice.waitJS(t, `probe('/settings', j => j.values['message.max_length']) === 12`, "the limit is in force")
		alice.do(t, chromedp.SendKeys(`[data-testid="composer-input"]`, "short"))
		alice.waitJS(t, `text('composer-count') === '5/12'`, "the count shows while typing")
		alice.say(t, " but far too long")
		alice.waitJS(t, `/22\/12 · 10 too many/.test(text('composer-count')) && document.querySelector('[data-testid="composer-send"]').disabled`,
			"over the limit: the count says by how much and Send is off")
		assert.True(t, alice.eval(t, `texts().length === 9 && document.getElementById('composer-input').value === 'short but far too long'`), "nothing was sent; the text stays")
		alice.clear(t, `[data-testid="composer-input"]`)
		admin(t, n1, http.MethodDelete, "message.max_length", "")
	})

	t.Run("rate limited messages wait and go out by themselves, in order", func(t *testing.T) {
		admin(t, n1, http.MethodPut, "rate.messages_per_second", `{"value": 1}`)
		alice.waitJS(t, `probe('/settings', j => j.values['rate.messages_per_second']) === 1`, "the rate is in force")
		burst := []string{"fast 1", "fast 2", "fast 3", "fast 4"}
		alice.do(t, chromedp.Evaluate[chromedp.Void](`window.sawWaiting = false; new MutationObserver(() => {
			if (document.querySelector('[data-state="waiting"]')) window.sawWaiting = true;
			if (document.querySelector('[data-testid="message-retry"]')) window.sawRetry = true;
		}).observe(document.getElementById('messages'), {subtree: true, attributes: true, childList: true})`))
		for _, m := range burst {
			alice.say(t, m)
		}
		bob.waitJS(t, `texts().slice(-4).join() === 'fast 1,fast 2,fast 3,fast 4'`, "bob gets all four, in order")
		alice.waitJS(t, `sent('fast 4')`, "alice's last one is acked")
		assert.True(t, alice.eval(t, `window.sawWaiting && !window.sawRetry`), "the queue waited out the limit without Retry buttons")
		admin(t, n1, http.MethodDelete, "rate.messages_per_second", "")
	})

	t.Run("the leaderboard game posts a score, and no score is no error", func(t *testing.T) {
		alice.do(t, chromedp.Click(`[data-testid="tab-board"]`))
		alice.waitJS(t, `text('lb-me').startsWith('no score yet')`, "no score yet, without a 404")
		alice.do(t, chromedp.Click(`[data-testid="game-start"]`))
		for i := 0; i < 7; i++ {
			alice.do(t, chromedp.Click(`[data-testid="game-target"]`))
		}
		alice.waitJS(t, `/^7 clicks\./.test(text('game-status'))`, "the round ends and the score is posted")
		alice.waitJS(t, `text('lb-me').startsWith('#1 with 7 clicks')`, "alice is first on today's board")
		alice.waitJS(t, `[...document.querySelectorAll('#lb-top [data-testid="lb-entry"]')].map(e => e.dataset.player).join() === 'alice'`, "the top 10 shows her")
	})

	t.Run("screenshots and accessibility", func(t *testing.T) {
		alice.screenshot(t, filepath.Join(shots, "chat-main-1280.png"))
		alice.do(t, chromedp.Click(`[data-testid="conn-status"]`))
		alice.waitJS(t, `!document.getElementById('conn-details').hidden && /^\d+ ms$/.test(text('conn-latency'))`, "the status control shows node and latency")
		alice.screenshot(t, filepath.Join(shots, "chat-status-1280.png"))
		alice.do(t, chromedp.Click(`[data-testid="conn-status"]`))
		alice.axe(t, "chat page at 1280 px")
		bob.screenshot(t, filepath.Join(shots, "chat-main-360.png"))
		bob.axe(t, "chat page at 360 px")
		bob.do(t, chromedp.Click(`[data-testid="tab-people"]`))
		bob.waitJS(t, `document.getElementById('people-panel').offsetParent !== null && !!document.querySelector('[data-testid="lobby"]')`, "the lobby list shows")
		bob.screenshot(t, filepath.Join(shots, "chat-lobbies-360.png"))
		bob.axe(t, "lobby list at 360 px")
		bob.do(t, chromedp.Click(`[data-testid="tab-chat"]`))
		bob.do(t, darkMode)
		bob.screenshot(t, filepath.Join(shots, "chat-main-360-dark.png"))
		bob.axe(t, "chat page at 360 px, dark")
	})

	t.Run("a second tab of the same guest signs in with the stored token", func(t *testing.T) {
		alice2 := openTab(t, alice, "http://"+n1.addr+"/", 1280, 800) // the same origin: the same storage
		alice2.signIn(t, "alice", "general")
		alice2.waitJS(t, `text('room-label') === 'general · room 1 · 2/50'`, "the second tab joins the same seat")
		alice2.waitJS(t, `texts().length >= 9`, "with the history")
		assert.Empty(t, alice2.problems(), "alice's second tab: no console errors")
	})

	t.Run("signing out frees the name at once", func(t *testing.T) {
		bob.do(t, chromedp.Click(`[data-testid="signout"]`))
		bob.waitJS(t, `!document.getElementById('signin').hidden`, "bob is back at sign-in")
		carol := openPage(t, browser, "http://"+n1.addr+"/", 1280, 800)
		carol.signIn(t, "bob", "general")
		carol.waitJS(t, `text('room-label').startsWith('general · room 1')`, "a new guest takes the name bob")
		assert.Empty(t, carol.problems(), "no console errors")
	})

	t.Run("the API page lists every operation of the served spec", func(t *testing.T) {
		var spec struct {
			Paths map[string]map[string]json.RawMessage `json:"paths"`
		}
		require.NoError(t, json.Unmarshal(docs.OpenAPI, &spec))
		ops, moderation := 0, 0
		for path, item := range spec.Paths {
			for m := range item {
				if slices.Contains([]string{"get", "post", "put", "delete", "patch"}, m) {
					ops++
					if strings.Contains(path, "moderation") {
						moderation++
					}
				}
			}
		}
		api := openPage(t, browser, "http://"+n1.addr+"/api", 1280, 800)
		api.waitJS(t, fmt.Sprintf(`document.querySelectorAll('[data-testid="apidocs-op"]').length === %d`, ops), "every operation is listed")
		api.do(t, chromedp.SendKeys(`[data-testid="apidocs-filter"]`, "/moderation"))
		api.waitJS(t, fmt.Sprintf(`document.querySelectorAll('[data-testid="apidocs-op"]').length === %d`, moderation), "the filter narrows the list")
		api.screenshot(t, filepath.Join(shots, "api-1280.png"))
		api.axe(t, "API page")
		assert.Empty(t, api.problems(), "the API page: no console errors")
	})

	for _, p := range []*page{alice, bob} {
		assert.Empty(t, p.problems(), "%s: no script errors, CSP violations or console errors", p.name)
	}
}

// TestStaticHeaders checks what the client is served with: a strict CSP,
// types, and revalidation by ETag.
func TestStaticHeaders(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	n := startNode(t, r, "n1")
	get := func(path, etag string) *http.Response {
		req, err := http.NewRequest(http.MethodGet, "http://"+n.addr+path, nil)
		require.NoError(t, err)
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		require.NoError(t, res.Body.Close())
		return res
	}

	t.Run("the page has a strict CSP and no-cache", func(t *testing.T) {
		res := get("/", "")
		require.Equal(t, http.StatusOK, res.StatusCode)
		assert.Equal(t, "text/html; charset=utf-8", res.Header.Get("Content-Type"))
		csp := res.Header.Get("Content-Security-Policy")
		assert.Contains(t, csp, "default-src 'self'")
		assert.Contains(t, csp, "connect-src 'self' ws: wss:")
		assert.NotContains(t, csp, "unsafe-inline")
		assert.Equal(t, "no-cache", res.Header.Get("Cache-Control"))
		assert.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"))
	})

	t.Run("the admin console is its own page at /admin, with the same CSP", func(t *testing.T) {
		res := get("/admin", "")
		require.Equal(t, http.StatusOK, res.StatusCode)
		assert.Equal(t, "text/html; charset=utf-8", res.Header.Get("Content-Type"))
		assert.Contains(t, res.Header.Get("Content-Security-Policy"), "default-src 'self'")
		assert.NotEqual(t, get("/", "").Header.Get("ETag"), res.Header.Get("ETag"), "not the chat page")
	})

	t.Run("scripts and styles have their types", func(t *testing.T) {
		for path, typ := range map[string]string{
			"/app.js": "text/javascript; charset=utf-8", "/conn.js": "text/javascript; charset=utf-8",
			"/admin.js": "text/javascript; charset=utf-8", "/format.js": "text/javascript; charset=utf-8",
			"/app.css": "text/css; charset=utf-8", "/favicon.svg": "image/svg+xml",
		} {
			res := get(path, "")
			require.Equal(t, http.StatusOK, res.StatusCode, path)
			assert.Equal(t, typ, res.Header.Get("Content-Type"), path)
		}
	})

	t.Run("a matching ETag answers 304", func(t *testing.T) {
		etag := get("/app.js", "").Header.Get("ETag")
		require.NotEmpty(t, etag)
		assert.Equal(t, http.StatusNotModified, get("/app.js", etag).StatusCode)
		assert.Equal(t, http.StatusOK, get("/app.js", `"other"`).StatusCode)
	})

	t.Run("the SDK's modules are served byte for byte at /sdk/, with their type and ETag", func(t *testing.T) {
		names, err := fs.Glob(jssdk.FS(), "*.js")
		require.NoError(t, err)
		require.Contains(t, names, "index.js")
		require.Contains(t, names, "realtime.js")
		for _, name := range names {
			want, err := fs.ReadFile(jssdk.FS(), name)
			require.NoError(t, err)
			res, err := http.Get("http://" + n.addr + "/sdk/" + name)
			require.NoError(t, err)
			body, err := io.ReadAll(res.Body)
			require.NoError(t, err)
			require.NoError(t, res.Body.Close())
			require.Equal(t, http.StatusOK, res.StatusCode, name)
			assert.Equal(t, "text/javascript; charset=utf-8", res.Header.Get("Content-Type"), name)
			assert.Equal(t, "no-cache", res.Header.Get("Cache-Control"), name)
			assert.Equal(t, string(want), string(body), "%s: the served module is the SDK's file", name)
		}
		etag := get("/sdk/realtime.js", "").Header.Get("ETag")
		require.NotEmpty(t, etag)
		assert.Equal(t, http.StatusNotModified, get("/sdk/realtime.js", etag).StatusCode)
		assert.NotEqual(t, etag, get("/sdk/index.js", "").Header.Get("ETag"), "each file has its own ETag")
		res := get("/sdk/nope.js", "")
		assert.Equal(t, http.StatusNotFound, res.StatusCode)
		assert.Equal(t, "application/json", strings.Split(res.Header.Get("Content-Type"), ";")[0], "a missing file answers in the error shape")
		assert.Equal(t, http.StatusNotFound, get("/sdk/", "").StatusCode)
		assert.Equal(t, http.StatusNotFound, get("/sdk/..%2Fapp.js", "").StatusCode, "only the SDK's own files")
	})

	t.Run("unknown paths stay 404", func(t *testing.T) {
		assert.Equal(t, http.StatusNotFound, get("/nope.js", "").StatusCode)
	})
}

// admin sends an admin request for one setting to a node.
func admin(t *testing.T, n *node, method, key, body string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+n.addr+"/api/v1/settings/"+key, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer adm")
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	msg, _ := io.ReadAll(res.Body)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusOK, res.StatusCode, "%s %s: %s", method, key, msg)
}

// darkMode makes the page prefer a dark colour scheme.
var darkMode = chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
	_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}},
	})
	return err
})

// node is one in-process chatd node.
type node struct {
	srv  *compose.Node
	addr string // host:port
}

func startNode(t *testing.T, r *redistest.Redis, id string) *node {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("CHATD_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	secret := []byte("browser-test-secret-0123456789abcdef")
	reg := prometheus.NewRegistry()
	srv, err := compose.New(compose.Config{
		Realtime: realtime.Config{Redis: r.NewClient(t), Prefix: r.Prefix, Node: id, MatchRoomKey: secret,
			Version: "v0.0.0-test", Logger: logger.With("node", id), Registerer: reg},
		Web: web.Config{Node: id, Secret: secret, AdminToken: "adm", AdminReadToken: "adm-read", Logger: logger, Registry: reg},
	})
	require.NoError(t, err)
	require.NoError(t, srv.Start(context.Background()))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-served
	})
	return &node{srv: srv, addr: ln.Addr().String()}
}

// cutProxy forwards TCP to a node until cut: then it closes every
// connection and refuses new ones until restore.
type cutProxy struct {
	t      *testing.T
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
}

func newCutProxy(t *testing.T, to *node) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{t: t, ln: ln, target: to.addr, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		p.cut()
	})
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			_ = c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c, up) {
			continue
		}
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *cutProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		for _, c := range cs {
			_ = c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *cutProxy) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

func (p *cutProxy) restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// startBrowser starts headless Chromium for one test.
func startBrowser(t *testing.T, ctx context.Context, chromium string) context.Context {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.Flag("disable-backgrounding-occluded-windows", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	)
	t.Cleanup(cancelAlloc)
	browser, closeBrowser := chromedp.NewContext(alloc)
	t.Cleanup(closeBrowser)
	require.NoError(t, chromedp.Do(browser), "start chromium")
	return browser
}

// page is one browser tab on the client.
type page struct {
	name string
	ctx  context.Context

	mu         sync.Mutex
	errs       []string
	allowUntil time.Time // console errors before this are expected ones
}

// helpers is evaluated in every page before the test's expressions.
const helpers = `
var text = (id) => (document.getElementById(id) || {}).textContent || '';
var text2 = (sel) => (document.querySelector(sel) || {}).textContent || '';
var members = () => [...document.querySelectorAll('[data-testid="member"]')].map(m => m.dataset.user);
var texts = () => [...document.querySelectorAll('[data-testid="message-text"]')].map(m => m.textContent);
var sent = (t) => [...document.querySelectorAll('[data-testid="message"][data-state="sent"]')]
  .some(m => m.dataset.id && m.querySelector('[data-testid="message-text"]').textContent === t);
var sentTypes = () => window.__sent || [];
var probe = (path, pick) => {
  const k = '__probe' + path;
  if (!window[k]) {
    const token = JSON.parse(sessionStorage.getItem('chatd.session')).token;
    window[k] = fetch('/api/v1' + path, {headers: {Authorization: 'Bearer ' + token}})
      .then(r => r.json()).then(j => { window[k + ':v'] = pick(j); }).catch(() => {}).finally(() => { window[k] = null; });
  }
  return window[k + ':v'];
};
var unreadTotal = () => probe('/unread', j => Object.values(j.rooms || {}).reduce((a, b) => a + b, 0));
`

// recordFrames runs before the page's scripts: it notes the type of every
// frame the page sends on a WebSocket.
const recordFrames = `(() => {
  const send = WebSocket.prototype.send;
  window.__sent = [];
  WebSocket.prototype.send = function (d) {
    try { window.__sent.push(JSON.parse(d).type); } catch (e) {}
    return send.call(this, d);
  };
})();`

// openPage opens a tab with a browser context (storage) of its own.
func openPage(t *testing.T, browser context.Context, url string, w, h int64) *page {
	t.Helper()
	tab, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	return setupPage(t, tab, url, w, h)
}

// openTab opens another tab in p's browser context: the same storage, as
// a second tab of the same person.
func openTab(t *testing.T, p *page, url string, w, h int64) *page {
	t.Helper()
	tab, cancel := chromedp.NewContext(p.ctx)
	t.Cleanup(cancel)
	return setupPage(t, tab, url, w, h)
}

func setupPage(t *testing.T, tab context.Context, url string, w, h int64) *page {
	t.Helper()
	p := &page{name: url, ctx: tab}
	require.NoError(t, chromedp.Do(tab, chromedp.EmulateViewport(w, h)))
	require.NoError(t, chromedp.Do(tab, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: recordFrames})
		return err
	})))
	console := chromedp.Console(tab)
	go func() {
		for m, err := range console {
			if err != nil {
				return
			}
			// Exceptions, CSP violations and errors the browser logs (a
			// failed request among them) are problems, outside the phases a
			// test expects network errors in.
			if m.IsException() || m.Type == chromedp.ConsoleError || strings.Contains(m.Text, "Content Security Policy") {
				p.mu.Lock()
				if time.Now().Before(p.allowUntil) {
					t.Logf("%s: expected console error: %s", p.name, m.String())
				} else {
					p.errs = append(p.errs, m.String())
				}
				p.mu.Unlock()
			}
		}
	}()
	require.NoError(t, chromedp.Do(tab, chromedp.Navigate(url)))
	return p
}

// expectErrors runs fn while the console errors of the page are expected
// (a cut connection, a refused sign-in), and for a second after.
func (p *page) expectErrors(fn func()) {
	p.mu.Lock()
	p.allowUntil = time.Now().Add(time.Hour)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.allowUntil = time.Now().Add(time.Second)
		p.mu.Unlock()
	}()
	fn()
}

//go:embed browser_testdata/axe.min.js
var axeSource string

// axe runs axe-core (vendored, pinned: browser_testdata/axe.min.js) on the
// page: every violation is logged, serious and critical ones fail the test.
func (p *page) axe(t *testing.T, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](axeSource+";undefined"))
	require.NoError(t, err, "inject axe-core")
	type violation struct {
		ID     string   `json:"id"`
		Impact string   `json:"impact"`
		Help   string   `json:"help"`
		Nodes  []string `json:"nodes"`
	}
	vs, err := chromedp.Run(ctx, chromedp.Evaluate[[]violation](`axe.run(document, {resultTypes: ['violations']}).then(r =>
		r.violations.map(v => ({id: v.id, impact: v.impact || '', help: v.help, nodes: v.nodes.map(n => n.target.join(' '))})))`,
		chromedp.EvalAwaitPromise))
	require.NoError(t, err, "run axe-core")
	bad := 0
	for _, v := range vs {
		t.Logf("axe %s (%s): %s %s: %s at %s", what, p.name, v.Impact, v.ID, v.Help, strings.Join(v.Nodes, ", "))
		if v.Impact == "serious" || v.Impact == "critical" {
			bad++
		}
	}
	t.Logf("axe %s (%s): %d violations, %d serious or critical", what, p.name, len(vs), bad)
	assert.Zero(t, bad, "axe %s: serious or critical violations", what)
}

// clear empties an input as a user would, with an input event.
func (p *page) clear(t *testing.T, sel string) {
	t.Helper()
	p.do(t, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(el => { el.value = ''; el.dispatchEvent(new Event('input', {bubbles: true})); })(document.querySelector(%q))`, sel)))
}

// evalInt evaluates a numeric expression with the helpers in scope.
func (p *page) evalInt(t *testing.T, expr string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](js(expr)))
	require.NoError(t, err, p.name)
	return n
}

func (p *page) do(t *testing.T, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	err := chromedp.Do(ctx, steps...)
	if err != nil {
		p.failShot(t)
	}
	require.NoError(t, err, p.name)
}

func (p *page) signIn(t *testing.T, user, lobby string) {
	t.Helper()
	p.name = user
	p.do(t,
		chromedp.WaitVisible(`[data-testid="signin-name"]`),
		chromedp.SendKeys(`[data-testid="signin-name"]`, user),
		chromedp.SetValue(`[data-testid="signin-lobby"]`, lobby),
		chromedp.Click(`[data-testid="signin-submit"]`),
		chromedp.WaitVisible(`[data-testid="composer-input"]`),
	)
}

// say types text and presses Enter. The Enter is a keydown event: CDP's
// key events send Enter's character separately, so the newline a real
// browser never inserts (the page cancels the keydown) would land in the
// emptied composer.
func (p *page) say(t *testing.T, text string) {
	t.Helper()
	p.do(t, chromedp.SendKeys(`[data-testid="composer-input"]`, text),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('composer-input').dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', bubbles: true, cancelable: true}))`))
}

// js wraps an expression so that the helpers are in scope.
func js(expr string) string {
	return "(() => {" + helpers + "return (" + expr + ");})()"
}

// eval evaluates a boolean expression with the helpers in scope.
func (p *page) eval(t *testing.T, expr string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js("!!("+expr+")")))
	require.NoError(t, err, p.name)
	return ok
}

// waitJS waits until a boolean expression holds in the page.
func (p *page) waitJS(t *testing.T, expr, msg string) {
	t.Helper()
	p.waitJSFor(t, 15*time.Second, expr, msg)
}

// waitJSFor is waitJS with its own deadline, for a condition that follows
// the cluster's own periods (heartbeats, presence renewals).
func (p *page) waitJSFor(t *testing.T, d time.Duration, expr, msg string) {
	t.Helper()
	deadline := time.Now().Add(d)
	var err error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithDeadline(p.ctx, deadline.Add(5*time.Second))
		_, err = chromedp.Run(ctx, chromedp.Poll[bool](js("!!("+expr+")"),
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(time.Until(deadline))))
		cancel()
		// A page that reloads (sign-out) ends the poll: poll the new one.
		if err == nil || !strings.Contains(err.Error(), "navigated or closed") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		p.failShot(t)
	}
	require.NoError(t, err, "%s: %s", p.name, msg)
}

// failShot saves a screenshot of a page whose step failed.
func (p *page) failShot(t *testing.T) {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, p.name)
	p.screenshot(t, filepath.Join(artifactDir(t), fmt.Sprintf("failed-%s-%d.png", name, time.Now().UnixNano())))
}

func (p *page) texts(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	out, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](js("texts()")))
	require.NoError(t, err, p.name)
	return out
}

func (p *page) screenshot(t *testing.T, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Logf("%s: screenshot: %v", p.name, err)
		return
	}
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("%s: screenshot %s", p.name, path)
}

func (p *page) problems() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.errs...)
}

// artifactDir is CHATD_ARTIFACTS when set, else the test's temp dir.
func artifactDir(t *testing.T) string {
	if d := os.Getenv("CHATD_ARTIFACTS"); d != "" {
		require.NoError(t, os.MkdirAll(d, 0o755))
		return d
	}
	return t.TempDir()
}

// findChromium returns Debian's chromium, or skips (fails when
// CHATD_TEST_STRICT=1) without one.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("CHATD_CHROMIUM"), "chromium", "chromium-browser", "/usr/bin/chromium"} {
		if name == "" {
			continue
		}
		if path, err := exec.LookPath(name); err == nil {
			return path
		} else if !errors.Is(err, exec.ErrNotFound) && !errors.Is(err, os.ErrNotExist) {
			t.Logf("chromium %s: %v", name, err)
		}
	}
	if os.Getenv("CHATD_TEST_STRICT") == "1" {
		t.Fatal("chromium is not installed (apt-get install -y chromium); CHATD_TEST_STRICT=1 forbids skipping")
	}
	t.Skip("chromium is not installed (apt-get install -y chromium)")
	return ""
}

// browserOnTwoNodes is the set-up the browser tests share: Chromium (or a
// skip), a real Redis with nodes n1 and n2 on it, and a browser that ends
// limit after the start (then the test's chromedp calls fail instead of
// hanging).
func browserOnTwoNodes(t *testing.T, limit time.Duration) (n1, n2 *node, browser context.Context) {
	t.Helper()
	chromium := findChromium(t)
	r := redistest.Real(t)
	n1, n2 = startNode(t, r, "n1"), startNode(t, r, "n2")
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	t.Cleanup(cancel)
	return n1, n2, startBrowser(t, ctx, chromium)
}
