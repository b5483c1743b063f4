package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/internal/chatdtest"
)

// answers is a scripted HTTP server: each request gets the next answer;
// it records the requests.
type answers struct {
	mu   sync.Mutex
	seq  []func(w http.ResponseWriter)
	reqs []*http.Request
}

func (a *answers) serve(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.reqs = append(a.reqs, r)
		var f func(http.ResponseWriter)
		if len(a.seq) > 0 {
			f, a.seq = a.seq[0], a.seq[1:]
		}
		a.mu.Unlock()
		if f == nil {
			w.WriteHeader(http.StatusTeapot)
			return
		}
		f(w)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func (a *answers) requests() []*http.Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*http.Request(nil), a.reqs...)
}

func answer(status int, retryAfter, body string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

var fast = client.Backoff{Min: time.Millisecond, Max: 2 * time.Millisecond}

// A purchase answered 503 and then 409 conflict is sent again with the
// same Idempotency-Key until it succeeds; two calls have two keys.
func TestRetriesRepeatTheIdempotencyKey(t *testing.T) {
	a := &answers{seq: []func(http.ResponseWriter){
		answer(503, "0", `{"error":{"code":"redis_unavailable","message":"retry"}}`),
		answer(409, "", `{"error":{"code":"conflict","message":"retry"}}`),
		answer(200, "", `{"balance":5,"items":{"sword":1}}`),
		answer(200, "", `{"balance":0,"items":{"sword":2}}`),
	}}
	srv := a.serve(t)
	c, err := client.New(client.Config{BaseURL: srv.URL, Token: "t", Backoff: fast})
	require.NoError(t, err)
	ctx := ctxT(t)
	w, err := c.Buy(ctx, "sword", 1)
	require.NoError(t, err)
	assert.Equal(t, int64(5), w.Balance)
	_, err = c.Buy(ctx, "sword", 1)
	require.NoError(t, err)
	reqs := a.requests()
	require.Len(t, reqs, 4)
	key := reqs[0].Header.Get("Idempotency-Key")
	assert.Len(t, key, 32)
	for _, r := range reqs[:3] {
		assert.Equal(t, key, r.Header.Get("Idempotency-Key"), "one key for one purchase")
		assert.Equal(t, "Bearer t", r.Header.Get("Authorization"))
	}
	assert.NotEqual(t, key, reqs[3].Header.Get("Idempotency-Key"), "a new key for a new purchase")
}

// Calls that are not safe to repeat are not repeated after an unknown
// outcome; a 4xx is never repeated; Retries bounds the attempts.
func TestNoRetryWhereARepeatWouldDoubleIt(t *testing.T) {
	ctx := ctxT(t)
	a := &answers{seq: []func(http.ResponseWriter){answer(502, "", `<html>bad gateway</html>`)}}
	srv := a.serve(t)
	c, err := client.New(client.Config{BaseURL: srv.URL, Token: "t", Backoff: fast})
	require.NoError(t, err)
	_, err = c.Grant(ctx, "bob", 5)
	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, 502, e.Status)
	assert.Equal(t, errcode.Internal, e.Code, "no chatd shape: coded by status")
	assert.Contains(t, e.Message, "bad gateway")
	assert.Len(t, a.requests(), 1, "a grant is not repeated")
	assert.Empty(t, a.requests()[0].Header.Get("Idempotency-Key"), "no key unless given")

	a = &answers{seq: []func(http.ResponseWriter){answer(502, "", `<html>bad gateway</html>`), answer(200, "", `{"balance":5}`)}}
	c, _ = client.New(client.Config{BaseURL: a.serve(t).URL, Token: "t", Backoff: fast})
	bal, err := c.Grant(ctx, "bob", 5, client.WithIdempotencyKey("order-9"))
	require.NoError(t, err)
	assert.EqualValues(t, 5, bal)
	reqs := a.requests()
	require.Len(t, reqs, 2, "a keyed grant is repeated")
	for _, r := range reqs {
		assert.Equal(t, "order-9", r.Header.Get("Idempotency-Key"), "with its key each time")
	}

	a = &answers{seq: []func(http.ResponseWriter){answer(409, "", `{"error":{"code":"sold_out","message":"none"}}`)}}
	c, _ = client.New(client.Config{BaseURL: a.serve(t).URL, Backoff: fast})
	_, err = c.Buy(ctx, "sword", 1)
	assert.ErrorIs(t, err, client.ErrSoldOut)
	assert.Len(t, a.requests(), 1)

	a = &answers{}
	for range 5 {
		a.seq = append(a.seq, answer(503, "", `{"error":{"code":"busy","message":"retry"}}`))
	}
	c, _ = client.New(client.Config{BaseURL: a.serve(t).URL, Backoff: fast, Retries: 3})
	_, err = c.Join(ctx, "lobby")
	assert.ErrorIs(t, err, client.ErrBusy)
	assert.Len(t, a.requests(), 4, "1 + Retries")
}

