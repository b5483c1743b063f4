package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/chatd/chatd/hooks"
	"github.com/chatd/chatd/names"
	"github.com/chatd/chatd/web"
)

// Config is chatd's configuration: every flag of the README's "Running"
// table, each with its environment twin and its key in a --config file.
type Config struct {
	Addr       string
	Redis      string
	NodeID     string
	Prefix     string
	Secret     string
	AdminToken string
	// AdminReadToken opens every admin read but no admin action; "" = none.
	AdminReadToken string
	// ServerKeys are the server API's keys (web.ParseServerKey); none =
	// the server API answers 403.
	ServerKeys     []web.ServerKey
	AllowedOrigins []string
	LogLevel       slog.Level
	LogFormat      string // "text" or "json"
	ShutdownGrace  time.Duration
	// SendWindow is the shortest time between two send commits of this
	// node (realtime.Config.SendWindow); 0 = none.
	SendWindow     time.Duration
	Auth           string       // "guest" or "jwt"
	TrustedProxies []*net.IPNet // peers whose X-Forwarded-For is believed
	// MetricsAddr is the private listener of /metrics and net/http/pprof;
	// "" = /metrics on Addr and no pprof.
	MetricsAddr string
	TLSCert     string // PEM certificate chain of the public listener; "" = plain HTTP
	TLSKey      string // its PEM private key
	// JWTAudience, when set, is an "aud" every token must name (chatd's
	// own tokens name it); "" = the audience is not checked.
	JWTAudience string
	// JWTIssuer is the "iss" every token must carry; "" = "chatd".
	JWTIssuer string
	// Caps on the work one principal may hold on this node (web.Config's
	// fields of the same names); 0 = no cap.
	MaxRequestsPerAddr, MaxRequestsPerUser int
	MaxPollsPerAddr, MaxPollsPerUser       int
	// MaxHistoryBuilds is how many history pages this node builds at once
	// (at least 1).
	MaxHistoryBuilds int
	// Hooks are the application's backend hooks (hooks.go); no URL = off.
	Hooks hooks.Config

	ConfigFile  string // the --config file read; "" = none
	PrintConfig bool   // print the effective configuration and exit
	Version     bool   // print the version and exit

	warnings []string // said in the log once it exists (deprecated flags)
}

// flagSpec is one flag: its name (also its key in a config file),
// environment twin, default and help.
type flagSpec struct {
	name, env, def, help string
	list                 bool // comma-separated on the command line; a list or a string in a file
	secret               bool // masked by --print-config
}

