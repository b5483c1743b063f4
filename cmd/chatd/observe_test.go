package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// jsonLines parses every line of a JSON log; it fails the test on a line
// that is not one JSON object.
func jsonLines(t *testing.T, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), "a log line that is not JSON: %s", sc.Text())
		out = append(out, m)
	}
	return out
}

// request sends a GET with an optional X-Request-ID and returns the
// answer's status and X-Request-ID.
func request(t *testing.T, url, id string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if id != "" {
		req.Header.Set("X-Request-ID", id)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("X-Request-ID")
}

// jsonListening finds the base URL in a JSON log.
func jsonListening(t *testing.T, logs *logBuffer, key string) string {
	t.Helper()
	var addr string
	require.Eventually(t, func() bool {
		for _, l := range jsonLines(t, logs.String()) {
			if v, ok := l[key].(string); ok && (key != "addr" || strings.HasPrefix(l["msg"].(string), "chatd listening")) {
				addr = v
				return true
			}
		}
		return false
	}, 20*time.Second, 10*time.Millisecond, "no %s in the log:\n%s", key, logs)
	return addr
}

func TestJSONLogsCarryNodeAndRequestID(t *testing.T) {
	r := redistest.Own(t, redistest.Options{})
	ctx := t.Context()
	logs := &logBuffer{}
	done := make(chan error, 1)
	runCtx, cancel := context.WithCancel(ctx)
	go func() {
		done <- run(runCtx, []string{"--addr", "127.0.0.1:0", "--log-format", "json", "--log-level", "debug", "--node-id", "json-node",
			"--redis", r.URL(), "--prefix", r.Prefix, "--secret", secret}, env(nil), io.Discard, logs)
	}()
	base := "http://" + jsonListening(t, logs, "addr")
	require.Eventually(t, func() bool { s, _ := request(t, base+"/readyz", ""); return s == 200 }, 10*time.Second, 20*time.Millisecond)

	status, echoed := request(t, base+"/healthz", "client-id-1")
	assert.Equal(t, 200, status)
	assert.Equal(t, "client-id-1", echoed, "a sane X-Request-ID is kept and echoed")
	_, generated := request(t, base+"/healthz", "")
	assert.Regexp(t, `^[0-9a-f]{32}$`, generated, "one is generated when the request has none")
	_, replaced := request(t, base+"/healthz", "bad id\twith spaces")
	assert.Regexp(t, `^[0-9a-f]{32}$`, replaced, "an insane one is replaced")
	_, long := request(t, base+"/healthz", strings.Repeat("a", 65))
	assert.Regexp(t, `^[0-9a-f]{32}$`, long, "over 64 characters is replaced")
	status, _ = request(t, base+"/nope", "refused-404")
	assert.Equal(t, 404, status)

	// a paused Redis: readiness fails with 503, logged at warn with its id
	r.Server.Pause(t)
	status, _ = request(t, base+"/readyz", "failed-503")
	r.Server.Resume(t)
	require.Eventually(t, func() bool { s, _ := request(t, base+"/readyz", ""); return s == 200 }, 10*time.Second, 20*time.Millisecond)
	cancel()
	require.NoError(t, <-done)

	lines := jsonLines(t, logs.String())
	require.NotEmpty(t, lines)
	byID := map[string][]map[string]any{}
	for _, l := range lines {
		assert.Equal(t, "json-node", l["node"], "every line names the node: %v", l)
		if id, ok := l["request_id"].(string); ok {
			byID[id] = append(byID[id], l)
		}
		if l["msg"] == "request" || l["msg"] == "request failed" || l["msg"] == "request refused" {
			assert.NotEmpty(t, l["request_id"], "a request line carries request_id: %v", l)
		}
	}
	require.Len(t, byID["client-id-1"], 1)
	assert.Equal(t, "/healthz", byID["client-id-1"][0]["path"])
	assert.NotEmpty(t, byID[generated], "the generated id is in the log")
	var msgs []string
	for _, l := range byID["refused-404"] {
		msgs = append(msgs, l["msg"].(string))
	}
	assert.ElementsMatch(t, []string{"request refused", "request"}, msgs, "a 4xx: its refusal and request lines")
	if status == http.StatusServiceUnavailable {
		var failed bool
		for _, l := range byID["failed-503"] {
			failed = failed || (l["msg"] == "request failed" && l["level"] == "WARN")
		}
		assert.True(t, failed, "a 5xx is logged at warn with its request id: %v", byID["failed-503"])
	} else {
		t.Errorf("a request while Redis was paused answered %d, not 503", status)
	}
}

var metricLine = regexp.MustCompile(`(?m)^(\w+)(\{[^}]*\})? (\S+)$`)

// scrape reads a /metrics page: "name{labels}" → value text.
func scrape(t *testing.T, url string) map[string]string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode, url)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := map[string]string{}
	for _, m := range metricLine.FindAllStringSubmatch(string(b), -1) {
		out[m[1]+m[2]] = m[3]
	}
	return out
}

