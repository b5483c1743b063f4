// Package chatdtest runs real chatd processes for tests: it builds
// ./cmd/chatd once per test binary, gives a test a private redis-server
// (through internal/redistest) or uses the one it is given, and starts N
// nodes on free loopback ports, sharing one secret and admin token, each
// ready (GET /readyz answered 200) before Start returns. A test controls
// each node as a process — SIGTERM and wait, SIGKILL, SIGSTOP/SIGCONT,
// restart on the same port — and gets the tails of the nodes' logs when it
// fails. Every process dies when the test ends (t.Cleanup) and also when
// the test binary dies (Pdeathsig).
//
// Faults are real: a SIGKILLed node leaves its WebSockets' TCP connections
// reset and its seats to lapse by lease, a SIGTERMed one drains (closes
// its WebSockets with 1012 and answers /readyz 503), a SIGSTOPped one hangs
// with its sockets open. A fake server or an in-process node would not
// show what a client sees then.
//
// With CHATD_E2E_LOGS=dir, a test's run directory (the nodes' logs) is
// copied to dir/<test name> when it ends, passed or failed.
package chatdtest

import (
	"cmp"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/redistest"
)

// Defaults of Options.
const (
	DefaultSecret     = "chatdtest-secret-0123456789abcdef" // 33 characters
	DefaultAdminToken = "chatdtest-admin"
)

var buildDir atomic.Pointer[string]

// Options configure Start; the zero value starts one node on a private
// redis-server.
type Options struct {
	// Nodes is how many chatd nodes to start; 0 means 1.
	Nodes int
	// Redis is the Redis the nodes use; nil starts a private one for the
	// test (redistest.Own), which the test may kill or pause through
	// Redis.Server.
	Redis *redistest.Redis
	// RedisURL, if set, is the --redis value instead of Redis's (a server
	// the test did not get from redistest).
	RedisURL string
	// Prefix is the key prefix; "" takes Redis's per-test prefix.
	Prefix string
	// Secret and AdminToken default to DefaultSecret and DefaultAdminToken.
	Secret, AdminToken string
	// Args are more flags for every node.
	Args []string
	// Env is more environment for every node (KEY=value).
	Env []string
	// LogLevel is --log-level; "" takes CHATD_E2E_LOG_LEVEL, else info.
	LogLevel string
	// ShutdownGrace is --shutdown-grace; 0 means 5 s.
	ShutdownGrace time.Duration
	// ReadyTimeout bounds the wait for /readyz; 0 means 30 s.
	ReadyTimeout time.Duration
}

// Cluster is the nodes of one test.
type Cluster struct {
	// Nodes are the chatd processes, n1, n2, …
	Nodes []*Node
	// Redis is the Redis the nodes use (nil with Options.RedisURL).
	Redis *redistest.Redis
	// Secret and AdminToken are the nodes' --secret and --admin-token.
	Secret, AdminToken string
	// Prefix is the nodes' --prefix.
	Prefix string
	// Dir holds the nodes' logs.
	Dir string

	tb   testing.TB
	bin  string
	opts Options
	url  string // --redis
}

// Node is one chatd process, on a loopback port it keeps across restarts.
type Node struct {
	// ID is the node's --node-id ("n1", …).
	ID string
	// Port is its loopback port.
	Port int
	// URL is its base URL, http://127.0.0.1:port.
	URL string
	// Log is the path of its log (stdout and stderr, appended across
	// restarts).
	Log string
	// Args are more flags for this node, read at each start: set them
	// before Restart to restart with other flags.
	Args []string

	c *Cluster
	p *proc
}

// Start starts the nodes of opts for tb and waits until each is ready.
// Without redis-server it skips the test (fails it under
// CHATD_TEST_STRICT=1), as redistest.Own does.
func Start(tb testing.TB, opts Options) *Cluster {
	tb.Helper()
	c := &Cluster{
		tb: tb, opts: opts, bin: Binary(tb), Dir: tb.TempDir(),
		Secret: cmp.Or(opts.Secret, DefaultSecret), AdminToken: cmp.Or(opts.AdminToken, DefaultAdminToken),
	}
	switch {
	case opts.RedisURL != "":
		c.url = opts.RedisURL
	case opts.Redis != nil:
		c.Redis = opts.Redis
	default:
		c.Redis = redistest.Own(tb, redistest.Options{})
	}
	if c.Redis != nil && c.url == "" {
		c.url = c.Redis.URL()
	}
	c.Prefix = opts.Prefix
	if c.Prefix == "" && c.Redis != nil {
		c.Prefix = c.Redis.Prefix
	}
	if c.Prefix == "" {
		c.Prefix = redistest.Prefix(tb)
	}
	tb.Cleanup(c.cleanup)
	for range max(opts.Nodes, 1) {
		c.AddNode()
	}
	return c
}

// AddNode starts one more node and waits until it is ready.
func (c *Cluster) AddNode() *Node {
	c.tb.Helper()
	n := &Node{ID: "n" + strconv.Itoa(len(c.Nodes)+1), Port: FreePort(c.tb), c: c}
	n.URL = "http://127.0.0.1:" + strconv.Itoa(n.Port)
	n.Log = filepath.Join(c.Dir, n.ID+".log")
	c.Nodes = append(c.Nodes, n)
	n.Start()
	return n
}

// URLs returns the nodes' base URLs, in order.
func (c *Cluster) URLs() []string {
	urls := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		urls[i] = n.URL
	}
	return urls
}

