// Package examples holds the test of docs/getting-started.md; the
// examples themselves are in the directories below, each with its test.
package examples

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/chatdtest"
	"github.com/chatd/chatd/internal/redistest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	chatdtest.Cleanup()
	os.Exit(code)
}

const guide = "../docs/getting-started.md"

// block is a fenced code block of the guide.
type block struct {
	lang  string
	line  int // of the opening fence
	lines []string
}

func blocks(t *testing.T) []block {
	t.Helper()
	f, err := os.Open(guide)
	require.NoError(t, err)
	defer f.Close()
	var out []block
	var cur *block
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &block{lang: strings.TrimPrefix(line, "```"), line: n}
		case cur != nil && line == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, line)
		}
	}
	require.NoError(t, sc.Err())
	require.Nil(t, cur, "an unclosed code block")
	return out
}

// command is one "$ " line of a console block and the answer under it.
type command struct {
	where string // guide line
	cmd   string
	want  []string
}

// pattern turns a documented answer line into a regexp: "…" stands for
// anything, the rest is literal.
func pattern(line string) *regexp.Regexp {
	parts := strings.Split(line, "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*?") + "$")
}

// Every console transcript of the guide — the curl lines and their
// answers — runs in one shell against two real nodes (localhost:8080 and
// :8081 are n1, :8082 is n2, as in the guide) with the guide's admin
// token, and each command prints the answer shown under it ("…" matching
// anything).
func TestGettingStartedTranscripts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts chatd processes")
	}
	for _, tool := range []string{"sh", "curl", "sed"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CHATD_TEST_STRICT") == "1" {
				t.Fatalf("%s is not installed (CHATD_TEST_STRICT=1)", tool)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
	var cmds []command
	for _, b := range blocks(t) {
		if b.lang != "console" {
			continue
		}
		for i, l := range b.lines {
			if c, ok := strings.CutPrefix(l, "$ "); ok {
				cmds = append(cmds, command{where: fmt.Sprintf("%s:%d", guide, b.line+1+i), cmd: c})
				continue
			}
			require.NotEmpty(t, cmds, "%s:%d: an answer before any command", guide, b.line+1+i)
			cmds[len(cmds)-1].want = append(cmds[len(cmds)-1].want, l)
		}
	}
	require.GreaterOrEqual(t, len(cmds), 15, "the guide's curl transcripts")

	cl := chatdtest.Start(t, chatdtest.Options{Nodes: 2, AdminToken: "admin-secret"})
	hosts := strings.NewReplacer(
		"localhost:8080", cl.Nodes[0].Addr(),
		"localhost:8081", cl.Nodes[0].Addr(),
		"localhost:8082", cl.Nodes[1].Addr(),
	)
	var script strings.Builder
	for i, c := range cmds {
		fmt.Fprintf(&script, "printf '\\n@@@%d\\n'\n%s\n", i, hosts.Replace(c.cmd))
	}
	fmt.Fprintf(&script, "printf '\\n@@@end\\n'\n")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "sh", "-c", script.String()).CombinedOutput()
	require.NoError(t, err, "the transcripts' commands:\n%s", out)

	rest := string(out)
	for i, c := range cmds {
		_, after, ok := strings.Cut(rest, fmt.Sprintf("\n@@@%d\n", i))
		require.True(t, ok, "no output marker for %s", c.where)
		got, next, ok := strings.Cut(after, "\n@@@")
		require.True(t, ok)
		rest = "\n@@@" + next
		var lines []string
		if got = strings.Trim(got, "\n"); got != "" {
			lines = strings.Split(got, "\n")
		}
		if !assert.Len(t, lines, len(c.want), "%s: %s\nanswered:\n%s", c.where, c.cmd, got) {
			continue
		}
		for j, w := range c.want {
			assert.Regexp(t, pattern(w), lines[j], "%s: %s", c.where, c.cmd)
		}
	}
}

