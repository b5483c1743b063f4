package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// writeFile writes a config file into the test's directory.
func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

func TestConfigPrecedence(t *testing.T) {
	t.Parallel()
	file := writeFile(t, "chatd.yaml", `
addr: "127.0.0.1:7001"
prefix: fileprefix
log-level: warn
shutdown-grace: 7s
allowed-origins: ["https://file.example"]
`)
	cases := []struct {
		name      string
		args      []string
		env       map[string]string
		addr      string
		prefix    string
		grace     string
		origins   []string
		fromAddr  string // origin of addr
		fromGrace string
	}{
		{"the file over the defaults", []string{"--config", file}, nil,
			"127.0.0.1:7001", "fileprefix", "7s", []string{"https://file.example"}, file + ":2", file + ":5"},
		{"the environment over the file", []string{"--config", file}, map[string]string{"CHATD_ADDR": "127.0.0.1:7002", "CHATD_SHUTDOWN_GRACE": "8s"},
			"127.0.0.1:7002", "fileprefix", "8s", []string{"https://file.example"}, "env CHATD_ADDR", "env CHATD_SHUTDOWN_GRACE"},
		{"a flag over the environment and the file", []string{"--config", file, "--addr", "127.0.0.1:7003"}, map[string]string{"CHATD_ADDR": "127.0.0.1:7002"},
			"127.0.0.1:7003", "fileprefix", "7s", []string{"https://file.example"}, "flag", file + ":5"},
		{"an empty environment variable does not hide the file", []string{"--config", file}, map[string]string{"CHATD_ADDR": ""},
			"127.0.0.1:7001", "fileprefix", "7s", []string{"https://file.example"}, file + ":2", file + ":5"},
		{"CHATD_CONFIG names the file", nil, map[string]string{"CHATD_CONFIG": file},
			"127.0.0.1:7001", "fileprefix", "7s", []string{"https://file.example"}, file + ":2", file + ":5"},
		{"--config wins over CHATD_CONFIG", []string{"--config", file}, map[string]string{"CHATD_CONFIG": "/nonexistent.yaml"},
			"127.0.0.1:7001", "fileprefix", "7s", []string{"https://file.example"}, file + ":2", file + ":5"},
		{"defaults without a file", nil, nil, ":8080", "chatd", "10s", nil, "default", "default"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, r, err := loadConfig(tc.args, env(tc.env), io.Discard)
			require.NoError(t, err)
			assert.Equal(t, tc.addr, c.Addr)
			assert.Equal(t, tc.prefix, c.Prefix)
			assert.Equal(t, tc.grace, c.ShutdownGrace.String())
			assert.Equal(t, tc.origins, c.AllowedOrigins)
			assert.Equal(t, tc.fromAddr, r.from["addr"].String())
			assert.Equal(t, tc.fromGrace, r.from["shutdown-grace"].String())
		})
	}
}

