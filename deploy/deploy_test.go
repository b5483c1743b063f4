package deploy

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/chatd/chatd/internal/redistest"
)

// Docker cannot run here, so the compose file and the Dockerfile are checked
// as documents; the nginx config is checked by nginx itself (nginx -t) on
// the loopback rendering that cluster.sh and the end-to-end tests run.

// composeFile is the part of the Compose specification the file uses. It
// has no top-level name: Debian's docker-compose 1.29 refuses one ("'name'
// does not match any of the regexes: '^x-'"), so readCompose rejects it
// like any other key but services, volumes and the x- extensions.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
	// Extensions are the x- fields that hold the YAML anchors.
	Extensions map[string]any `yaml:",inline"`
}

type composeService struct {
	Image string `yaml:"image"`
	Build struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
	Command     []string          `yaml:"command"`
	Hostname    string            `yaml:"hostname"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
	Expose      []string          `yaml:"expose"`
	Volumes     []string          `yaml:"volumes"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck struct {
		Test     []string `yaml:"test"`
		Interval string   `yaml:"interval"`
		Timeout  string   `yaml:"timeout"`
		Retries  int      `yaml:"retries"`
	} `yaml:"healthcheck"`
	Restart         string `yaml:"restart"`
	StopGracePeriod string `yaml:"stop_grace_period"`
}

var chatdServices = []string{"chatd1", "chatd2", "chatd3"}

// composePath is the Compose file, at the repository root (the tests run in
// deploy/), so that `docker compose up` works where the README says.
var composePath = filepath.Join("..", "docker-compose.yml")

func readCompose(t *testing.T) composeFile {
	t.Helper()
	p, err := os.ReadFile(composePath)
	require.NoError(t, err)
	var f composeFile
	dec := yaml.NewDecoder(bytes.NewReader(p))
	dec.KnownFields(true) // a misspelt key is an error, not a silent default
	require.NoError(t, dec.Decode(&f))
	for key := range f.Extensions {
		require.True(t, strings.HasPrefix(key, "x-"), "top-level key %q: Compose v1.29 accepts only services, volumes, networks, secrets, configs, version and x- extensions", key)
	}
	return f
}

// TestComposeV1 has the Compose implementations on this machine parse the
// file: Debian 12's docker-compose 1.29 (python; .ci/run installs it) and
// Compose v2 (`docker compose`) when its plugin is installed. `config -q`
// validates the file without a Docker daemon.
func TestComposeV1(t *testing.T) {
	ran := 0
	if _, err := exec.LookPath("docker-compose"); err == nil {
		out, err := exec.Command("docker-compose", "-f", composePath, "config", "-q").CombinedOutput()
		assert.NoError(t, err, "docker-compose 1.x refuses the file:\n%s", out)
		ran++
	} else if redistest.Strict() {
		t.Fatal("docker-compose (Debian's Compose v1.29) is not installed (CHATD_TEST_STRICT=1)")
	}
	if _, err := exec.LookPath("docker"); err == nil {
		if exec.Command("docker", "compose", "version").Run() == nil {
			out, err := exec.Command("docker", "compose", "-f", composePath, "config", "-q").CombinedOutput()
			assert.NoError(t, err, "docker compose (v2) refuses the file:\n%s", out)
			ran++
		}
	}
	if ran == 0 {
		t.Skip("neither docker-compose nor docker compose is installed")
	}
}

// composeDefault resolves "${VAR:-default}" the way Compose does with VAR
// unset.
func composeDefault(s string) string {
	return regexp.MustCompile(`\$\{[A-Z_]+:-([^}]*)\}`).ReplaceAllString(s, "$1")
}

