package web

import (
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/gofiber/fiber/v2"
)

// requestIDKey is the fiber.Ctx local holding the request's id.
type requestIDKey struct{}

// maxRequestID bounds an X-Request-ID taken from a client or a balancer.
const maxRequestID = 64

// requestID is the outermost middleware: it gives every HTTP request an id
// and writes the request's log lines with it, so that a client's report, a
// balancer's access log and the node's log name the same request.
//
// The id is the request's X-Request-ID when that is a sane token (1–64 of
// [A-Za-z0-9._:+=/@-], as nginx's $request_id, a UUID or a trace id are),
// else 32 random hex digits; it is echoed in the answer's X-Request-ID.
// Each request is counted in chatd_http_request_duration_seconds and logged
// at debug ("request"); an error that leaves a handler is answered in the
// documented shape and logged with the id, at warn for a 5xx ("request
// failed"), at debug otherwise ("request refused").
func (s *Server) requestID(c *fiber.Ctx) error {
	id := c.Get(fiber.HeaderXRequestID)
	if !saneRequestID(id) {
		id = newRequestID()
	}
	c.Set(fiber.HeaderXRequestID, id)
	c.Locals(requestIDKey{}, id)
	start := time.Now()
	err := c.Next()
	status := c.Response().StatusCode()
	if err != nil {
		ae := toAPIError(err)
		status = ae.Status
		attrs := []any{"method", c.Method(), "path", c.Path(), "status", ae.Status, "code", ae.Code, "request_id", id, "err", err}
		if ae.Status >= 500 {
			s.log.Warn("request failed", attrs...)
		} else {
			s.log.Debug("request refused", attrs...)
		}
		if werr := writeError(c, ae); werr != nil {
			return werr
		}
	}
	s.m.observe(c.Method(), c.Route().Path, status, time.Since(start))
	s.log.Debug("request", "method", c.Method(), "path", c.Path(), "status", status, "dur", time.Since(start), "request_id", id)
	return nil
}

// RequestID returns the id requestID gave the request of c ("" outside
// a request it saw).
func RequestID(c *fiber.Ctx) string {
	id, _ := c.Locals(requestIDKey{}).(string)
	return id
}

// saneRequestID reports whether a client's X-Request-ID may be kept: it
// goes into log lines and an answer header as is.
func saneRequestID(id string) bool {
	if id == "" || len(id) > maxRequestID {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch b := id[i]; {
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9':
		case b == '.', b == '_', b == ':', b == '+', b == '=', b == '/', b == '@', b == '-':
		default:
			return false
		}
	}
	return true
}

// newRequestID is 128 random bits in hex.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}