func TestConfigFileRefusals(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body string
		line       string // "file:N"
		says       []string
	}{
		{"an unknown key", "addr: \":8080\"\ncolour: red\n", ":2:", []string{`unknown key "colour"`, "addr, redis"}},
		{"a misspelt key", "\n\nnode_id: a\n", ":3:", []string{`unknown key "node_id"`, "node-id"}},
		{"a key given twice", "prefix: a\nprefix: b\n", ":2:", []string{`"prefix" is given twice`, "line 1"}},
		{"a bad value, named by its flag", "log-level: info\naddr: nowhere\n", ":2:", []string{`--addr "nowhere"`}},
		{"a bad duration", "shutdown-grace: soon\n", ":1:", []string{"--shutdown-grace"}},
		{"a bad list item", "trusted-proxies:\n  - 10.0.0.0/8\n  - proxy.example\n", ":2:", []string{"--trusted-proxies", "proxy.example"}},
		{"a list for a string", "addr: [a, b]\n", ":1:", []string{"addr: expected a string, not a list"}},
		{"a mapping for a value", "redis:\n  host: x\n", ":2:", []string{"redis: expected a string"}},
		{"a YAML syntax error", "addr: \":8080\"\n\tprefix: x\n", ":2:", []string{"found character that cannot start any token"}},
		{"an unclosed quote", "addr: \":8080\nprefix: x\n", ":", nil},
		{"a list at the top", "- addr\n", ":1:", []string{"expected a mapping"}},
		{"the file naming another", "config: other.yaml\n", ":1:", []string{`"config" is not a config file key`}},
		{"an action in the file", "version: true\n", ":1:", []string{`"version" is not a config file key`}},
	}
	for _, tc := range cases {
		t.Run(tc.name+" is refused with the file and line", func(t *testing.T) {
			file := writeFile(t, "bad.yaml", tc.body)
			_, err := parseConfig([]string{"--config", file}, env(nil), io.Discard)
			require.Error(t, err)
			msg := err.Error()
			assert.True(t, strings.HasPrefix(msg, file+tc.line), "starts with %s%s: %s", file, tc.line, msg)
			assert.Regexp(t, `^`+regexp.QuoteMeta(file)+`:\d+: `, msg, "file:line: first")
			for _, s := range tc.says {
				assert.Contains(t, msg, s)
			}
			assert.NotContains(t, msg, "\n", "one line")
		})
	}
	t.Run("a missing file is refused naming --config", func(t *testing.T) {
		_, err := parseConfig([]string{"--config", filepath.Join(t.TempDir(), "none.yaml")}, env(nil), io.Discard)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "--config")
		assert.Contains(t, err.Error(), "none.yaml")
	})
	t.Run("a bad value from the environment keeps its old message", func(t *testing.T) {
		file := writeFile(t, "ok.yaml", "addr: \":8080\"\n")
		_, err := parseConfig([]string{"--config", file}, env(map[string]string{"CHATD_ADDR": "foo"}), io.Discard)
		require.Error(t, err)
		assert.Equal(t, `--addr "foo": expected host:port or :port`, err.Error())
	})
	t.Run("an empty file or only comments is no setting", func(t *testing.T) {
		for _, body := range []string{"", "# nothing\n", "---\n"} {
			file := writeFile(t, "empty.yaml", body)
			c, err := parseConfig([]string{"--config", file}, env(nil), io.Discard)
			require.NoError(t, err, "%q", body)
			assert.Equal(t, ":8080", c.Addr)
		}
	})
	t.Run("a list flag takes a list or a comma-separated string", func(t *testing.T) {
		for _, body := range []string{
			"trusted-proxies: [10.0.0.0/8, 192.0.2.7]\n",
			"trusted-proxies: \"10.0.0.0/8, 192.0.2.7\"\n",
			"trusted-proxies:\n  - 10.0.0.0/8\n  - 192.0.2.7\n",
		} {
			file := writeFile(t, "list.yaml", body)
			c, err := parseConfig([]string{"--config", file}, env(nil), io.Discard)
			require.NoError(t, err, body)
			require.Len(t, c.TrustedProxies, 2, body)
			assert.Equal(t, "192.0.2.7/32", c.TrustedProxies[1].String())
		}
	})
}

func TestExampleConfigFileLoads(t *testing.T) {
	t.Parallel()
	path := filepath.Join("..", "..", "deploy", "chatd.example.yaml")
	c, r, err := loadConfig([]string{"--config", path}, env(map[string]string{"CHATD_SECRET": secret}), io.Discard)
	require.NoError(t, err, "the sample loads (with CHATD_SECRET, as it says)")
	assert.Equal(t, "redis://127.0.0.1:6379/0", c.Redis)
	assert.Equal(t, "json", c.LogFormat)
	assert.Equal(t, "127.0.0.1:9090", c.MetricsAddr)
	assert.Equal(t, "file", r.from["metrics-addr"].kind)

	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, f := range flagSpecs {
		assert.Regexp(t, `(?m)^(# )?`+regexp.QuoteMeta(f.name)+`:`, string(raw), "the sample documents %s", f.name)
	}
}

