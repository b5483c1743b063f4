package deploy

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/chatdtest"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/wsclient"
	"github.com/chatd/chatd/protocol"
)

// The harness runs the loopback topology of cluster.sh inside a test: a
// private redis-server, three chatd processes built from this checkout, and
// nginx with deploy/nginx.conf rendered by cluster.sh, all killed by pid when
// the test ends (and by Pdeathsig if the test binary dies).

const (
	testSecret = "e2e-secret-0123456789abcdef012345" // 32 characters
	adminToken = "adm"
)

var buildDir string

func TestMain(m *testing.M) {
	code := m.Run()
	chatdtest.Cleanup()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	if toolsDir != "" {
		_ = os.RemoveAll(toolsDir)
	}
	os.Exit(code)
}

// moduleRoot is the directory of go.mod, from `go env GOMOD`.
var moduleRoot = sync.OnceValues(func() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("go env GOMOD: not inside a module")
	}
	return filepath.Dir(gomod), nil
})

// chatdBinary builds ./cmd/chatd once per test binary.
var chatdBinary = sync.OnceValues(func() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	buildDir, err = os.MkdirTemp("", "chatd-deploy-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(buildDir, "chatd")
	// -buildvcs=auto: stamp the revision (--version, chatd_build_info)
	// even where GOFLAGS says -buildvcs=false.
	cmd := exec.Command("go", "build", "-buildvcs=auto", "-o", bin, "./cmd/chatd")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/chatd: %v\n%s", err, out)
	}
	return bin, nil
})

func buildChatd(t testing.TB) string {
	t.Helper()
	bin, err := chatdBinary()
	require.NoError(t, err)
	return bin
}

// nginxPath finds nginx on PATH or in /usr/sbin (Debian puts it there, and
// /usr/sbin is not on every user's PATH). Without it the test skips, or
// fails under CHATD_TEST_STRICT=1.
func nginxPath(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx"
	}
	if redistest.Strict() {
		t.Fatal("CHATD_TEST_STRICT=1 and nginx is not installed (apt-get install nginx)")
	}
	t.Skip("nginx is not installed (apt-get install nginx)")
	return ""
}

// skipShort skips end-to-end tests under -short.
func skipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: skipped with -short")
	}
}

// freePort returns a loopback port that is free now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// proc is one child process, logging to a file.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when it has exited
	err  error         // its exit status, once done
}

// startProc starts a child that dies with the test binary: Pdeathsig fires
// when the thread that started the child exits, so the goroutine that starts
// it stays on its thread until the child is gone.
func startProc(t testing.TB, name, logPath string, env []string, bin string, args ...string) *proc {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer logf.Close()
		if err := cmd.Start(); err != nil {
			started <- err
			close(p.done)
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	require.NoError(t, <-started, "start %s", name)
	return p
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the process unless it has exited.
func (p *proc) signal(sig syscall.Signal) {
	if !p.exited() {
		_ = p.cmd.Process.Signal(sig)
	}
}

// wait waits up to d for the process to exit; done says whether it did,
// err is then its exit status.
func (p *proc) wait(d time.Duration) (done bool, err error) {
	select {
	case <-p.done:
		return true, p.err
	case <-time.After(d):
		return false, nil
	}
}

// kill kills the process with SIGKILL and waits for it.
func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
	<-p.done
}

// node is one chatd process of a cluster.
type node struct {
	id   string
	port int
	log  string
	p    *proc
}

func (n *node) addr() string { return "127.0.0.1:" + strconv.Itoa(n.port) }

// cluster is three chatd nodes on one private Redis behind nginx.
type cluster struct {
	t      testing.TB
	dir    string
	bin    string
	redis  *redistest.Redis
	nodes  []*node
	lb     string // nginx host:port
	nginx  *proc
	client *http.Client

	mu     sync.Mutex
	tokens map[string]string // user → first session token
}

// startCluster starts the topology of cluster.sh for one test, on a
// private redis-server.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	skipShort(t)
	nginx := nginxPath(t)
	return startNodes(t, nginx, redistest.Own(t, redistest.Options{}))
}

// startNodes starts three chatd nodes on r and nginx in front of them.
func startNodes(t *testing.T, nginx string, r *redistest.Redis) *cluster {
	t.Helper()
	c := &cluster{
		t:      t,
		dir:    t.TempDir(),
		bin:    buildChatd(t),
		redis:  r,
		client: &http.Client{Timeout: 45 * time.Second}, // long polls wait up to 30 s
	}
	t.Cleanup(c.dumpLogsOnFailure)
	for i := 1; i <= 3; i++ {
		n := &node{id: "n" + strconv.Itoa(i), port: freePort(t)}
		n.log = filepath.Join(c.dir, n.id+".log")
		c.nodes = append(c.nodes, n)
		c.start(n)
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			n.p.kill()
		}
	})
	c.startNginx(nginx)
	return c
}

