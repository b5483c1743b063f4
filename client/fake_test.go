package client_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/client"
)

// These tests script a WebSocket server by hand, to send what a real
// chatd never sends (malformed events) or to place a disconnect exactly
// (between a say and its ack). Everything chatd does send is tested
// against real processes in e2e_test.go and reconnect_test.go.

// fake is a scripted WebSocket server: script runs for the n-th connection
// (from 0).
type fake struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	n      int
	script func(n int, ws *fakeWS)
}

func newFake(t *testing.T, script func(n int, ws *fakeWS)) *fake {
	f := &fake{t: t, script: script}
	up := websocket.Upgrader{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		f.mu.Lock()
		n := f.n
		f.n++
		f.mu.Unlock()
		f.script(n, &fakeWS{t: t, ws: ws, query: r.URL.Query().Encode()})
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) conns() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// fakeWS is the server side of one connection.
type fakeWS struct {
	t     *testing.T
	ws    *websocket.Conn
	query string
}

func (w *fakeWS) send(frames ...string) {
	for _, f := range frames {
		if err := w.ws.WriteMessage(websocket.TextMessage, []byte(f)); err != nil {
			w.t.Logf("fake: write: %v", err)
			return
		}
	}
}

func (w *fakeWS) hello() { w.send(`{"type":"hello","user":"u","node":"fake","motd":""}`) }

// read returns the next client frame, decoded.
func (w *fakeWS) read() map[string]string {
	_ = w.ws.SetReadDeadline(time.Now().Add(wait))
	_, p, err := w.ws.ReadMessage()
	if err != nil {
		return nil
	}
	var f map[string]string
	if err := json.Unmarshal(p, &f); err != nil {
		w.t.Errorf("fake: client frame %q: %v", p, err)
	}
	return f
}

// expect reads the next frame and checks its type.
func (w *fakeWS) expect(typ string) map[string]string {
	f := w.read()
	if f["type"] != typ {
		w.t.Errorf("fake: want a %s frame, got %v", typ, f)
	}
	return f
}

func (w *fakeWS) close(code int, text string) {
	_ = w.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
}

// idle reads (and drops) until the client goes.
func (w *fakeWS) idle() {
	for w.read() != nil {
	}
}

func fakeClient(t *testing.T, f *fake) *client.Client {
	c, err := client.New(client.Config{BaseURL: f.srv.URL, Token: "tok", Backoff: client.Backoff{Min: time.Millisecond, Max: 5 * time.Millisecond}})
	require.NoError(t, err)
	return c
}

func msgFrame(room string, i int) string {
	return fmt.Sprintf(`{"type":"message","message":{"id":"1796114764962-%06d","room":%q,"from":"x","text":"m%d","ts":"2026-12-01T11:01:25.123Z"}}`, i, room, i)
}

func msgID(i int) string { return fmt.Sprintf("1796114764962-%06d", i) }

// Malformed events from the server never panic the SDK: each is skipped
// with a BadFrameEvent, the good events around them are delivered, and the
// connection goes on.
func TestBadServerEventsAreSkipped(t *testing.T) {
	bad := []string{
		`not json`,
		`{"type":5}`,
		`{}`,
		`[1,2,3]`,
		`{"type":"message","message":"x"}`,
		`{"type":"message","message":{"id":"1-1"}}`,
		`{"type":"message","message":{"id":"1-1","room":"r-1","ts":"yesterday"}}`,
		`{"type":"message","message":null}`,
		`{"type":"joined","room":"general-1"}`,
		`{"type":"joined","room":{"id":7}}`,
		`{"type":"ack"}`,
		`{"type":"ack","ref":"x","id":"1-1","room":{"id":"r-1"}}`,
		`{"type":"error"}`,
		`{"type":"error","code":"internal","message":{"nested":true}}`,
		`{"type":"presence","room":"r-1"}`,
		`{"type":"settings"}`,
		"\xff\xfe{}",
		strings.Repeat("[", 100000),
		`{"type":"hello","user":1}`,
		`{"type":"message","message":{"id":"1-1","room":"r-1","from":"x","text":"t","ts":"2026-12-01T11:01:25Z"},"extra":`,
	}
	f := newFake(t, func(n int, w *fakeWS) {
		w.hello()
		for _, b := range bad {
			w.send(b)
		}
		_ = w.ws.WriteMessage(websocket.BinaryMessage, []byte(`{"type":"notice","id":"b","text":"binary"}`))
		// a batch mixing good and bad lines, an unknown type, a pong nobody waits for
		w.send("{\"type\":\"notice\",\"id\":\"1\",\"text\":\"one\"}\n{oops}\n\n\r\n{\"type\":\"future_event\",\"x\":1}\n{\"type\":\"pong\"}\n{\"type\":\"notice\",\"id\":\"2\",\"text\":\"two\"}")
		w.send(`{"type":"ack","ref":"nobody","id":"1-1","room":"r-1"}`, `{"type":"left","room":"never-1"}`)
		w.expect("ping")
		w.send(`{"type":"pong"}`)
		w.idle()
	})
	c := fakeClient(t, f)
	cn, r := connect(t, c, client.ConnOptions{})
	_, err := cn.Ping(ctxT(t))
	require.NoError(t, err, "the connection still works")
	evs := r.waitFor(t, "both notices", func(evs []client.Event) bool {
		return has(evs, func(e client.NoticeEvent) bool { return e.ID == "2" })
	})
	assert.True(t, has(evs, func(e client.NoticeEvent) bool { return e.ID == "1" }))
	nbad := 0
	for _, ev := range evs {
		if b, ok := ev.(client.BadFrameEvent); ok {
			nbad++
			assert.Error(t, b.Err)
			assert.LessOrEqual(t, len(b.Frame), 210, "the frame is clipped")
		}
	}
	assert.Equal(t, len(bad)+2, nbad, "each bad event and the binary frame and {oops}: %s", describe(evs))
	assert.Equal(t, nbad, cn.Stats().BadEvents)
	assert.Equal(t, 1, f.conns(), "no reconnect for bad events")
}

// A say left without an ack when the connection drops is sent again, with
// the same ref, after the resume; the messages the server replays that
// the Conn had already are dropped at the seam.
func TestResumeDedupsTheSeamAndResendsUnackedSays(t *testing.T) {
	var firstRef string
	resumed := make(chan map[string]string, 1)
	f := newFake(t, func(n int, w *fakeWS) {
		w.hello()
		switch n {
		case 0:
			j := w.expect("join")
			assert.Equal(t, "r", j["lobby"])
			w.send(`{"type":"joined","room":{"id":"r-1","lobby":"r","seq":1,"capacity":50,"members":["u"]}}`)
			w.send(msgFrame("r-1", 1), msgFrame("r-1", 2)+"\n"+msgFrame("r-1", 3))
			s := w.expect("say")
			firstRef = s["ref"]
			w.close(1012, "draining") // before the ack
		case 1:
			resumed <- w.expect("resume")
			s := w.expect("say")
			assert.Equal(t, firstRef, s["ref"], "the same ref")
			assert.Equal(t, "hi", s["text"])
			w.send(`{"type":"joined","room":{"id":"r-1","lobby":"r","seq":1,"capacity":50,"members":["u"]}}`)
			w.send(msgFrame("r-1", 2), msgFrame("r-1", 3), msgFrame("r-1", 4)) // 2 and 3 again
			w.send(fmt.Sprintf(`{"type":"ack","ref":%q,"id":%q,"room":"r-1"}`, s["ref"], msgID(5)), msgFrame("r-1", 5))
			w.idle()
		}
	})
	c := fakeClient(t, f)
	cn, r := connect(t, c, client.ConnOptions{})
	ctx := ctxT(t)
	room, err := cn.Join(ctx, "r")
	require.NoError(t, err)
	r.waitFor(t, "three messages", func(evs []client.Event) bool { return len(messages(evs, "r-1")) == 3 })
	id, err := cn.Say(ctx, room.ID, "hi")
	require.NoError(t, err)
	assert.Equal(t, msgID(5), id)
	res := <-resumed
	assert.Equal(t, map[string]string{"type": "resume", "room": "r-1", "after": msgID(3), "ref": res["ref"]}, res)
	evs := r.waitFor(t, "five messages", func(evs []client.Event) bool { return len(messages(evs, "r-1")) == 5 })
	assert.Equal(t, []string{msgID(1), msgID(2), msgID(3), msgID(4), msgID(5)}, ids(messages(evs, "r-1")))
	assert.Equal(t, 2, cn.Stats().Duplicates)
	assert.True(t, has(evs, func(e client.DisconnectedEvent) bool { return errors.Is(e.Err, client.ErrDraining) && !e.Final }))
	assert.True(t, has(evs, func(e client.JoinedEvent) bool { return e.Resumed }))
	assert.Contains(t, f.srv.URL, "127.0.0.1")
}

// Close codes end the Conn or make it reconnect as the protocol says, and
// are errors errors.Is matches.
func TestCloseCodes(t *testing.T) {
	for _, tc := range []struct {
		code  int
		want  error
		final bool
	}{
		{4000, client.ErrSessionEnded, true},
		{4001, client.ErrKicked, true},
		{4003, client.ErrBanned, true},
		{1012, client.ErrDraining, false},
		{1013, client.ErrTooSlow, false},
		{1008, client.ErrFlood, false},
		{1011, client.ErrServerFailed, false},
		{1009, client.ErrFrameTooBig, false},
	} {
		t.Run(fmt.Sprint(tc.code), func(t *testing.T) {
			f := newFake(t, func(n int, w *fakeWS) {
				w.hello()
				if n == 0 {
					w.close(tc.code, "why")
					return
				}
				w.idle()
			})
			cn, r := connect(t, fakeClient(t, f), client.ConnOptions{})
			if tc.final {
				select {
				case <-cn.Done():
				case <-time.After(wait):
					t.Fatal("the Conn did not end")
				}
				assert.ErrorIs(t, cn.Err(), tc.want)
				var ce *client.CloseError
				require.ErrorAs(t, cn.Err(), &ce)
				assert.Equal(t, "why", ce.Text)
				assert.Equal(t, 1, f.conns(), "no reconnect")
				r.waitFor(t, "the end of Events", func([]client.Event) bool { r.mu.Lock(); defer r.mu.Unlock(); return r.closed })
				return
			}
			r.waitFor(t, "the reconnect", func(evs []client.Event) bool {
				return has(evs, func(e client.DisconnectedEvent) bool { return errors.Is(e.Err, tc.want) && !e.Final }) &&
					has(evs, func(e client.ConnectedEvent) bool { return e.Reconnect })
			})
			assert.NoError(t, cn.Err())
		})
	}
}

// A refused open is an *Error with its code, status and Retry-After; the
// SDK does not retry a 401 or 403.
func TestRefusedOpen(t *testing.T) {
	var hits int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Query().Get("token") {
		case "banned":
			w.WriteHeader(403)
			_, _ = w.Write([]byte(`{"error":{"code":"banned","message":"until tomorrow"}}`))
		case "busy":
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(429)
			_, _ = w.Write([]byte(`{"error":{"code":"too_many_connections","message":"too many"}}`))
		default:
			w.WriteHeader(401)
			_, _ = w.Write([]byte(`{"error":{"code":"bad_token","message":"sign in"}}`))
		}
	}))
	t.Cleanup(srv.Close)
	ctx := ctxT(t)
	for token, want := range map[string]error{"bad": client.ErrBadToken, "banned": client.ErrBanned, "busy": client.ErrTooManyConnections} {
		c, err := client.New(client.Config{NodeURLs: []string{srv.URL, srv.URL}, Token: token})
		require.NoError(t, err)
		hits = 0
		_, err = c.Connect(ctx, client.ConnOptions{})
		assert.ErrorIs(t, err, want)
		var e *client.Error
		require.ErrorAs(t, err, &e)
		if token == "busy" {
			assert.Equal(t, 2*time.Second, e.RetryAfter)
			assert.Equal(t, 2, hits, "tried on each node URL")
		} else {
			assert.Equal(t, 1, hits, "a 401 or 403 is not retried")
		}
	}
}