func TestPrintConfig(t *testing.T) {
	t.Parallel()
	file := writeFile(t, "chatd.yaml", "prefix: fromfile\nlog-format: json\n")
	environ := map[string]string{
		"CHATD_REDIS":            "redis://user:hunter2-pass@127.0.0.1:6379/3",
		"CHATD_SECRET":           secret,
		"CHATD_ADMIN_TOKEN":      adminToken,
		"CHATD_METRICS_ADDR":     "127.0.0.1:9191",
		"CHATD_ADMIN_READ_TOKEN": "read-only-token-value",
	}
	args := []string{"--config", file, "--print-config", "--allowed-origins", "https://a.example,http://b.example:8080",
		"--trusted-proxies", "10.0.0.0/8,192.0.2.7", "--shutdown-grace", "1m30s", "--log-level", "debug", "--send-window", "3ms"}
	var stdout, stderr bytes.Buffer
	require.NoError(t, run(t.Context(), args, env(environ), &stdout, &stderr))
	out := stdout.String()
	assert.Empty(t, stderr.String(), "nothing but the configuration")
	for _, s := range []string{secret, adminToken, "read-only-token-value", "hunter2"} {
		assert.NotContains(t, out, s, "secrets are masked")
	}
	assert.Contains(t, out, `redis: "redis://user:***@127.0.0.1:6379/3"`)
	assert.Contains(t, out, "# env CHATD_REDIS; password masked")
	assert.Contains(t, out, "# set, masked (env CHATD_SECRET)")
	assert.Contains(t, out, `admin-read-token: "" # set, masked (env CHATD_ADMIN_READ_TOKEN)`)
	assert.Contains(t, out, `prefix: "fromfile" # `+file+":1")
	assert.Contains(t, out, `allowed-origins: ["https://a.example", "http://b.example:8080"] # flag`)
	assert.Contains(t, out, `addr: ":8080" # default`)
	assert.Contains(t, out, `send-window: "3ms" # flag`)

	var keys yaml.Node
	require.NoError(t, yaml.Unmarshal(stdout.Bytes(), &keys), "it is YAML")

	t.Run("loads back to the same configuration, secrets given again", func(t *testing.T) {
		printed := writeFile(t, "printed.yaml", out)
		want, err := parseConfig(args, env(environ), io.Discard)
		require.NoError(t, err)
		got, err := parseConfig([]string{"--config", printed}, env(map[string]string{
			"CHATD_REDIS": environ["CHATD_REDIS"], "CHATD_SECRET": secret, "CHATD_ADMIN_TOKEN": adminToken,
			"CHATD_ADMIN_READ_TOKEN": environ["CHATD_ADMIN_READ_TOKEN"],
		}), io.Discard)
		require.NoError(t, err)
		want.ConfigFile, want.PrintConfig, got.ConfigFile = "", false, ""
		assert.Equal(t, want, got)
	})
	t.Run("an invalid configuration is refused, not printed", func(t *testing.T) {
		var stdout bytes.Buffer
		err := run(t.Context(), []string{"--print-config", "--addr", "nowhere"}, env(nil), &stdout, io.Discard)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "--addr")
		assert.Empty(t, stdout.String())
	})
}