// The guide's other commands name files and flags that exist: every
// `go run ./…` and `go build … ./…` a package directory, every `sh …` a
// file, and every --flag given to chatd one that `chatd --help` lists.
func TestGettingStartedCommands(t *testing.T) {
	bin := chatdtest.Binary(t)
	help, err := exec.Command(bin, "--help").CombinedOutput()
	require.NoError(t, err, "%s", help)
	goPkg := regexp.MustCompile(`\bgo (?:run|build)\b.*?\s(\./[^\s]+)`)
	shFile := regexp.MustCompile(`^(?:\S+=\S+ )*sh (\S+\.sh)`)
	flag := regexp.MustCompile(`\s--([a-z-]+)`)
	checked := 0
	for _, b := range blocks(t) {
		if b.lang != "sh" {
			continue
		}
		for i, l := range b.lines {
			where := fmt.Sprintf("%s:%d", guide, b.line+1+i)
			l, _, _ = strings.Cut(l, " #")
			if m := goPkg.FindStringSubmatch(l); m != nil {
				matches, err := filepath.Glob(filepath.Join("..", m[1], "*.go"))
				require.NoError(t, err)
				assert.NotEmpty(t, matches, "%s: %s is not a Go package", where, m[1])
				checked++
			}
			if m := shFile.FindStringSubmatch(l); m != nil {
				_, err := os.Stat(filepath.Join("..", m[1]))
				assert.NoError(t, err, "%s: %s", where, m[1])
				checked++
			}
			if strings.Contains(l, "./chatd ") || strings.Contains(l, "./cmd/chatd ") {
				for _, f := range flag.FindAllStringSubmatch(l, -1) {
					assert.Contains(t, string(help), "\n  -"+f[1]+" ", "%s: chatd has no --%s", where, f[1])
					checked++
				}
			}
		}
	}
	assert.GreaterOrEqual(t, checked, 10, "commands checked")
}

// redisStep is the guide's throwaway-Redis step: the lines of step 5's
// first sh block up to the one that runs redis-server, with 6379 made
// port.
func redisStep(t *testing.T, port int) string {
	t.Helper()
	for _, b := range blocks(t) {
		if b.lang != "sh" {
			continue
		}
		for i, l := range b.lines {
			if strings.Contains(l, "redis-server") {
				return strings.ReplaceAll(strings.Join(b.lines[:i+1], "\n"), "6379", strconv.Itoa(port))
			}
		}
	}
	t.Fatal("the guide has no redis-server step")
	return ""
}

// The guide's Redis step fails loudly when its port answers already (a
// bare `redis-server --daemonize yes` exits 0 there and starts nothing,
// and the guide's two nodes would share someone else's Redis), and starts
// a Redis that answers when the port is free.
func TestGettingStartedRedisStep(t *testing.T) {
	if !redistest.Available() {
		if redistest.Strict() {
			t.Fatal("redis-server is not installed (CHATD_TEST_STRICT=1)")
		}
		t.Skip("redis-server is not installed")
	}

	t.Run("a port that answers already fails the step", func(t *testing.T) {
		other := redistest.StartServer(t, redistest.Options{})
		_, p, err := net.SplitHostPort(other.Addr)
		require.NoError(t, err)
		port, err := strconv.Atoi(p)
		require.NoError(t, err)
		out, err := exec.Command("sh", "-c", redisStep(t, port)).CombinedOutput()
		assert.Error(t, err, "the step succeeded on a port another Redis holds:\n%s", out)
		assert.Contains(t, string(out), "answers already", "the step says why")
	})

	t.Run("a free port gets a Redis that answers", func(t *testing.T) {
		// The daemon binds every address (*:port), so the port is taken
		// from below the ephemeral range, where the packages' outgoing
		// connections (CI runs them at once) take their local ports; one
		// may still be taken before the daemon binds it:
		// the daemon's log, kept for the test, tells that apart from a
		// step that does not start Redis, and only that case tries
		// another port.
		for attempt := 1; ; attempt++ {
			port := guidePort(t)
			logFile := filepath.Join(t.TempDir(), "redis.log")
			step := strings.Replace(redisStep(t, port), "--daemonize yes", "--daemonize yes --logfile "+logFile, 1)
			out, err := exec.Command("sh", "-c", step).CombinedOutput()
			t.Cleanup(func() { _ = exec.Command("redis-cli", "-p", strconv.Itoa(port), "shutdown", "nosave").Run() })
			require.NoError(t, err, "%s", out)
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				pong, err := exec.Command("redis-cli", "-p", strconv.Itoa(port), "ping").Output()
				if err == nil && strings.TrimSpace(string(pong)) == "PONG" {
					return
				}
			}
			log, _ := os.ReadFile(logFile)
			if attempt < 3 && strings.Contains(string(log), "Address already in use") {
				t.Logf("port %d was taken before the daemon bound it; another port", port)
				continue
			}
			t.Fatalf("the guide's Redis does not answer on %d; its log:\n%s", port, log)
		}
	})
}

// guidePort returns a port below Linux's ephemeral range (32768–60999)
// that is free on every address now: the guide's Redis binds *:port,
// which any socket holding that local port refuses.
func guidePort(t *testing.T) int {
	t.Helper()
	for range 100 {
		port := 20000 + rand.IntN(12000)
		l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		require.NoError(t, l.Close())
		return port
	}
	t.Fatal("no free port from 20000 to 31999")
	return 0
}
