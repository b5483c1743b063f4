package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// noUpgradeProxy is an HTTP proxy in front of a node that forwards plain
// requests (the event stream among them) and refuses every WebSocket
// upgrade, as some corporate proxies do.
type noUpgradeProxy struct {
	addr    string
	refused atomic.Int64
}

// newNoUpgradeProxy proxies to the nodes round robin.
func newNoUpgradeProxy(t *testing.T, to ...*node) *noUpgradeProxy {
	t.Helper()
	var next atomic.Int64
	rp := &httputil.ReverseProxy{ // flushes text/event-stream at once
		Rewrite: func(r *httputil.ProxyRequest) {
			n := to[int(next.Add(1))%len(to)]
			r.SetURL(&url.URL{Scheme: "http", Host: n.addr})
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, err.Error(), http.StatusBadGateway)
		},
	}
	p := &noUpgradeProxy{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.addr = ln.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			p.refused.Add(1)
			http.Error(w, "WebSockets are not allowed here", http.StatusForbidden)
			return
		}
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = srv.Close()
	})
	return p
}

// restCall sends one API request straight to a node.
func restCall(t *testing.T, n *node, method, path, token string, body any, out any) {
	t.Helper()
	var rd *strings.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = strings.NewReader(string(b))
	} else {
		rd = strings.NewReader("")
	}
	req, err := http.NewRequest(method, "http://"+n.addr+"/api/v1"+path, rd)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode, "%s %s", method, path)
	if out != nil {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
	}
}

// TestBrowserSSEResumesAfterADrain: on the event stream, a node
// that drains ends the page's stream with reconnect; the page reopens it
// through the proxy on the other node with its position and shows the
// message sent meanwhile, once.
func TestBrowserSSEResumesAfterADrain(t *testing.T) {
	t.Parallel()
	n1, n2, browser := browserOnTwoNodes(t, 120*time.Second)
	proxy := newNoUpgradeProxy(t, n1, n2)
	sam := openPage(t, browser, "http://"+proxy.addr+"/", 1280, 800)
	sam.expectErrors(func() {
		sam.signIn(t, "sam", "drain")
		sam.waitJS(t, `text('conn-text') + ' · ' + text('conn-via') === 'live · SSE'`, "on the event stream")
	})
	sam.waitJS(t, `text('room-label') === 'drain · room 1 · 1/50'`, "seated")
	sam.waitJS(t, `text('conn-node') !== '' && text('conn-node') !== '—'`, "a node said hello")

	var s struct{ Token string }
	restCall(t, n2, "POST", "/session", "", map[string]string{"user": "bob"}, &s)
	bob := s.Token
	var joined struct{ Room struct{ ID string } }
	restCall(t, n2, "POST", "/lobbies/drain/join", bob, nil, &joined)
	room := joined.Room.ID
	restCall(t, n2, "POST", "/rooms/"+room+"/messages", bob, map[string]string{"text": "before"}, nil)
	sam.waitJS(t, `texts().includes('before')`, "live on the stream")

	// drain the node that holds the page's stream; the other one stays
	holder, other := n1, n2
	if sam.eval(t, `text('conn-node') === 'n2'`) {
		holder, other = n2, n1
	}
	sam.expectErrors(func() { // the proxy's 502s while it tries the drained node
		dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer dcancel()
		_ = holder.srv.Shutdown(dctx)
		restCall(t, other, "POST", "/rooms/"+room+"/messages", bob, map[string]string{"text": "meanwhile"}, nil)
		sam.waitJS(t, fmt.Sprintf(`text('conn-node') === %q && text('conn-text') + ' · ' + text('conn-via') === 'live · SSE'`, other.srv.Web.Node()), "the stream reopened on the other node")
	})
	sam.waitJS(t, `texts().includes('meanwhile')`, "the message sent while the stream moved arrives")
	restCall(t, other, "POST", "/rooms/"+room+"/messages", bob, map[string]string{"text": "after"}, nil)
	sam.waitJS(t, `texts().includes('after')`, "live again")
	assert.Equal(t, 1, sam.evalInt(t, `texts().filter(x => x === 'before').length`), "nothing replayed twice")
	assert.Equal(t, 1, sam.evalInt(t, `texts().filter(x => x === 'meanwhile').length`), "the missed message once")
}
