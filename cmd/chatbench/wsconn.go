package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// chatbench's WebSocket client is written by hand, over a bufio.Reader on
// the raw net.Conn, so that receiving costs the generator as little as
// possible: a bare hub delivers several hundred thousand frames a second on
// two cores, and a client that allocates and JSON-decodes every frame would
// measure itself instead. A frame is read into one buffer per connection
// (reused), server frames are unmasked, and a frame may carry several JSON
// events separated by '\n' (chatd's opt-in batch=1): NextEvent hands them
// out one at a time, and every caller counts events, not frames.
//
// It is not the Go SDK (package client), which tests and examples speak
// through, on purpose: besides the per-event cost, the settings scenario
// times a Set until its frame arrives, where the SDK's event queue would be
// part of the figure, and the fan-out and idle scenarios dial chatd and the
// bare hub with the same client, so that both sides of a ratio are measured
// alike; the hub speaks only the frames the scenarios use.

// WebSocket opcodes (RFC 6455 §5.2).
const (
	opCont  = 0x0
	opText  = 0x1
	opBin   = 0x2
	opClose = 0x8
	opPing  = 0x9
	opPong  = 0xA
)

// maxMessage bounds one reassembled message; a server sending more is
// broken.
const maxMessage = 16 << 20

// errClosed is returned once the server sent a close frame.
var errClosed = errors.New("websocket: closed by the server")

// CloseError is the server's close frame: its status code and reason.
type CloseError struct {
	Code   int
	Reason string
}

func (e *CloseError) Error() string {
	return fmt.Sprintf("websocket: closed by the server: %d %s", e.Code, e.Reason)
}

// Unwrap makes errors.Is(err, errClosed) hold.
func (e *CloseError) Unwrap() error { return errClosed }

// frameReader reads WebSocket messages from br: data frames are
// reassembled (continuations appended), pings are handed to onPing, pongs
// skipped, a close frame ends the stream with a *CloseError. The payload it
// returns lives in a buffer reused by the next call.
type frameReader struct {
	br     *bufio.Reader
	buf    []byte
	ctl    [125]byte
	onPing func(p []byte) error
}

// header reads one frame header: fin, opcode, payload length and, for a
// masked frame (a server must not mask, but a masked one is still read
// correctly), its key.
func (r *frameReader) header() (fin bool, op byte, n int, mask []byte, err error) {
	h, err := r.br.Peek(2)
	if err != nil {
		if r.br.Buffered() > 0 {
			err = noEOF(err) // half a header
		}
		return false, 0, 0, nil, err
	}
	b0, b1 := h[0], h[1]
	if _, err := r.br.Discard(2); err != nil {
		return false, 0, 0, nil, err
	}
	fin, op = b0&0x80 != 0, b0&0x0f
	if b0&0x70 != 0 {
		return false, 0, 0, nil, fmt.Errorf("websocket: reserved bits set (%#x) without an extension", b0)
	}
	n64 := uint64(b1 & 0x7f)
	switch n64 {
	case 126:
		p, err := r.br.Peek(2)
		if err != nil {
			return false, 0, 0, nil, noEOF(err)
		}
		n64 = uint64(binary.BigEndian.Uint16(p))
		r.br.Discard(2)
	case 127:
		p, err := r.br.Peek(8)
		if err != nil {
			return false, 0, 0, nil, noEOF(err)
		}
		n64 = binary.BigEndian.Uint64(p)
		r.br.Discard(8)
	}
	if n64 > maxMessage {
		return false, 0, 0, nil, fmt.Errorf("websocket: frame of %d bytes, over %d", n64, maxMessage)
	}
	if b1&0x80 != 0 {
		p, err := r.br.Peek(4)
		if err != nil {
			return false, 0, 0, nil, noEOF(err)
		}
		mask = []byte{p[0], p[1], p[2], p[3]}
		r.br.Discard(4)
	}
	return fin, op, int(n64), mask, nil
}

// noEOF turns an EOF inside a frame into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func unmask(p, key []byte, pos int) {
	for i := range p {
		p[i] ^= key[(pos+i)&3]
	}
}