var flagSpecs = []flagSpec{
	{name: "addr", env: "CHATD_ADDR", def: ":8080", help: "HTTP + WebSocket listen address"},
	{name: "redis", env: "CHATD_REDIS", help: "redis://host:port/db (single), host:port,host:port,… (Redis Cluster), or redis-sentinel://[:password@]host:port[,host:port]/master[?db=N]; empty = embedded in-process Redis (one node only)"},
	{name: "node-id", env: "CHATD_NODE_ID", help: "name of this node in presence, logs and metrics (default hostname-pid)"},
	{name: "prefix", env: "CHATD_PREFIX", def: "chatd", help: "namespace of every Redis key and channel"},
	{name: "secret", env: "CHATD_SECRET", secret: true, help: "HMAC secret that signs session tokens, shared by all nodes (at least 16 characters); required with --redis"},
	{name: "admin-token", env: "CHATD_ADMIN_TOKEN", secret: true, help: "bearer token for admin endpoints; empty = admin endpoints answer 403"},
	{name: "admin-read-token", env: "CHATD_ADMIN_READ_TOKEN", secret: true, help: "read-only admin bearer token: every admin read (the admin console's screens), every admin action answers 403; empty = none"},
	{name: "server-keys", env: "CHATD_SERVER_KEYS", list: true, secret: true, help: "API keys of your backend for the server API (/api/v1/server/…), comma-separated, each name:secret:scopes[:lobbies=a+b*][:rate=N] — scopes publish, broadcast, presence, disconnect, grant joined by + (or *), the secret 24–256 of [A-Za-z0-9_.~+/=-], sent as Authorization: Bearer <secret>; empty = the server API answers 403"},
	{name: "allowed-origins", env: "CHATD_ALLOWED_ORIGINS", list: true, help: "comma-separated WebSocket Origin allow-list (scheme://host[:port]); empty = same host only"},
	{name: "log-level", env: "CHATD_LOG_LEVEL", def: "info", help: "debug, info, warn or error"},
	{name: "log-format", env: "CHATD_LOG_FORMAT", def: "text", help: "text (logfmt) or json (one JSON object per line)"},
	{name: "shutdown-grace", env: "CHATD_SHUTDOWN_GRACE", def: "10s", help: "how long a shutdown may take to drain"},
	{name: "send-window", env: "CHATD_SEND_WINDOW", def: "0s", help: "the shortest time between two of this node's send commits (the says of all its clients go to Redis together, one script call per lobby): on a busy node each carries the says of a window, which costs Redis less per say, for up to this much latency on a say; a quiet node sends at once; 0s to 100ms, 0s = none"},
	{name: "auth", env: "CHATD_AUTH", def: "guest", help: "guest: POST /api/v1/session mints a token for any free guest name (held while in use); jwt: POST /api/v1/session is off, only tokens from your login service (signed with --secret) are accepted"},
	{name: "trusted-proxies", env: "CHATD_TRUSTED_PROXIES", list: true, help: "comma-separated CIDRs of proxies whose X-Forwarded-For names the client address (per-address caps); empty = trust none"},
	{name: "metrics-addr", env: "CHATD_METRICS_ADDR", help: "private listen address of /metrics and /debug/pprof/ (e.g. 127.0.0.1:9090); when set, the public --addr no longer serves /metrics; empty = /metrics on --addr, no pprof"},
	{name: "debug-addr", env: "CHATD_DEBUG_ADDR", help: "deprecated alias of --metrics-addr"},
	{name: "tls-cert", env: "CHATD_TLS_CERT", help: "PEM certificate chain file: serve HTTPS and wss:// on --addr (reloaded on SIGHUP); needs --tls-key"},
	{name: "tls-key", env: "CHATD_TLS_KEY", help: "PEM private key file of --tls-cert"},
	{name: "jwt-audience", env: "CHATD_JWT_AUDIENCE", help: "an aud every token must name (chatd's own tokens name it): a token minted for another service with the same secret is refused; empty = aud not checked"},
	{name: "jwt-issuer", env: "CHATD_JWT_ISSUER", help: "the iss every token must carry (chatd's own tokens carry it); empty = \"chatd\""},
	{name: "max-requests-per-addr", env: "CHATD_MAX_REQUESTS_PER_ADDR", def: "256", help: "HTTP requests under /api/v1 one client address may have in flight on this node (the event stream aside); one more is 429 rate_limited; 0 = no cap"},
	{name: "max-requests-per-user", env: "CHATD_MAX_REQUESTS_PER_USER", def: "64", help: "HTTP requests under /api/v1 one user (over all its sessions and addresses) may have in flight on this node; one more is 429 rate_limited; 0 = no cap"},
	{name: "max-polls-per-addr", env: "CHATD_MAX_POLLS_PER_ADDR", def: "64", help: "long polls (wait > 0) one client address may have parked on this node; one more is 429 rate_limited; 0 = no cap"},
	{name: "max-polls-per-user", env: "CHATD_MAX_POLLS_PER_USER", def: "8", help: "long polls one user may have parked on this node, over all its sessions; one more is 429 rate_limited; 0 = no cap"},
	{name: "max-history-builds", env: "CHATD_MAX_HISTORY_BUILDS", def: "4", help: "history pages (GET /rooms/{room}/messages, up to 1 MiB each) this node reads and builds at once; more wait their turn; at least 1"},
}

// origin says where a value came from: a flag, its environment twin, the
// config file (with its line) or the default.
type origin struct {
	kind string // "flag", "env", "file" or "default"
	env  string // the variable, for "env"
	file string // the file, for "file"
	line int    // its line, for "file"
}

func (o origin) String() string {
	switch o.kind {
	case "env":
		return "env " + o.env
	case "file":
		return fmt.Sprintf("%s:%d", o.file, o.line)
	}
	return o.kind
}

// resolved is every flag's value as a string, and where it came from.
type resolved struct {
	val  map[string]string
	from map[string]origin
}

// parseConfig reads the configuration: a flag on the command line wins,
// then its environment twin (when not empty), then its key in the --config
// file (or CHATD_CONFIG), then its default. Errors name the flag and what
// it expects, in one line, prefixed with file:line when the value came
// from the file; only -h prints the usage (to stderr).
//
// The environment is applied after parsing, not as the flags' defaults, so
// that the usage text never shows a value from the environment: it would
// print CHATD_SECRET and CHATD_ADMIN_TOKEN into whatever collects stderr.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (Config, error) {
	c, _, err := loadConfig(args, getenv, stderr)
	return c, err
}