func TestDebugAddrIsADeprecatedAlias(t *testing.T) {
	t.Parallel()
	c, err := parseConfig([]string{"--debug-addr", "127.0.0.1:6060"}, env(nil), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:6060", c.MetricsAddr)
	require.Len(t, c.warnings, 1)
	assert.Contains(t, c.warnings[0], "deprecated")

	c, err = parseConfig([]string{"--debug-addr", "127.0.0.1:6060", "--metrics-addr", "127.0.0.1:6060"}, env(nil), io.Discard)
	require.NoError(t, err, "both, the same")
	assert.Equal(t, "127.0.0.1:6060", c.MetricsAddr)

	_, err = parseConfig([]string{"--metrics-addr", "127.0.0.1:9090"}, env(map[string]string{"CHATD_DEBUG_ADDR": "127.0.0.1:6060"}), io.Discard)
	require.Error(t, err, "two different addresses")
	assert.Contains(t, err.Error(), "--debug-addr")
	assert.Contains(t, err.Error(), "--metrics-addr")

	c, err = parseConfig(nil, env(nil), io.Discard)
	require.NoError(t, err)
	assert.Empty(t, c.MetricsAddr, "no metrics listener by default: /metrics stays on --addr")
}

func TestParseConfigNewFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--log-format", "xml"}, "--log-format"},
		{[]string{"--metrics-addr", "9090"}, "--metrics-addr"},
		{[]string{"--tls-cert", "c.pem"}, "--tls-key: required with --tls-cert"},
		{[]string{"--tls-key", "k.pem"}, "--tls-cert: required with --tls-key"},
	} {
		_, err := parseConfig(tc.args, env(nil), io.Discard)
		require.Error(t, err, tc.args)
		assert.Contains(t, err.Error(), tc.says)
	}
	c, err := parseConfig([]string{"--log-format", "json", "--tls-cert", "c.pem", "--tls-key", "k.pem"}, env(nil), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "json", c.LogFormat)
	assert.Equal(t, "c.pem", c.TLSCert)
}

func TestMaskRedisPassword(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"redis://127.0.0.1:6379/0":                  "redis://127.0.0.1:6379/0",
		"redis://:pw@127.0.0.1:6379/0":              "redis://:***@127.0.0.1:6379/0",
		"redis://user:pw@127.0.0.1:6379/0":          "redis://user:***@127.0.0.1:6379/0",
		"redis://pw@127.0.0.1:6379/0":               "redis://***@127.0.0.1:6379/0",
		"redis-sentinel://:p@w@s1:26379,s2:26379/m": "redis-sentinel://:***@s1:26379,s2:26379/m",
		"127.0.0.1:7000,127.0.0.1:7001":             "127.0.0.1:7000,127.0.0.1:7001",
	} {
		assert.Equal(t, want, maskRedisPassword(in), in)
	}
}

// TestCapFlags: the per-principal caps on work in flight are flags with an
// environment twin and a key in the config file, default to web's figures,
// refuse what is not a whole number in range, and --print-config shows
// where each came from.
func TestCapFlags(t *testing.T) {
	t.Parallel()
	c, err := parseConfig(nil, env(nil), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, [5]int{256, 64, 64, 8, 4}, [5]int{c.MaxRequestsPerAddr, c.MaxRequestsPerUser, c.MaxPollsPerAddr, c.MaxPollsPerUser, c.MaxHistoryBuilds})

	file := writeFile(t, "chatd.yaml", "max-polls-per-addr: 7\nmax-history-builds: 2\n")
	c, r, err := loadConfig([]string{"--config", file, "--max-requests-per-user", "0"},
		env(map[string]string{"CHATD_MAX_REQUESTS_PER_ADDR": "1000", "CHATD_MAX_POLLS_PER_USER": "3"}), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, [5]int{1000, 0, 7, 3, 2}, [5]int{c.MaxRequestsPerAddr, c.MaxRequestsPerUser, c.MaxPollsPerAddr, c.MaxPollsPerUser, c.MaxHistoryBuilds})
	assert.Equal(t, "flag", r.from["max-requests-per-user"].kind)
	assert.Equal(t, "env", r.from["max-requests-per-addr"].kind)
	assert.Equal(t, "file", r.from["max-polls-per-addr"].kind)
	assert.Equal(t, -1, noCap(c.MaxRequestsPerUser), "0 is no cap, which web takes as negative")

	for _, args := range [][]string{
		{"--max-requests-per-addr", "-1"}, {"--max-requests-per-user", "many"},
		{"--max-polls-per-addr", "1e9"}, {"--max-history-builds", "0"},
	} {
		_, err := parseConfig(args, env(nil), io.Discard)
		assert.ErrorContains(t, err, args[0], "%v is refused, naming the flag", args)
	}

	var stdout bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"--print-config", "--max-polls-per-user", "5"}, env(nil), &stdout, io.Discard))
	assert.Contains(t, stdout.String(), `max-polls-per-user: "5" # flag`)
	assert.Contains(t, stdout.String(), `max-history-builds: "4" # default`)
}
