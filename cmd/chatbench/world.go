package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Proc is a process chatbench started and stops by pid.
type Proc struct {
	Name string
	URL  string // http://127.0.0.1:port for servers
	Addr string // 127.0.0.1:port
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// start runs bin with args, its output going to dir/name.log.
func start(dir, name, bin string, args []string) (*Proc, error) {
	lf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, cmd: cmd, log: lf, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

// Stop sends SIGTERM, waits up to grace, then SIGKILL.
func (p *Proc) Stop(grace time.Duration) {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	p.log.Close()
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// RSS is the process's resident set size in bytes, from /proc/pid/status.
func (p *Proc) RSS() (int64, error) { return rssOf(p.Pid()) }

func rssOf(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// World is what a run measures: a Redis, chatd nodes and the bare hubs.
type World struct {
	Dir       string
	RedisAddr string
	Redis     *redis.Client
	Targets   []string // chatd base URLs
	Nodes     []*Proc  // chatd processes, when chatbench started them
	Hub0      *Proc    // bare hub without Redis (A3)
	Hubs      []*Proc  // bare hubs on Redis pub/sub (A4)
	RedisProc *Proc    // the private redis-server, nil with -redis
	procs     []*Proc

	// how startChatd started chatd, for addChatd
	chatdBin, secret, admin string
	started                 int // chatd nodes started so far (names n1, n2, …)
}

// Close stops every process chatbench started, newest first.
func (w *World) Close() {
	if w.Redis != nil {
		w.Redis.Close()
	}
	for i := len(w.procs) - 1; i >= 0; i-- {
		w.procs[i].Stop(10 * time.Second)
	}
	w.procs = nil
}

func (w *World) own(p *Proc) *Proc {
	w.procs = append(w.procs, p)
	return p
}

// pidOf returns the pid of the server chatbench started at base URL, 0
// when it did not start it (-targets).
func (w *World) pidOf(base string) int {
	for _, p := range w.procs {
		if p.URL == base && p.cmd != nil && p.cmd.Process != nil {
			return p.Pid()
		}
	}
	return 0
}

// redisPid is the private redis-server's pid, 0 with -redis.
func (w *World) redisPid() int {
	if w.RedisProc == nil {
		return 0
	}
	return w.RedisProc.Pid()
}

// startRedis starts a private redis-server without persistence.
func (w *World) startRedis(ctx context.Context) error {
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	_, port, _ := net.SplitHostPort(addr)
	p, err := start(w.Dir, "redis", "redis-server", []string{
		"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--protected-mode", "no", "--dir", w.Dir, "--maxclients", "20000",
	})
	if err != nil {
		return fmt.Errorf("redis-server (apt-get install redis-server): %w", err)
	}
	w.own(p)
	p.Addr = addr
	w.RedisAddr = addr
	w.RedisProc = p
	return w.connectRedis(ctx, p)
}

func (w *World) connectRedis(ctx context.Context, p *Proc) error {
	w.Redis = redis.NewClient(&redis.Options{Addr: w.RedisAddr, PoolSize: 64})
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := w.Redis.Ping(ctx).Err()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || (p != nil && p.Exited()) {
			return fmt.Errorf("redis at %s not answering: %w", w.RedisAddr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// buildChatd builds ./cmd/chatd of the module at root into root/tmp/chatd.
func buildChatd(ctx context.Context, root string) (string, error) {
	out := filepath.Join(root, "tmp", "chatd")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/chatd")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/chatd: %w\n%s", err, b)
	}
	return out, nil
}

// moduleRoot finds the chatd module root from the working directory up.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/chatd/chatd\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the chatd module: run chatbench from the checkout, or pass -chatd and -targets")
		}
		dir = parent
	}
}

// startChatd starts n chatd nodes on the world's Redis.
func (w *World) startChatd(ctx context.Context, bin string, n int, secret, admin string) error {
	w.chatdBin, w.secret, w.admin = bin, secret, admin
	ps, err := w.addChatd(ctx, n)
	if err != nil {
		return err
	}
	for _, p := range ps {
		w.Nodes = append(w.Nodes, p)
		w.Targets = append(w.Targets, p.URL)
	}
	// The generator is one client address opening thousands of sessions
	// and sockets: lift the per-address caps for the run.
	api := newAPI(1, admin)
	for _, key := range []string{"limit.sessions_per_ip_per_minute", "limit.connections_per_ip", "limit.new_boards_per_ip_per_minute"} {
		if _, err := api.SetSetting(ctx, w.Targets[0], key, 0); err != nil && !strings.Contains(err.Error(), "unknown_setting") {
			return fmt.Errorf("lift %s: %w", key, err) // (an older chatd has no such cap: fine)
		}
	}
	return nil
}

// addChatd starts n more chatd nodes on the world's Redis, as startChatd
// did (same binary, secret and admin token), named after the nodes the
// world has already started, and waits until they are ready. It does not
// add them to Nodes and Targets: a scenario that needs more nodes than
// the run's stops them itself (World.Close stops them too).
func (w *World) addChatd(ctx context.Context, n int) ([]*Proc, error) {
	if w.chatdBin == "" {
		return nil, errors.New("no chatd binary: the run did not start chatd (-targets)")
	}
	var ps []*Proc
	for range n {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		w.started++
		name := fmt.Sprintf("n%d", w.started)
		p, err := start(w.Dir, name, w.chatdBin, []string{
			"--redis", "redis://" + w.RedisAddr + "/0", "--secret", w.secret, "--admin-token", w.admin,
			"--node-id", name, "--addr", addr, "--log-level", "warn",
		})
		if err != nil {
			return nil, err
		}
		w.own(p)
		p.Addr, p.URL = addr, "http://"+addr
		ps = append(ps, p)
	}
	for _, p := range ps {
		if err := waitHTTP(ctx, p, "/readyz", 30*time.Second); err != nil {
			return nil, err
		}
	}
	return ps, nil
}

// startHubs starts the bare hubs: one without Redis and n on Redis.
func (w *World) startHubs(ctx context.Context, n int) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	mk := func(name, redisAddr string) (*Proc, error) {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		args := []string{"-serve-hub", addr, "-hub-node", name}
		if redisAddr != "" {
			args = append(args, "-hub-redis", redisAddr)
		}
		p, err := start(w.Dir, name, self, args)
		if err != nil {
			return nil, err
		}
		w.own(p)
		p.Addr, p.URL = addr, "http://"+addr
		return p, waitHTTP(ctx, p, "/healthz", 20*time.Second)
	}
	if w.Hub0, err = mk("h0", ""); err != nil {
		return err
	}
	for i := 1; i <= n; i++ {
		p, err := mk(fmt.Sprintf("h%d", i), w.RedisAddr)
		if err != nil {
			return err
		}
		w.Hubs = append(w.Hubs, p)
	}
	return nil
}

// waitHTTP polls base+path until it answers 200.
func waitHTTP(ctx context.Context, p *Proc, path string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		if p.cmd != nil && p.Exited() {
			return fmt.Errorf("%s exited before %s answered (see %s)", p.Name, path, p.log.Name())
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s %s: %w", p.Name, path, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// fileLimit returns this process's open-file limit (soft), or 0 when
// unknown.
func fileLimit() int {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) != nil || l.Cur > 1<<30 {
		return 0
	}
	return int(l.Cur)
}

// raiseFileLimit lifts the soft open-file limit to the hard one, for the
// many client sockets (children inherit it).
func raiseFileLimit() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}
