package hooks

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"

	"github.com/chatd/chatd/internal/keyspace"
)

// Name is a hook's name: connect, join, publish, match or rpc. It is the
// last path element of the hook's default URL and the X-Chatd-Hook header.
type Name string

// The hooks.
const (
	Connect Name = "connect"
	Join    Name = "join"
	Publish Name = "publish"
	Match   Name = "match"
	RPC     Name = "rpc"
)

// Names lists every hook, in the order the documentation gives them.
var Names = []Name{Connect, Join, Publish, Match, RPC}

// Failure is what a hook does when its backend does not answer.
type Failure string

// The failure policies.
const (
	// FailClosed refuses what the hook guards (the client gets
	// hook_unavailable); a match hook failing closed leaves the match
	// unannounced, and the matcher calls it again after a backoff.
	FailClosed Failure = "closed"
	// FailOpen lets it through as if the backend had allowed it, with no
	// data and the text unchanged.
	FailOpen Failure = "open"
)

// Header names of a hook request.
const (
	HeaderHook      = "X-Chatd-Hook"
	HeaderTimestamp = "X-Chatd-Timestamp"
	HeaderSignature = "X-Chatd-Signature"
	HeaderEventID   = "Idempotency-Key"
)

// ReplayWindow is how far a request's timestamp may be from the backend's
// clock before the backend should refuse it (documented; the example
// backend enforces it).
const ReplayWindow = 5 * time.Minute

// MaxReply is the largest reply body a hook reads; a larger one is a
// failure of the backend.
const MaxReply = 64 << 10

// HookConfig configures one hook. The zero value is the hook off.
type HookConfig struct {
	// URL receives the hook's POSTs; "" = the hook is off (today's
	// behaviour, at no cost).
	URL string
	// Timeout bounds one attempt; 0 = 2 s (publish: 1 s).
	Timeout time.Duration
	// Retries is how many times a failed attempt is made again (only
	// connect, join, publish and match: their requests are decisions the
	// backend recognises by the event id); 0 = none. rpc is never retried.
	Retries int
	// Failure is the policy when the backend does not answer; "" = the
	// hook's default (closed for connect, join, publish and rpc, open for
	// match).
	Failure Failure
	// Scope lists the lobbies (join, publish) or queues (match) the hook
	// applies to, as path.Match globs ("game-*", "ranked"); empty = all.
	// connect and rpc have no scope.
	Scope []string
}

// Config configures the hooks of a node.
type Config struct {
	// Hooks by name; a hook not in the map, or with no URL, is off.
	Hooks map[Name]HookConfig
	// Secrets sign every request (HMAC-SHA256 of "timestamp.body"), one
	// signature each, so a backend can rotate: add the new secret here,
	// then to the backend, then drop the old one. At least one is
	// required when a hook is on; each at least 16 bytes.
	Secrets []string
	// Node is this node's id, sent in every request.
	Node string
	// Redis and Prefix keep a match hook's answer (one per match, so a
	// retried match tells the same data); Redis is required with the
	// match hook.
	Redis  redis.UniversalClient
	Prefix string
	// BreakerFailures is how many failed calls in a row open a hook's
	// circuit breaker; 0 = 5.
	BreakerFailures int
	// BreakerOpen is how long an open breaker refuses before it lets one
	// call try; 0 = 10 s.
	BreakerOpen time.Duration
	// Client sends the requests; nil = a client of its own (no redirects
	// followed, idle connections kept per backend).
	Client *http.Client
	// Now is the clock of the timestamps; nil = time.Now.
	Now func() time.Time
	// Logger receives the logs; nil = slog.Default().
	Logger *slog.Logger
	// Registerer receives the metrics; nil = none.
	Registerer prometheus.Registerer
}

// Hooks calls the application's backend. A nil *Hooks has every hook off:
// each method then answers at once as if the backend allowed everything.
type Hooks struct {
	cfg   Config
	hooks map[Name]*hook
	ks    keyspace.Space
	m     *metrics
	log   *slog.Logger
}

// hook is one configured hook.
type hook struct {
	name    Name
	cfg     HookConfig
	breaker *gobreaker.CircuitBreaker[[]byte]
}

