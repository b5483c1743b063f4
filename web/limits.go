package web

import (
	"context"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/chatd/chatd/identity"
	"github.com/chatd/chatd/ratelimit"
	"github.com/chatd/chatd/settings"
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

// newSessionLimiter is the per-address bucket of POST /session:
// limit.sessions_per_ip_per_minute, as a rate of N/60 a second with a
// burst of N.
func (s *Server) newSessionLimiter() *ratelimit.Limiter {
	st := s.node.Settings()
	return ratelimit.New(s.rdb, ratelimit.Config{
		Prefix:     s.keyPrefix() + ":sessions",
		Rate:       func() float64 { return float64(st.Int(settings.SessionsPerIPPerMin)) / 60 },
		Burst:      func() float64 { return float64(st.Int(settings.SessionsPerIPPerMin)) },
		Now:        s.cfg.Now,
		Registerer: s.cfg.Registry,
	})
}

func (s *Server) keyPrefix() string {
	if s.cfg.Prefix == "" {
		return "chatd"
	}
	return s.cfg.Prefix
}

// allowSession takes a token of the address's session bucket.
func (s *Server) allowSession(ctx context.Context, ip string) error {
	if s.node.Settings().Int(settings.SessionsPerIPPerMin) == 0 {
		return nil
	}
	key, err := identity.RateKey(ip)
	if err != nil {
		return nil // not an IP (a unix socket): nothing to count
	}
	ok, retry, err := s.sessionLimiter.Allow(ctx, key)
	if err != nil {
		return err
	}
	if !ok {
		return errf(http.StatusTooManyRequests, "rate_limited",
			"too many new sessions from your address (at most %d a minute); retry in %.0f s",
			s.node.Settings().Int(settings.SessionsPerIPPerMin), max(1, retry.Round(time.Second).Seconds()))
	}
	return nil
}
