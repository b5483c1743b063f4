package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

const (
	secret     = "s3cret-0123456789-abcdef-XYZ"
	adminToken = "adm1n-token-0123456789-QRS"
)

// env returns a getenv over m.
func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestParseConfigRefusesBadValues(t *testing.T) {
	t.Parallel()
	s := "--secret=" + secret
	cases := []struct {
		name string
		args []string
		env  map[string]string
		flag string // the message names it
	}{
		{"addr without a port", []string{"--addr", "foo"}, nil, "--addr"},
		{"addr empty", []string{"--addr="}, nil, "--addr"},
		{"addr from the environment", nil, map[string]string{"CHATD_ADDR": "foo"}, "--addr"},
		{"prefix with a space", []string{"--prefix", "a b"}, nil, "--prefix"},
		{"prefix with a hash tag", []string{"--prefix", "a}{b"}, nil, "--prefix"},
		{"prefix with a colon", []string{"--prefix", "x:y"}, nil, "--prefix"},
		{"prefix empty", []string{"--prefix="}, nil, "--prefix"},
		{"node id with a space", []string{"--node-id", "node 1"}, nil, "--node-id"},
		{"redis without secret", []string{"--redis", "redis://127.0.0.1:6379/0"}, nil, "--secret"},
		{"redis from the environment without secret", nil, map[string]string{"CHATD_REDIS": "redis://127.0.0.1:6379/0"}, "--secret"},
		{"secret short", []string{"--secret", "short"}, nil, "--secret"},
		{"secret short from the environment", []string{"--redis", "127.0.0.1:6379"}, map[string]string{"CHATD_SECRET": "short"}, "--secret"},
		{"redis ftp", []string{"--redis", "ftp://x", s}, nil, "--redis"},
		{"redis bad port", []string{"--redis", "redis://127.0.0.1:port/0", s}, nil, "--redis"},
		{"redis bad db", []string{"--redis", "redis://127.0.0.1:6379/zero", s}, nil, "--redis"},
		{"redis list with a bare host", []string{"--redis", "127.0.0.1:7000,127.0.0.2", s}, nil, "--redis"},
		{"redis sentinel without master", []string{"--redis", "redis-sentinel://127.0.0.1:26379", s}, nil, "--redis"},
		{"allowed origin without scheme", []string{"--allowed-origins", "nope"}, nil, "--allowed-origins"},
		{"allowed origin ftp", []string{"--allowed-origins", "https://ok.example,ftp://x"}, nil, "--allowed-origins"},
		{"allowed origin with a path", []string{"--allowed-origins", "https://x.example/app"}, nil, "--allowed-origins"},
		{"allowed origins from the environment", nil, map[string]string{"CHATD_ALLOWED_ORIGINS": "*"}, "--allowed-origins"},
		{"log level", []string{"--log-level", "loud"}, nil, "--log-level"},
		{"shutdown grace", []string{"--shutdown-grace", "soon"}, nil, "--shutdown-grace"},
		{"shutdown grace negative", []string{"--shutdown-grace", "-1s"}, nil, "--shutdown-grace"},
		{"send window negative", []string{"--send-window", "-1ms"}, nil, "--send-window"},
		{"send window over 100ms", []string{"--send-window", "101ms"}, nil, "--send-window"},
		{"send window from the environment", nil, map[string]string{"CHATD_SEND_WINDOW": "soon"}, "--send-window"},
		{"unknown flag", []string{"--colour", "red"}, nil, "-colour"},
		{"flag without its value", []string{"--addr"}, nil, "-addr"},
		{"an argument", []string{"serve"}, nil, "serve"},
	}
	for _, tc := range cases {
		t.Run(tc.name+" is refused in one line naming the flag", func(t *testing.T) {
			var stderr bytes.Buffer
			_, err := parseConfig(tc.args, env(tc.env), &stderr)
			require.Error(t, err)
			msg := err.Error()
			assert.Contains(t, msg, tc.flag)
			assert.NotContains(t, msg, "\n")
			assert.Empty(t, stderr.String(), "nothing else is printed (no usage dump)")

			stderr.Reset()
			err = run(context.Background(), tc.args, env(tc.env), io.Discard, &stderr)
			require.Error(t, err, "run")
			assert.Equal(t, msg, err.Error(), "run returns the same error")
			assert.Empty(t, stderr.String(), "run prints nothing before refusing")
		})
	}
}

