package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/wsframe"
)

// countConn counts the Write calls made on a net.Conn: one per system
// call on a real socket.
type countConn struct {
	net.Conn
	writes atomic.Int32
}

func (c *countConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestHubCoalescedWriter: with events already queued when the writer wakes,
// the coalescing modes write them all in one Write — a frame per event
// (coalesce) or one newline-joined frame (batch) — and a dropped client
// gets close 1013 and its reader woken.
func TestHubCoalescedWriter(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		mode hubWrite
		want []string
	}{
		"coalesce: one write, a frame per event": {writeCoalesce, []string{`{"n":1}`, `{"n":2}`, `{"n":3}`}},
		"batch: one write, one frame":            {writeBatch, []string{"{\"n\":1}\n{\"n\":2}\n{\"n\":3}"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sv, cl := net.Pipe()
			defer cl.Close()
			raw := &countConn{Conn: sv}
			var woken atomic.Bool
			c := &hubClient{raw: raw, mode: tc.mode, send: make(chan []byte, hubQueue), done: make(chan struct{}),
				wake: func() { woken.Store(true) }}
			for i := 1; i <= 3; i++ {
				c.send <- []byte(`{"n":` + string(rune('0'+i)) + `}`)
			}
			finished := make(chan struct{})
			go (&hub{}).write(c, finished)

			fr := frameReader{br: bufio.NewReader(cl)}
			var got []string
			for range tc.want {
				_ = cl.SetReadDeadline(time.Now().Add(5 * time.Second))
				p, err := fr.Next()
				require.NoError(t, err)
				got = append(got, string(p))
			}
			assert.Equal(t, tc.want, got)
			assert.Equal(t, int32(1), raw.writes.Load(), "everything queued leaves in one write")

			c.close()
			_ = cl.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err := fr.Next()
			var ce *CloseError
			require.True(t, errors.As(err, &ce), "%v", err)
			assert.Equal(t, 1013, ce.Code)
			<-finished
			assert.True(t, woken.Load(), "the reader is woken")
		})
	}
}

// TestAppendEvents: batch frames hold at most wsframe.MaxBatch bytes, an event
// longer than that gets a frame alone, and every event comes back out in
// order through chatbench's own reader.
func TestAppendEvents(t *testing.T) {
	t.Parallel()
	big := []byte(strings.Repeat("y", wsframe.MaxBatch+10))
	mid := []byte(strings.Repeat("z", wsframe.MaxBatch/2))
	events := [][]byte{[]byte("a"), mid, mid, big, []byte("b"), []byte("c")}
	for _, tc := range []struct {
		batch  bool
		frames int
	}{{false, 6}, {true, 4}} { // batch: [a mid] [mid] [big] [b c]
		var frames [][]byte
		fr := frameReader{br: bufio.NewReader(bytes.NewReader(wsframe.AppendEvents(nil, events, tc.batch)))}
		for {
			p, err := fr.Next()
			if err != nil {
				break
			}
			assert.LessOrEqual(t, len(p), max(wsframe.MaxBatch, len(big)))
			if len(p) > wsframe.MaxBatch {
				assert.Equal(t, big, p, "only an event over the bound makes a frame over it")
			}
			frames = append(frames, bytes.Clone(p))
		}
		assert.Len(t, frames, tc.frames, "batch %v", tc.batch)
		var back [][]byte
		for _, f := range frames {
			back = append(back, bytes.Split(f, []byte("\n"))...)
		}
		assert.Equal(t, events, back, "batch %v", tc.batch)
	}
}

// TestAnchorCheck: the check passes only when more senders deliver no more
// than the hub beyond its noise, and fails when that noise is too wide to
// tell.
func TestAnchorCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ratio, noise float64
		ok           bool
	}{
		{1.00, 0.03, true},
		{1.04, 0.02, true},  // within the 5% floor
		{1.08, 0.02, false}, // over it: generator-bound
		{1.15, 0.18, true},  // within the hub's own noise
		{1.68, 1.03, false}, // inconclusive: too noisy
		{0.90, 0.50, false},
		{math.NaN(), 0.01, false},
	} {
		ok, why := anchorCheck(tc.ratio, tc.noise)
		assert.Equal(t, tc.ok, ok, "ratio %.2f noise %.2f: %s", tc.ratio, tc.noise, why)
	}
	rp := &Report{}
	b := &Bench{rep: rp}
	b.hubCheck("s", "A4 hub×1 batched", []float64{400, 410, 405}, []float64{500, 520, 510})
	require.Len(t, rp.Checks, 1)
	assert.False(t, rp.Checks[0].OK, "2× senders delivered 1.26×: %s", rp.Checks[0].Detail)
	require.NotNil(t, rp.Rows[0].OK)
	assert.False(t, *rp.Rows[0].OK)
}

// TestHubPipelinedIngress: a burst of says on one connection of a bare hub
// on a real Redis is acked and delivered once each, in order, both ways
// the hub takes says; with ?ingress=pipe they go out several to a
// pipeline (chatd's ingress), with the default sync ingress never.
func TestHubPipelinedIngress(t *testing.T) {
	t.Parallel()
	rd := redistest.Real(t)
	for name, tc := range map[string]struct {
		ingress string
		piped   bool
	}{
		"pipe: says share pipelines":  {"pipe", true},
		"sync: one PUBLISH at a time": {"", false},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			addr, err := freeAddr()
			require.NoError(t, err)
			h := newHub("t")
			done := make(chan error, 1)
			go func() { done <- h.run(ctx, addr, rd.Addrs[0]) }()
			defer func() { cancel(); <-done }()
			p := &Proc{Name: "hub", URL: "http://" + addr}
			require.NoError(t, waitHTTP(ctx, p, "/healthz", 10*time.Second))

			q := url.Values{"write": {"batch"}}
			if tc.ingress != "" {
				q.Set("ingress", tc.ingress)
			}
			ws, _, err := dialWS(ctx, p.URL, "u1", q)
			require.NoError(t, err)
			defer ws.Close()
			room, err := ws.Join(redistest.Prefix(t))
			require.NoError(t, err)
			const n = 100      // acks and messages together stay under the hub's send queue (hubQueue)
			for i := range n { // all written before one answer is read
				require.NoError(t, ws.Send(map[string]string{"type": "say", "room": room.ID, "text": strconv.Itoa(i), "ref": strconv.Itoa(i)}))
			}
			var acks, texts []string
			_ = ws.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			for len(acks) < n || len(texts) < n {
				var f Frame
				require.NoError(t, ws.Read(&f), "acks %d, messages %d", len(acks), len(texts))
				switch f.Type {
				case "ack":
					acks = append(acks, f.Ref)
				case "message":
					texts = append(texts, f.Msg.Text)
				case "error":
					t.Fatalf("error frame: %s %s", f.Code, f.ErrText)
				}
			}
			want := make([]string, n)
			for i := range want {
				want[i] = strconv.Itoa(i)
			}
			assert.Equal(t, want, acks, "every say acked once, in order")
			assert.Equal(t, want, texts, "every say delivered once, in order")
			if tc.piped {
				assert.Greater(t, h.maxBatch.Load(), int64(1), "says in flight together")
			} else {
				assert.Zero(t, h.maxBatch.Load(), "no say worker")
			}
		})
	}
}