// Next returns the payload of the next text or binary message.
func (r *frameReader) Next() ([]byte, error) {
	r.buf = r.buf[:0]
	started := false
	for {
		fin, op, n, mask, err := r.header()
		if err != nil {
			if started {
				err = noEOF(err)
			}
			return nil, err
		}
		switch op {
		case opText, opBin, opCont:
			if (op == opCont) != started {
				return nil, fmt.Errorf("websocket: opcode %d %s a fragmented message", op, map[bool]string{true: "inside", false: "outside"}[started])
			}
			if len(r.buf)+n > maxMessage {
				return nil, fmt.Errorf("websocket: message over %d bytes", maxMessage)
			}
			at := len(r.buf)
			r.buf = slices.Grow(r.buf, n)[:at+n] // grows to the largest message, then reused
			if _, err := io.ReadFull(r.br, r.buf[at:]); err != nil {
				return nil, noEOF(err)
			}
			if mask != nil {
				unmask(r.buf[at:], mask, 0)
			}
			if fin {
				return r.buf, nil
			}
			started = true
		case opPing, opPong, opClose:
			if !fin || n > len(r.ctl) {
				return nil, fmt.Errorf("websocket: control frame %d fragmented or over 125 bytes", op)
			}
			p := r.ctl[:n]
			if _, err := io.ReadFull(r.br, p); err != nil {
				return nil, noEOF(err)
			}
			if mask != nil {
				unmask(p, mask, 0)
			}
			switch op {
			case opPing:
				if r.onPing != nil {
					if err := r.onPing(p); err != nil {
						return nil, err
					}
				}
			case opClose:
				ce := &CloseError{Code: 1005}
				if n >= 2 {
					ce.Code, ce.Reason = int(binary.BigEndian.Uint16(p)), string(p[2:])
				}
				return nil, ce
			}
		default:
			return nil, fmt.Errorf("websocket: unknown opcode %d", op)
		}
	}
}

// eventSplitter hands out the '\n'-separated events of the current
// message one at a time; empty lines are skipped.
type eventSplitter struct {
	rest []byte
}

// next returns the next event of the current message, or false when the
// message is used up.
func (s *eventSplitter) next() ([]byte, bool) {
	for len(s.rest) > 0 {
		ev := s.rest
		if i := bytes.IndexByte(s.rest, '\n'); i >= 0 {
			ev, s.rest = s.rest[:i], s.rest[i+1:]
		} else {
			s.rest = nil
		}
		if len(ev) > 0 && ev[len(ev)-1] == '\r' {
			ev = ev[:len(ev)-1]
		}
		if len(ev) > 0 {
			return ev, true
		}
	}
	return nil, false
}

// WS is one WebSocket client connection. Send and SendText are safe for
// concurrent use; NextEvent and Read must be called from one goroutine.
type WS struct {
	conn net.Conn
	fr   frameReader
	ev   eventSplitter

	wmu  sync.Mutex
	wbuf []byte
}

// wsBatch asks every server for several events per frame (query batch=1);
// a server without it ignores the parameter. Set from -ws-batch.
var wsBatch = true

// dialWS opens base's /ws with token (and the query parameters in extra)
// and reads the hello frame.
func dialWS(ctx context.Context, base, token string, extra ...url.Values) (*WS, Frame, error) {
	return dialWSVia(ctx, nil, base, token, extra...)
}

// dialWSVia is dialWS through dialer d (nil: a default dialer); the conns
// scenario's workers give each their own loopback source address
// (d.LocalAddr) so that no one address runs out of ephemeral ports.
func dialWSVia(ctx context.Context, d *net.Dialer, base, token string, extra ...url.Values) (*WS, Frame, error) {
	q := url.Values{"token": {token}}
	for _, e := range extra {
		for k, v := range e {
			q[k] = v
		}
	}
	if wsBatch {
		q.Set("batch", "1")
	}
	w, err := dialRaw(ctx, d, base, "/ws?"+q.Encode())
	if err != nil {
		return nil, Frame{}, err
	}
	var f Frame
	_ = w.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := w.Read(&f); err != nil {
		w.Close()
		return nil, f, fmt.Errorf("hello from %s: %w", base, err)
	}
	_ = w.conn.SetReadDeadline(time.Time{})
	if f.Type != "hello" {
		w.Close()
		return nil, f, fmt.Errorf("first frame from %s is %q, not hello", base, f.Type)
	}
	return w, f, nil
}

