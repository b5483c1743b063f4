// Package embedded runs an in-process Redis (miniredis) for a single chatd
// node with no Redis to talk to: the zero-setup default of `go run ./cmd/chatd`
// and the last-resort fallback of the tests.
//
// miniredis is a test double: by default its clock stands still, so TTLs never
// run out and a lock or a seat lease would live forever. Start turns on
// ClockTTL, which makes every TTL follow the wall clock as on a real server.
// It is one process's memory: two chatd nodes cannot share it, and it keeps
// nothing across restarts.
package embedded

import (
	"fmt"

	"github.com/alicebob/miniredis/v2"
)

// Server is an in-process Redis listening on a loopback port.
type Server struct {
	m *miniredis.Miniredis
}

// Start starts an embedded server on a free loopback port.
func Start() (*Server, error) {
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	if err := m.Start(); err != nil {
		return nil, fmt.Errorf("embedded redis: %w", err)
	}
	return &Server{m: m}, nil
}

// Addr returns the host:port the server listens on.
func (s *Server) Addr() string { return s.m.Addr() }

// Close stops the server and drops its data.
func (s *Server) Close() { s.m.Close() }
