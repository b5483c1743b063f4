package csharpsdk_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/chatdtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	chatdtest.Cleanup()
	os.Exit(code)
}

// missing skips the test for want of a tool, or fails it under
// CHATD_TEST_STRICT=1.
func missing(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CHATD_TEST_STRICT") == "1" {
		t.Fatalf("%s (CHATD_TEST_STRICT=1; apt-get install mono-mcs libmono-system-net-http4.0-cil)", why)
	}
	t.Skip(why)
}

// build compiles the SDK as a library (with its XML docs, so that a
// missing doc comment is a warning the output shows) and the tests as an
// executable, and returns the executable's path.
func build(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"mcs", "mono"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing(t, tool+" is not installed")
		}
	}
	src, err := filepath.Glob(filepath.Join("src", "*.cs"))
	if err != nil || len(src) == 0 {
		t.Fatalf("no src/*.cs: %v", err)
	}
	dir := t.TempDir()
	lib := append([]string{"-target:library", "-warnaserror+", "-out:" + filepath.Join(dir, "Chatd.dll"),
		"-doc:" + filepath.Join(dir, "Chatd.xml"), "-r:System.Net.Http.dll"}, src...)
	if out, err := exec.Command("mcs", lib...).CombinedOutput(); err != nil {
		t.Fatalf("mcs (the SDK as Chatd.dll): %v\n%s", err, out)
	}
	exe := filepath.Join(dir, "tests.exe")
	args := append([]string{"-out:" + exe, "-r:System.Net.Http.dll"}, src...)
	args = append(args, filepath.Join("tests", "Tests.cs"))
	if out, err := exec.Command("mcs", args...).CombinedOutput(); err != nil {
		t.Fatalf("mcs (tests.exe): %v\n%s", err, out)
	}
	return exe
}

// TestCSharpSDK builds the SDK with mcs and runs its tests under mono
// against two real chatd nodes sharing one redis-server: sessions,
// failover over a dead base URL, a say received on the other node, a poll
// with dirty sections, idempotent message posts and purchases, a
// leaderboard post, a matchmaking ticket matched, and a node SIGKILLed
// under a WebSocket client, which must reconnect to the other node and
// resume with no message lost or doubled. The C# program asks for the
// kill by printing "KILL <i>"; this test kills node i and answers "KILLED".
// Without mono and mcs it skips, and fails under CHATD_TEST_STRICT=1.
// CHATD_TEST_RUN=text runs only the C# tests whose name contains text.
func TestCSharpSDK(t *testing.T) {
	exe := build(t)
	c := chatdtest.Start(t, chatdtest.Options{Nodes: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "mono", "--debug", exe)
	cmd.Env = append(os.Environ(), "CHATD_TEST_RUN="+os.Getenv("CHATD_TEST_RUN"), "CHATD_URLS="+strings.Join(c.URLs(), ","), "CHATD_ADMIN_TOKEN="+c.AdminToken)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		lines []string
	)
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		mu.Lock()
		lines = append(lines, line)
		mu.Unlock()
		t.Log(line)
		if i, ok := strings.CutPrefix(line, "KILL "); ok {
			n := c.Nodes[0]
			if i != "0" {
				t.Errorf("the tests asked to kill node %q; only node 0 is theirs to kill", i)
			} else {
				n.Kill()
			}
			if _, err := io.WriteString(stdin, "KILLED\n"); err != nil {
				t.Errorf("answering the kill: %v", err)
			}
		}
	}
	err = cmd.Wait()
	if err != nil {
		t.Fatalf("mono tests.exe: %v after %v\nstderr:\n%s", err, time.Since(start).Round(time.Millisecond), stderr.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lines) == 0 || lines[len(lines)-1] != "PASS" {
		t.Fatalf("the tests did not end with PASS:\n%s", strings.Join(lines, "\n"))
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "FAIL") {
			t.Errorf("%s", l)
		}
	}
	t.Logf("C# SDK tests passed in %v", time.Since(start).Round(time.Millisecond))
}
