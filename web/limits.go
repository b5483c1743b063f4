package web

import (
	"net"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// proxies are the peers trusted to name the client address in
// X-Forwarded-For (Config.TrustedProxies).
type proxies []*net.IPNet

// clientIP is the request's client address: the peer's, or, when the peer
// is a trusted proxy, the right-most address of X-Forwarded-For that is not
// a trusted proxy itself (addresses left of it are the client's to forge).
func (p proxies) clientIP(c *fiber.Ctx) string {
	peer := c.Context().RemoteIP()
	if !p.trusted(peer) {
		return peer.String()
	}
	xff := string(c.Request().Header.Peek(fiber.HeaderXForwardedFor))
	parts := strings.Split(xff, ",")
	for i := len(parts) - 1; i >= 0; i-- {
		ip := net.ParseIP(strings.TrimSpace(parts[i]))
		if ip == nil {
			break
		}
		if !p.trusted(ip) {
			return ip.String()
		}
	}
	return peer.String()
}

func (p proxies) trusted(ip net.IP) bool {
	for _, n := range p {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}
