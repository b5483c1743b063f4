package web_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/web"
)

// TestBrowserClient drives the browser client in headless Chromium against
// two chatd nodes on one Redis: alice's page talks to n1, bob's page to n2
// through a TCP proxy the test can cut, like a network failure.
func TestBrowserClient(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)
	r := redistest.Real(t)

	n1 := startNode(t, r, "n1")
	n2 := startNode(t, r, "n2")
	proxy := newCutProxy(t, n2)

	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Second)
	defer cancel()
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
	defer cancelAlloc()
	browser, closeBrowser := chromedp.NewContext(alloc)
	defer closeBrowser()
	require.NoError(t, chromedp.Do(browser), "start chromium")

	alice := openPage(t, browser, "http://"+n1.addr+"/", 1280, 800)
	bob := openPage(t, browser, "http://"+proxy.addr()+"/", 360, 740) // a phone

	t.Run("two pages on two nodes share a room and see each other", func(t *testing.T) {
		bob.do(t, chromedp.WaitVisible(`[data-testid="signin-name"]`))
		bob.screenshot(t, filepath.Join(artifactDir(t), "browser-signin-360.png"))
		alice.signIn(t, "alice", "general")
		bob.signIn(t, "bob", "general")
		alice.waitJS(t, `text('room-label') === 'general · room 1 · 2/50'`, "alice sees the room with 2 of 50 seats taken")
		bob.waitJS(t, `text('room-label') === 'general · room 1 · 2/50'`, "bob sees the same room")
		alice.waitJS(t, `text('node-label') === 'node n1'`, "alice is served by n1")
		bob.waitJS(t, `text('node-label') === 'node n2'`, "bob is served by n2")
		alice.waitJS(t, `members().join() === 'alice,bob'`, "alice sees bob in presence")
		bob.waitJS(t, `members().join() === 'bob,alice'`, "bob sees alice in presence")
	})

	t.Run("messages go both ways, escaped, acked once", func(t *testing.T) {
		evil := `<img src=x onerror="document.body.dataset.pwned=1"><b>hi bob</b>`
		alice.say(t, evil)
		bob.waitJS(t, fmt.Sprintf(`texts().includes(%q)`, evil), "bob sees alice's text as text")
		alice.waitJS(t, fmt.Sprintf(`sent(%q)`, evil), "alice's message is acked")
		bob.say(t, "hi alice")
		alice.waitJS(t, `texts().includes('hi alice')`, "alice sees bob's message")
		for _, p := range []*page{alice, bob} {
			assert.True(t, p.eval(t, `!document.querySelector('#messages img, #messages b') && !document.body.dataset.pwned`),
				"%s: user text never becomes markup", p.name)
			assert.Equal(t, []string{evil, "hi alice"}, p.texts(t), "%s: each message once, in order", p.name)
		}
	})

	t.Run("an admin changes the MOTD and both pages show it without reload", func(t *testing.T) {
		alice.do(t, chromedp.Click(`[data-testid="tab-admin"]`))
		alice.do(t, chromedp.SetValue(`[data-testid="admin-token"]`, "adm"))
		alice.do(t, chromedp.Click(`[data-testid="admin-token-save"]`))
		alice.waitJS(t, `!!document.querySelector('[data-testid="setting-motd"]')`, "the settings form is built")
		alice.do(t, chromedp.SetValue(`[data-testid="setting-room.capacity"]`, "0"))
		alice.do(t, chromedp.Click(`[data-testid="setting-save-room.capacity"]`))
		alice.waitJS(t, `text2('[data-testid="setting-error-room.capacity"]') !== ''`,
			"a bad value shows the server's reason")
		alice.do(t, chromedp.SetValue(`[data-testid="setting-motd"]`, "Welcome to chatd <3"))
		alice.do(t, chromedp.Click(`[data-testid="setting-save-motd"]`))
		for _, p := range []*page{alice, bob} {
			p.waitJS(t, `!document.getElementById('motd').hidden && text('motd-text') === 'Welcome to chatd <3'`, p.name+" shows the new MOTD")
		}
		alice.do(t, chromedp.SetValue(`[data-testid="notice-text"]`, "Maintenance at 22:00 UTC"))
		alice.do(t, chromedp.Click(`[data-testid="notice-send"]`))
		for _, p := range []*page{alice, bob} {
			p.waitJS(t, `[...document.querySelectorAll('[data-testid="notice"]')].map(n => n.querySelector('.notice-text').textContent).join('|') === 'Maintenance at 22:00 UTC'`,
				p.name+" shows the notice once")
		}
	})

	t.Run("a page whose connection is cut reconnects and shows what it missed, once each", func(t *testing.T) {
		proxy.cut()
		bob.waitJS(t, `document.getElementById('conn-status').dataset.state !== 'open'`, "bob's page notices the cut")
		missed := []string{"missed 1", "missed 2", "missed 3"}
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
		bob.waitJS(t, `texts().length === 6 && sent('typed while offline')`, "bob sees what he missed and sends what he typed")
		want := []string{`<img src=x onerror="document.body.dataset.pwned=1"><b>hi bob</b>`, "hi alice", "missed 1", "missed 2", "missed 3", "typed while offline"}
		assert.Equal(t, want, bob.texts(t), "bob: every message once, in order")
		alice.waitJS(t, `texts().length === 6`, "alice gets bob's offline message")
		assert.Equal(t, want, alice.texts(t), "alice: every message once, in order")
		alice.waitJS(t, `members().join() === 'alice,bob'`, "bob is back in alice's presence list")
	})

	t.Run("refused messages show the reason inline, with retry and discard", func(t *testing.T) {
		admin(t, n1, http.MethodPut, "message.max_length", `{"value": 12}`)
		alice.waitJS(t, `document.querySelector('[data-testid="setting-message.max_length"]').value === '12'`, "the new limit reaches the page")
		alice.say(t, "far too long for twelve")
		alice.waitJS(t, `(m => m && m.dataset.state === 'error' && /too long/i.test(m.textContent))(document.querySelector('[data-code="too_long"]'))`,
			"too_long is shown next to the message")
		alice.do(t, chromedp.Click(`[data-code="too_long"] [data-testid="message-error"] button:last-child`))
		alice.waitJS(t, `!document.querySelector('[data-code="too_long"]')`, "Discard removes it")
		admin(t, n1, http.MethodDelete, "message.max_length", "")
		alice.waitJS(t, `document.querySelector('[data-testid="setting-message.max_length"]').value === '2000'`, "the default limit is back")

		admin(t, n1, http.MethodPut, "rate.messages_per_second", `{"value": 0.2}`)
		alice.waitJS(t, `document.querySelector('[data-testid="setting-rate.messages_per_second"]').value === '0.2'`, "the new rate reaches the page")
		alice.say(t, "fast 1")
		alice.say(t, "fast 2")
		alice.waitJS(t, `!!document.querySelector('[data-code="rate_limited"][data-state="error"]')`, "rate_limited is shown next to the message")
		admin(t, n1, http.MethodDelete, "rate.messages_per_second", "")
		alice.waitJS(t, `document.querySelector('[data-testid="setting-rate.messages_per_second"]').value === '10'`, "the default rate is back")
		// Retry (at most twice a second) until the limiter lets it through.
		alice.waitJS(t, `((b) => {
			if (b && !(Date.now() - (window.lastRetry || 0) < 500)) { window.lastRetry = Date.now(); b.click(); }
			return sent('fast 1') && sent('fast 2');
		})(document.querySelector('[data-state="error"] [data-testid="message-error"] button'))`, "Retry sends it")
		bob.waitJS(t, `texts().slice(-2).join() === 'fast 1,fast 2'`, "bob gets both, once each")
	})

	t.Run("the leaderboard game posts a score", func(t *testing.T) {
		alice.do(t, chromedp.Click(`[data-testid="tab-board"]`))
		alice.do(t, chromedp.Click(`[data-testid="game-start"]`))
		for i := 0; i < 7; i++ {
			alice.do(t, chromedp.Click(`[data-testid="game-target"]`))
		}
		alice.waitJS(t, `/^7 clicks\./.test(text('game-status'))`, "the round ends and the score is posted")
		alice.waitJS(t, `text('lb-me').startsWith('#1 with 7 clicks')`, "alice is first on today's board")
		alice.waitJS(t, `[...document.querySelectorAll('#lb-top [data-testid="lb-entry"]')].map(e => e.dataset.player).join() === 'alice'`, "the top 10 shows her")
	})

	shots := artifactDir(t)
	alice.waitJS(t, `text2('[data-user="bob"] [data-testid="member-node"]') === 'n2'`, "alice sees which node serves bob")
	alice.do(t, chromedp.Click(`[data-testid="tab-admin"]`), chromedp.Evaluate[chromedp.Void](`document.getElementById('admin-panel').scrollTop = 0`))
	alice.screenshot(t, filepath.Join(shots, "browser-admin-1280.png"))
	alice.do(t, chromedp.Click(`[data-testid="tab-board"]`))
	alice.screenshot(t, filepath.Join(shots, "browser-main-1280.png"))
	bob.screenshot(t, filepath.Join(shots, "browser-main-360.png"))
	bob.do(t, darkMode)
	bob.screenshot(t, filepath.Join(shots, "browser-main-360-dark.png"))

	for _, p := range []*page{alice, bob} {
		assert.Empty(t, p.problems(), "%s: no script errors or CSP violations", p.name)
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

	t.Run("scripts and styles have their types", func(t *testing.T) {
		for path, typ := range map[string]string{
			"/app.js": "text/javascript; charset=utf-8", "/conn.js": "text/javascript; charset=utf-8",
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
	srv  *web.Server
	addr string // host:port
}

func startNode(t *testing.T, r *redistest.Redis, id string) *node {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("CHATD_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	srv, err := web.New(web.Config{
		Redis: r.NewClient(t), Prefix: r.Prefix, Node: id,
		Secret: []byte("browser-test-secret-0123456789abcdef"), AdminToken: "adm", Logger: logger,
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

// page is one browser tab on the client.
type page struct {
	name string
	ctx  context.Context

	mu   sync.Mutex
	errs []string
}

// helpers is evaluated in every page before the test's expressions.
const helpers = `
var text = (id) => (document.getElementById(id) || {}).textContent || '';
var text2 = (sel) => (document.querySelector(sel) || {}).textContent || '';
var members = () => [...document.querySelectorAll('[data-testid="member"]')].map(m => m.dataset.user);
var texts = () => [...document.querySelectorAll('[data-testid="message-text"]')].map(m => m.textContent);
var sent = (t) => [...document.querySelectorAll('[data-testid="message"][data-state="sent"]')]
  .some(m => m.dataset.id && m.querySelector('[data-testid="message-text"]').textContent === t);
`

func openPage(t *testing.T, browser context.Context, url string, w, h int64) *page {
	t.Helper()
	tab, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	p := &page{name: url, ctx: tab}
	require.NoError(t, chromedp.Do(tab, chromedp.EmulateViewport(w, h)))
	console := chromedp.Console(tab)
	go func() {
		for m, err := range console {
			if err != nil {
				return
			}
			// A cut connection logs network errors; those are expected.
			// Exceptions and CSP violations are not.
			if m.IsException() || strings.Contains(m.Text, "Content Security Policy") {
				p.mu.Lock()
				p.errs = append(p.errs, m.String())
				p.mu.Unlock()
			}
		}
	}()
	require.NoError(t, chromedp.Do(tab, chromedp.Navigate(url)))
	return p
}

func (p *page) do(t *testing.T, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, steps...), p.name)
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

// say types text and presses Enter.
func (p *page) say(t *testing.T, text string) {
	t.Helper()
	p.do(t, chromedp.SendKeys(`[data-testid="composer-input"]`, text+"\r"))
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
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](js("!!("+expr+")"),
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(15*time.Second)))
	if err != nil {
		shot := filepath.Join(artifactDir(t), fmt.Sprintf("failed-%s-%d.png", p.name, time.Now().UnixNano()))
		p.screenshot(t, shot)
	}
	require.NoError(t, err, "%s: %s", p.name, msg)
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