// loadConfig is parseConfig, also returning where each value came from
// (for --print-config).
func loadConfig(args []string, getenv func(string) string, stderr io.Writer) (Config, resolved, error) {
	r := resolved{val: map[string]string{}, from: map[string]origin{}}
	fs := flag.NewFlagSet("chatd", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // a parse error is returned, in one line
	vals := map[string]*string{}
	for _, f := range flagSpecs {
		vals[f.name] = fs.String(f.name, f.def, f.help+" (env "+f.env+")")
	}
	configFlag := fs.String("config", "", "YAML file of settings, one key per flag (the flag names, e.g. addr: \":8080\"); flags and environment win over it (env CHATD_CONFIG)")
	printConfig := fs.Bool("print-config", false, "print the effective configuration as YAML, secrets masked, and exit")
	version := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fmt.Fprintln(stderr, "Usage: chatd [flags]; every flag has an environment twin and a key in the --config file: a flag wins over its environment twin, which wins over the file.")
			fs.PrintDefaults()
		}
		return Config{}, r, err
	}
	if fs.NArg() > 0 {
		return Config{}, r, fmt.Errorf("unexpected argument %q: chatd takes only flags (see -h)", fs.Arg(0))
	}
	if *version {
		return Config{Version: true}, r, nil
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	c := Config{PrintConfig: *printConfig, ConfigFile: *configFlag}
	if !set["config"] {
		c.ConfigFile = getenv("CHATD_CONFIG")
	}
	var file map[string]fileValue
	if c.ConfigFile != "" {
		var err error
		if file, err = readConfigFile(c.ConfigFile); err != nil {
			return c, r, err
		}
	}
	for _, f := range flagSpecs {
		switch fv, inFile := file[f.name]; {
		case set[f.name]:
			r.val[f.name], r.from[f.name] = *vals[f.name], origin{kind: "flag"}
		case getenv(f.env) != "":
			r.val[f.name], r.from[f.name] = getenv(f.env), origin{kind: "env", env: f.env}
		case inFile:
			r.val[f.name], r.from[f.name] = fv.value, origin{kind: "file", file: c.ConfigFile, line: fv.line}
		default:
			r.val[f.name], r.from[f.name] = f.def, origin{kind: "default"}
		}
	}
	err := r.apply(&c)
	return c, r, err
}

// fail returns an error about flag name's value: msg as is, prefixed with
// file:line when the value came from the config file.
func (r resolved) fail(name, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	if o := r.from[name]; o.kind == "file" {
		return fmt.Errorf("%s: %w", o, err)
	}
	return err
}

// given reports whether flag name was set anywhere but by its default.
func (r resolved) given(name string) bool { return r.from[name].kind != "default" }

