package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/protocol"
)

// The tests' client of the event stream (GET /api/v1/events).

// sseRecord is one record of an event stream.
type sseRecord struct {
	id, event string
	data      map[string]any
}

// typ is the record's data type ("message", "reconnect", …).
func (r sseRecord) typ() string { s, _ := r.data["type"].(string); return s }

// sseClient is the tests' client of GET /api/v1/events: it reads records
// in the background and checks each record's data against
// docs/ws-frames.schema.json's StreamEvent, as the WebSocket tests check
// frames against ServerEvent.
type sseClient struct {
	t       testing.TB
	user    string
	cancel  context.CancelFunc
	records chan sseRecord
	ended   chan struct{} // closed when the stream ended (either side)

	mu       sync.Mutex
	lastID   string   // the last id: received, as EventSource keeps it
	comments []string // comment lines (": ping")
	bad      []string // records the schema refuses
}

// streamOpts say how a stream is opened.
type streamOpts struct {
	query  bool   // the token in ?token= (as EventSource) instead of Authorization
	last   string // Last-Event-ID header
	lastQ  string // ?last_event_id=
	client *http.Client
}

// openStream opens user's stream on n with tok and waits for its hello.
func openStream(t testing.TB, n *testNode, user, tok string, o streamOpts) *sseClient {
	t.Helper()
	q := url.Values{}
	if o.query {
		q.Set("token", tok)
	}
	if o.lastQ != "" {
		q.Set("last_event_id", o.lastQ)
	}
	u := n.url + "/api/v1/events"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	require.NoError(t, err)
	if !o.query {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if o.last != "" {
		req.Header.Set("Last-Event-ID", o.last)
	}
	req.Header.Set("Accept", "text/event-stream")
	hc := o.client
	if hc == nil {
		hc = &http.Client{} // no timeout: a stream lasts
	}
	resp, err := hc.Do(req)
	if err != nil {
		cancel()
		require.NoError(t, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		t.Fatalf("%s: the stream answered %d", user, resp.StatusCode)
	}
	assert.Equal(t, "text/event-stream; charset=utf-8", resp.Header.Get("Content-Type"))
	assert.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	s := &sseClient{t: t, user: user, cancel: cancel, records: make(chan sseRecord, 20000), ended: make(chan struct{})}
	go s.read(resp)
	t.Cleanup(s.reportBad)
	t.Cleanup(s.close)
	hello := s.next("hello")
	require.Equal(t, user, hello.data["user"])
	return s
}

// read parses the stream (protocol.RecordReader: the WHATWG event stream
// format, as EventSource does) until it ends.
func (s *sseClient) read(resp *http.Response) {
	defer close(s.ended)
	defer resp.Body.Close()
	sp := mustSpecNoT()
	rr := protocol.NewRecordReader(resp.Body)
	rr.OnComment = func(line string) {
		s.mu.Lock()
		s.comments = append(s.comments, line)
		s.mu.Unlock()
	}
	for {
		r, err := rr.Next()
		if err != nil {
			return
		}
		rec := sseRecord{id: r.ID, event: r.Event}
		if sp != nil {
			if err := validateWith(sp.streamEvent, r.Data, "stream record"); err != nil {
				s.mu.Lock()
				s.bad = append(s.bad, err.Error())
				s.mu.Unlock()
			}
		}
		if err := json.Unmarshal(r.Data, &rec.data); err != nil {
			s.mu.Lock()
			s.bad = append(s.bad, fmt.Sprintf("record data is not JSON: %q", r.Data))
			s.mu.Unlock()
		}
		if r.HasID {
			s.mu.Lock()
			s.lastID = rec.id
			s.mu.Unlock()
		}
		s.records <- rec
	}
}

func mustSpecNoT() *spec {
	s, _ := loadSpec()
	return s
}

// close hangs up, as a browser tab that goes away.
func (s *sseClient) close() {
	s.cancel()
	<-s.ended
}

func (s *sseClient) reportBad() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.bad {
		s.t.Errorf("%s: %s", s.user, e)
	}
}

// last is the id of the last record that had one.
func (s *sseClient) last() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastID
}

// next returns the next record of data type typ, skipping others.
func (s *sseClient) next(typ string) sseRecord {
	s.t.Helper()
	deadline := time.After(frameWait)
	for {
		select {
		case r := <-s.records:
			if r.typ() == typ {
				return r
			}
		case <-deadline:
			s.t.Fatalf("%s: no %q record within %s", s.user, typ, frameWait)
		}
	}
}

// messages collects n message records of room (others are skipped).
func (s *sseClient) messages(room string, n int) []sseRecord {
	s.t.Helper()
	var out []sseRecord
	for len(out) < n {
		r := s.next("message")
		if m, _ := r.data["message"].(map[string]any); m["room"] == room {
			out = append(out, r)
		}
	}
	return out
}

// texts reads message records until it has seen each of texts.
func (s *sseClient) texts(texts ...string) {
	s.t.Helper()
	want := map[string]bool{}
	for _, x := range texts {
		want[x] = true
	}
	for len(want) > 0 {
		_, text := recID(s.next("message"))
		delete(want, text)
	}
}

// awaitEnd waits until the server ended the stream.
func (s *sseClient) awaitEnd() {
	s.t.Helper()
	select {
	case <-s.ended:
	case <-time.After(frameWait):
		s.t.Fatalf("%s: the stream did not end within %s", s.user, frameWait)
	}
}

// recID is a message record's message id and text.
func recID(r sseRecord) (id, text string) {
	m, _ := r.data["message"].(map[string]any)
	id, _ = m["id"].(string)
	text, _ = m["text"].(string)
	return id, text
}