func TestComposeFile(t *testing.T) {
	f := readCompose(t)

	t.Run("has redis 7, three chatd nodes and nginx", func(t *testing.T) {
		var names []string
		for name := range f.Services {
			names = append(names, name)
		}
		sort.Strings(names)
		assert.Equal(t, []string{"chatd1", "chatd2", "chatd3", "nginx", "redis"}, names)
		assert.Regexp(t, `^redis:7(\.|-|$)`, f.Services["redis"].Image)
		assert.Equal(t, []string{"CMD", "redis-cli", "ping"}, f.Services["redis"].Healthcheck.Test)
	})

	t.Run("nodes share the secret and admin token and name themselves apart", func(t *testing.T) {
		first := f.Services[chatdServices[0]].Environment
		for _, name := range chatdServices {
			s := f.Services[name]
			env := s.Environment
			assert.Equal(t, "redis://redis:6379/0", env["CHATD_REDIS"], name)
			assert.Equal(t, first["CHATD_SECRET"], env["CHATD_SECRET"], name)
			assert.Equal(t, first["CHATD_ADMIN_TOKEN"], env["CHATD_ADMIN_TOKEN"], name)
			assert.Equal(t, name, env["CHATD_NODE_ID"], name)
			assert.Equal(t, ":8080", env["CHATD_ADDR"], name)
			assert.Equal(t, name, s.Hostname)
			assert.Equal(t, []string{"8080", "9090"}, s.Expose, name)
			assert.Equal(t, ":9090", env["CHATD_METRICS_ADDR"], "%s: metrics on the exposed private port", name)
			assert.Empty(t, s.Ports, "%s: nodes are reached through nginx only", name)
			assert.Equal(t, "service_healthy", s.DependsOn["redis"].Condition, name)
			assert.Equal(t, ".", s.Build.Context, name)
			assert.Equal(t, "deploy/Dockerfile", s.Build.Dockerfile, name)
			assert.NotEmpty(t, s.Restart, name)
		}
		secret := composeDefault(first["CHATD_SECRET"])
		assert.GreaterOrEqual(t, len(secret), 16, "chatd refuses secrets under 16 characters: %q", secret)
		assert.Contains(t, first["CHATD_SECRET"], "${CHATD_SECRET", "the secret must be settable from the environment")
		assert.NotEmpty(t, composeDefault(first["CHATD_ADMIN_TOKEN"]))
	})

	t.Run("nginx publishes 8080 with nginx.conf, after the nodes are healthy", func(t *testing.T) {
		n := f.Services["nginx"]
		assert.Regexp(t, `^nginx:`, n.Image)
		assert.Equal(t, []string{"8080:8080"}, n.Ports)
		assert.Contains(t, n.Volumes, "./deploy/nginx.conf:/etc/nginx/nginx.conf:ro")
		for _, v := range n.Volumes {
			host, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(host, ".") {
				assert.FileExists(t, filepath.Join(filepath.Dir(composePath), host), "volume %s", v)
			}
		}
		for _, name := range chatdServices {
			assert.Equal(t, "service_healthy", n.DependsOn[name].Condition, name)
		}
	})

	t.Run("build context holds the Dockerfile and the module", func(t *testing.T) {
		s := f.Services["chatd1"]
		ctxDir := filepath.Join(filepath.Dir(composePath), s.Build.Context)
		assert.FileExists(t, filepath.Join(ctxDir, s.Build.Dockerfile))
		assert.FileExists(t, filepath.Join(ctxDir, "go.mod"))
		assert.DirExists(t, filepath.Join(ctxDir, "cmd", "chatd"))
	})

	t.Run("nginx upstream lists exactly the chatd services", func(t *testing.T) {
		conf, err := os.ReadFile("nginx.conf")
		require.NoError(t, err)
		var servers []string
		for _, m := range regexp.MustCompile(`(?m)^\s*server\s+([^\s;{]+)`).FindAllStringSubmatch(string(conf), -1) {
			servers = append(servers, m[1])
		}
		var want []string
		for _, name := range chatdServices {
			want = append(want, name+":8080")
		}
		assert.Equal(t, want, servers)
	})
}

