package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"runtime"
	"strconv"

	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/names"
)

// Config is chatd's configuration: every flag of docs/PROTOCOL.md's "Running"
// table, each with its environment twin.
type Config struct {
	Addr           string
	Redis          string
	NodeID         string
	Prefix         string
	Secret         string
	AdminToken     string
	AllowedOrigins []string
	LogLevel       slog.Level
	ShutdownGrace  time.Duration
	Auth           string       // "guest" or "jwt"
	TrustedProxies []*net.IPNet // peers whose X-Forwarded-For is believed
	DebugAddr      string       // net/http/pprof listener; "" = none
}

// flagSpec is one flag: its name, environment twin, default and help.
type flagSpec struct {
	name, env, def, help string
}

var flagSpecs = []flagSpec{
	{"addr", "CHATD_ADDR", ":8080", "HTTP + WebSocket listen address"},
	{"redis", "CHATD_REDIS", "", "redis://host:port/db (single), host:port,host:port,… (Redis Cluster), or redis-sentinel://[:password@]host:port[,host:port]/master[?db=N]; empty = embedded in-process Redis (one node only)"},
	{"node-id", "CHATD_NODE_ID", "", "name of this node in presence and metrics (default hostname-pid)"},
	{"prefix", "CHATD_PREFIX", "chatd", "namespace of every Redis key and channel"},
	{"secret", "CHATD_SECRET", "", "HMAC secret that signs session tokens, shared by all nodes (at least 16 characters); required with --redis"},
	{"admin-token", "CHATD_ADMIN_TOKEN", "", "bearer token for admin endpoints; empty = admin endpoints answer 403"},
	{"allowed-origins", "CHATD_ALLOWED_ORIGINS", "", "comma-separated WebSocket Origin allow-list (scheme://host[:port]); empty = same host only"},
	{"log-level", "CHATD_LOG_LEVEL", "info", "debug, info, warn or error"},
	{"shutdown-grace", "CHATD_SHUTDOWN_GRACE", "10s", "how long a shutdown may take to drain"},
	{"auth", "CHATD_AUTH", "guest", "guest: POST /api/v1/session mints a token for any free guest name (held while in use); jwt: POST /api/v1/session is off, only tokens from your login service (signed with --secret) are accepted"},
	{"debug-addr", "CHATD_DEBUG_ADDR", "", "listen address of a net/http/pprof endpoint for profiling (e.g. 127.0.0.1:6060); empty = none; never expose it"},
	{"trusted-proxies", "CHATD_TRUSTED_PROXIES", "", "comma-separated CIDRs of proxies whose X-Forwarded-For names the client address (per-address caps); empty = trust none"},
}