// apply checks the values and fills c.
func (r resolved) apply(c *Config) error {
	v := r.val
	c.Addr, c.Redis, c.NodeID, c.Prefix = v["addr"], strings.TrimSpace(v["redis"]), v["node-id"], v["prefix"]
	c.Secret, c.AdminToken, c.AdminReadToken = v["secret"], v["admin-token"], v["admin-read-token"]
	if c.AdminReadToken != "" && c.AdminReadToken == c.AdminToken {
		return r.fail("admin-read-token", "--admin-read-token: must differ from --admin-token (a token is one role)")
	}
	for _, spec := range strings.Split(v["server-keys"], ",") {
		if strings.TrimSpace(spec) == "" {
			continue
		}
		k, err := web.ParseServerKey(spec)
		if err != nil {
			return r.fail("server-keys", "--server-keys: %v", err) // never the secret
		}
		c.ServerKeys = append(c.ServerKeys, k)
	}
	if err := web.CheckServerKeys(c.ServerKeys, c.AdminToken, c.AdminReadToken); err != nil {
		return r.fail("server-keys", "--server-keys: %s", strings.TrimPrefix(err.Error(), "web: "))
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return r.fail("addr", "--addr %q: expected host:port or :port", c.Addr)
	}
	if c.NodeID != "" && names.Lobby(c.NodeID) != nil {
		return r.fail("node-id", "--node-id %q: expected 1–64 of [A-Za-z0-9_.-]", c.NodeID)
	}
	if names.Lobby(c.Prefix) != nil {
		return r.fail("prefix", "--prefix %q: expected 1–64 of [A-Za-z0-9_.-]", c.Prefix)
	}
	if c.Redis != "" {
		if _, err := redisOptions(c.Redis); err != nil {
			return r.fail("redis", "--redis: %s", redactRedis(err.Error(), c.Redis))
		}
		if c.Secret == "" {
			return errors.New("--secret: required with --redis, so that every node accepts the others' session tokens (CHATD_SECRET)")
		}
	}
	if c.Secret != "" && len(c.Secret) < 16 {
		return r.fail("secret", "--secret: expected at least 16 characters")
	}
	for _, o := range strings.Split(v["allowed-origins"], ",") {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return r.fail("allowed-origins", "--allowed-origins: %q: expected scheme://host[:port], e.g. https://chat.example.com", o)
		}
		c.AllowedOrigins = append(c.AllowedOrigins, u.Scheme+"://"+u.Host)
	}
	if err := c.LogLevel.UnmarshalText([]byte(v["log-level"])); err != nil {
		return r.fail("log-level", "--log-level %q: expected debug, info, warn or error", v["log-level"])
	}
	switch c.LogFormat = v["log-format"]; c.LogFormat {
	case "text", "json":
	default:
		return r.fail("log-format", "--log-format %q: expected text or json", c.LogFormat)
	}
	d, err := time.ParseDuration(v["shutdown-grace"])
	if err != nil || d <= 0 {
		return r.fail("shutdown-grace", "--shutdown-grace %q: expected a positive duration such as 10s", v["shutdown-grace"])
	}
	c.ShutdownGrace = d
	if d, err = time.ParseDuration(v["send-window"]); err != nil || d < 0 || d > 100*time.Millisecond {
		return r.fail("send-window", "--send-window %q: expected a duration from 0s to 100ms, such as 2ms", v["send-window"])
	}
	c.SendWindow = d
	if err := r.applyMetricsAddr(c); err != nil {
		return err
	}
	switch c.Auth = v["auth"]; c.Auth {
	case "guest", "jwt":
	default:
		return r.fail("auth", "--auth %q: expected guest or jwt", c.Auth)
	}
	for _, p := range strings.Split(v["trusted-proxies"], ",") {
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
			return r.fail("trusted-proxies", "--trusted-proxies: %q: expected a CIDR such as 10.0.0.0/8 or an address", p)
		}
		c.TrustedProxies = append(c.TrustedProxies, n)
	}
	c.TLSCert, c.TLSKey = v["tls-cert"], v["tls-key"]
	c.JWTAudience, c.JWTIssuer = v["jwt-audience"], v["jwt-issuer"]
	for _, f := range []string{"jwt-audience", "jwt-issuer"} {
		if !claimValue(v[f]) {
			return r.fail(f, "--%s %q: expected 1–256 printable ASCII characters without spaces, or empty", f, v[f])
		}
	}
	for _, f := range []struct {
		name string
		min  int
		dst  *int
	}{
		{"max-requests-per-addr", 0, &c.MaxRequestsPerAddr}, {"max-requests-per-user", 0, &c.MaxRequestsPerUser},
		{"max-polls-per-addr", 0, &c.MaxPollsPerAddr}, {"max-polls-per-user", 0, &c.MaxPollsPerUser},
		{"max-history-builds", 1, &c.MaxHistoryBuilds},
	} {
		n, err := strconv.Atoi(strings.TrimSpace(v[f.name]))
		if err != nil || n < f.min || n > 1_000_000 {
			return r.fail(f.name, "--%s %q: expected a whole number from %d to 1000000", f.name, v[f.name], f.min)
		}
		*f.dst = n
	}
	if err := r.applyHooks(c); err != nil {
		return err
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		if c.TLSCert == "" {
			return r.fail("tls-key", "--tls-cert: required with --tls-key")
		}
		return r.fail("tls-cert", "--tls-key: required with --tls-cert")
	}
	return nil
}

// applyMetricsAddr sets c.MetricsAddr from --metrics-addr or its
// deprecated alias --debug-addr (which used to serve pprof alone).
func (r resolved) applyMetricsAddr(c *Config) error {
	addr, name := r.val["metrics-addr"], "metrics-addr"
	if r.given("debug-addr") && r.val["debug-addr"] != "" {
		if r.given("metrics-addr") && addr != r.val["debug-addr"] {
			return r.fail("debug-addr", "--debug-addr %q: a deprecated alias of --metrics-addr, which is %q: give only --metrics-addr", r.val["debug-addr"], addr)
		}
		addr, name = r.val["debug-addr"], "debug-addr"
		c.warnings = append(c.warnings, "--debug-addr (CHATD_DEBUG_ADDR) is deprecated: it is now --metrics-addr (CHATD_METRICS_ADDR), which serves /metrics as well as /debug/pprof/, and /metrics is no longer served on --addr")
	}
	if addr == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return r.fail(name, "--%s %q: expected host:port", name, addr)
	}
	c.MetricsAddr = addr
	return nil
}

// claimValue reports whether s may be a JWT aud or iss to require: empty
// (not set), or 1–256 printable ASCII characters without spaces.
func claimValue(s string) bool {
	if len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}
