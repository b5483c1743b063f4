package web_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBrowserFallsBackToSSE drives the browser client in headless
// Chromium through a proxy that refuses every WebSocket upgrade (403) and
// passes everything else, like a network that breaks upgrades: the page
// signs in, falls back to the Server-Sent Events stream with its sends
// over HTTP, says so in its status line, and chats with a WebSocket user
// on another node.
func TestBrowserFallsBackToSSE(t *testing.T) {
	t.Parallel()
	n1, n2, browser := browserOnTwoNodes(t, 120*time.Second)
	proxy := newUpgradeRefusingProxy(t, n1)

	alice := openPage(t, browser, "http://"+proxy.addr+"/", 1280, 800)
	bob := openPage(t, browser, "http://"+n2.addr+"/", 1280, 800)

	alice.expectErrors(func() { // the browser logs the refused WebSocket
		alice.signIn(t, "alice", "general")
		alice.waitJS(t, `text('conn-text') + ' · ' + text('conn-via') === 'live · SSE' && document.getElementById('conn-status').dataset.state === 'open'`,
			"alice's page falls back to SSE and says so")
	})
	assert.Greater(t, proxy.refused.Load(), int64(0), "the page tried the WebSocket first")
	assert.Greater(t, proxy.streams.Load(), int64(0), "the page opened the event stream")
	bob.signIn(t, "bob", "general")
	bob.waitJS(t, `text('conn-text') + ' · ' + text('conn-via') === 'live · WebSocket'`, "bob's page is on the WebSocket")

	alice.waitJS(t, `text('room-label') === 'general · room 1 · 2/50' && members().join() === 'alice,bob'`, "alice sees the room and bob in it")
	bob.waitJS(t, `text('room-label') === 'general · room 1 · 2/50' && members().join() === 'bob,alice'`, "bob sees alice in it")
	alice.waitJS(t, `text('conn-node') === 'n1' && text('conn-transport') === 'SSE, sends over HTTP'`, "the details name the node and the transport")

	alice.say(t, "hello over sse")
	alice.waitJS(t, `sent('hello over sse')`, "alice's message is stored (its POST answered)")
	bob.waitJS(t, `texts().includes('hello over sse')`, "bob gets it on n2")
	bob.say(t, "hello over websocket")
	alice.waitJS(t, `texts().join('|') === 'hello over sse|hello over websocket'`, "alice gets bob's answer over the stream, each message once")
	bob.waitJS(t, `texts().join('|') === 'hello over sse|hello over websocket'`, "bob has both, in the same order")
	assert.True(t, alice.eval(t, `sentTypes().length === 0`), "alice's page sent no WebSocket frame")

	// typing, both ways: bob's frame reaches alice's stream; alice's
	// indicator goes over HTTP (POST …/typing) and reaches bob's socket
	bob.do(t, chromedp.SendKeys(`[data-testid="composer-input"]`, "bob types"))
	alice.waitJS(t, `text('typing') === 'bob is typing…'`, "alice sees bob typing, on the stream")
	alice.do(t, chromedp.SendKeys(`[data-testid="composer-input"]`, "alice types"))
	bob.waitJS(t, `text('typing') === 'alice is typing…'`, "bob sees alice typing, sent over HTTP")
	bob.clear(t, `[data-testid="composer-input"]`)
	alice.clear(t, `[data-testid="composer-input"]`)

	// The stream is cut (a proxy timeout, a node gone): the page opens it
	// again, still as SSE, and the position (Last-Event-ID) brings what
	// was said meanwhile, once.
	alice.expectErrors(func() {
		streams := proxy.streams.Load()
		alice.do(t, chromedp.Evaluate[chromedp.Void](`window.reconnectsBefore = document.getElementById('conn-reconnects').textContent`))
		proxy.cutStreams()
		alice.waitJS(t, `text('conn-reconnects') !== window.reconnectsBefore`, "alice's page sees its stream end")
		bob.say(t, "while the stream was down")
		bob.waitJS(t, `sent('while the stream was down')`, "bob's message is stored")
		alice.waitJS(t, `texts().join('|') === 'hello over sse|hello over websocket|while the stream was down'`, "alice gets what she missed, once")
		assert.Greater(t, proxy.streams.Load(), streams, "the page opened a new stream")
	})
	alice.waitJS(t, `text('conn-via') === 'SSE' && document.getElementById('conn-status').dataset.state === 'open'`, "live again, still over SSE")
	alice.say(t, "back on the stream")
	bob.waitJS(t, `texts().at(-1) === 'back on the stream'`, "alice can still talk")

	// A lobby switch over SSE: the leave and the join are HTTP calls, and
	// the stream follows the session into the new room.
	alice.do(t, chromedp.SetValue(`[data-testid="lobby-input"]`, "side"),
		chromedp.Click(`[data-testid="lobby-join"]`))
	alice.waitJS(t, `text('room-label') === 'side · room 1 · 1/50' && members().join() === 'alice' && texts().length === 0`, "alice is alone in the new lobby")
	bob.waitJS(t, `members().join() === 'bob'`, "bob sees alice leave")
	alice.say(t, "in the side lobby")
	alice.waitJS(t, `sent('in the side lobby') && texts().join() === 'in the side lobby'`, "alice's message in the new room comes back on the stream, once")
	assert.False(t, bob.eval(t, `texts().includes('in the side lobby')`), "not in bob's room")
	assert.Empty(t, bob.problems(), "bob's page: no console errors")
	assert.Empty(t, alice.problems(), "alice's page: no console errors besides the refused WebSocket and the cut")
}

// upgradeRefusingProxy forwards HTTP to a node, streaming (an SSE answer
// is flushed as it comes), and answers every WebSocket upgrade 403.
type upgradeRefusingProxy struct {
	addr    string
	refused atomic.Int64
	streams atomic.Int64

	mu   sync.Mutex
	cuts map[*context.CancelFunc]struct{} // of the event streams open
}

// cutStreams ends every event stream open through the proxy, as a
// network that drops a long response would.
func (p *upgradeRefusingProxy) cutStreams() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.cuts {
		(*c)()
	}
	clear(p.cuts)
}

func newUpgradeRefusingProxy(t *testing.T, to *node) *upgradeRefusingProxy {
	t.Helper()
	target, err := url.Parse("http://" + to.addr)
	require.NoError(t, err)
	p := &upgradeRefusingProxy{cuts: map[*context.CancelFunc]struct{}{}}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		FlushInterval: -1,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.addr = ln.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") || strings.Contains(strings.ToLower(r.Header.Get("Connection")), "upgrade") {
			p.refused.Add(1)
			http.Error(w, "upgrades are not allowed on this network", http.StatusForbidden)
			return
		}
		if r.URL.Path == "/api/v1/events" {
			p.streams.Add(1)
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			p.mu.Lock()
			p.cuts[&cancel] = struct{}{}
			p.mu.Unlock()
			defer func() {
				p.mu.Lock()
				delete(p.cuts, &cancel)
				p.mu.Unlock()
			}()
			r = r.WithContext(ctx)
		}
		rp.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			_ = srv.Close() // the event stream does not end by itself
		}
	})
	return p
}