// parseConfig reads flags from args; a flag not on the command line takes
// its environment twin, then its default. Errors name the flag and what it
// expects, in one line; only -h prints the usage (to stderr).
//
// The environment is applied after parsing, not as the flags' defaults, so
// that the usage text never shows a value from the environment: it would
// print CHATD_SECRET and CHATD_ADMIN_TOKEN into whatever collects stderr.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (Config, error) {
	fs := flag.NewFlagSet("chatd", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // a parse error is returned, in one line
	vals := map[string]*string{}
	for _, f := range flagSpecs {
		vals[f.name] = fs.String(f.name, f.def, f.help+" (env "+f.env+")")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fmt.Fprintln(stderr, "Usage: chatd [flags]; every flag has an environment twin, the flag wins.")
			fs.PrintDefaults()
		}
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected argument %q: chatd takes only flags (see -h)", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, f := range flagSpecs {
		if v := getenv(f.env); v != "" && !set[f.name] {
			*vals[f.name] = v
		}
	}
	c := Config{
		Addr:       *vals["addr"],
		Redis:      strings.TrimSpace(*vals["redis"]),
		NodeID:     *vals["node-id"],
		Prefix:     *vals["prefix"],
		Secret:     *vals["secret"],
		AdminToken: *vals["admin-token"],
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return c, fmt.Errorf("--addr %q: expected host:port or :port", c.Addr)
	}
	if c.NodeID != "" && names.Lobby(c.NodeID) != nil {
		return c, fmt.Errorf("--node-id %q: expected 1–64 of [A-Za-z0-9_.-]", c.NodeID)
	}
	if names.Lobby(c.Prefix) != nil {
		return c, fmt.Errorf("--prefix %q: expected 1–64 of [A-Za-z0-9_.-]", c.Prefix)
	}
	if c.Redis != "" {
		if _, err := redisOptions(c.Redis); err != nil {
			return c, fmt.Errorf("--redis: %s", redactRedis(err.Error(), c.Redis))
		}
		if c.Secret == "" {
			return c, errors.New("--secret: required with --redis, so that every node accepts the others' session tokens (CHATD_SECRET)")
		}
	}
	if c.Secret != "" && len(c.Secret) < 16 {
		return c, errors.New("--secret: expected at least 16 characters")
	}
	for _, o := range strings.Split(*vals["allowed-origins"], ",") {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return c, fmt.Errorf("--allowed-origins: %q: expected scheme://host[:port], e.g. https://chat.example.com", o)
		}
		c.AllowedOrigins = append(c.AllowedOrigins, u.Scheme+"://"+u.Host)
	}
	if err := c.LogLevel.UnmarshalText([]byte(*vals["log-level"])); err != nil {
		return c, fmt.Errorf("--log-level %q: expected debug, info, warn or error", *vals["log-level"])
	}
	d, err := time.ParseDuration(*vals["shutdown-grace"])
	if err != nil || d <= 0 {
		return c, fmt.Errorf("--shutdown-grace %q: expected a positive duration such as 10s", *vals["shutdown-grace"])
	}
	c.ShutdownGrace = d
	if c.DebugAddr = *vals["debug-addr"]; c.DebugAddr != "" {
		if _, _, err := net.SplitHostPort(c.DebugAddr); err != nil {
			return c, fmt.Errorf("--debug-addr %q: expected host:port", c.DebugAddr)
		}
	}
	switch c.Auth = *vals["auth"]; c.Auth {
	case "guest", "jwt":
	default:
		return c, fmt.Errorf("--auth %q: expected guest or jwt", c.Auth)
	}
	for _, p := range strings.Split(*vals["trusted-proxies"], ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !strings.Contains(p, "/") {
			if strings.Contains(p, ":") {
				p += "/128"
			} else {
				p += "/32"
			}
		}
		_, n, err := net.ParseCIDR(p)
		if err != nil {
			return c, fmt.Errorf("--trusted-proxies: %q: expected a CIDR such as 10.0.0.0/8 or an address", p)
		}
		c.TrustedProxies = append(c.TrustedProxies, n)
	}
	return c, nil
}

// redactRedis replaces, in msg, the user info of the --redis value s (a
// password, e.g. redis://:hunter2@host/0) with ***, so that error messages
// and logs never carry it, whether or not s parses.
func redactRedis(msg, s string) string {
	i := strings.Index(s, "://")
	if i < 0 {
		return msg
	}
	rest := s[i+3:]
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return msg
	}
	red := s[:i+3] + "***@" + rest[at+1:]
	quote := func(x string) string { q := strconv.Quote(x); return q[1 : len(q)-1] }
	msg = strings.ReplaceAll(msg, s, red)
	msg = strings.ReplaceAll(msg, quote(s), quote(red))
	// the parser may have quoted a part of it: hide the password itself
	if _, pass, ok := strings.Cut(rest[:at], ":"); ok && len(pass) >= 4 {
		for _, form := range []string{pass, quote(pass), url.PathEscape(pass), url.QueryEscape(pass)} {
			msg = strings.ReplaceAll(msg, form, "***")
		}
	}
	return msg
}

// redisSpec is a parsed --redis value.
type redisSpec struct {
	single   *redis.Options
	cluster  *redis.ClusterOptions
	failover *redis.FailoverOptions
}