// cleanup kills every node, copies the logs for CHATD_E2E_LOGS, and logs
// their tails if the test failed.
func (c *Cluster) cleanup() {
	for _, n := range c.Nodes {
		if n.p != nil {
			n.p.kill()
		}
	}
	if keep := os.Getenv("CHATD_E2E_LOGS"); keep != "" {
		dst := filepath.Join(keep, strings.ReplaceAll(c.tb.Name(), "/", "_"))
		if err := os.CopyFS(dst, os.DirFS(c.Dir)); err != nil {
			c.tb.Logf("CHATD_E2E_LOGS: %v", err)
		}
	}
	if c.tb.Failed() {
		for _, n := range c.Nodes {
			c.tb.Logf("--- %s log (last lines) ---\n%s", n.ID, Tail(n.Log, 40))
		}
	}
}

// Addr returns the node's host:port.
func (n *Node) Addr() string { return "127.0.0.1:" + strconv.Itoa(n.Port) }

// Start starts the node (again: after Stop or Kill, on the same port) and
// waits until it is ready; it fails the test if the node is running.
func (n *Node) Start() {
	tb := n.c.tb
	tb.Helper()
	if n.p != nil && !n.p.exited() {
		tb.Fatalf("chatdtest: %s is running", n.ID)
	}
	o := n.c.opts
	args := []string{
		"--redis", n.c.url,
		"--prefix", n.c.Prefix,
		"--secret", n.c.Secret,
		"--admin-token", n.c.AdminToken,
		"--node-id", n.ID,
		"--addr", n.Addr(),
		"--shutdown-grace", cmp.Or(o.ShutdownGrace, 5*time.Second).String(),
		"--log-level", cmp.Or(o.LogLevel, os.Getenv("CHATD_E2E_LOG_LEVEL"), "info"),
	}
	args = append(append(args, o.Args...), n.Args...)
	p, err := startProc(n.Log, o.Env, n.c.bin, args...)
	if err != nil {
		tb.Fatalf("chatdtest: start %s: %v", n.ID, err)
	}
	n.p = p
	n.waitReady(cmp.Or(o.ReadyTimeout, 30*time.Second))
}

// waitReady waits until /readyz answers 200, failing early if the process
// exits.
func (n *Node) waitReady(d time.Duration) {
	tb := n.c.tb
	tb.Helper()
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(d)
	var last error
	for {
		if n.p.exited() {
			tb.Fatalf("chatdtest: %s exited (%v) before it was ready:\n%s", n.ID, n.p.err, Tail(n.Log, 30))
		}
		resp, err := hc.Get(n.URL + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = &statusError{resp.StatusCode}
		}
		last = err
		if time.Now().After(deadline) {
			tb.Fatalf("chatdtest: %s not ready within %s (last: %v):\n%s", n.ID, d, last, Tail(n.Log, 30))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type statusError struct{ status int }

func (e *statusError) Error() string { return "HTTP " + strconv.Itoa(e.status) }

// Running reports whether the process is running (stopped counts).
func (n *Node) Running() bool { return n.p != nil && !n.p.exited() }

// PID returns the process id (of the last start).
func (n *Node) PID() int { return n.p.cmd.Process.Pid }

// Signal sends sig to the process; an error if it has exited.
func (n *Node) Signal(sig syscall.Signal) error { return n.p.signal(sig) }

// Wait waits up to d for the process to exit; exited says whether it did,
// err is then its exit status (nil for a clean exit).
func (n *Node) Wait(d time.Duration) (exited bool, err error) { return n.p.wait(d) }

// Stop sends SIGTERM (the node drains: its WebSockets close with 1012) and
// waits for the process to exit, up to the shutdown grace and 10 s more;
// it fails the test if the node does not exit or exits with an error.
func (n *Node) Stop() {
	tb := n.c.tb
	tb.Helper()
	if err := n.Signal(syscall.SIGTERM); err != nil {
		tb.Fatalf("chatdtest: stop %s: %v", n.ID, err)
	}
	d := cmp.Or(n.c.opts.ShutdownGrace, 5*time.Second) + 10*time.Second
	exited, err := n.Wait(d)
	if !exited {
		tb.Fatalf("chatdtest: %s did not exit within %s of SIGTERM:\n%s", n.ID, d, Tail(n.Log, 30))
	}
	if err != nil {
		tb.Fatalf("chatdtest: %s exited with %v after SIGTERM:\n%s", n.ID, err, Tail(n.Log, 30))
	}
}

// Kill kills the process with SIGKILL and waits for it to be gone.
func (n *Node) Kill() { n.p.kill() }

// Pause stops the process (SIGSTOP): it keeps its sockets and answers
// nothing until Resume.
func (n *Node) Pause() {
	n.c.tb.Helper()
	if err := n.Signal(syscall.SIGSTOP); err != nil {
		n.c.tb.Fatalf("chatdtest: pause %s: %v", n.ID, err)
	}
	// kill(2) returns before every thread has stopped: a request sent at
	// once could still be answered. Return once all of them have.
	if err := n.p.waitStopped(5 * time.Second); err != nil {
		n.c.tb.Fatalf("chatdtest: pause %s: %v", n.ID, err)
	}
}

// Resume continues a paused process (SIGCONT).
func (n *Node) Resume() {
	n.c.tb.Helper()
	if err := n.Signal(syscall.SIGCONT); err != nil {
		n.c.tb.Fatalf("chatdtest: resume %s: %v", n.ID, err)
	}
}

// Restart stops the node (SIGTERM, as Stop) if it runs, and starts it
// again on the same port.
func (n *Node) Restart() {
	n.c.tb.Helper()
	if n.Running() {
		n.Stop()
	}
	n.Start()
}

// Healthy reports whether the node answers /readyz with 200 within ctx.
func (n *Node) Healthy(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.URL+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
