package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/internal/chatdtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	chatdtest.Cleanup()
	os.Exit(code)
}

const (
	hookSecret = "example-hook-secret-0123456789"
	wait       = 30 * time.Second
)

// testBackend serves the example Backend on a loopback port; the test
// can make it hang (accept and never answer: every hook times out) or
// stop it (connections refused).
type testBackend struct {
	*Backend
	url   string
	srv   *http.Server
	hang  atomic.Bool
	calls sync.Map // hook → *atomic.Int64
}

func startBackend(t *testing.T) *testBackend {
	t.Helper()
	tb := &testBackend{Backend: &Backend{Secrets: []string{hookSecret}, Banned: []string{"darn"}, Members: []string{"vera"}, GameServers: "games.test"}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	tb.url = "http://" + ln.Addr().String()
	tb.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := tb.calls.LoadOrStore(strings.TrimPrefix(r.URL.Path, "/"), &atomic.Int64{})
		n.(*atomic.Int64).Add(1)
		if tb.hang.Load() {
			<-r.Context().Done() // chatd's timeout ends it
			return
		}
		tb.Backend.ServeHTTP(w, r)
	})}
	go func() { _ = tb.srv.Serve(ln) }()
	t.Cleanup(func() { _ = tb.srv.Close() })
	return tb
}