// start starts node n and waits until it is ready.
func (c *cluster) start(n *node) {
	c.t.Helper()
	n.p = startProc(c.t, n.id, n.log, nil, c.bin,
		"--redis", c.redis.URL(),
		"--prefix", c.redis.Prefix,
		"--secret", testSecret,
		"--admin-token", adminToken,
		"--node-id", n.id,
		"--addr", n.addr(),
		"--shutdown-grace", "5s",
		"--log-level", cmp.Or(os.Getenv("CHATD_E2E_LOG_LEVEL"), "info"),
	)
	c.waitHTTP(n.p, "http://"+n.addr()+"/readyz", n.log)
}

// startNginx renders deploy/nginx.conf with cluster.sh for this cluster's
// ports and runs nginx in the foreground with its own prefix directory.
func (c *cluster) startNginx(bin string) {
	c.t.Helper()
	dir := filepath.Join(c.dir, "nginx")
	require.NoError(c.t, os.MkdirAll(filepath.Join(dir, "tmp"), 0o755))
	lbPort := freePort(c.t)
	c.lb = "127.0.0.1:" + strconv.Itoa(lbPort)
	var ports []string
	for _, n := range c.nodes {
		ports = append(ports, strconv.Itoa(n.port))
	}
	conf := renderNginx(c.t, c.dir, lbPort, ports)
	confPath := filepath.Join(dir, "nginx.conf")
	require.NoError(c.t, os.WriteFile(confPath, conf, 0o644))
	c.nginx = startProc(c.t, "nginx", filepath.Join(dir, "nginx.log"), nil, bin,
		"-p", dir+"/", "-e", filepath.Join(dir, "error.log"), "-c", confPath,
		"-g", "daemon off; pid "+filepath.Join(dir, "nginx.pid")+";")
	c.t.Cleanup(func() {
		// TERM is nginx's fast shutdown: the master stops its workers.
		c.nginx.signal(syscall.SIGTERM)
		if done, _ := c.nginx.wait(5 * time.Second); !done {
			c.nginx.kill()
		}
	})
	c.waitHTTP(c.nginx, "http://"+c.lb+"/healthz", filepath.Join(dir, "error.log"))
}

// renderNginx runs `cluster.sh nginx-conf` for a run directory and ports.
func renderNginx(t testing.TB, runDir string, lbPort int, nodePorts []string) []byte {
	t.Helper()
	// The script needs only bash and sed; find them even when a test runs
	// with a PATH narrowed to hide redis-server.
	path := os.Getenv("PATH") + ":/usr/local/bin:/usr/bin:/bin"
	bash, err := lookPathIn("bash", path)
	require.NoError(t, err, "bash")
	cmd := exec.Command(bash, "cluster.sh", "nginx-conf")
	cmd.Env = append(os.Environ(), "PATH="+path,
		"CHATD_RUN_DIR="+runDir,
		"CHATD_LB_PORT="+strconv.Itoa(lbPort),
		"CHATD_NODE_PORTS="+strings.Join(nodePorts, " "))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "cluster.sh nginx-conf: %s", stderr.String())
	return out
}

// waitHTTP waits until url answers 200, failing early if p exits.
func (c *cluster) waitHTTP(p *proc, url, logPath string) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if p.exited() {
			c.t.Fatalf("%s exited (%v) before %s answered:\n%s", p.name, p.err, url, tail(logPath, 20))
		}
		resp, err := c.client.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s did not answer 200 on %s within 20s (last: %v):\n%s", p.name, url, err, tail(logPath, 20))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitRouted waits until the balancer sends a connection to n again: it