// TestComposeReferences keeps the docs pointing at the Compose file where
// it is: no file may send a reader to deploy/docker-compose.yml or tell them
// to run Compose from deploy/.
func TestComposeReferences(t *testing.T) {
	_, err := os.Stat("docker-compose.yml")
	assert.True(t, os.IsNotExist(err), "deploy/docker-compose.yml is back; the Compose file lives at the repository root")
	stale := regexp.MustCompile(`deploy/docker-compose\.yml|cd deploy\s*(&&|;|\n)\s*docker compose|deploy/\.env\b`)
	root := ".."
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", ".run", "node_modules", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".md", ".go", ".sh", ".yml", ".yaml", ".conf", ".json", ".js", ".html":
		default:
			if filepath.Base(path) != "Dockerfile" {
				return nil
			}
		}
		if filepath.Base(path) == "deploy_test.go" {
			return nil // this test names the stale strings
		}
		p, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if loc := stale.FindIndex(p); loc != nil {
			line := bytes.Count(p[:loc[0]], []byte("\n")) + 1
			t.Errorf("%s:%d still says %q", path, line, p[loc[0]:loc[1]])
		}
		return nil
	})
	require.NoError(t, err)
}

func TestDockerfile(t *testing.T) {
	p, err := os.ReadFile("Dockerfile")
	require.NoError(t, err)
	lines := dockerInstructions(string(p))
	var froms, users []string
	var health, build string
	for _, l := range lines {
		word, rest, _ := strings.Cut(l, " ")
		switch strings.ToUpper(word) {
		case "FROM":
			froms = append(froms, rest)
		case "USER":
			users = append(users, rest)
		case "HEALTHCHECK":
			health = rest
		case "RUN":
			if strings.Contains(rest, "go build") {
				build = rest
			}
		}
	}
	t.Run("is multi-stage", func(t *testing.T) {
		assert.GreaterOrEqual(t, len(froms), 2, "FROM lines: %v", froms)
	})
	t.Run("builds a static binary", func(t *testing.T) {
		assert.Contains(t, build, "CGO_ENABLED=0")
		assert.Contains(t, build, "./cmd/chatd")
	})
	t.Run("runs as a non-root user", func(t *testing.T) {
		require.NotEmpty(t, users)
		last := users[len(users)-1]
		assert.NotRegexp(t, `^(root|0)(:|$)`, last)
	})
	t.Run("checks health on /healthz", func(t *testing.T) {
		assert.Contains(t, health, "/healthz")
	})
	t.Run("builds with a Go at least as new as go.mod asks", func(t *testing.T) {
		m := regexp.MustCompile(`(?m)^ARG GO_VERSION=(\S+)$`).FindStringSubmatch(string(p))
		require.NotNil(t, m, "ARG GO_VERSION=")
		mod, err := os.ReadFile(filepath.Join("..", "go.mod"))
		require.NoError(t, err)
		want := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
		require.NotNil(t, want)
		assert.GreaterOrEqual(t, semver(m[1]), semver(string(want[1])), "Dockerfile GO_VERSION %s < go.mod's go %s", m[1], want[1])
	})
}

// semver turns "1.26.8" into a number that orders versions (missing parts
// count as 0).
func semver(v string) int {
	n := 0
	parts := strings.SplitN(v, ".", 3)
	for i := 0; i < 3; i++ {
		x := 0
		if i < len(parts) {
			x, _ = strconv.Atoi(parts[i])
		}
		n = n*1000 + x
	}
	return n
}

// dockerInstructions joins continuation lines and drops comments.
func dockerInstructions(s string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(s, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		out = append(out, cur.String())
		cur.Reset()
	}
	return out
}

