package web

import (
	"strings"
	"sync"

	"github.com/gofiber/fiber/v2"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/names"
)

// Defaults of the per-principal caps on work in flight (Config fields of
// the same names say how to change them).
const (
	defaultMaxRequestsPerAddr = 256
	defaultMaxRequestsPerUser = 64
	defaultMaxPollsPerAddr    = 64
	defaultMaxPollsPerUser    = 8
	defaultMaxHistoryBuilds   = 4
)

// inflight counts the requests in flight on this node per key (a client
// address, a user): the work one principal can make a node hold at once.
type inflight struct {
	mu sync.Mutex
	n  map[string]int
}

// acquire takes one of key's max slots; false when all are taken. A max
// below 1 means no cap.
func (f *inflight) acquire(key string, max int) bool {
	if max < 1 {
		return true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == nil {
		f.n = map[string]int{}
	}
	if f.n[key] >= max {
		return false
	}
	f.n[key]++
	return true
}

// release gives back a slot acquire took.
func (f *inflight) release(key string, max int) {
	if max < 1 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n[key]--; f.n[key] <= 0 {
		delete(f.n, key)
	}
}

// capRequests refuses a request under /api/v1 while its client address
// has Config.MaxRequestsPerAddr requests in flight on this node, or the
// user of its token Config.MaxRequestsPerUser (429 rate_limited): a parked
// long poll or a slow reader holds its slots until it is answered. The
// user is the one of a valid user token (checked here by its signature
// alone, no Redis call; the route checks it again in full), over all its
// sessions and addresses: many addresses cannot make one user hold more.
// The event stream is not counted here: it is a connection, capped by
// limit.connections_per_ip.
func (s *Server) capRequests(c *fiber.Ctx) error {
	if strings.HasSuffix(c.Path(), "/events") {
		return c.Next()
	}
	addr, max := s.ip.clientIP(c), s.cfg.MaxRequestsPerAddr
	if !s.requests.acquire(addr, max) {
		return errf(errcode.RateLimited, "at most %d requests in flight from one address on one node; wait for an answer before sending more", max)
	}
	defer s.requests.release(addr, max)
	if tok := bearer(c); tok != "" && s.auth.adminRole(tok) == "" {
		if p, err := s.auth.tokens.verify(tok); err == nil {
			user, umax := "user:"+names.Canonical(p.User), s.cfg.MaxRequestsPerUser
			if !s.userRequests.acquire(user, umax) {
				return errf(errcode.RateLimited, "at most %d requests in flight for one user on one node; wait for an answer before sending more", umax)
			}
			defer s.userRequests.release(user, umax)
		}
	}
	return c.Next()
}

// parkPoll takes a long-poll slot of the client address and one of the
// user (Config.MaxPollsPerAddr, Config.MaxPollsPerUser) and returns the
// function that gives them back, or a rate_limited error.
func (h *pollAPI) parkPoll(c *fiber.Ctx, user string) (func(), error) {
	addr := "addr:" + h.ip.clientIP(c)
	if !h.polling.acquire(addr, h.maxPollsPerAddr) {
		return nil, errf(errcode.RateLimited, "at most %d long polls parked from one address on one node; poll with wait=0 or wait for an answer", h.maxPollsPerAddr)
	}
	u := "user:" + user
	if !h.polling.acquire(u, h.maxPollsPerUser) {
		h.polling.release(addr, h.maxPollsPerAddr)
		return nil, errf(errcode.RateLimited, "at most %d long polls parked for one user on one node; poll with wait=0 or wait for an answer", h.maxPollsPerUser)
	}
	return func() {
		h.polling.release(u, h.maxPollsPerUser)
		h.polling.release(addr, h.maxPollsPerAddr)
	}, nil
}
