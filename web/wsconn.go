package web

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/contrib/websocket"

	"github.com/chatd/chatd/internal/wsframe"
)

// wsConn is a client's realtime.Transport over a WebSocket: it writes
// frames itself, straight onto the connection, so that everything queued
// for a client leaves in one write system call with one deadline, however
// many events it holds. (Writing each event with WriteMessage costs a
// write and a deadline per event: two thirds of a loaded node's CPU.)
// With batching on (the client opened /ws?batch=1), consecutive events go
// in one text frame separated by '\n', up to wsframe.MaxBatch bytes a frame.
//
// Only the client's writer calls Write, Ping and Close, one at a time. The
// reader never writes: pings and close frames from the peer are answered
// through the writer (handlers set in serveWS), and the read limit is
// enforced by the reader itself, so the library never writes a frame of
// its own in the middle of ours.
type wsConn struct {
	conn  *websocket.Conn
	raw   net.Conn
	batch bool

	mu       sync.Mutex
	released bool        // serveWS returned: the library reuses conn
	gone     atomic.Bool // released, for Abort
	closed   bool        // a close frame was sent
	// lingering: the close frame went out and only the write side was
	// shut; release drains the peer's input before the socket closes.
	lingering bool
}

// Writing limits.
const writeWait = 10 * time.Second // a batch that takes longer drops the client

// The lingering close (see Close): how long, and how many bytes, the
// reader drains from a peer after the close frame before the socket is
// closed anyway.
const (
	lingerWait  = time.Second
	lingerBytes = 1 << 20
)

var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// Write sends events as text frames in one write.
func (w *wsConn) Write(events [][]byte) error {
	bp := framePool.Get().(*[]byte)
	buf := wsframe.AppendEvents((*bp)[:0], events, w.batch)
	err := w.writeRaw(buf)
	if cap(buf) <= 1<<20 {
		*bp = buf
		framePool.Put(bp)
	}
	return err
}

// Ping sends a ping frame.
func (w *wsConn) Ping() error {
	return w.writeRaw(wsframe.AppendHeader(nil, websocket.PingMessage, 0))
}

// control writes a control frame (a pong from the reader: wsConn's lock
// keeps it from landing inside a batch).
func (w *wsConn) control(op int, payload []byte) error {
	if len(payload) > 125 {
		payload = payload[:125]
	}
	return w.writeRaw(append(wsframe.AppendHeader(nil, op, len(payload)), payload...))
}

// Close sends a close frame (code 0: none) and ends the connection.
//
// After a close frame it shuts down only the write side (a lingering
// close, as RFC 6455 §7.1.1 asks of a server and as HTTP servers do): the
// peer reads the close frame, then end of stream, and release drains what
// the peer still sends until the peer closes too. Closing the socket at
// once would be a reset whenever the peer's frames were still unread (a
// client flooding says when it is closed for abuse): the peer's kernel then
// drops the close frame it had not read yet, and the client sees an
// abnormal closure (1006) instead of the code it was closed with.
func (w *wsConn) Close(code int, reason string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.released || w.lingering {
		return
	}
	if code != 0 && !w.closed {
		w.closed = true
		_ = w.raw.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := w.raw.Write(wsframe.AppendClose(nil, code, reason)); err == nil {
			if cw := closeWriter(w.raw); cw != nil && cw.CloseWrite() == nil {
				w.lingering = true
				return
			}
		}
	}
	_ = w.raw.Close()
}

// closeWriter is the connection under c that can shut its write side
// down (a *net.TCPConn, a *tls.Conn), or nil. Fasthttp hands a hijacked
// connection over wrapped (and makes its Close a no-op: the server closes
// the socket once the handler returns); UnsafeConn unwraps it.
func closeWriter(c net.Conn) interface{ CloseWrite() error } {
	for c != nil {
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			return cw
		}
		u, ok := c.(interface{ UnsafeConn() net.Conn })
		if !ok {
			return nil
		}
		c = u.UnsafeConn()
	}
	return nil
}

func (w *wsConn) writeRaw(b []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.released {
		return net.ErrClosed
	}
	if err := w.raw.SetWriteDeadline(time.Now().Add(writeWait)); err != nil {
		return err
	}
	_, err := w.raw.Write(b)
	return err
}

// Abort cuts a write in progress short: the client is dropped for not
// reading. It may run concurrently with a Write, so it takes no lock; the
// net.Conn's deadline methods are safe for that.
func (w *wsConn) Abort() {
	if !w.gone.Load() {
		_ = w.raw.SetWriteDeadline(time.Now())
	}
}

// Wake makes the reader return (the client is closing). Like Abort it
// takes no lock: a writer may hold it, blocked on a peer that does not read.
func (w *wsConn) Wake() {
	if !w.gone.Load() {
		_ = w.raw.SetReadDeadline(time.Now())
	}
}

// release marks the connection as handed back to the library: nothing may
// touch it after this. It runs on the reader (serveWS) once the read loop
// is over; after a lingering Close it first drains the peer's input, for at
// most lingerWait and lingerBytes, and closes the socket.
func (w *wsConn) release() {
	w.mu.Lock()
	lingering := w.lingering
	w.mu.Unlock()
	if lingering {
		_ = w.raw.SetReadDeadline(time.Now().Add(lingerWait))
		_, _ = io.Copy(io.Discard, io.LimitReader(w.raw, lingerBytes))
		_ = w.raw.Close() // a no-op under fasthttp, which closes it after serveWS
	}
	w.mu.Lock()
	w.released = true
	w.gone.Store(true)
	w.mu.Unlock()
}
