// Package wsclient is the one test client of chatd's WebSocket for the
// repository's tests: it dials, reads in the background, splits batched
// frames into events, decodes and checks each with protocol.DecodeEvent,
// and hands the events out in order with the close code at the end.
// web's and deploy's tests build their helpers on it instead of each
// writing a read loop of their own; a test that must send frames the
// protocol refuses (bad JSON, binary frames, oversized frames) does so
// through SendRaw, on purpose.
//
// The Go SDK (client) is the client for applications: it reconnects,
// resumes and hides the frames. Tests of the protocol need the frames
// themselves, which is what this package gives.
package wsclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/chatd/chatd/protocol"
)

// Options of Dial; the zero value is fine.
type Options struct {
	// Header is sent with the upgrade (Origin, say).
	Header http.Header
	// Dialer dials; nil means a dialer with a 10 s handshake timeout.
	Dialer *websocket.Dialer
	// Check, when set, checks every event line as received (against the
	// frame schema, say); its errors are collected (Bad), not fatal.
	Check func(line []byte) error
	// Buffer is how many events may wait unread before the reader waits;
	// 0 means 10,000.
	Buffer int
}

// Event is one server event as received.
type Event struct {
	// Event is the decoded event; nil when the line did not decode (see
	// Conn.Bad).
	protocol.ServerEvent
	// Raw is the line as received.
	Raw []byte
}

// Type is the event's type, or "" for a line that did not decode.
func (e Event) Type() string {
	if e.ServerEvent == nil {
		return ""
	}
	return e.EventType()
}

// Map is the event as generic JSON, for tests that look at fields by
// name; nil for a line that is not a JSON object.
func (e Event) Map() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(e.Raw, &m)
	return m
}

// Conn is a WebSocket connection to chatd.
type Conn struct {
	ws     *websocket.Conn
	check  func([]byte) error
	events chan Event
	done   chan struct{}
	quit   chan struct{} // closed by Close: the reader stops waiting on events
	once   sync.Once

	mu     sync.Mutex
	code   int
	reason string // the close frame's reason
	bad    []error
	types  map[string]bool
}

// Errors of Next.
var (
	ErrClosed  = errors.New("wsclient: the connection closed")
	ErrTimeout = errors.New("wsclient: no such event in time")
)

// Dial opens a WebSocket to url (ws://host/ws?token=…) and starts reading.
// The response is returned as the dialer returns it (its body unread on a
// refused upgrade, for the caller to check); the caller closes the Conn.
func Dial(ctx context.Context, url string, o *Options) (*Conn, *http.Response, error) {
	if o == nil {
		o = &Options{}
	}
	d := o.Dialer
	if d == nil {
		d = &websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	}
	ws, resp, err := d.DialContext(ctx, url, o.Header)
	if err != nil {
		return nil, resp, err
	}
	n := o.Buffer
	if n == 0 {
		n = 10000
	}
	c := &Conn{ws: ws, check: o.Check, events: make(chan Event, n), done: make(chan struct{}), quit: make(chan struct{}), types: map[string]bool{}}
	go c.read()
	return c, resp, nil
}

func (c *Conn) read() {
	defer close(c.done)
	defer close(c.events)
	for {
		typ, p, err := c.ws.ReadMessage()
		if err != nil {
			code, reason := websocket.CloseAbnormalClosure, ""
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				code, reason = ce.Code, ce.Text
			}
			c.mu.Lock()
			c.code, c.reason = code, reason
			c.mu.Unlock()
			return
		}
		if typ != websocket.TextMessage {
			c.fail(errors.New("wsclient: a frame that is not text"))
		}
		for _, line := range bytes.Split(p, []byte("\n")) {
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			if c.check != nil {
				if err := c.check(line); err != nil {
					c.fail(err)
				}
			}
			ev, err := protocol.DecodeEvent(line)
			if err != nil {
				c.fail(err)
			} else {
				c.mu.Lock()
				c.types[ev.EventType()] = true
				c.mu.Unlock()
			}
			select {
			case c.events <- Event{ServerEvent: ev, Raw: line}:
			case <-c.quit:
				return
			}
		}
	}
}

func (c *Conn) fail(err error) {
	c.mu.Lock()
	c.bad = append(c.bad, err)
	c.mu.Unlock()
}

// Send sends a frame (protocol.EncodeFrame).
func (c *Conn) Send(f protocol.ClientFrame) error {
	p, err := protocol.EncodeFrame(f)
	if err != nil {
		return err
	}
	return c.ws.WriteMessage(websocket.TextMessage, p)
}

// SendRaw sends p as a message of type typ (websocket.TextMessage, …):
// for frames the protocol refuses, sent on purpose.
func (c *Conn) SendRaw(typ int, p []byte) error { return c.ws.WriteMessage(typ, p) }

// Events delivers every event in order; it is closed after the last one
// once the connection ended. Take events either here or with Next, not
// both.
func (c *Conn) Events() <-chan Event { return c.events }

// Next returns the next event of one of types (any type when none),
// skipping others: ErrClosed when the connection ended first, ErrTimeout
// after wait.
func (c *Conn) Next(wait time.Duration, types ...string) (Event, error) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				return Event{}, ErrClosed
			}
			if len(types) == 0 {
				return ev, nil
			}
			for _, t := range types {
				if ev.Type() == t {
					return ev, nil
				}
			}
		case <-deadline.C:
			return Event{}, ErrTimeout
		}
	}
}

// Done is closed when the connection ended (CloseCode is then set).
func (c *Conn) Done() <-chan struct{} { return c.done }

// CloseCode is the code of the close frame the server sent, 1006 for a
// connection cut without one, 0 while it is open.
func (c *Conn) CloseCode() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.code
}

// CloseReason is the reason of the close frame the server sent, "" for
// none (or while open).
func (c *Conn) CloseReason() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

// Types reports which event types came so far.
func (c *Conn) Types() map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]bool, len(c.types))
	for t := range c.types {
		out[t] = true
	}
	return out
}

// Bad returns what did not pass: lines that do not decode as protocol
// events or that Options.Check refused, and non-text frames.
func (c *Conn) Bad() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]error(nil), c.bad...)
}

// WS is the underlying connection, for a test that must act on the
// socket itself (a close frame of its own, a write deadline).
func (c *Conn) WS() *websocket.Conn { return c.ws }

// Close closes the connection without a close frame and waits for the
// reader to end.
func (c *Conn) Close() error {
	c.once.Do(func() { close(c.quit) })
	err := c.ws.Close()
	<-c.done
	return err
}
