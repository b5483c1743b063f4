package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/chatd/chatd/errcode"
)

// maxAnswer bounds the body of one answer read into memory.
const maxAnswer = 32 << 20

// call is one REST request.
type call struct {
	method string
	path   string // under the base URL, with /api/v1
	query  url.Values
	body   any // JSON-encoded when non-nil
	out    any // 2xx answer decoded into it when non-nil
	// safe: the request may be sent again after a failure whose outcome
	// is unknown (a reset connection, a 502/503): reads, requests that
	// are idempotent by nature (join, leave, read marks), and requests
	// with an Idempotency-Key.
	safe  bool
	key   string        // Idempotency-Key header, "" for none
	wait  time.Duration // a long poll: added to the per-attempt timeout
	token *string       // token to send instead of the Client's
}

// CallOption changes one call.
type CallOption func(*callOpts)

type callOpts struct{ key string }

// WithIdempotencyKey sends key as the Idempotency-Key of a message post,
// score post or purchase instead of a fresh random one: for an
// application that persists the key to repeat the call after a restart
// of its own. A key is 1–128 bytes of printable ASCII without spaces. A
// grant (Grant) sends a key only when given one, and is retried then.
func WithIdempotencyKey(key string) CallOption { return func(o *callOpts) { o.key = key } }

// optsOf applies opts.
func optsOf(opts []CallOption) callOpts {
	var o callOpts
	for _, f := range opts {
		f(&o)
	}
	return o
}

// idemKey returns the key of opts, or a new random one: 128 bits in hex.
func idemKey(opts []CallOption) string {
	if k := optsOf(opts).key; k != "" {
		return k
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// do sends cl, retrying as the package doc describes, and decodes the
// answer.
func (c *Client) do(ctx context.Context, cl call) error {
	var body []byte
	if cl.body != nil {
		var err error
		if body, err = json.Marshal(cl.body); err != nil {
			return fmt.Errorf("client: %s %s: encode body: %w", cl.method, cl.path, err)
		}
	}
	for attempt := 0; ; attempt++ {
		base := c.eps.current()
		err := c.once(ctx, base, cl, body)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		retry, move := retryable(err, cl)
		if move {
			c.eps.failed(base)
		}
		if !retry || attempt >= c.retries {
			return err
		}
		d := c.backoff.Delay(attempt)
		var e *Error
		if errors.As(err, &e) && e.RetryAfter > 0 {
			d = e.RetryAfter // the server's word; ctx bounds the wait
		}
		c.log.Debug("chatd request: retrying", "op", cl.method+" "+cl.path, "attempt", attempt+1, "in", d, "err", err)
		if !sleep(ctx, d) {
			return err
		}
	}
}

// retryable says whether the failed call may be sent again, and whether
// the node it went to should be left for the next one.
func retryable(err error, cl call) (retry, move bool) {
	var e *Error
	if errors.As(err, &e) {
		switch e.Status {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			if e.Code == errcode.NotDurable {
				// The write was applied and waits for a replica: sent
				// again with its key it answers the first result once a
				// replica holds it, and stores nothing again; without
				// one it would be stored twice. The node is not at fault.
				return cl.safe && cl.key != "", false
			}
			return cl.safe, true
		case http.StatusConflict:
			// a purchase that lost its transaction: nothing was bought
			return cl.key != "" && e.Code == errcode.Conflict, false
		}
		return false, false
	}
	var ae *answerError
	if errors.As(err, &ae) {
		return cl.safe, false // a 2xx we could not read: the call took effect
	}
	// a transport error: the node may be gone. A request that never left
	// (the dial failed) may always go again.
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true, true
	}
	return cl.safe, true
}

// answerError is a 2xx answer that could not be read or decoded.
type answerError struct{ err error }

func (e *answerError) Error() string { return e.err.Error() }
func (e *answerError) Unwrap() error { return e.err }

// once sends one attempt of cl to base.
func (c *Client) once(ctx context.Context, base string, cl call, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout+cl.wait)
	defer cancel()
	u := base + cl.path
	if len(cl.query) > 0 {
		u += "?" + cl.query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	op := cl.method + " " + cl.path
	req, err := http.NewRequestWithContext(ctx, cl.method, u, rd)
	if err != nil {
		return fmt.Errorf("client: %s: %w", op, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.cfg.UserAgent)
	tok := c.Token()
	if cl.token != nil {
		tok = *cl.token
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if cl.key != "" {
		req.Header.Set("Idempotency-Key", cl.key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("client: %s: %w", op, err)
	}
	defer resp.Body.Close()
	p, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if resp.StatusCode/100 != 2 {
		return decodeError(op, resp, p)
	}
	if err != nil {
		return &answerError{fmt.Errorf("client: %s: read answer: %w", op, err)}
	}
	if cl.out != nil {
		if err := json.Unmarshal(p, cl.out); err != nil {
			return &answerError{fmt.Errorf("client: %s: decode answer %.100q: %w", op, p, err)}
		}
	}
	return nil
}

// decodeError makes the *Error of an answer outside 2xx.
func decodeError(op string, resp *http.Response, p []byte) *Error {
	var shape struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	e := &Error{Status: resp.StatusCode, Op: op, RetryAfter: retryAfter(resp.Header.Get("Retry-After"))}
	if json.Unmarshal(p, &shape) == nil && shape.Error.Code != "" {
		e.Code, e.Message = errcode.Code(shape.Error.Code), shape.Error.Message
		return e
	}
	e.Code = codeForStatus(resp.StatusCode)
	e.Message = http.StatusText(resp.StatusCode)
	if len(p) > 0 {
		e.Message = fmt.Sprintf("%s: %.200q", e.Message, p)
	}
	return e
}

// retryAfter parses a Retry-After header: delay-seconds or an HTTP date.
func retryAfter(h string) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(h, 64); err == nil && s >= 0 && s < 1e6 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(0, time.Until(t))
	}
	return 0
}

// path builds an /api/v1 path from segments, each escaped.
func path(segs ...string) string {
	var b []byte
	b = append(b, "/api/v1"...)
	for _, s := range segs {
		b = append(b, '/')
		b = append(b, url.PathEscape(s)...)
	}
	return string(b)
}