func TestNginxConfig(t *testing.T) {
	raw, err := os.ReadFile("nginx.conf")
	require.NoError(t, err)
	conf := string(raw)

	t.Run("upgrades WebSockets", func(t *testing.T) {
		assert.Contains(t, conf, "proxy_http_version 1.1;")
		assert.Contains(t, conf, "proxy_set_header Upgrade $http_upgrade;")
		assert.Contains(t, conf, "proxy_set_header Connection $connection_upgrade;")
	})
	t.Run("outwaits the 25 s ping interval", func(t *testing.T) {
		m := regexp.MustCompile(`proxy_read_timeout\s+(\d+)s;`).FindStringSubmatch(conf)
		require.NotNil(t, m)
		secs, _ := strconv.Atoi(m[1])
		assert.Greater(t, secs, 2*25, "proxy_read_timeout should outlast two ping intervals")
	})
	t.Run("marks failing nodes down and keeps no sticky sessions", func(t *testing.T) {
		assert.Regexp(t, `server chatd1:8080 max_fails=\d+ fail_timeout=\d+s;`, conf)
		directives := regexp.MustCompile(`(?m)#.*$`).ReplaceAllString(conf, "")
		assert.NotRegexp(t, `(?m)^\s*(ip_hash|hash|sticky)\b`, directives)
		assert.Contains(t, conf, "No sticky sessions", "say why in a comment")
	})

	t.Run("logs no session tokens", func(t *testing.T) {
		m := regexp.MustCompile(`(?s)log_format chatd (.*?);`).FindStringSubmatch(conf)
		require.NotNil(t, m)
		for _, leaky := range []string{"$request ", "$request\"", "$request_uri", "$args", "$query_string", "$arg_token"} {
			assert.NotContains(t, m[1], leaky)
		}
		assert.Regexp(t, `access_log \S+ chatd;`, conf)
	})

	t.Run("loopback rendering passes nginx -t", func(t *testing.T) {
		nginx := nginxPath(t)
		dir := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "nginx", "tmp"), 0o755))
		out := string(renderNginx(t, dir, 18080, []string{"18081", "18082", "18083"}))
		for _, want := range []string{
			"server 127.0.0.1:18081 ", "server 127.0.0.1:18082 ", "server 127.0.0.1:18083 ",
			"listen 127.0.0.1:18080;", "proxy_temp_path \"" + dir + "/nginx/tmp/proxy\";",
		} {
			assert.Contains(t, out, want)
		}
		assert.NotRegexp(t, `server chatd\d:8080`, out)
		assert.Equal(t, strings.Count(conf, "\n")+5, strings.Count(out, "\n"), "only the temp paths are added")

		path := filepath.Join(dir, "nginx", "nginx.conf")
		require.NoError(t, os.WriteFile(path, []byte(out), 0o644))
		cmd := exec.Command(nginx, "-t", "-p", filepath.Join(dir, "nginx")+"/", "-e", filepath.Join(dir, "nginx", "error.log"),
			"-c", path, "-g", "pid "+filepath.Join(dir, "nginx", "nginx.pid")+";")
		msg, err := cmd.CombinedOutput()
		assert.NoError(t, err, "nginx -t:\n%s", msg)
		assert.Contains(t, string(msg), "test is successful")
	})
}

// clusterScript runs cluster.sh in a private run directory on free ports;
// it stops whatever the script started when the test ends.
type clusterScript struct {
	t     *testing.T
	run   string
	lb    int
	nodes [3]int
	redis int
	env   []string
}

// newClusterScript skips without nginx or redis-server (fails under
// CHATD_TEST_STRICT=1). lb is the balancer port; 0 picks a free one.
func newClusterScript(t *testing.T, lb int) *clusterScript {
	t.Helper()
	skipShort(t)
	nginxPath(t)
	if !redistest.Available() {
		if redistest.Strict() {
			t.Fatal("CHATD_TEST_STRICT=1 and redis-server is not installed")
		}
		t.Skip("redis-server is not installed")
	}
	if lb == 0 {
		lb = freePort(t)
	}
	c := &clusterScript{t: t, run: t.TempDir(), lb: lb, redis: freePort(t)}
	for i := range c.nodes {
		c.nodes[i] = freePort(t)
	}
	c.env = append(os.Environ(),
		"CHATD_RUN_DIR="+c.run,
		"CHATD_LB_PORT="+strconv.Itoa(c.lb),
		"CHATD_NODE_PORTS="+strconv.Itoa(c.nodes[0])+" "+strconv.Itoa(c.nodes[1])+" "+strconv.Itoa(c.nodes[2]),
		"CHATD_REDIS_PORT="+strconv.Itoa(c.redis),
		"CHATD_BIN="+buildChatd(t),
		"CHATD_PREFIX=clustersh",
		// nginx may live in /usr/sbin, off a normal user's PATH
		"PATH="+os.Getenv("PATH")+":/usr/sbin",
	)
	t.Cleanup(func() {
		if out, err := c.script("down"); err != nil {
			t.Logf("cluster.sh down: %v\n%s", err, out)
		}
	})
	return c
}

