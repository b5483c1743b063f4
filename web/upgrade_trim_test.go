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
)

// An upgraded connection keeps none of its request's query, cookies or
// non-handshake headers in contrib/websocket's Conn (they would be held for
// the connection's life), and the upgrade still works with all of them sent.
func TestUpgradeKeepsNoneOfTheRequestButTheLocals(t *testing.T) {
	type seen struct {
		token, batch, cookie, agent, custom, local string
	}
	got := make(chan seen, 1)
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/ws", func(c *fiber.Ctx) error {
		c.Locals("kept", c.Query("token"))
		trimForUpgrade(c)
		return c.Next()
	}, websocket.New(func(conn *websocket.Conn) {
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
}