func (tb *testBackend) count(hook string) int64 {
	n, ok := tb.calls.Load(hook)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

// player is a signed-in user with a WebSocket on one node, whose events
// are recorded.
type player struct {
	name string
	cl   *client.Client
	conn *client.Conn
	mu   sync.Mutex
	evs  []client.Event
}

func newPlayer(ctx context.Context, t *testing.T, url, name string) *player {
	t.Helper()
	cl, err := client.New(client.Config{BaseURL: url, Retries: -1})
	require.NoError(t, err)
	require.NoError(t, cl.SignIn(ctx, name))
	p := &player{name: name, cl: cl}
	p.conn, err = cl.Connect(ctx, client.ConnOptions{})
	require.NoError(t, err, name)
	t.Cleanup(func() { _ = p.conn.Close() })
	go func() {
		for ev := range p.conn.Events() {
			p.mu.Lock()
			p.evs = append(p.evs, ev)
			p.mu.Unlock()
		}
	}()
	return p
}

// waitEvent waits for the first recorded event that ok accepts.
func waitEvent[E client.Event](t *testing.T, p *player, ok func(E) bool) E {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		p.mu.Lock()
		for _, ev := range p.evs {
			if e, is := ev.(E); is && ok(e) {
				p.mu.Unlock()
				return e
			}
		}
		p.mu.Unlock()
		if time.Now().After(deadline) {
			var zero E
			t.Fatalf("%s: no %T came", p.name, zero)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// texts returns the texts of the messages p received in room.
func (p *player) texts(room string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, ev := range p.evs {
		if m, ok := ev.(client.MessageEvent); ok && m.Message.Room == room {
			out = append(out, m.Message.Text)
		}
	}
	return out
}

func codeOf(err error) errcode.Code {
	var e *client.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// TestHookExampleBackendOnThreeNodes runs the example backend behind three
// chatd processes sharing one Redis and checks the acceptance: a
// banned word is refused (hook_denied) and stored nowhere, a join the
// backend denies is refused with its reason over WebSocket and REST,
// every player's matched event carries the backend's game server on
// every node, rpc roll answers over WebSocket and REST, the backend
// verifies chatd's signatures and refuses a stale timestamp; then, the
// backend hung and stopped, each hook follows its failure policy, chat
// where no hook applies goes on, the publish breaker opens (says refused
// at once instead of after the timeout) and closes once the backend is
// back.
func TestHookExampleBackendOnThreeNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts chatd processes")
	}
	be := startBackend(t)
	cl := chatdtest.Start(t, chatdtest.Options{Nodes: 3, Args: []string{
		"--hook-url", be.url,
		"--hook-scope", "join=vip-*,publish=game-*,match=duel",
		"--hook-failure", "connect=open,join=closed,publish=closed,match=open",
		"--hook-timeout", "500ms",
		"--hook-retries", "join=1",
		"--hook-breaker", "3/2s",
	}, Env: []string{"CHATD_HOOK_SECRET=" + hookSecret}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	n1, n2, n3 := cl.Nodes[0].URL, cl.Nodes[1].URL, cl.Nodes[2].URL
	adm, err := client.New(client.Config{BaseURL: n1, Token: cl.AdminToken})
	require.NoError(t, err)
	_, err = adm.SetSetting(ctx, "limit.sessions_per_ip_per_minute", 0)
	require.NoError(t, err)
	_, err = adm.SetSetting(ctx, "matchmaking.queues", `{"duel":{"min":2,"max":2,"window":1000,"reserve_seconds":60}}`)
	require.NoError(t, err)

	// connect: hello carries the backend's data; a suspended user is refused
	al, bo, vera := newPlayer(ctx, t, n1, "al"), newPlayer(ctx, t, n2, "bo"), newPlayer(ctx, t, n3, "vera")
	hello := waitEvent(t, al, func(client.ConnectedEvent) bool { return true })
	assert.JSONEq(t, `{"tier":"free"}`, string(hello.Data))
	hello = waitEvent(t, vera, func(client.ConnectedEvent) bool { return true })
	assert.JSONEq(t, `{"tier":"vip"}`, string(hello.Data))
	banned, err := client.New(client.Config{BaseURL: n2})
	require.NoError(t, err)
	require.NoError(t, banned.SignIn(ctx, "banned-bob"))
	_, err = banned.Connect(ctx, client.ConnOptions{})
	require.Error(t, err)
	assert.Equal(t, errcode.HookDenied, codeOf(err), "%v", err)
	assert.Contains(t, strings.ToLower(err.Error()), "this account is suspended")

	// publish: a banned word is refused with hook_denied and stored nowhere
	room, err := al.conn.Join(ctx, "game-1")
	require.NoError(t, err)
	_, err = bo.conn.Resume(ctx, room.ID, "") // the same room, on another node
	if err != nil {
		_, err = bo.conn.Join(ctx, "game-1")
	}
	require.NoError(t, err)
	_, err = al.conn.Say(ctx, room.ID, "well DARN it")
	require.Error(t, err)
	assert.Equal(t, errcode.HookDenied, codeOf(err))
	assert.Contains(t, err.Error(), "not allowed here")
	_, err = al.cl.Post(ctx, room.ID, "darn again")
	assert.Equal(t, errcode.HookDenied, codeOf(err), "REST posts pass the same hook: %v", err)
	_, err = al.conn.Say(ctx, room.ID, "good game")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(bo.texts(room.ID)) > 0 }, wait, 20*time.Millisecond)
	hist, err := bo.cl.History(ctx, room.ID, client.HistoryOptions{})
	require.NoError(t, err)
	for _, m := range hist {
		assert.NotContains(t, strings.ToLower(m.Text), "darn", "a refused message is not in the history")
	}
	assert.Equal(t, []string{"good game"}, bo.texts(room.ID), "nor delivered")

	// join: the backend's allow-list, over WebSocket and REST
	_, err = al.conn.Join(ctx, "vip-lounge")
	assert.Equal(t, errcode.HookDenied, codeOf(err))
	assert.Contains(t, strings.ToLower(err.Error()), "lobby vip-lounge is for vip members")
	_, err = al.cl.Join(ctx, "vip-lounge")
	assert.Equal(t, errcode.HookDenied, codeOf(err))
	_, err = vera.conn.Join(ctx, "vip-lounge")
	require.NoError(t, err)

	// match: every player's matched event, on every node, carries the
	// backend's game server; al has a second connection on node 3
	alOn3, err := client.New(client.Config{BaseURL: n3, Token: al.cl.Token()})
	require.NoError(t, err)
	al3, err := alOn3.Connect(ctx, client.ConnOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = al3.Close() })
	al3p := &player{name: "al@n3", cl: al.cl, conn: al3}
	go func() {
		for ev := range al3.Events() {
			al3p.mu.Lock()
			al3p.evs = append(al3p.evs, ev)
			al3p.mu.Unlock()
		}
	}()
	_, err = al.cl.SubmitTicket(ctx, "duel", client.TicketRequest{Skill: 1500})
	require.NoError(t, err)
	_, err = bo.cl.SubmitTicket(ctx, "duel", client.TicketRequest{Skill: 1500})
	require.NoError(t, err)
	var datas []string
	for _, p := range []*player{al, bo, al3p} {
		m := waitEvent(t, p, func(client.MatchedEvent) bool { return true })
		datas = append(datas, string(m.Data))
		assert.Contains(t, string(m.Data), `"server":"gs-`, p.name)
	}
	assert.Equal(t, datas[0], datas[1], "the same data for every player")
	assert.Equal(t, datas[0], datas[2], "and every node")
	assert.EqualValues(t, 1, be.count("match"), "one call per match")

	// rpc: roll over WebSocket and REST
	res, err := al.conn.RPC(ctx, "roll", map[string]int{"sides": 20})
	require.NoError(t, err)
	var roll struct{ Roll, Sides int }
	require.NoError(t, json.Unmarshal(res, &roll))
	assert.Equal(t, 20, roll.Sides)
	assert.True(t, roll.Roll >= 1 && roll.Roll <= 20, "%d", roll.Roll)
	res, err = bo.cl.RPC(ctx, "roll", nil)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(res, &roll))
	assert.Equal(t, 6, roll.Sides)
	_, err = bo.cl.RPC(ctx, "launch", nil)
	assert.Equal(t, errcode.HookDenied, codeOf(err))

	// signatures: the backend refuses a stale timestamp and a bad signature
	post := func(ts int64, secret string) int {
		body := []byte(`{"hook":"rpc","method":"roll"}`)
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(strconv.FormatInt(ts, 10) + "."))
		m.Write(body)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, be.url+"/rpc", bytes.NewReader(body))
		req.Header.Set("X-Chatd-Timestamp", strconv.FormatInt(ts, 10))
		req.Header.Set("X-Chatd-Signature", "v1="+hex.EncodeToString(m.Sum(nil)))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusOK, post(time.Now().Unix(), hookSecret))
	assert.Equal(t, http.StatusUnauthorized, post(time.Now().Add(-6*time.Minute).Unix(), hookSecret), "stale")
	assert.Equal(t, http.StatusUnauthorized, post(time.Now().Unix(), "another-secret-0123456789"), "bad signature")

	// the backend hangs: say latency before and after the breaker opens
	lounge, err := al.conn.Join(ctx, "lounge")
	require.NoError(t, err)
	_, err = bo.conn.Join(ctx, "lounge")
	require.NoError(t, err)
	metrics := func(url string) string {
		resp, err := http.Get(url + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	be.hang.Store(true)
	var before, after []time.Duration
	for i := range 8 {
		start := time.Now()
		_, err := al.conn.Say(ctx, room.ID, "while hung "+strconv.Itoa(i))
		d := time.Since(start)
		assert.Equal(t, errcode.HookUnavailable, codeOf(err), "publish fails closed: %v", err)
		if i < 3 {
			before = append(before, d)
		} else {
			after = append(after, d)
		}
	}
	t.Logf("say latency, backend hung (publish timeout 500ms, breaker 3 failures): before the breaker opened %v; after %v", before, after)
	assert.Contains(t, metrics(n1), `chatd_hook_breaker_state{hook="publish"} 2`, "open")
	start := time.Now()
	_, err = al.conn.Say(ctx, lounge.ID, "the lounge has no hook")
	require.NoError(t, err)
	t.Logf("say latency in a room without hooks, backend hung: %v", time.Since(start))
	require.Eventually(t, func() bool { return len(bo.texts(lounge.ID)) > 0 }, wait, 20*time.Millisecond)
	_, err = al.conn.Join(ctx, "vip-other")
	assert.Equal(t, errcode.HookUnavailable, codeOf(err), "join fails closed")
	_, err = al.conn.RPC(ctx, "roll", nil)
	assert.Equal(t, errcode.HookUnavailable, codeOf(err), "rpc fails closed")
	late := newPlayer(ctx, t, n1, "carl") // connect fails open: no data
	hello = waitEvent(t, late, func(client.ConnectedEvent) bool { return true })
	assert.Nil(t, hello.Data)

	// the backend is back: after the breaker's 2 s one say tries, and passes
	be.hang.Store(false)
	require.Eventually(t, func() bool {
		_, err := al.conn.Say(ctx, room.ID, "back again")
		return err == nil
	}, wait, 250*time.Millisecond)
	assert.Contains(t, metrics(n1), `chatd_hook_breaker_state{hook="publish"} 0`, "closed")
	assert.Contains(t, metrics(n1), `chatd_hook_calls_total{hook="publish",result="failed_closed"}`)

	// the backend stops: the same policies, at once (connections refused)
	require.NoError(t, be.srv.Close())
	_, err = bo.conn.Say(ctx, room.ID, "anyone?")
	assert.Equal(t, errcode.HookUnavailable, codeOf(err))
	_, err = bo.conn.Say(ctx, lounge.ID, "lounge still works")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return strings.Contains(strings.Join(al.texts(lounge.ID), "|"), "lounge still works")
	}, wait, 20*time.Millisecond)
	// match fails open: a match forms, its players told without data
	dee, eve := newPlayer(ctx, t, n2, "dee"), newPlayer(ctx, t, n3, "eve")
	_, err = dee.cl.SubmitTicket(ctx, "duel", client.TicketRequest{Skill: 10})
	require.NoError(t, err)
	_, err = eve.cl.SubmitTicket(ctx, "duel", client.TicketRequest{Skill: 10})
	require.NoError(t, err)
	for _, p := range []*player{dee, eve} {
		m := waitEvent(t, p, func(client.MatchedEvent) bool { return true })
		assert.Nil(t, m.Data, p.name)
	}
}