// A say whose frame would pass the server's 64 KiB is refused before it
// is sent; a ping and a Close work after it.
func TestSayTooLargeIsRefusedLocally(t *testing.T) {
	f := newFake(t, func(n int, w *fakeWS) {
		w.hello()
		f := w.expect("ping") // nothing before it
		_ = f
		w.send(`{"type":"pong"}`)
		w.idle()
	})
	cn, _ := connect(t, fakeClient(t, f), client.ConnOptions{})
	ctx := ctxT(t)
	_, err := cn.Say(ctx, "r-1", strings.Repeat("x", 70<<10))
	assert.ErrorIs(t, err, client.ErrTooLarge)
	_, err = cn.Ping(ctx)
	require.NoError(t, err)
	require.NoError(t, cn.Close())
	_, err = cn.Say(ctx, "r-1", "after close")
	assert.ErrorIs(t, err, client.ErrClosed)
	select {
	case _, ok := <-cn.Events():
		for ok {
			_, ok = <-cn.Events()
		}
	case <-time.After(wait):
		t.Fatal("Events was not closed")
	}
}

// The errors of the WebSocket that concern a room: a lapsed seat ends the
// room (RoomLostEvent), a resume gap is an event, and a say refused with
// its ref fails that say only.
func TestRoomErrors(t *testing.T) {
	f := newFake(t, func(n int, w *fakeWS) {
		w.hello()
		w.expect("join")
		w.send(`{"type":"joined","room":{"id":"r-1","lobby":"r","seq":1,"capacity":50,"members":["u"]}}`)
		s := w.expect("say")
		w.send(fmt.Sprintf(`{"type":"error","code":"rate_limited","message":"wait 1.0 s","ref":%q,"room":"r-1"}`, s["ref"]))
		w.send(`{"type":"error","code":"resume_gap","message":"gone","room":"r-1"}`)
		w.send(`{"type":"error","code":"not_seated","message":"your seat expired","room":"r-1"}`)
		w.idle()
	})
	cn, r := connect(t, fakeClient(t, f), client.ConnOptions{})
	ctx := ctxT(t)
	_, err := cn.Join(ctx, "r")
	require.NoError(t, err)
	_, err = cn.Say(ctx, "r-1", "fast")
	assert.ErrorIs(t, err, client.ErrRateLimited)
	evs := r.waitFor(t, "the lost room", func(evs []client.Event) bool {
		return has(evs, func(e client.RoomLostEvent) bool { return e.Room == "r-1" && errors.Is(e.Err, client.ErrNotSeated) })
	})
	assert.True(t, has(evs, func(e client.ResumeGapEvent) bool { return e.Room == "r-1" }))
	assert.Empty(t, cn.Rooms())
}