// redisOptions parses --redis: a redis:// or rediss:// URL, a
// redis-sentinel:// URL, or a comma-separated host:port list (a cluster; a
// single bare host:port is a single server).
func redisOptions(s string) (redisSpec, error) {
	switch {
	case strings.HasPrefix(s, "redis://"), strings.HasPrefix(s, "rediss://"), strings.HasPrefix(s, "unix://"):
		o, err := redis.ParseURL(s)
		if err != nil {
			return redisSpec{}, fmt.Errorf("%q: %v", s, err)
		}
		return redisSpec{single: o}, nil
	case strings.HasPrefix(s, "redis-sentinel://"):
		return sentinelOptions(s)
	case strings.Contains(s, "://"):
		return redisSpec{}, fmt.Errorf("%q: expected redis://host:port/db, redis-sentinel://host:port/master or host:port,host:port", s)
	}
	var addrs []string
	for _, a := range strings.Split(s, ",") {
		a = strings.TrimSpace(a)
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return redisSpec{}, fmt.Errorf("%q: %q is not host:port", s, a)
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 1 {
		return redisSpec{single: &redis.Options{Addr: addrs[0]}}, nil
	}
	return redisSpec{cluster: &redis.ClusterOptions{Addrs: addrs}}, nil
}

func sentinelOptions(s string) (redisSpec, error) {
	u, err := url.Parse(s)
	if err != nil {
		return redisSpec{}, fmt.Errorf("%q: %v", s, err)
	}
	master := strings.Trim(u.Path, "/")
	if u.Host == "" || master == "" {
		return redisSpec{}, fmt.Errorf("%q: expected redis-sentinel://host:port[,host:port]/master", s)
	}
	o := &redis.FailoverOptions{MasterName: master, SentinelAddrs: strings.Split(u.Host, ",")}
	if u.User != nil {
		o.Password, _ = u.User.Password()
		o.Username = u.User.Username()
	}
	if db := u.Query().Get("db"); db != "" {
		if _, err := fmt.Sscanf(db, "%d", &o.DB); err != nil {
			return redisSpec{}, fmt.Errorf("%q: db must be a number", s)
		}
	}
	if u.Query().Get("tls") == "true" {
		o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return redisSpec{failover: o}, nil
}

// client builds the go-redis client for spec with chatd's timeouts: short
// enough that a hung Redis fails a request in about two seconds instead of
// hanging it. A cluster client follows a master's failover within a second
// of the cluster's own (newClusterClient); a Sentinel client asks the
// Sentinels for the master on every new connection and drops its pools when
// they announce a switch (+switch-master), which go-redis does by itself. The pool is larger than go-redis's default (10 per CPU): a
// burst of says from thousands of WebSockets otherwise waits on the pool and
// fails as if Redis were down (measured with cmd/chatbench: 14% of says at
// 2,000 clients on one 2-core node).
func (spec redisSpec) client() redis.UniversalClient {
	const (
		dial    = 2 * time.Second
		rw      = 2 * time.Second
		retries = 1
	)
	pool := max(128, 10*runtime.GOMAXPROCS(0))
	switch {
	case spec.cluster != nil:
		o := spec.cluster
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.MaxRetries = dial, rw, rw, retries
		o.ContextTimeoutEnabled, o.PoolSize = true, pool
		// A dead master is dialed at most twice per attempt (go-redis tries
		// five times by default: ten seconds when its host is gone), and the
		// slot map is re-read every 10 s even without errors (60 s by
		// default). Failover itself is followed by clusterFollower.
		o.DialerRetries = 2
		o.ClusterStateReloadInterval = 10 * time.Second
		return newClusterClient(o)
	case spec.failover != nil:
		o := spec.failover
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.MaxRetries = dial, rw, rw, retries
		o.ContextTimeoutEnabled, o.PoolSize = true, pool
		return redis.NewFailoverClient(o)
	default:
		o := spec.single
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.MaxRetries = dial, rw, rw, retries
		o.ContextTimeoutEnabled, o.PoolSize = true, pool
		return redis.NewClient(o)
	}
}
