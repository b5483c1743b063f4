package hooks_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/hooks"
	"github.com/chatd/chatd/internal/redistest"
)

const (
	secretA = "hook-secret-aaaaaaaaaaaa"
	secretB = "hook-secret-bbbbbbbbbbbb"
)

// received is one request a test backend got.
type received struct {
	hook, ts, id, sig string
	body              []byte
}

// backend is a real HTTP backend whose answer a test sets.
type backend struct {
	*httptest.Server
	mu     sync.Mutex
	got    []received
	answer func(r received) (int, string)
}

func newBackend(t *testing.T, answer func(r received) (int, string)) *backend {
	b := &backend{answer: answer}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec := received{hook: r.Header.Get(hooks.HeaderHook), ts: r.Header.Get(hooks.HeaderTimestamp),
			id: r.Header.Get(hooks.HeaderEventID), sig: r.Header.Get(hooks.HeaderSignature), body: body}
		b.mu.Lock()
		b.got = append(b.got, rec)
		answer := b.answer
		b.mu.Unlock()
		status, reply := answer(rec)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, reply)
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *backend) requests() []received {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]received(nil), b.got...)
}

func (b *backend) set(answer func(r received) (int, string)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.answer = answer
}

func ok(reply string) func(received) (int, string) {
	return func(received) (int, string) { return 200, reply }
}

func newHooks(t *testing.T, cfg hooks.Config) *hooks.Hooks {
	t.Helper()
	if cfg.Secrets == nil {
		cfg.Secrets = []string{secretA}
	}
	cfg.Node = "n1"
	h, err := hooks.New(cfg)
	require.NoError(t, err)
	require.NotNil(t, h)
	return h
}