// A keyed post answered 503 not_durable (stored, no replica holds it yet)
// is sent again with its key, to the same node, until a replica does; a
// call without a key is not, as a repeat would store it twice.
func TestNotDurableIsRetriedWithItsKey(t *testing.T) {
	ctx := ctxT(t)
	notDurable := answer(503, "", `{"error":{"code":"not_durable","message":"no replica acknowledged it in time"}}`)
	a := &answers{seq: []func(http.ResponseWriter){notDurable, notDurable,
		answer(200, "", `{"message":{"id":"1764504000123-000001","room":"general-1","from":"alice","text":"hi","ts":"2026-11-30T12:00:00.123Z"}}`)}}
	other := &answers{}
	c, err := client.New(client.Config{NodeURLs: []string{a.serve(t).URL, other.serve(t).URL}, Token: "t", Backoff: fast})
	require.NoError(t, err)
	m, err := c.Post(ctx, "general-1", "hi")
	require.NoError(t, err)
	assert.Equal(t, "1764504000123-000001", m.ID)
	reqs := a.requests()
	require.Len(t, reqs, 3, "sent again while no replica held it")
	for _, r := range reqs {
		assert.Equal(t, reqs[0].Header.Get("Idempotency-Key"), r.Header.Get("Idempotency-Key"), "with its key each time")
	}
	assert.Empty(t, other.requests(), "on the same node: it is not at fault")

	a = &answers{seq: []func(http.ResponseWriter){notDurable}}
	c, _ = client.New(client.Config{BaseURL: a.serve(t).URL, Token: "t", Backoff: fast})
	_, err = c.Grant(ctx, "bob", 5)
	assert.ErrorIs(t, err, client.ErrNotDurable)
	assert.Len(t, a.requests(), 1, "a grant without a key is not repeated")
}

// A node that refuses connections is skipped for the next node URL, and
// stays skipped.
func TestDeadNodeIsSkipped(t *testing.T) {
	dead := "http://127.0.0.1:" + itoa(chatdtest.FreePort(t))
	a := &answers{seq: []func(http.ResponseWriter){answer(200, "", `{"balance":1,"items":{}}`), answer(200, "", `{"balance":1,"items":{}}`)}}
	live := a.serve(t).URL
	c, err := client.New(client.Config{NodeURLs: []string{dead, live}, Backoff: fast})
	require.NoError(t, err)
	ctx := ctxT(t)
	_, err = c.Grant(ctx, "x", 1) // not safe to repeat, but a failed dial sent nothing
	require.NoError(t, err)
	assert.Equal(t, live, c.URL())
	_, err = c.Wallet(ctx)
	require.NoError(t, err)
	assert.Len(t, a.requests(), 2)
}

// The poll loop waits a 429's Retry-After before polling again, backs off
// after other failures, and stops at once on a refused token.
func TestPollLoopHonoursRetryAfter(t *testing.T) {
	a := &answers{seq: []func(http.ResponseWriter){
		answer(429, "1", `{"error":{"code":"rate_limited","message":"slow down"}}`),
		answer(503, "", `{"error":{"code":"redis_unavailable","message":"retry"}}`),
		answer(200, "", `{"dirty":["wallet","future"],"data":{"wallet":{"balance":7,"items":{}},"future":{"x":1}}}`),
		answer(401, "", `{"error":{"code":"bad_token","message":"this session has ended"}}`),
	}}
	srv := a.serve(t)
	c, err := client.New(client.Config{BaseURL: srv.URL, Token: "t", Backoff: fast})
	require.NoError(t, err)
	var waits []time.Duration
	var got []*client.PollResult
	start := time.Now()
	err = c.Poll(ctxT(t), client.PollOptions{Wait: 2 * time.Second, OnError: func(_ error, d time.Duration) { waits = append(waits, d) }},
		func(_ context.Context, r *client.PollResult) error { got = append(got, r); return nil })
	assert.ErrorIs(t, err, client.ErrBadToken)
	require.Len(t, waits, 2)
	assert.Equal(t, time.Second, waits[0], "Retry-After")
	assert.LessOrEqual(t, waits[1], fast.Max, "backoff")
	assert.GreaterOrEqual(t, time.Since(start), time.Second, "it waited")
	require.Len(t, got, 1)
	assert.True(t, got[0].Has(client.SectionWallet))
	assert.Equal(t, int64(7), got[0].Wallet.Balance)
	assert.JSONEq(t, `{"x":1}`, string(got[0].Raw["future"]), "unknown sections are kept raw")
	for _, r := range a.requests() {
		assert.Equal(t, "2", r.URL.Query().Get("wait"))
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