func (c *clusterScript) script(arg string) (string, error) {
	cmd := exec.Command("bash", "cluster.sh", arg)
	cmd.Env = c.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// pid reads the pid file of name, or 0.
func (c *clusterScript) pid(name string) int {
	p, err := os.ReadFile(filepath.Join(c.run, name+".pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(p)))
	return pid
}

func TestClusterScript(t *testing.T) {
	t.Parallel()
	c := newClusterScript(t, 0)
	run, lb, script := c.run, c.lb, c.script

	out, err := script("up")
	require.NoError(t, err, out)
	assert.Contains(t, out, "chatd is up: http://127.0.0.1:"+strconv.Itoa(lb))

	t.Run("status lists five running processes, each on its own port", func(t *testing.T) {
		out, err := script("status")
		assert.NoError(t, err, out)
		assert.Equal(t, 5, strings.Count(out, " running (pid "), out)
		for i, port := range c.nodes {
			assert.Contains(t, out, fmt.Sprintf("chatd%d running (pid %d) on 127.0.0.1:%d", i+1, c.pid(fmt.Sprintf("chatd%d", i+1)), port))
		}
		assert.Contains(t, out, fmt.Sprintf("nginx running (pid %d) on 127.0.0.1:%d", c.pid("nginx"), lb))
		assert.Contains(t, out, fmt.Sprintf("redis running (pid %d) on 127.0.0.1:%d", c.pid("redis"), c.redis))
	})

	t.Run("the balancer reaches all three nodes", func(t *testing.T) {
		c := &cluster{t: t, lb: "127.0.0.1:" + strconv.Itoa(lb), client: &http.Client{Timeout: 5 * time.Second}}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		adm, err := os.ReadFile(filepath.Join(run, "CHATD_ADMIN_TOKEN")) // GET /nodes is admin-only
		require.NoError(t, err)
		admin := strings.TrimSpace(string(adm))
		var got []string
		assert.Eventually(t, func() bool {
			var out struct {
				Nodes []struct {
					ID string `json:"id"`
				} `json:"nodes"`
			}
			if _, err := c.do(ctx, c.lb, http.MethodGet, "/api/v1/nodes", admin, nil, &out); err != nil {
				return false
			}
			got = got[:0]
			for _, n := range out.Nodes {
				got = append(got, n.ID)
			}
			sort.Strings(got)
			return strings.Join(got, ",") == "chatd1,chatd2,chatd3"
		}, 15*time.Second, 100*time.Millisecond, "nodes: %v", got)
	})

	t.Run("status tells a node that runs but does not answer", func(t *testing.T) {
		pid := c.pid("chatd2")
		require.NotZero(t, pid)
		require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
		// Every status while chatd2 is stopped tells it. On a loaded CI
		// machine nginx's own answer was missed once, by every one of
		// status's tries (3 s): status is asked up to three times for a
		// report of the four others running, and each miss is logged with
		// status's reason and nginx's logs.
		var out string
		for try := 1; try <= 3; try++ {
			var err error
			out, err = script("status")
			assert.Error(t, err, "status must fail while chatd2 does not answer:\n%s", out)
			assert.Contains(t, out, fmt.Sprintf("chatd2 not answering on 127.0.0.1:%d", c.nodes[1]))
			if strings.Count(out, " running (pid ") == 4 {
				break
			}
			t.Logf("status, try %d:\n%s\nnginx.log:\n%s\nerror.log:\n%s", try, out,
				tail(filepath.Join(run, "nginx.log"), 20), tail(filepath.Join(run, "nginx", "error.log"), 20))
		}
		require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
		assert.Equal(t, 4, strings.Count(out, " running (pid "), out)
		assert.Eventually(t, func() bool {
			_, err := script("status")
			return err == nil
		}, 20*time.Second, 200*time.Millisecond, "status after SIGCONT")
	})

	t.Run("up again leaves the running cluster as it is", func(t *testing.T) {
		before := c.pid("nginx")
		out, err := script("up")
		require.NoError(t, err, out)
		assert.Equal(t, 5, strings.Count(out, " already running (pid "), out)
		assert.Equal(t, before, c.pid("nginx"))
	})

	t.Run("down stops every process by its pid", func(t *testing.T) {
		var pids []int
		for _, name := range []string{"redis", "chatd1", "chatd2", "chatd3", "nginx"} {
			p, err := os.ReadFile(filepath.Join(run, name+".pid"))
			require.NoError(t, err)
			pid, err := strconv.Atoi(strings.TrimSpace(string(p)))
			require.NoError(t, err)
			pids = append(pids, pid)
		}
		out, err := script("down")
		require.NoError(t, err, out)
		for _, pid := range pids {
			assert.False(t, processRuns(pid), "pid %d still runs", pid)
		}
		out, err = script("status")
		assert.Error(t, err, "status must fail when nothing runs")
		assert.Equal(t, 5, strings.Count(out, " stopped"), out)
	})
}

// TestClusterScriptRefusesATakenPort is `go run ./cmd/chatd` (a node on the
// balancer's port) followed by `cluster.sh up`: up must refuse, say which
// port, and start nothing — not report a cluster whose balancer is the lone
// node.
func TestClusterScriptRefusesATakenPort(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	lone := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"node":"lone-node","ok":true}`)) // as chatd's /healthz
	})}
	go func() { _ = lone.Serve(ln) }()
	t.Cleanup(func() { _ = lone.Close() })
	lb := ln.Addr().(*net.TCPAddr).Port
	c := newClusterScript(t, lb)

	out, err := c.script("up")
	require.Error(t, err, "up must fail while the balancer port is taken:\n%s", out)
	assert.Contains(t, out, "port already taken")
	assert.Contains(t, out, strconv.Itoa(lb)+" (nginx)")
	assert.NotContains(t, out, "chatd is up")
	for _, name := range []string{"redis", "chatd1", "chatd2", "chatd3", "nginx"} {
		if pid := c.pid(name); pid != 0 {
			assert.False(t, processRuns(pid), "%s (pid %d) was started", name, pid)
		}
	}
	out, err = c.script("status")
	assert.Error(t, err)
	assert.Equal(t, 5, strings.Count(out, " stopped"), out)
}

// TestClusterScriptNginxCannotBind: the balancer port looks free (nothing
// accepts connections there) but nginx cannot bind it, because a socket is
// bound to it without listening. up must see nginx's [emerg] and fail, and
// status must not call nginx running.
func TestClusterScriptNginxCannotBind(t *testing.T) {
	t.Parallel()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}})) // no SO_REUSEADDR, no listen
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	lb := sa.(*syscall.SockaddrInet4).Port
	c := newClusterScript(t, lb)

	out, err := c.script("up")
	require.Error(t, err, "up must fail when nginx cannot bind:\n%s", out)
	assert.Contains(t, out, "nginx failed")
	assert.Contains(t, out, "[emerg]")
	assert.Contains(t, out, "127.0.0.1:"+strconv.Itoa(lb))
	assert.NotContains(t, out, "chatd is up")

	out, err = c.script("status")
	assert.Error(t, err, "status with nginx unable to bind:\n%s", out)
	assert.NotContains(t, out, "nginx running", out)
	assert.Equal(t, 4, strings.Count(out, " running (pid "), "redis and the nodes did start:\n%s", out)
}

// processRuns reports whether pid runs and is not a zombie.
func processRuns(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z")
}