func TestMetricsListener(t *testing.T) {
	r := redistest.Real(t)
	logs := &logBuffer{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--log-format", "json",
			"--redis", r.URL(), "--prefix", r.Prefix, "--secret", secret}, env(nil), io.Discard, logs)
	}()
	defer func() { cancel(); require.NoError(t, <-done) }()
	base := "http://" + jsonListening(t, logs, "addr")
	metrics := "http://" + jsonListening(t, logs, "metrics_addr")
	require.Eventually(t, func() bool { s, _ := request(t, base+"/readyz", ""); return s == 200 }, 10*time.Second, 20*time.Millisecond)

	t.Run("the public port answers 404 on /metrics, in the error shape", func(t *testing.T) {
		resp, err := http.Get(base + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, 404, resp.StatusCode)
		var shape struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&shape))
		assert.Equal(t, "not_found", shape.Error.Code)
	})
	t.Run("the metrics port serves the node's metrics", func(t *testing.T) {
		m := scrape(t, metrics+"/metrics")
		var build string
		for k, v := range m {
			if strings.HasPrefix(k, "chatd_build_info{") {
				build = k
				assert.Equal(t, "1", v)
			}
		}
		assert.Regexp(t, `go_version="go1\.\d+`, build)
		assert.Contains(t, build, `revision="`)
		assert.Equal(t, "1", m["chatd_ready"], "ready")
		assert.NotEmpty(t, m[`chatd_redis_command_duration_seconds_count{cmd="ping"}`], "the start-up PING was timed")
		// The first node heartbeat (a script) runs on the heartbeat loop's
		// goroutine as the node starts, not before /readyz answers 200: on
		// a busy machine the first scrape may come before it.
		scripts := func(m map[string]string) string {
			return m[`chatd_redis_command_duration_seconds_count{cmd="settings.settings_write"}`] +
				m[`chatd_redis_command_duration_seconds_count{cmd="presence.node_heartbeat"}`]
		}
		assert.Eventually(t, func() bool { return scripts(scrape(t, metrics+"/metrics")) != "" }, 10*time.Second, 50*time.Millisecond,
			"a script is counted by its name")
		assert.NotEmpty(t, m[`chatd_redis_pool_conns{pool="commands"}`])
		assert.Contains(t, m, `chatd_http_request_duration_seconds_count{method="GET",route="/readyz",status="200"}`)
		assert.Contains(t, m, "go_goroutines")
		assert.Contains(t, m, "process_resident_memory_bytes")
	})
	t.Run("pprof is there too", func(t *testing.T) {
		status, _ := request(t, metrics+"/debug/pprof/", "")
		assert.Equal(t, 200, status)
		status, _ = request(t, metrics+"/debug/pprof/goroutine?debug=1", "")
		assert.Equal(t, 200, status)
	})
}