// New builds the hooks of cfg. With no hook on it returns nil, nil (every
// hook off). It returns an error for a bad URL, policy, scope or secret.
func New(cfg Config) (*Hooks, error) {
	on := false
	for _, n := range Names {
		if cfg.Hooks[n].URL != "" {
			on = true
		}
	}
	for n := range cfg.Hooks {
		if !known(n) {
			return nil, fmt.Errorf("hooks: unknown hook %q: expected connect, join, publish, match or rpc", n)
		}
	}
	if !on {
		return nil, nil
	}
	if len(cfg.Secrets) == 0 {
		return nil, errors.New("hooks: a hook is on but no secret signs its requests (--hook-secret)")
	}
	for _, s := range cfg.Secrets {
		if len(s) < 16 {
			return nil, errors.New("hooks: every hook secret must be at least 16 characters")
		}
	}
	if cfg.Hooks[Match].URL != "" && cfg.Redis == nil {
		return nil, errors.New("hooks: the match hook needs Config.Redis")
	}
	if cfg.BreakerFailures <= 0 {
		cfg.BreakerFailures = 5
	}
	if cfg.BreakerOpen <= 0 {
		cfg.BreakerOpen = 10 * time.Second
	}
	if cfg.Client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64
		cfg.Client = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &Hooks{cfg: cfg, hooks: map[Name]*hook{}, ks: keyspace.New(cfg.Prefix), log: cfg.Logger}
	h.m = newMetrics(cfg.Registerer)
	for _, n := range Names {
		hc := cfg.Hooks[n]
		if hc.URL == "" {
			continue
		}
		if !strings.HasPrefix(hc.URL, "http://") && !strings.HasPrefix(hc.URL, "https://") {
			return nil, fmt.Errorf("hooks: the %s hook's URL %q must be http:// or https://", n, hc.URL)
		}
		if hc.Timeout <= 0 {
			hc.Timeout = 2 * time.Second
			if n == Publish {
				hc.Timeout = time.Second
			}
		}
		if hc.Retries < 0 || hc.Retries > 5 {
			return nil, fmt.Errorf("hooks: the %s hook's retries must be 0 to 5", n)
		}
		if n == RPC {
			hc.Retries = 0          // a call may act: never sent twice by chatd
			hc.Failure = FailClosed // there is no answer to give without the backend
		}
		switch hc.Failure {
		case "":
			hc.Failure = FailClosed
			if n == Match {
				hc.Failure = FailOpen
			}
		case FailClosed, FailOpen:
		default:
			return nil, fmt.Errorf("hooks: the %s hook's failure policy %q: expected open or closed", n, hc.Failure)
		}
		for _, g := range hc.Scope {
			if _, err := path.Match(g, ""); err != nil {
				return nil, fmt.Errorf("hooks: the %s hook's scope %q: %w", n, g, err)
			}
		}
		hk := &hook{name: n, cfg: hc}
		hk.breaker = gobreaker.NewCircuitBreaker[[]byte](gobreaker.Settings{
			Name:        string(n),
			MaxRequests: 1, // half-open: one call tries
			Timeout:     cfg.BreakerOpen,
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= uint32(cfg.BreakerFailures) },
			OnStateChange: func(_ string, from, to gobreaker.State) {
				h.log.Warn("hook circuit breaker", "hook", n, "from", from.String(), "to", to.String())
			},
		})
		h.hooks[n] = hk
		h.m.breaker(n, hk.breaker)
		h.m.init(n)
	}
	return h, nil
}

func known(n Name) bool {
	for _, k := range Names {
		if k == n {
			return true
		}
	}
	return false
}

// On reports whether hook n is on. A nil *Hooks has none on.
func (h *Hooks) On(n Name) bool {
	return h != nil && h.hooks[n] != nil
}