// no longer counts n as failed.
func (c *cluster) waitRouted(ctx context.Context, n *node) {
	c.t.Helper()
	// nginx balances by open connections (least_conn): a plain GET goes to
	// whichever node holds the fewest, which may be another one that came
	// back earlier and has none. So hold up to 12 WebSockets at once: as
	// they pile onto the emptiest nodes the restarted one gets its turn,
	// unless nginx still takes it for down.
	tok := c.session(ctx, "probe")
	var last string
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var out struct {
			Node string `json:"node"`
		}
		if _, err := c.do(ctx, c.lb, http.MethodGet, "/healthz", "", nil, &out); err == nil && out.Node == n.id {
			return
		}
		var held []*wsclient.Conn
		found := false
		for range 12 {
			u := url.URL{Scheme: "ws", Host: c.lb, Path: "/ws", RawQuery: "token=" + url.QueryEscape(tok)}
			ws, resp, err := wsclient.Dial(ctx, u.String(), &wsclient.Options{Dialer: &websocket.Dialer{HandshakeTimeout: 5 * time.Second}})
			if resp != nil && resp.Body != nil {
				_ = resp.Body.Close()
			}
			if err != nil {
				last = err.Error()
				break
			}
			held = append(held, ws)
			ev, err := ws.Next(5*time.Second, protocol.TypeHello)
			if err != nil {
				last = err.Error()
				break
			}
			hello := ev.ServerEvent.(protocol.Hello)
			last = hello.Node
			if hello.Node == n.id {
				found = true
				break
			}
		}
		for _, ws := range held {
			_ = ws.Close()
		}
		if found {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	c.t.Fatalf("nginx never routed to %s again within 30 s (last answer: %s)", n.id, last)
}

// node returns the node with id.
func (c *cluster) node(id string) *node {
	for _, n := range c.nodes {
		if n.id == id {
			return n
		}
	}
	c.t.Fatalf("no node %q", id)
	return nil
}

// dumpLogsOnFailure logs the tails of the nodes' and nginx's logs when the
// test failed; with CHATD_E2E_LOGS=dir it also copies the whole run
// directory (logs, nginx config) to dir/<test name>.
func (c *cluster) dumpLogsOnFailure() {
	if keep := os.Getenv("CHATD_E2E_LOGS"); keep != "" {
		dst := filepath.Join(keep, strings.ReplaceAll(c.t.Name(), "/", "_"))
		if err := os.CopyFS(dst, os.DirFS(c.dir)); err != nil {
			c.t.Logf("CHATD_E2E_LOGS: %v", err)
		}
	}
	if !c.t.Failed() {
		return
	}
	for _, n := range c.nodes {
		c.t.Logf("--- %s log (last lines) ---\n%s", n.id, tail(n.log, 40))
	}
	c.t.Logf("--- nginx error log ---\n%s", tail(filepath.Join(c.dir, "nginx", "error.log"), 20))
	c.t.Logf("--- nginx log ---\n%s", tail(filepath.Join(c.dir, "nginx", "nginx.log"), 20))
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// do sends an HTTP request through the balancer (or to base, if it is a
// host:port) and decodes the JSON answer into out.
func (c *cluster) do(ctx context.Context, base, method, path, token string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		p, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(p)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+base+path, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	p, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, p)
	}
	if out != nil {
		if err := json.Unmarshal(p, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode %q: %w", method, path, p, err)
		}
	}
	return resp.StatusCode, nil
}

// session asks the balancer for a session token for user.
func (c *cluster) session(ctx context.Context, user string) string {
	c.t.Helper()
	var out struct {
		Token string `json:"token"`
	}
	// a guest name is held by its first session: later sessions of the
	// same user show that one's token (a second device of the same guest)
	c.mu.Lock()
	prev := c.tokens[user]
	c.mu.Unlock()
	_, err := c.do(ctx, c.lb, http.MethodPost, "/api/v1/session", prev, map[string]string{"user": user}, &out)
	require.NoError(c.t, err)
	require.NotEmpty(c.t, out.Token)
	c.mu.Lock()
	if c.tokens == nil {
		c.tokens = map[string]string{}
	}
	if c.tokens[user] == "" {
		c.tokens[user] = out.Token
	}
	c.mu.Unlock()
	return out.Token
}

// setSetting changes a live setting through the balancer with the admin
// token, then waits until every node serves the new value.
func (c *cluster) setSetting(ctx context.Context, key string, value any) {
	c.t.Helper()
	_, err := c.do(ctx, c.lb, http.MethodPut, "/api/v1/settings/"+key, adminToken, map[string]any{"value": value}, nil)
	require.NoError(c.t, err)
	tok := c.session(ctx, "settings-watcher")
	want := fmt.Sprint(value)
	for _, n := range c.nodes {
		require.Eventually(c.t, func() bool {
			var out struct {
				Values map[string]any `json:"values"`
			}
			if _, err := c.do(ctx, n.addr(), http.MethodGet, "/api/v1/settings", tok, nil, &out); err != nil {
				return false
			}
			return fmt.Sprint(out.Values[key]) == want
		}, 10*time.Second, 50*time.Millisecond, "node %s never saw %s = %v", n.id, key, value)
	}
}

// room reads a room through the balancer.
func (c *cluster) room(ctx context.Context, token, id string) (roomInfo, error) {
	var out struct {
		Room roomInfo `json:"room"`
	}
	_, err := c.do(ctx, c.lb, http.MethodGet, "/api/v1/rooms/"+id, token, nil, &out)
	return out.Room, err
}

// roomInfo is the protocol's Room.
type roomInfo struct {
	ID       string   `json:"id"`
	Lobby    string   `json:"lobby"`
	Seq      int      `json:"seq"`
	Capacity int      `json:"capacity"`
	Members  []string `json:"members"`
}

// lookPathIn finds an executable in the directories of path.
func lookPathIn(name, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// errorOf sends a request through the balancer and returns its status and
// the code of chatd's error shape ("" when the answer has none).
func (c *cluster) errorOf(ctx context.Context, method, path, token string, body any) (int, string) {
	c.t.Helper()
	status, err := c.do(ctx, c.lb, method, path, token, body, nil)
	if err == nil {
		return status, ""
	}
	var shape struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	msg := err.Error()
	if i := strings.Index(msg, "{"); i >= 0 {
		_ = json.Unmarshal([]byte(msg[i:]), &shape)
	}
	return status, shape.Error.Code
}