// wsGUID is RFC 6455's key suffix.
const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// dialRaw connects to base (http://host:port) through d (nil: a default
// dialer with a 10 s timeout) and upgrades path to a WebSocket. An answer
// other than 101 is an error naming the status and the start of its body.
func dialRaw(ctx context.Context, d *net.Dialer, base, path string) (*WS, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	if d == nil {
		d = &net.Dialer{Timeout: 10 * time.Second}
	}
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", base, err)
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	var k [16]byte
	_, _ = rand.Read(k[:])
	key := base64.StdEncoding.EncodeToString(k[:])
	req := "GET " + path + " HTTP/1.1\r\nHost: " + u.Host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: " + key + "\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		conn.Close()
		return nil, fmt.Errorf("dial %s: %w", base, err)
	}
	br := bufio.NewReaderSize(conn, 16<<10)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodGet})
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("dial %s: handshake: %w", base, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		resp.Body.Close()
		conn.Close()
		return nil, fmt.Errorf("dial %s: websocket: bad handshake (HTTP %d): %s", base, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	sum := sha1.Sum([]byte(key + wsGUID))
	if resp.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(sum[:]) {
		conn.Close()
		return nil, fmt.Errorf("dial %s: websocket: bad Sec-WebSocket-Accept", base)
	}
	_ = conn.SetDeadline(time.Time{})
	w := &WS{conn: conn}
	w.fr = frameReader{br: br, onPing: func(p []byte) error { return w.write(opPong, p) }}
	return w, nil
}

// NextEvent returns the next JSON event from the server: the next line of
// the current message, or the first of the next one. The slice is valid
// until the next call.
func (w *WS) NextEvent() ([]byte, error) {
	for {
		if ev, ok := w.ev.next(); ok {
			return ev, nil
		}
		p, err := w.fr.Next()
		if err != nil {
			return nil, err
		}
		w.ev.rest = p
	}
}

// Read reads and decodes the next event.
func (w *WS) Read(f *Frame) error {
	ev, err := w.NextEvent()
	if err != nil {
		return err
	}
	return decodeFrame(ev, f)
}

// Send writes v as one JSON text frame.
func (w *WS) Send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return w.SendText(b)
}

// SendText writes p as one text frame.
func (w *WS) SendText(p []byte) error { return w.write(opText, p) }

// write sends one masked frame (a client must mask).
func (w *WS) write(op byte, p []byte) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	w.wbuf = appendFrame(w.wbuf[:0], op, p, mrand.Uint32())
	_ = w.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := w.conn.Write(w.wbuf)
	return err
}

// appendFrame appends one final client frame of opcode op carrying p,
// masked with key.
func appendFrame(b []byte, op byte, p []byte, key uint32) []byte {
	b = append(b, 0x80|op)
	switch n := len(p); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n <= 0xffff:
		b = append(b, 0x80|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	var k [4]byte
	binary.BigEndian.PutUint32(k[:], key)
	b = append(b, k[:]...)
	at := len(b)
	b = append(b, p...)
	unmask(b[at:], k[:], 0)
	return b
}

// Join sends a join for lobby and reads until the joined frame (before any
// reader goroutine runs). Events after it in the same frame stay for the
// next NextEvent.
func (w *WS) Join(lobby string) (Room, error) {
	if err := w.Send(map[string]string{"type": "join", "lobby": lobby}); err != nil {
		return Room{}, err
	}
	_ = w.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	defer w.conn.SetReadDeadline(time.Time{})
	for {
		var f Frame
		if err := w.Read(&f); err != nil {
			return Room{}, fmt.Errorf("join %s: %w", lobby, err)
		}
		switch f.Type {
		case "joined":
			return f.Room, nil
		case "error":
			return Room{}, fmt.Errorf("join %s: %s: %s", lobby, f.Code, f.ErrText)
		}
	}
}

// Close closes the connection.
func (w *WS) Close() error { return w.conn.Close() }