func TestParseConfigHidesRedisPasswords(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"redis://:hunter2-pass@127.0.0.1:port/0",
		"redis://user:hunter2-pass@127.0.0.1:6379/zero",
		"rediss://:hunter2-pass@[::1/0",
		"redis-sentinel://:hunter2-pass@127.0.0.1:26379",
		"redis-sentinel://:hunter2-pass@127.0.0.1:26379/m?db=x",
		"redis://:hunter2%2Fpass@127.0.0.1:port/0",
		"redis://:hunter2\"pass@127.0.0.1:port/0",
	} {
		_, err := parseConfig([]string{"--redis", u, "--secret", secret}, env(nil), io.Discard)
		require.Error(t, err, u)
		assert.Contains(t, err.Error(), "--redis", u)
		assert.NotContains(t, err.Error(), "hunter2", u)
	}
}

func TestParseConfigEnvTwins(t *testing.T) {
	t.Parallel()
	all := map[string]string{
		"CHATD_ADDR":             "127.0.0.1:9000",
		"CHATD_REDIS":            "redis://127.0.0.1:6379/2",
		"CHATD_NODE_ID":          "env-node",
		"CHATD_PREFIX":           "envprefix",
		"CHATD_SECRET":           secret,
		"CHATD_ADMIN_TOKEN":      adminToken,
		"CHATD_ADMIN_READ_TOKEN": "env-read-token",
		"CHATD_ALLOWED_ORIGINS":  "https://a.example, http://b.example:8080",
		"CHATD_LOG_LEVEL":        "debug",
		"CHATD_SHUTDOWN_GRACE":   "3s",
		"CHATD_SEND_WINDOW":      "5ms",
	}
	t.Run("each environment twin applies", func(t *testing.T) {
		c, err := parseConfig(nil, env(all), io.Discard)
		require.NoError(t, err)
		assert.Equal(t, Config{
			Addr: "127.0.0.1:9000", Redis: "redis://127.0.0.1:6379/2", NodeID: "env-node", Prefix: "envprefix",
			Secret: secret, AdminToken: adminToken, AdminReadToken: "env-read-token", AllowedOrigins: []string{"https://a.example", "http://b.example:8080"},
			LogLevel: slog.LevelDebug, LogFormat: "text", ShutdownGrace: 3 * time.Second, SendWindow: 5 * time.Millisecond, Auth: "guest",
			MaxRequestsPerAddr: 256, MaxRequestsPerUser: 64, MaxPollsPerAddr: 64, MaxPollsPerUser: 8, MaxHistoryBuilds: 4,
		}, c)
	})
	t.Run("flags win over the environment", func(t *testing.T) {
		c, err := parseConfig([]string{
			"--addr", ":7000", "--redis", "127.0.0.1:7001,127.0.0.1:7002", "--node-id", "flag-node", "--prefix", "flagprefix",
			"--secret", "flag-secret-0123456789", "--admin-token", "flag-admin", "--admin-read-token", "flag-read", "--allowed-origins", "https://c.example",
			"--log-level", "warn", "--shutdown-grace", "1m", "--send-window", "1ms",
		}, env(all), io.Discard)
		require.NoError(t, err)
		assert.Equal(t, Config{
			Addr: ":7000", Redis: "127.0.0.1:7001,127.0.0.1:7002", NodeID: "flag-node", Prefix: "flagprefix",
			Secret: "flag-secret-0123456789", AdminToken: "flag-admin", AdminReadToken: "flag-read", AllowedOrigins: []string{"https://c.example"},
			LogLevel: slog.LevelWarn, LogFormat: "text", ShutdownGrace: time.Minute, SendWindow: time.Millisecond, Auth: "guest",
			MaxRequestsPerAddr: 256, MaxRequestsPerUser: 64, MaxPollsPerAddr: 64, MaxPollsPerUser: 8, MaxHistoryBuilds: 4,
		}, c)
	})
	t.Run("an empty flag wins over the environment too", func(t *testing.T) {
		c, err := parseConfig([]string{"--admin-token="}, env(map[string]string{"CHATD_ADMIN_TOKEN": adminToken}), io.Discard)
		require.NoError(t, err)
		assert.Empty(t, c.AdminToken)
	})
	t.Run("defaults without either", func(t *testing.T) {
		c, err := parseConfig(nil, env(nil), io.Discard)
		require.NoError(t, err)
		assert.Equal(t, ":8080", c.Addr)
		assert.Equal(t, "chatd", c.Prefix)
		assert.Empty(t, c.Redis)
		assert.Empty(t, c.Secret)
		assert.Empty(t, c.AdminToken)
		assert.Empty(t, c.AdminReadToken)
		assert.Empty(t, c.AllowedOrigins)
	})
	t.Run("the read-only token comes from its key in the file, and may not be the full token", func(t *testing.T) {
		file := writeFile(t, "read.yaml", "admin-read-token: file-read-token\n")
		c, err := parseConfig([]string{"--config", file}, env(nil), io.Discard)
		require.NoError(t, err)
		assert.Equal(t, "file-read-token", c.AdminReadToken)
		_, err = parseConfig([]string{"--admin-token", "same-token", "--admin-read-token", "same-token"}, env(nil), io.Discard)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "--admin-read-token: must differ from --admin-token")
	})
}