// Applies reports whether hook n is on for the lobby or queue name (its
// Scope). A nil *Hooks has none on.
func (h *Hooks) Applies(n Name, name string) bool {
	if h == nil {
		return false
	}
	hk := h.hooks[n]
	if hk == nil {
		return false
	}
	if len(hk.cfg.Scope) == 0 {
		return true
	}
	for _, g := range hk.cfg.Scope {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// Failure returns hook n's failure policy ("" when off).
func (h *Hooks) Failure(n Name) Failure {
	if !h.On(n) {
		return ""
	}
	return h.hooks[n].cfg.Failure
}

// NewEventID returns a fresh event id (32 hex digits).
func NewEventID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// envelope is what every request body starts with.
type envelope struct {
	Hook Name   `json:"hook"`
	ID   string `json:"id"`
	Node string `json:"node"`
	TS   int64  `json:"ts"`
}

// Reply is a backend's answer, every field optional: {} allows. Deny
// refuses (the client gets hook_denied and Deny.Reason); Data is the
// connect hook's hello data, the match hook's matched data, the rpc
// hook's result; Text replaces a publish's text.
type Reply struct {
	Deny *Deny           `json:"deny,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
	Text *string         `json:"text,omitempty"`
}

// Deny is a refusal: Reason is told to the client.
type Deny struct {
	Reason string `json:"reason"`
}

// call sends body (the hook's request, its envelope filled here) to hook
// n's backend, with retries and the circuit breaker, and decodes the
// reply. A denial is a *DeniedError; a failure of the backend, whatever
// the policy, is an error wrapping ErrUnavailable, and failed tells which
// (the caller applies the policy, which may let it through).
func (h *Hooks) call(ctx context.Context, n Name, id string, req any) (Reply, error) {
	hk := h.hooks[n]
	start := time.Now()
	body, err := json.Marshal(req)
	if err != nil {
		return Reply{}, fmt.Errorf("hooks: %s: %w", n, err)
	}
	raw, err := hk.breaker.Execute(func() ([]byte, error) { return h.attempts(ctx, hk, id, body) })
	h.m.latency.WithLabelValues(string(n)).Observe(time.Since(start).Seconds())
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		h.m.errors.WithLabelValues(string(n), "breaker_open").Inc()
		err = errBreakerOpen
	}
	if err != nil {
		// the cause as text: a backend's timeout is not Redis's (errcode)
		return Reply{}, fmt.Errorf("%w: %s hook: %v", ErrUnavailable, n, err)
	}
	r, err := decodeReply(raw)
	if err != nil {
		h.m.errors.WithLabelValues(string(n), "bad_reply").Inc()
		return Reply{}, fmt.Errorf("%w: %s hook: the reply is not the documented JSON: %v", ErrUnavailable, n, err)
	}
	if r.Deny != nil {
		return r, &DeniedError{Hook: n, Reason: clip(r.Deny.Reason, 200)}
	}
	return r, nil
}

// decodeReply decodes a backend's reply: one JSON object of the Reply
// shape ("data": null is no data).
func decodeReply(raw []byte) (Reply, error) {
	var r Reply
	if err := json.Unmarshal(raw, &r); err != nil {
		return Reply{}, err
	}
	if string(r.Data) == "null" {
		r.Data = nil
	}
	return r, nil
}

// attempts makes the attempts of one call: the first, then up to Retries
// more after a failure, each with the same event id and body and a fresh
// timestamp and signature.
func (h *Hooks) attempts(ctx context.Context, hk *hook, id string, body []byte) ([]byte, error) {
	var err error
	for i := 0; i <= hk.cfg.Retries; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Duration(i) * 50 * time.Millisecond):
			}
		}
		var raw []byte
		raw, err = h.attempt(ctx, hk, id, body)
		if err == nil {
			return raw, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, err
}

// status is a reply status other than 200.
type statusError struct{ code int }

func (e statusError) Error() string { return "HTTP " + strconv.Itoa(e.code) }

func (h *Hooks) attempt(ctx context.Context, hk *hook, id string, body []byte) ([]byte, error) {
	actx, cancel := context.WithTimeout(ctx, hk.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, hk.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	ts := strconv.FormatInt(h.cfg.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "chatd-hooks")
	req.Header.Set(HeaderHook, string(hk.name))
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderEventID, id)
	req.Header.Set(HeaderSignature, Signature(h.cfg.Secrets, ts, body))
	resp, err := h.cfg.Client.Do(req)
	if err != nil {
		kind := "transport"
		if actx.Err() != nil {
			kind = "timeout"
		}
		h.m.errors.WithLabelValues(string(hk.name), kind).Inc()
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxReply+1))
	if err != nil {
		h.m.errors.WithLabelValues(string(hk.name), "transport").Inc()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		h.m.errors.WithLabelValues(string(hk.name), "status").Inc()
		return nil, statusError{resp.StatusCode}
	}
	if len(raw) > MaxReply {
		h.m.errors.WithLabelValues(string(hk.name), "bad_reply").Inc()
		return nil, fmt.Errorf("the reply is over %d bytes", MaxReply)
	}
	if !json.Valid(raw) {
		h.m.errors.WithLabelValues(string(hk.name), "bad_reply").Inc()
		return nil, errors.New("the reply is not JSON")
	}
	return raw, nil
}

// decide applies hook n's failure policy to err, a call's outcome, and
// counts the call by result. It returns err when the caller must refuse,
// nil when it goes on (allowed, or failed open).
func (h *Hooks) decide(n Name, err error) error {
	switch {
	case err == nil:
		h.m.calls.WithLabelValues(string(n), "allow").Inc()
		return nil
	case errors.Is(err, ErrDenied):
		h.m.calls.WithLabelValues(string(n), "deny").Inc()
		return err
	case h.hooks[n].cfg.Failure == FailOpen:
		h.m.calls.WithLabelValues(string(n), "failed_open").Inc()
		h.log.Debug("hook failed open", "hook", n, "err", err)
		return nil
	default:
		h.m.calls.WithLabelValues(string(n), "failed_closed").Inc()
		h.log.Debug("hook failed closed", "hook", n, "err", err)
		return err
	}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
