package client

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Config configures a Client. Only a base URL is required.
type Config struct {
	// BaseURL is a node or the balancer in front of the nodes:
	// http(s)://host[:port]. Ignored when NodeURLs is set.
	BaseURL string
	// NodeURLs are nodes to use in turn: requests and WebSockets go to the
	// current one, and a connection that fails moves to the next (a
	// client of a cluster without a balancer).
	NodeURLs []string
	// NextURL, if set, picks the URL to use after failed failed (a
	// service-discovery lookup, say); it overrides the rotation of
	// NodeURLs, and its answers must be http(s) URLs (another answer keeps
	// the URL in use). It is called without locks held, from the goroutine
	// of the failed request or of a Conn's reconnect, so it must be safe
	// for concurrent use and return promptly: Conn.Close waits for it.
	NextURL func(failed string) string
	// HTTPClient sends the REST requests; nil uses a client of its own
	// with keep-alive. Its Timeout, if any, bounds every request, long
	// polls included; leave it 0 and use RequestTimeout.
	HTTPClient *http.Client
	// Token is the session token to send (from SignIn, or a login
	// service). A Client without one can only sign in and read what needs
	// no user.
	Token string
	// Logger receives the SDK's debug and warning lines (reconnects,
	// retries, undecodable events); nil discards them.
	Logger *slog.Logger
	// RequestTimeout bounds one attempt of one request (a long poll gets
	// its wait on top); 0 means 15 s.
	RequestTimeout time.Duration
	// Retries is how many times a failed request that is safe to repeat
	// is sent again (see the package doc, "Retries"); 0 means 2, a
	// negative value none.
	Retries int
	// Backoff is the delay between retries and reconnects; zero fields
	// take its defaults.
	Backoff Backoff
	// UserAgent is sent on every request; "" sends "chatd-go-client".
	UserAgent string
}

// Client is a chatd client for one session (one token), safe for
// concurrent use. Its REST methods each take a context; Connect opens the
// realtime WebSocket of the session.
type Client struct {
	cfg     Config
	hc      *http.Client
	eps     *endpoints
	log     *slog.Logger
	retries int
	backoff Backoff

	mu    sync.RWMutex
	token string
	user  string
}

// New returns a Client for cfg. It makes no request.
func New(cfg Config) (*Client, error) {
	urls := cfg.NodeURLs
	if len(urls) == 0 {
		if cfg.BaseURL == "" {
			return nil, errors.New("client: Config needs BaseURL or NodeURLs")
		}
		urls = []string{cfg.BaseURL}
	}
	clean := make([]string, len(urls))
	for i, u := range urls {
		c, err := cleanURL(u)
		if err != nil {
			return nil, err
		}
		clean[i] = c
	}
	c := &Client{
		cfg:     cfg,
		hc:      cfg.HTTPClient,
		eps:     &endpoints{urls: clean, next: cfg.NextURL},
		log:     cfg.Logger,
		retries: cfg.Retries,
		backoff: cfg.Backoff.withDefaults(),
	}
	if c.hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 16
		c.hc = &http.Client{Transport: tr}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.retries == 0 {
		c.retries = 2
	} else if c.retries < 0 {
		c.retries = 0
	}
	if c.cfg.RequestTimeout <= 0 {
		c.cfg.RequestTimeout = 15 * time.Second
	}
	if c.cfg.UserAgent == "" {
		c.cfg.UserAgent = "chatd-go-client"
	}
	c.setToken(cfg.Token, "")
	return c, nil
}

// cleanURL checks that u is an http(s) URL and drops a trailing slash.
func cleanURL(u string) (string, error) {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return "", fmt.Errorf("client: %q: expected http(s)://host[:port]", u)
	}
	return strings.TrimRight(u, "/"), nil
}

// Token returns the session token ("" before SignIn).
func (c *Client) Token() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.token
}

// User returns the user of the token (its sub claim), or "".
func (c *Client) User() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.user
}

// URL returns the base URL requests go to now.
func (c *Client) URL() string { return c.eps.current() }

// WithToken returns a Client like c (same URLs, HTTP client and options)
// for another token: a token from a login service, or the admin token.
func (c *Client) WithToken(token string) *Client {
	d := &Client{cfg: c.cfg, hc: c.hc, eps: c.eps, log: c.log, retries: c.retries, backoff: c.backoff}
	d.setToken(token, "")
	return d
}

// setToken sets the token and the user: user if given, else the token's
// sub claim (read, not verified: the server verifies).
func (c *Client) setToken(token, user string) {
	if user == "" {
		user = tokenUser(token)
	}
	c.mu.Lock()
	c.token, c.user = token, user
	c.mu.Unlock()
}

// tokenUser reads the sub claim of a JWT without verifying it; "" if the
// token is not a JWT.
func tokenUser(token string) string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return ""
	}
	p, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var claims struct {
		Sub string `json:"sub"`
	}
	if json.Unmarshal(p, &claims) != nil {
		return ""
	}
	return claims.Sub
}

// endpoints is the URL in use and how to move on after a failure, shared
// by a Client, the Clients made from it and their Conns.
type endpoints struct {
	next func(failed string) string

	mu   sync.Mutex
	urls []string
	i    int
	cur  string // NextURL's last answer, when next is set
}

func (e *endpoints) current() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cur != "" {
		return e.cur
	}
	return e.urls[e.i]
}

// failed moves past u if it is still the current URL (several requests
// failing on one node move on once), and returns the URL to use now.
func (e *endpoints) failed(u string) string {
	e.mu.Lock()
	if u != e.currentLocked() {
		defer e.mu.Unlock()
		return e.currentLocked()
	}
	if e.next == nil {
		e.i = (e.i + 1) % len(e.urls)
		defer e.mu.Unlock()
		return e.urls[e.i]
	}
	e.mu.Unlock()
	n, err := cleanURL(e.next(u))
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		return e.currentLocked() // a bad answer: keep what we had
	}
	e.cur = n
	return n
}

func (e *endpoints) currentLocked() string {
	if e.cur != "" {
		return e.cur
	}
	return e.urls[e.i]
}