func TestHelpShowsNoSecrets(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	_, err := parseConfig([]string{"-h"}, env(map[string]string{"CHATD_SECRET": secret, "CHATD_ADMIN_TOKEN": adminToken,
		"CHATD_ADMIN_READ_TOKEN": "read-token-from-env"}), &stderr)
	require.ErrorIs(t, err, flag.ErrHelp)
	out := stderr.String()
	for _, f := range flagSpecs {
		assert.Contains(t, out, "-"+f.name)
		assert.Contains(t, out, f.env)
	}
	assert.NotContains(t, out, secret)
	assert.NotContains(t, out, adminToken)
	assert.NotContains(t, out, "read-token-from-env")
}

// logBuffer is a stderr that run's logger and the test share.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var listening = regexp.MustCompile(`msg="chatd listening: open (https?)://[^"]*" .*?addr=(\S+)`)

// started runs chatd with args until the test ends; it returns its base
// URL, its log, and a stop function that cancels it and returns run's error.
func started(t *testing.T, args []string, environ map[string]string) (string, *logBuffer, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &logBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, env(environ), io.Discard, logs) }()
	var base string
	require.Eventually(t, func() bool {
		select {
		case err := <-done:
			t.Fatalf("chatd stopped at start: %v\n%s", err, logs)
		default:
		}
		if m := listening.FindStringSubmatch(logs.String()); m != nil {
			base = m[1] + "://" + m[2]
			return true
		}
		return false
	}, 20*time.Second, 10*time.Millisecond, "chatd did not log its address:\n%s", logs)
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(30 * time.Second):
				runErr = errors.New("run did not return within 30s of its context ending")
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return base, logs, stop
}