func mac(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

func TestHookRequestIsSignedWithEverySecretOverTimestampAndBody(t *testing.T) {
	t.Parallel()
	b := newBackend(t, ok(`{"data":{"tier":"gold"}}`))
	now := time.Unix(1_800_000_000, 0)
	h := newHooks(t, hooks.Config{Secrets: []string{secretA, secretB}, Now: func() time.Time { return now },
		Hooks: map[hooks.Name]hooks.HookConfig{hooks.Connect: {URL: b.URL}}})
	data, err := h.Connect(t.Context(), hooks.ConnectRequest{User: "al", Session: "s1", Addr: "192.0.2.1", Transport: "websocket"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"tier":"gold"}`, string(data))

	got := b.requests()
	require.Len(t, got, 1)
	r := got[0]
	assert.Equal(t, "connect", r.hook)
	assert.Equal(t, "1800000000", r.ts)
	assert.Len(t, r.id, 32)
	assert.Equal(t, "v1="+mac(secretA, r.ts, r.body)+",v1="+mac(secretB, r.ts, r.body), r.sig)
	var body map[string]any
	require.NoError(t, json.Unmarshal(r.body, &body))
	assert.Equal(t, "connect", body["hook"])
	assert.Equal(t, r.id, body["id"])
	assert.Equal(t, "n1", body["node"])
	assert.Equal(t, "al", body["user"])
	assert.Equal(t, "websocket", body["transport"])
	assert.Equal(t, hooks.Signature([]string{secretA, secretB}, r.ts, r.body), r.sig)
}

func TestHookDenyCarriesTheBackendsReason(t *testing.T) {
	t.Parallel()
	b := newBackend(t, ok(`{"deny":{"reason":"lobby vip is for members"}}`))
	h := newHooks(t, hooks.Config{Hooks: map[hooks.Name]hooks.HookConfig{hooks.Join: {URL: b.URL}}})
	err := h.Join(t.Context(), hooks.JoinRequest{User: "al", Lobby: "vip"})
	require.ErrorIs(t, err, hooks.ErrDenied)
	assert.Equal(t, errcode.HookDenied, errcode.Of(err))
	assert.Equal(t, "Lobby vip is for members", errcode.Message(err))
}

func TestHookFailurePolicies(t *testing.T) {
	t.Parallel()
	b := newBackend(t, func(received) (int, string) { return 500, "down" })
	for _, tc := range []struct {
		name    string
		failure hooks.Failure
		refused bool
	}{
		{"fail closed refuses with hook_unavailable", hooks.FailClosed, true},
		{"fail open lets the message through unchanged", hooks.FailOpen, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			h := newHooks(t, hooks.Config{Registerer: reg, Hooks: map[hooks.Name]hooks.HookConfig{hooks.Publish: {URL: b.URL, Failure: tc.failure}}})
			text, err := h.Publish(t.Context(), hooks.PublishRequest{User: "al", Room: "general-1", Lobby: "general", Text: "hi"})
			if tc.refused {
				require.ErrorIs(t, err, hooks.ErrUnavailable)
				assert.Equal(t, errcode.HookUnavailable, errcode.Of(err))
				assert.Equal(t, 1.0, testutil.ToFloat64(metric(t, reg, "failed_closed")))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "hi", text)
			assert.Equal(t, 1.0, testutil.ToFloat64(metric(t, reg, "failed_open")))
		})
	}
}

// metric is chatd_hook_calls_total{hook="publish",result}.
func metric(t *testing.T, reg *prometheus.Registry, result string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "chatd_hook_calls_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["result"] == result {
				g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x"})
				g.Set(m.GetCounter().GetValue())
				return g
			}
		}
	}
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: "x"})
}

func TestHookPublishReplacesTheText(t *testing.T) {
	t.Parallel()
	b := newBackend(t, ok(`{"text":"h*llo"}`))
	h := newHooks(t, hooks.Config{Hooks: map[hooks.Name]hooks.HookConfig{hooks.Publish: {URL: b.URL}}})
	text, err := h.Publish(t.Context(), hooks.PublishRequest{User: "al", Room: "general-1", Lobby: "general", Text: "hello"})
	require.NoError(t, err)
	assert.Equal(t, "h*llo", text)
}

func TestHookRetriesRepeatTheEventIDAndRPCIsNeverRetried(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	b := newBackend(t, func(received) (int, string) {
		if n.Add(1)%2 == 1 {
			return 503, "" // every first attempt fails
		}
		return 200, `{}`
	})
	h := newHooks(t, hooks.Config{Hooks: map[hooks.Name]hooks.HookConfig{
		hooks.Join: {URL: b.URL, Retries: 1}, hooks.RPC: {URL: b.URL, Retries: 3}}})
	require.NoError(t, h.Join(t.Context(), hooks.JoinRequest{User: "al", Lobby: "general"}))
	got := b.requests()
	require.Len(t, got, 2)
	assert.Equal(t, got[0].id, got[1].id, "a retry repeats the event id")
	assert.Equal(t, got[0].body, got[1].body)

	n.Store(0)
	_, err := h.RPC(t.Context(), hooks.RPCRequest{User: "al", Method: "roll"})
	require.ErrorIs(t, err, hooks.ErrUnavailable)
	assert.Len(t, b.requests(), 3, "an rpc is sent once")
}

func TestHookPublishEventIDFollowsTheClientsRef(t *testing.T) {
	t.Parallel()
	b := newBackend(t, ok(`{}`))
	h := newHooks(t, hooks.Config{Hooks: map[hooks.Name]hooks.HookConfig{hooks.Publish: {URL: b.URL}}})
	req := hooks.PublishRequest{User: "al", Session: "s1", Room: "general-1", Lobby: "general", Text: "hi", Ref: "r1"}
	for range 2 {
		_, err := h.Publish(t.Context(), req)
		require.NoError(t, err)
	}
	req.Ref = ""
	_, err := h.Publish(t.Context(), req)
	require.NoError(t, err)
	got := b.requests()
	require.Len(t, got, 3)
	assert.Equal(t, got[0].id, got[1].id, "the same say sent again is the same event")
	assert.NotEqual(t, got[0].id, got[2].id)
}

func TestHookScopeGlobs(t *testing.T) {
	t.Parallel()
	b := newBackend(t, ok(`{"deny":{"reason":"no"}}`))
	h := newHooks(t, hooks.Config{Hooks: map[hooks.Name]hooks.HookConfig{hooks.Join: {URL: b.URL, Scope: []string{"game-*", "ranked"}}}})
	for lobby, asked := range map[string]bool{"game-7": true, "ranked": true, "general": false, "ranked2": false} {
		err := h.Join(t.Context(), hooks.JoinRequest{User: "al", Lobby: lobby})
		assert.Equal(t, asked, err != nil, lobby)
		assert.Equal(t, asked, h.Applies(hooks.Join, lobby), lobby)
	}
	assert.Len(t, b.requests(), 2)
	var off *hooks.Hooks
	assert.False(t, off.Applies(hooks.Join, "game-1"))
	assert.NoError(t, off.Join(t.Context(), hooks.JoinRequest{Lobby: "game-1"}))
	_, err := off.RPC(t.Context(), hooks.RPCRequest{Method: "x"})
	assert.ErrorIs(t, err, hooks.ErrNoRPC)
}

func TestHookBreakerOpensAndCloses(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	down.Store(true)
	b := newBackend(t, func(received) (int, string) {
		if down.Load() {
			return 502, ""
		}
		return 200, `{}`
	})
	reg := prometheus.NewRegistry()
	const open = 300 * time.Millisecond
	h := newHooks(t, hooks.Config{Registerer: reg, BreakerFailures: 3, BreakerOpen: open,
		Hooks: map[hooks.Name]hooks.HookConfig{hooks.Publish: {URL: b.URL}}})
	say := func() error {
		_, err := h.Publish(t.Context(), hooks.PublishRequest{User: "al", Room: "general-1", Lobby: "general", Text: "hi"})
		return err
	}
	state := func() float64 {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "chatd_hook_breaker_state" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no chatd_hook_breaker_state")
		return -1
	}
	for range 3 {
		require.ErrorIs(t, say(), hooks.ErrUnavailable)
	}
	assert.Len(t, b.requests(), 3)
	assert.Equal(t, 2.0, state(), "open")
	for range 10 {
		require.ErrorIs(t, say(), hooks.ErrUnavailable)
	}
	assert.Len(t, b.requests(), 3, "an open breaker sends nothing")

	down.Store(false)
	time.Sleep(open + 50*time.Millisecond)
	assert.Equal(t, 1.0, state(), "half-open")
	require.NoError(t, say(), "one call tries, and passes")
	assert.Equal(t, 0.0, state(), "closed")
	require.NoError(t, say())
	assert.Len(t, b.requests(), 5)
}

func TestHookTimeoutIsAFailure(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	b := newBackend(t, func(received) (int, string) { <-release; return 200, `{}` })
	defer close(release)
	h := newHooks(t, hooks.Config{Hooks: map[hooks.Name]hooks.HookConfig{hooks.Join: {URL: b.URL, Timeout: 100 * time.Millisecond}}})
	start := time.Now()
	err := h.Join(t.Context(), hooks.JoinRequest{User: "al", Lobby: "x"})
	require.ErrorIs(t, err, hooks.ErrUnavailable)
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestHookBadRepliesAreFailures(t *testing.T) {
	t.Parallel()
	for name, reply := range map[string]func(received) (int, string){
		"not JSON":       ok("yes"),
		"a redirect":     func(received) (int, string) { return 302, "" },
		"too large":      ok(`{"data":"` + strings.Repeat("x", hooks.MaxReply) + `"}`),
		"data too large": ok(`{"data":"` + strings.Repeat("x", hooks.MaxData) + `"}`),
	} {
		t.Run(name, func(t *testing.T) {
			b := newBackend(t, reply)
			h := newHooks(t, hooks.Config{Hooks: map[hooks.Name]hooks.HookConfig{hooks.Connect: {URL: b.URL}}})
			_, err := h.Connect(t.Context(), hooks.ConnectRequest{User: "al"})
			require.ErrorIs(t, err, hooks.ErrUnavailable)
		})
	}
}

func TestHookMatchAnswerIsKeptForRetries(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	var n atomic.Int32
	b := newBackend(t, func(received) (int, string) {
		return 200, `{"data":{"server":"gs-` + strconv.Itoa(int(n.Add(1))) + `.example:7777"}}`
	})
	mk := func() *hooks.Hooks {
		return newHooks(t, hooks.Config{Redis: r.NewClient(t), Prefix: r.Prefix,
			Hooks: map[hooks.Name]hooks.HookConfig{hooks.Match: {URL: b.URL}}})
	}
	h1, h2 := mk(), mk() // two nodes
	req := hooks.MatchRequest{Match: "42", Queue: "duel", Room: "mm.duel.42-1", Players: []string{"al", "bo"}}
	d1, err := h1.Match(t.Context(), req)
	require.NoError(t, err)
	d2, err := h2.Match(t.Context(), req)
	require.NoError(t, err)
	assert.JSONEq(t, `{"server":"gs-1.example:7777"}`, string(d1))
	assert.Equal(t, string(d1), string(d2), "the same match tells the same data on every node")
	got := b.requests()
	require.Len(t, got, 1, "the backend is asked once per match")
	assert.Equal(t, "match-duel-42", got[0].id)

	// failing open keeps "no data" for the match
	b.set(func(received) (int, string) { return 500, "" })
	req.Match = "43"
	d, err := h1.Match(t.Context(), req)
	require.NoError(t, err)
	assert.Nil(t, d)
	b.set(ok(`{"data":{"late":true}}`))
	d, err = h2.Match(t.Context(), req)
	require.NoError(t, err)
	assert.Nil(t, d, "a match told without data stays without")
}

func TestHookConfigErrors(t *testing.T) {
	t.Parallel()
	h, err := hooks.New(hooks.Config{})
	require.NoError(t, err)
	assert.Nil(t, h, "no hook on: nil")
	for name, cfg := range map[string]hooks.Config{
		"no secret":       {Hooks: map[hooks.Name]hooks.HookConfig{hooks.Join: {URL: "http://x"}}},
		"short secret":    {Secrets: []string{"short"}, Hooks: map[hooks.Name]hooks.HookConfig{hooks.Join: {URL: "http://x"}}},
		"bad scheme":      {Secrets: []string{secretA}, Hooks: map[hooks.Name]hooks.HookConfig{hooks.Join: {URL: "ftp://x"}}},
		"bad policy":      {Secrets: []string{secretA}, Hooks: map[hooks.Name]hooks.HookConfig{hooks.Join: {URL: "http://x", Failure: "maybe"}}},
		"bad scope":       {Secrets: []string{secretA}, Hooks: map[hooks.Name]hooks.HookConfig{hooks.Join: {URL: "http://x", Scope: []string{"["}}}},
		"unknown hook":    {Secrets: []string{secretA}, Hooks: map[hooks.Name]hooks.HookConfig{"refresh": {URL: "http://x"}}},
		"match, no redis": {Secrets: []string{secretA}, Hooks: map[hooks.Name]hooks.HookConfig{hooks.Match: {URL: "http://x"}}},
	} {
		_, err := hooks.New(cfg)
		assert.Error(t, err, name)
	}
}
