package web

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// TestShutdownStopsServeWhateverTheOrder: fasthttp's shutdown closes only
// the listeners its Serve has registered, so a Shutdown that came before
// Serve got that far left Serve accepting for ever (a web test hung in CI
// on it). Serve after Shutdown returns at once, and a Serve racing a
// Shutdown returns.
func TestShutdownStopsServeWhateverTheOrder(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	newServer := func() *Server {
		srv, _, shutdown := composeNode(t, nodeConfig{Redis: r.NewClient(t), Prefix: r.Prefix, Config: Config{Node: "n1",
			Secret: []byte(testSecret), AdminToken: testAdmin, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}})
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = shutdown(ctx)
		})
		return srv
	}
	served := func(srv *Server, ln net.Listener) <-chan error {
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ln) }()
		return done
	}
	shutdown := func(srv *Server) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}

	t.Run("Serve after Shutdown returns at once", func(t *testing.T) {
		srv := newServer()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		shutdown(srv)
		select {
		case <-served(srv, ln):
		case <-time.After(5 * time.Second):
			t.Fatal("Serve still serves after Shutdown")
		}
	})
	t.Run("a Serve racing a Shutdown returns", func(t *testing.T) {
		for range 20 {
			srv := newServer()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			done := served(srv, ln)
			shutdown(srv)
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				t.Fatal("Serve still serves after Shutdown")
			}
		}
	})
}
