package web

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	fws "github.com/fasthttp/websocket"
	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
)

// An upgraded connection keeps none of its request's query, cookies or
// non-handshake headers in contrib/websocket's Conn, and fasthttp's copy of
// the request is released once the connection is upgraded (both would be
// held for the connection's life); the upgrade still works with all of
// them sent, and the released request context serves later requests.
func TestUpgradeKeepsNoneOfTheRequestButTheLocals(t *testing.T) {
	type seen struct {
		token, batch, cookie, agent, custom, local string
	}
	got := make(chan seen, 1)
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/ws", func(c *fiber.Ctx) error {
		c.Locals("kept", c.Query("token"))
		c.Locals(localRequest, c.Context())
		trimForUpgrade(c)
		return c.Next()
	}, websocket.New(func(conn *websocket.Conn) {
		rc := conn.Locals(localRequest).(*fasthttp.RequestCtx)
		require.Contains(t, string(rc.Request.Header.Header()), "Sec-Websocket-Key", "fasthttp still holds the request")
		releaseRequest(rc)
		assert.NotContains(t, string(rc.Request.Header.Header()), "Sec-Websocket-Key", "and no longer after releaseRequest")
		assert.Empty(t, rc.Request.Header.RawHeaders())
		s := seen{
			token:  conn.Query("token"),
			batch:  conn.Query("batch"),
			cookie: conn.Cookies("sid"),
			agent:  conn.Headers("User-Agent"),
			custom: conn.Headers("X-Custom"),
		}
		s.local, _ = conn.Locals("kept").(string)
		got <- s
		_ = conn.WriteMessage(websocket.TextMessage, []byte("ok"))
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown() })

	h := http.Header{}
	h.Set("User-Agent", "Mozilla/5.0 "+strings.Repeat("x", 200))
	h.Set("X-Custom", "yes")
	h.Set("Cookie", "sid=secret; other=1")
	h.Set("Origin", "http://"+ln.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, resp, err := (&fws.Dialer{}).DialContext(ctx, "ws://"+ln.Addr().String()+"/ws?token=tok123&batch=1", h)
	require.NoError(t, err, "the upgrade works with the request trimmed")
	defer ws.Close()
	assert.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	_, msg, err := ws.ReadMessage()
	require.NoError(t, err)
	assert.Equal(t, "ok", string(msg))

	s := <-got
	assert.Equal(t, "tok123", s.local, "the locals set before the trim are kept")
	assert.Empty(t, s.token, "the token is not kept")
	assert.Empty(t, s.batch)
	assert.Empty(t, s.cookie, "cookies are not kept")
	assert.Empty(t, s.agent, "headers the handshake does not read are not kept")
	assert.Empty(t, s.custom)

	// the released RequestCtx goes back to fasthttp's pool at the end and
	// serves the next requests
	for range 3 {
		ws2, _, err := (&fws.Dialer{}).DialContext(ctx, "ws://"+ln.Addr().String()+"/ws?token=again", h)
		require.NoError(t, err)
		<-got
		_, msg, err = ws2.ReadMessage()
		require.NoError(t, err)
		assert.Equal(t, "ok", string(msg))
		ws2.Close()
	}
}
