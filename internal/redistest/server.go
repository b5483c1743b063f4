package redistest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a private redis-server process on a loopback port. Tests may kill,
// pause, resume and restart it; it keeps its port across restarts, so clients
// reconnect to the same address.
type Server struct {
	// Addr is host:port of the server.
	Addr string

	port int
	dir  string
	args []string
	wrap []string // Options.Wrap

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Options configure a private server.
type Options struct {
	// AOF turns on the append-only file with fsync always, so that a Restart
	// keeps the data. The zero value runs without persistence, like the
	// machine's own Redis: a restart loses everything.
	AOF bool
	// Cluster starts the server with cluster mode enabled.
	Cluster bool
	// Args are appended to the redis-server command line.
	Args []string
	// Wrap, when set, runs redis-server under another program: its first
	// word is the program, the rest its arguments, and redis-server's
	// path and arguments follow (a profiler such as valgrind, whose
	// process is then the server's: Server.Pid). "{dir}" in a word is
	// replaced by the server's directory (Server.Dir), for the program's
	// files.
	Wrap []string
}

// Available reports whether redis-server and redis-cli are on PATH.
func Available() bool {
	_, err1 := exec.LookPath("redis-server")
	_, err2 := exec.LookPath("redis-cli")
	return err1 == nil && err2 == nil
}

// StartServer starts a private redis-server for one test; it is killed when the
// test ends. It fails the test when redis-server is missing from PATH (use
// Real or Available to decide beforehand).
func StartServer(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s, err := startServer(opts)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	tb.Cleanup(s.stop)
	return s
}

func startServer(opts Options) (*Server, error) {
	if !Available() {
		return nil, errors.New("redis-server is not on PATH")
	}
	dir, err := os.MkdirTemp("", "chatd-redistest-")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort(opts.Cluster)
		if err != nil {
			return nil, err
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), port: port, dir: dir}
		for _, w := range opts.Wrap {
			s.wrap = append(s.wrap, strings.ReplaceAll(w, "{dir}", dir))
		}
		s.args = []string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--daemonize", "no", "--loglevel", "warning",
			"--logfile", filepath.Join(dir, "redis.log"),
		}
		if opts.AOF {
			s.args = append(s.args, "--appendonly", "yes", "--appendfsync", "always")
		} else {
			s.args = append(s.args, "--appendonly", "no")
		}
		if opts.Cluster {
			s.args = append(s.args, "--cluster-enabled", "yes",
				"--cluster-config-file", filepath.Join(dir, "nodes-"+strconv.Itoa(port)+".conf"),
				"--cluster-node-timeout", strconv.FormatInt(clusterNodeTimeout.Milliseconds(), 10))
		}
		s.args = append(s.args, opts.Args...)
		if lastErr = s.start(); lastErr == nil {
			return s, nil
		}
	}
	return nil, fmt.Errorf("start redis-server: %w", lastErr)
}

// freePort finds a loopback port that is free now; for a cluster node the bus
// port (port+10000) must be free too.
func freePort(cluster bool) (int, error) {
	for i := 0; i < 100; i++ {
		port := 20000 + rand.IntN(25000)
		if !portFree(port) || (cluster && !portFree(port+10000)) {
			continue
		}
		return port, nil
	}
	return 0, errors.New("no free loopback port")
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// start runs redis-server with s.args and extra, and waits until it
// answers PING.
func (s *Server) start(extra ...string) error {
	cmd := exec.Command("redis-server", append(slices.Clip(s.args), extra...)...)
	if len(s.wrap) > 0 {
		bin, err := exec.LookPath("redis-server")
		if err != nil {
			return err
		}
		cmd = exec.Command(s.wrap[0], slices.Concat(s.wrap[1:], []string{bin}, s.args, extra)...)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = &stderr
	// Kill the server when the test binary dies, even on a crash. Pdeathsig
	// fires when the thread that started the child exits, so start it from a
	// goroutine pinned to its thread until the child exits.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	done := make(chan struct{})
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			close(done)
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(done)
	}()
	if err := <-started; err != nil {
		return err
	}
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()

	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			return fmt.Errorf("redis-server on %s exited: %s %s", s.Addr, stderr.String(), log)
		default:
		}
		if pingOnce(s.Addr) == nil {
			return nil
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("redis-server on %s did not answer PING within 10s", s.Addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func pingOnce(addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return c.Ping(ctx).Err() // also fails while the server is LOADING its AOF
}

// Pid is the server's process id (of the program of Options.Wrap, when
// set); 0 when it is not running.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	select {
	case <-s.done:
		return 0
	default:
		return s.cmd.Process.Pid
	}
}

// Dir is the server's directory (its log, and a Wrap program's files).
func (s *Server) Dir() string { return s.dir }

// kill sends SIGKILL (a crash: no shutdown, no final save) and waits for exit.
func (s *Server) kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT) // a paused process must run to die cleanly
	_ = cmd.Process.Kill()
	<-done
}

func (s *Server) stop() {
	s.kill()
	_ = os.RemoveAll(s.dir)
}

func (s *Server) signal(tb testing.TB, sig syscall.Signal) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		tb.Fatalf("redistest: server %s is not running", s.Addr)
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		tb.Fatalf("redistest: signal %v to %s: %v", sig, s.Addr, err)
	}
}

// Running reports whether the process is running (not killed, not exited).
func (s *Server) Running() bool {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Kill kills the server with SIGKILL and waits until it has exited.
func (s *Server) Kill(tb testing.TB) {
	tb.Helper()
	s.kill()
}

// Pause stops the server with SIGSTOP: connections stay open but nothing
// answers, as when a server hangs. Resume undoes it; the test's cleanup does too.
func (s *Server) Pause(tb testing.TB) {
	tb.Helper()
	s.signal(tb, syscall.SIGSTOP)
	tb.Cleanup(func() { s.resume() })
}

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume(tb testing.TB) {
	tb.Helper()
	s.signal(tb, syscall.SIGCONT)
}

func (s *Server) resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
	}
}

// Start starts a killed server again on the same port and waits until it answers.
func (s *Server) Start(tb testing.TB) {
	tb.Helper()
	if err := s.start(); err != nil {
		tb.Fatalf("redistest: restart: %v", err)
	}
}

// StartReplicaOf starts a stopped server again on its port as a replica
// of the server at addr from its first moment: a process that comes back
// empty is never a master that clients could write to before it is told
// REPLICAOF (what a StatefulSet's init does for a Redis without persistence).
func (s *Server) StartReplicaOf(tb testing.TB, addr string) {
	tb.Helper()
	host, port, _ := strings.Cut(addr, ":")
	if err := s.start("--replicaof", host, port); err != nil {
		tb.Fatalf("redistest: start as a replica of %s: %v", addr, err)
	}
}

// Restart kills the server and starts it again on the same port. Without
// Options.AOF the restarted server is empty, as after a crash of a server that
// keeps nothing on disk.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.kill()
	s.Start(tb)
}

// Client returns a new client of this server, closed when the test ends.
func (s *Server) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}