func get(t *testing.T, url, auth string, method string, body string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// exercise makes requests that carry the secrets: admin calls with the
// right and a wrong token, sessions, a bad token.
func exercise(t *testing.T, base string) {
	t.Helper()
	assert.Equal(t, 200, get(t, base+"/healthz", "", "GET", ""))
	require.Eventually(t, func() bool { return get(t, base+"/readyz", "", "GET", "") == 200 }, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, 200, get(t, base+"/api/v1/session", "", "POST", `{"user":"alice"}`))
	assert.Equal(t, 200, get(t, base+"/api/v1/settings/motd", adminToken, "PUT", `{"value":"hi"}`))
	assert.Equal(t, 401, get(t, base+"/api/v1/settings/motd", adminToken+"x", "PUT", `{"value":"hi"}`))
	assert.Equal(t, 401, get(t, base+"/api/v1/settings", secret, "GET", ""))
	assert.Equal(t, 404, get(t, base+"/nope?token="+secret, "", "GET", ""))
}

// The run tests are not parallel: run sets go-redis's package logger.

func TestRunEmbeddedServesAndStopsCleanly(t *testing.T) {
	base, logs, stop := started(t, []string{"--addr", "127.0.0.1:0", "--admin-token", adminToken, "--secret", secret, "--log-level", "debug"}, nil)
	exercise(t, base)
	require.NoError(t, stop(), "a cancelled context is a clean exit")
	out := logs.String()
	assert.Contains(t, out, "EMBEDDED", "the embedded Redis is said loudly")
	assert.Contains(t, out, `msg=stopped`)
	assert.Contains(t, out, "level=DEBUG", "debug logging was on")
	assert.NotContains(t, out, secret, "the secret is not logged")
	assert.NotContains(t, out, adminToken, "the admin token is not logged")
}

func TestRunOnRedisKeepsSecretsOutOfTheLog(t *testing.T) {
	r := redistest.New(t)
	base, logs, stop := started(t, []string{"--addr", "127.0.0.1:0", "--log-level", "debug"}, map[string]string{
		"CHATD_REDIS": r.URL(), "CHATD_PREFIX": r.Prefix, "CHATD_SECRET": secret, "CHATD_ADMIN_TOKEN": adminToken,
	})
	exercise(t, base)
	require.NoError(t, stop())
	out := logs.String()
	assert.NotContains(t, out, "EMBEDDED")
	assert.NotContains(t, out, secret)
	assert.NotContains(t, out, adminToken)
	assert.NotContains(t, out, "read-token-from-env")
}

func TestRunRefusesAnUnreachableRedis(t *testing.T) {
	for _, u := range []string{"redis://127.0.0.1:1/0", "redis://:hunter2-pass@127.0.0.1:1/0"} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var stderr logBuffer
		err := run(ctx, []string{"--redis", u, "--secret", secret, "--addr", "127.0.0.1:0"}, env(nil), io.Discard, &stderr)
		require.NoError(t, ctx.Err(), "run gave up on its own, before the test's deadline")
		cancel()
		require.Error(t, err, u)
		msg := err.Error()
		assert.True(t, strings.HasPrefix(msg, "--redis"), "names --redis: %s", msg)
		assert.NotContains(t, msg, "\n")
		assert.NotContains(t, msg, "hunter2")
		assert.NotContains(t, stderr.String(), "hunter2")
	}
}

func TestParseConfigAuthProxiesDebug(t *testing.T) {
	t.Parallel()
	c, err := parseConfig([]string{"--auth", "jwt", "--trusted-proxies", "10.0.0.0/8, 192.0.2.7,2001:db8::1", "--debug-addr", "127.0.0.1:6060"}, env(nil), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "jwt", c.Auth)
	require.Len(t, c.TrustedProxies, 3)
	assert.Equal(t, "10.0.0.0/8", c.TrustedProxies[0].String())
	assert.Equal(t, "192.0.2.7/32", c.TrustedProxies[1].String())
	assert.Equal(t, "2001:db8::1/128", c.TrustedProxies[2].String())
	assert.Equal(t, "127.0.0.1:6060", c.MetricsAddr, "--debug-addr is an alias of --metrics-addr")
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--auth", "open"}, "--auth"},
		{[]string{"--trusted-proxies", "10.0.0.0/33"}, "--trusted-proxies"},
		{[]string{"--trusted-proxies", "proxy.example"}, "--trusted-proxies"},
		{[]string{"--debug-addr", "6060"}, "--debug-addr"},
	} {
		_, err := parseConfig(tc.args, env(nil), io.Discard)
		require.Error(t, err, tc.args)
		assert.Contains(t, err.Error(), tc.flag)
		assert.NotContains(t, err.Error(), "\n", "one line")
	}
}

func TestRunEmbeddedPrintsTheURLAndAnAdminLink(t *testing.T) {
	base, logs, stop := started(t, []string{"--addr", "127.0.0.1:0"}, nil)
	require.NoError(t, stop())
	out := logs.String()
	assert.Contains(t, out, "open "+base+"/", "the URL to open")
	m := regexp.MustCompile(`admin#token=([0-9a-f]{32})`).FindStringSubmatch(out)
	require.NotNil(t, m, "embedded mode without --admin-token prints a sign-in link:\n%s", out)
	assert.Contains(t, out, "miniredis", "says what the embedded Redis is")
}
