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

	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/names"
)

// Config is chatd's configuration: every flag of PROTOCOL.md's "Running"
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
}

// parseConfig reads flags from args, each defaulting to its environment twin.
// Errors name the flag and what it expects, in one line.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (Config, error) {
	fs := flag.NewFlagSet("chatd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	vals := map[string]*string{}
	for _, f := range flagSpecs {
		def := f.def
		if v := getenv(f.env); v != "" {
			def = v
		}
		vals[f.name] = fs.String(f.name, def, f.help+" (env "+f.env+")")
	}
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected argument %q: chatd takes only flags (see -h)", fs.Arg(0))
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
			return c, fmt.Errorf("--redis: %v", err)
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
	return c, nil
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
// hanging it. The pool is larger than go-redis's default (10 per CPU): a
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
		return redis.NewClusterClient(o)
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
