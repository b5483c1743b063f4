package chatdtest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

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

// binary builds ./cmd/chatd once per test binary, into a directory removed
// by Cleanup (call it from TestMain) or left in the OS temp dir.
var binary = sync.OnceValues(func() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "chatdtest-")
	if err != nil {
		return "", err
	}
	buildDir.Store(&dir)
	bin := filepath.Join(dir, "chatd")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/chatd")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/chatd: %v\n%s", err, out)
	}
	return bin, nil
})

// Binary returns the path of chatd built from this checkout (CGO_ENABLED=0),
// building it on first use in the test binary.
func Binary(tb testing.TB) string {
	tb.Helper()
	bin, err := binary()
	if err != nil {
		tb.Fatalf("chatdtest: %v", err)
	}
	return bin
}

// Cleanup removes the built binary; call it from TestMain after m.Run.
func Cleanup() {
	if d := buildDir.Load(); d != nil {
		_ = os.RemoveAll(*d)
	}
}

// FreePort returns a loopback TCP port that is free now.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("chatdtest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// proc is one child process, its output appended to a log file.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when it has exited
	err  error         // its exit status, once done
}

// startProc starts bin; the child dies with the test binary: Pdeathsig
// fires when the thread that started the child exits, so the goroutine that
// starts it keeps its thread until the child is gone.
func startProc(logPath string, env []string, bin string, args ...string) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer logf.Close()
		if err := cmd.Start(); err != nil {
			started <- err
			p.err = err
			close(p.done)
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, <-started
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig unless the process has exited.
func (p *proc) signal(sig syscall.Signal) error {
	if p.exited() {
		return errors.New("the process has exited")
	}
	return p.cmd.Process.Signal(sig)
}

// waitStopped waits up to d until every thread of the process is stopped
// (state T in /proc/PID/task/*/stat), as after SIGSTOP.
func (p *proc) waitStopped(d time.Duration) error {
	dir := fmt.Sprintf("/proc/%d/task", p.cmd.Process.Pid)
	for deadline := time.Now().Add(d); ; time.Sleep(time.Millisecond) {
		tasks, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		stopped := len(tasks) > 0
		for _, task := range tasks {
			b, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
			// the state follows the command's closing parenthesis
			if i := bytes.LastIndexByte(b, ')'); err != nil || i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
				stopped = false
				break
			}
		}
		if stopped {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not every thread stopped within %v", d)
		}
	}
}

// wait waits up to d for the process to exit.
func (p *proc) wait(d time.Duration) (bool, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true, p.err
	case <-t.C:
		return false, nil
	}
}

// kill kills the process (SIGCONT first: a stopped process dies only when
// it runs) and waits for it.
func (p *proc) kill() {
	_ = p.signal(syscall.SIGKILL)
	_ = p.signal(syscall.SIGCONT)
	<-p.done
}

// Tail returns the last n lines of the file at path (or the error reading
// it).
func Tail(path string, n int) string {
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
