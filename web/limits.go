package web

import (
	"net"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// clientIP is the request's client address: the peer's, or, when the peer
// is a trusted proxy, the right-most address of X-Forwarded-For that is not
// a trusted proxy itself (addresses left of it are the client's to forge).
func (s *Server) clientIP(c *fiber.Ctx) string {
	peer := c.Context().RemoteIP()
	if !s.trusted(peer) {
		return peer.String()
	}
	xff := string(c.Request().Header.Peek(fiber.HeaderXForwardedFor))
	parts := strings.Split(xff, ",")
	for i := len(parts) - 1; i >= 0; i-- {
		ip := net.ParseIP(strings.TrimSpace(parts[i]))
		if ip == nil {
			break
		}
		if !s.trusted(ip) {
			return ip.String()
		}
	}
	return peer.String()
}

func (s *Server) trusted(ip net.IP) bool {
	for _, n := range s.cfg.TrustedProxies {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}
