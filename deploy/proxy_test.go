package deploy

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tcpProxy is a loopback TCP proxy the test owns, put between a client
// and a server (a chatd node and Redis, a WebSocket client and a node) to
// inject network faults the processes themselves cannot: added latency,
// a stall (bytes held, connections open), and cut connections (both sides
// closed at once, as a dropped NAT entry or a failed link would).
type tcpProxy struct {
	t      testing.TB
	ln     net.Listener
	target string

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	delay   time.Duration
	stalled chan struct{} // non-nil while stalled; closed when the stall ends
	closed  bool
	wg      sync.WaitGroup
}

// startProxy listens on a free loopback port and forwards every
// connection to target until the test ends.
func startProxy(t testing.TB, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p := &tcpProxy{t: t, ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

// addr is the proxy's host:port.
func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c, s) {
			return
		}
		p.wg.Add(2)
		go p.pipe(s, c)
		go p.pipe(c, s)
	}
}

func (p *tcpProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range cs {
			_ = c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

// pipe copies src to dst, holding each chunk for the current delay and
// while the proxy is stalled; it closes both when either side ends.
func (p *tcpProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer func() {
		_ = dst.Close()
		_ = src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			d, gate := p.delay, p.stalled
			p.mu.Unlock()
			if gate != nil {
				<-gate
			}
			if d > 0 {
				time.Sleep(d)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or closed: both sides go
		}
	}
}

// setDelay holds every chunk for d from now on (0: none).
func (p *tcpProxy) setDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// stall holds every byte in both directions, connections open, until
// unstall.
func (p *tcpProxy) stall() {
	p.mu.Lock()
	if p.stalled == nil {
		p.stalled = make(chan struct{})
	}
	p.mu.Unlock()
}

// unstall lets the held bytes go.
func (p *tcpProxy) unstall() {
	p.mu.Lock()
	if p.stalled != nil {
		close(p.stalled)
		p.stalled = nil
	}
	p.mu.Unlock()
}

// cut closes every connection open through the proxy now; new ones are
// accepted as before. It returns how many were cut (both sides count).
func (p *tcpProxy) cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.conns)
	for c := range p.conns {
		_ = c.Close()
	}
	return n
}

func (p *tcpProxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	_ = p.ln.Close()
	p.unstall()
	p.cut()
	p.wg.Wait()
}

// TestProxyForwardsDelaysStallsAndCuts checks the proxy itself on a
// loopback echo server: bytes pass, a stall holds them until unstall,
// and a cut closes the connection.
func TestProxyForwardsDelaysStallsAndCuts(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	p := startProxy(t, ln.Addr().String())
	c, err := net.Dial("tcp", p.addr())
	require.NoError(t, err)
	defer c.Close()
	echo := func(msg string, within time.Duration) (string, error) {
		if _, err := c.Write([]byte(msg)); err != nil {
			return "", err
		}
		_ = c.SetReadDeadline(time.Now().Add(within))
		buf := make([]byte, len(msg))
		_, err := io.ReadFull(c, buf)
		return string(buf), err
	}
	got, err := echo("hello", 10*time.Second)
	require.NoError(t, err, "forwarded")
	assert.Equal(t, "hello", got)

	p.stall()
	_, err = echo("held", 300*time.Millisecond)
	require.Error(t, err, "a stalled proxy holds the bytes")
	p.unstall()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4)
	_, err = io.ReadFull(c, buf)
	require.NoError(t, err)
	assert.Equal(t, "held", string(buf), "the held bytes go after unstall")

	assert.Equal(t, 2, p.cut(), "both sides of the one connection")
	_, err = echo("gone", 10*time.Second)
	assert.Error(t, err, "a cut connection is closed")
}
