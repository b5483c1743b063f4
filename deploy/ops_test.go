package deploy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/chatd/chatd/internal/redistest"
)

// toolsDir holds the deploycheck binary; TestMain removes it.
var toolsDir string

// deployCheckBinary builds deploy/tools (kustomize's and Prometheus's own
// Go code, in a module of its own) once per test binary. The first build
// on a machine fetches its modules from the Go module proxy.
var deployCheckBinary = sync.OnceValues(func() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	if toolsDir, err = os.MkdirTemp("", "chatd-deploycheck-"); err != nil {
		return "", err
	}
	bin := filepath.Join(toolsDir, "deploycheck")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join(root, "deploy", "tools")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build deploy/tools: %v\n%s", err, out)
	}
	return bin, nil
})

func deployCheck(t *testing.T) string {
	t.Helper()
	bin, err := deployCheckBinary()
	if err != nil {
		if redistest.Strict() {
			t.Fatal(err)
		}
		t.Skipf("deploy/tools does not build here (no Go module proxy?): %v", err)
	}
	return bin
}

// kustomize renders a kustomization with deploycheck into its objects.
func kustomize(t *testing.T, dir string) []map[string]any {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(deployCheck(t), "kustomize", dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "kustomize %s: %s", dir, stderr.String())
	var objs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var o map[string]any
		if err := dec.Decode(&o); err == io.EOF {
			break
		} else {
			require.NoError(t, err)
		}
		objs = append(objs, o)
	}
	return objs
}

// dig walks nested maps and lists: dig(o, "spec", "template", "spec").
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func find(objs []map[string]any, kind, name string) map[string]any {
	for _, o := range objs {
		if o["kind"] == kind && dig(o, "metadata", "name") == name {
			return o
		}
	}
	return nil
}

// containerEnv is a container's env as name → value.
func containerEnv(c any) map[string]string {
	out := map[string]string{}
	for _, e := range dig(c, "env").([]any) {
		v, _ := dig(e, "value").(string)
		out[dig(e, "name").(string)] = v
	}
	return out
}

func TestK8sKustomization(t *testing.T) {
	objs := kustomize(t, "k8s")
	kinds := map[string]bool{}
	for _, o := range objs {
		kinds[fmt.Sprintf("%s/%s", o["kind"], dig(o, "metadata", "name"))] = true
		assert.Equal(t, "chatd", dig(o, "metadata", "labels", "app.kubernetes.io/part-of"), "%v is labelled part of chatd", o["kind"])
	}
	for _, want := range []string{"Deployment/chatd", "Service/chatd", "PodDisruptionBudget/chatd", "Ingress/chatd", "Ingress/chatd-events", "StatefulSet/redis", "Service/redis"} {
		assert.True(t, kinds[want], "kubectl apply -k deploy/k8s brings %s", want)
	}
	dep := find(objs, "Deployment", "chatd")
	require.NotNil(t, dep)
	c := dig(dep, "spec", "template", "spec", "containers", 0)
	env := containerEnv(c)
	ports := map[string]int{}
	for _, p := range dig(c, "ports").([]any) {
		ports[dig(p, "name").(string)] = dig(p, "containerPort").(int)
	}

	t.Run("chatd reaches the bundled Redis", func(t *testing.T) {
		u := env["CHATD_REDIS"]
		require.True(t, strings.HasPrefix(u, "redis://"), u)
		host, port, err := net.SplitHostPort(strings.SplitN(strings.TrimPrefix(u, "redis://"), "/", 2)[0])
		require.NoError(t, err)
		svc := find(objs, "Service", host)
		require.NotNil(t, svc, "CHATD_REDIS names the %s Service", host)
		assert.Equal(t, port, strconv.Itoa(dig(svc, "spec", "ports", 0, "port").(int)))
		sts := find(objs, "StatefulSet", "redis")
		assert.Equal(t, dig(svc, "spec", "selector"), dig(sts, "spec", "template", "metadata", "labels"), "the Service selects the Redis pod")
		assert.NotNil(t, dig(sts, "spec", "volumeClaimTemplates", 0), "Redis keeps its data on a volume")
		assert.Contains(t, dig(sts, "spec", "template", "spec", "containers", 0, "args"), "noeviction")
	})
	t.Run("the metrics port is scraped, the public one is not", func(t *testing.T) {
		_, mport, err := net.SplitHostPort(env["CHATD_METRICS_ADDR"])
		require.NoError(t, err, "CHATD_METRICS_ADDR is set")
		assert.Equal(t, mport, strconv.Itoa(ports["metrics"]))
		ann := dig(dep, "spec", "template", "metadata", "annotations").(map[string]any)
		assert.Equal(t, "true", ann["prometheus.io/scrape"])
		assert.Equal(t, mport, ann["prometheus.io/port"])
		assert.Equal(t, "/metrics", ann["prometheus.io/path"])
		assert.NotEqual(t, ports["http"], ports["metrics"])
		for _, p := range dig(find(objs, "Service", "chatd"), "spec", "ports").([]any) {
			assert.Equal(t, "http", dig(p, "targetPort"), "the Service carries the public port only")
		}
		assert.Equal(t, "json", env["CHATD_LOG_FORMAT"])
	})
	t.Run("the Ingress outwaits the ping and streams events", func(t *testing.T) {
		for _, name := range []string{"chatd", "chatd-events"} {
			ing := find(objs, "Ingress", name)
			ann := dig(ing, "metadata", "annotations").(map[string]any)
			for _, k := range []string{"nginx.ingress.kubernetes.io/proxy-read-timeout", "nginx.ingress.kubernetes.io/proxy-send-timeout"} {
				secs, err := strconv.Atoi(fmt.Sprint(ann[k]))
				require.NoError(t, err, "%s %s", name, k)
				assert.Greater(t, secs, 2*25, "%s %s outlasts two 25 s pings", name, k)
			}
			b := dig(ing, "spec", "rules", 0, "http", "paths", 0, "backend", "service")
			assert.Equal(t, "chatd", dig(b, "name"))
			assert.Contains(t, ports, dig(b, "port", "name"), "the backend port is a chatd port")
		}
		ev := find(objs, "Ingress", "chatd-events")
		assert.Equal(t, "/api/v1/events", dig(ev, "spec", "rules", 0, "http", "paths", 0, "path"))
		assert.Equal(t, "off", dig(ev, "metadata", "annotations", "nginx.ingress.kubernetes.io/proxy-buffering"), "SSE is not buffered")
		assert.Equal(t, "1m", dig(find(objs, "Ingress", "chatd"), "metadata", "annotations", "nginx.ingress.kubernetes.io/proxy-body-size"))
	})
	t.Run("the disruption budget selects the chatd pods", func(t *testing.T) {
		assert.Equal(t, dig(dep, "spec", "template", "metadata", "labels", "app.kubernetes.io/name"),
			dig(find(objs, "PodDisruptionBudget", "chatd"), "spec", "selector", "matchLabels", "app.kubernetes.io/name"))
	})
	t.Run("the Sentinel overlay drops the bundled Redis and names the Sentinels", func(t *testing.T) {
		objs := kustomize(t, filepath.Join("k8s", "overlays", "sentinel"))
		assert.Nil(t, find(objs, "StatefulSet", "redis"))
		assert.Nil(t, find(objs, "Service", "redis"))
		dep := find(objs, "Deployment", "chatd")
		require.NotNil(t, dep)
		env := containerEnv(dig(dep, "spec", "template", "spec", "containers", 0))
		assert.True(t, strings.HasPrefix(env["CHATD_REDIS"], "redis-sentinel://"), env["CHATD_REDIS"])
		assert.Equal(t, ":9090", env["CHATD_METRICS_ADDR"], "the rest of the base stays")
		assert.NotNil(t, find(objs, "Ingress", "chatd"))
	})
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "chatd deploy test"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600))
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestNginxTLSBlock uncomments nginx.conf's TLS lines, points them at a
// generated certificate and checks the result with nginx -t.
func TestNginxTLSBlock(t *testing.T) {
	nginx := nginxPath(t)
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "nginx", "tmp"), 0o755))
	certFile, keyFile, _ := selfSigned(t, dir)
	conf := string(renderNginx(t, dir, 18080, []string{"18081", "18082", "18083"}))
	block := regexp.MustCompile(`(?s)# BEGIN TLS\n(.*?)# END TLS`).FindStringSubmatch(conf)
	require.NotNil(t, block, "nginx.conf has a TLS block between BEGIN TLS and END TLS")
	lines := strings.Split(strings.TrimSpace(block[1]), "\n")
	var on []string
	for _, l := range lines {
		l = strings.TrimSpace(l)
		require.True(t, strings.HasPrefix(l, "# "), "every line of the TLS block is commented: %q", l)
		on = append(on, strings.TrimPrefix(l, "# "))
	}
	enabled := strings.Join(on, "\n")
	for _, want := range []string{"listen 8443 ssl;", "ssl_certificate ", "ssl_certificate_key ", "ssl_protocols"} {
		assert.Contains(t, enabled, want)
	}
	enabled = regexp.MustCompile(`ssl_certificate\s+\S+;`).ReplaceAllString(enabled, "ssl_certificate "+certFile+";")
	enabled = regexp.MustCompile(`ssl_certificate_key\s+\S+;`).ReplaceAllString(enabled, "ssl_certificate_key "+keyFile+";")
	enabled = strings.Replace(enabled, "listen 8443 ssl;", "listen 127.0.0.1:18443 ssl;", 1)
	conf = strings.Replace(conf, block[0], enabled, 1)
	path := filepath.Join(dir, "nginx", "nginx.conf")
	require.NoError(t, os.WriteFile(path, []byte(conf), 0o644))
	cmd := exec.Command(nginx, "-t", "-p", filepath.Join(dir, "nginx")+"/", "-e", filepath.Join(dir, "nginx", "error.log"),
		"-c", path, "-g", "pid "+filepath.Join(dir, "nginx", "nginx.pid")+";")
	msg, err := cmd.CombinedOutput()
	assert.NoError(t, err, "nginx -t with TLS on:\n%s", msg)
	assert.Contains(t, string(msg), "test is successful")
}

// dashboardExprs returns every PromQL expression of the Grafana dashboard
// (panel targets, nested rows included) and the metrics its template
// variables read (label_values(metric, label)).
func dashboardExprs(t *testing.T) (exprs []string, varMetrics []string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("grafana", "chatd.json"))
	require.NoError(t, err)
	var d struct {
		UID        string `json:"uid"`
		Title      string `json:"title"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
		Panels []json.RawMessage `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &d), "the dashboard is JSON")
	require.NotEmpty(t, d.UID)
	ids := map[float64]bool{}
	var walk func(ps []json.RawMessage)
	walk = func(ps []json.RawMessage) {
		for _, p := range ps {
			var panel struct {
				ID      float64           `json:"id"`
				Type    string            `json:"type"`
				Title   string            `json:"title"`
				Panels  []json.RawMessage `json:"panels"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			}
			require.NoError(t, json.Unmarshal(p, &panel))
			assert.False(t, ids[panel.ID], "panel id %v is unique", panel.ID)
			ids[panel.ID] = true
			if panel.Type != "row" {
				assert.NotEmpty(t, panel.Targets, "panel %q has queries", panel.Title)
			}
			for _, tg := range panel.Targets {
				exprs = append(exprs, tg.Expr)
			}
			walk(panel.Panels)
		}
	}
	walk(d.Panels)
	lv := regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,`)
	for _, v := range d.Templating.List {
		if m := lv.FindStringSubmatch(v.Definition); m != nil {
			varMetrics = append(varMetrics, m[1])
		}
	}
	return exprs, varMetrics
}

// ruleExprs returns every rule expression of prometheus/alerts.yaml and
// checks each rule's shape.
func ruleExprs(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("prometheus", "alerts.yaml"))
	require.NoError(t, err)
	var f struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&f), "alerts.yaml is a Prometheus rule file")
	var exprs []string
	seen := map[string]bool{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			assert.NotEmpty(t, r.Alert)
			assert.False(t, seen[r.Alert], "%s is defined once", r.Alert)
			seen[r.Alert] = true
			assert.Contains(t, []string{"page", "ticket"}, r.Labels["severity"], "%s has a severity", r.Alert)
			assert.NotEmpty(t, r.Annotations["summary"], "%s has a summary", r.Alert)
			if r.For != "" {
				_, err := time.ParseDuration(r.For)
				assert.NoError(t, err, "%s for", r.Alert)
			}
			exprs = append(exprs, r.Expr)
		}
	}
	for _, want := range []string{"ChatdNodeDown", "ChatdNotReady", "ChatdRedisErrors", "ChatdSayLatencyHigh", "ChatdSlowClientCloses", "ChatdSeatLeaseExpiries"} {
		assert.True(t, seen[want], "alerts.yaml has %s", want)
	}
	return exprs
}

// grafanaVars replaces Grafana's variables with values PromQL parses.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h", "$job", "chatd")

// metricNames parses exprs with Prometheus's PromQL parser (deploycheck
// promql) and returns the metric names they select, each with an
// expression that names it.
func metricNames(t *testing.T, exprs []string) map[string]string {
	t.Helper()
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for _, e := range exprs {
		require.NoError(t, enc.Encode(grafanaVars.Replace(e)))
	}
	var stderr bytes.Buffer
	cmd := exec.Command(deployCheck(t), "promql")
	cmd.Stdin, cmd.Stderr = &in, &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "an expression does not parse: %s", stderr.String())
	names := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	i := 0
	for sc.Scan() {
		var ns []string
		require.NoError(t, json.Unmarshal(sc.Bytes(), &ns))
		require.NotEmpty(t, ns, "%q selects no metric", exprs[i])
		for _, n := range ns {
			require.NotEmpty(t, n, "%q has a selector without a metric name", exprs[i])
			names[n] = exprs[i]
		}
		i++
	}
	require.Equal(t, len(exprs), i)
	return names
}

// TestDashboardAndRulesParse checks the files alone: shapes, and that every
// expression parses as PromQL (TestObservability checks the names against
// a running chatd).
func TestDashboardAndRulesParse(t *testing.T) {
	exprs, _ := dashboardExprs(t)
	assert.NotEmpty(t, metricNames(t, exprs))
	assert.NotEmpty(t, metricNames(t, ruleExprs(t)))
}

var sampleName = regexp.MustCompile(`(?m)^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]`)

// exported scrapes a /metrics page and returns its sample names (with the
// _bucket, _sum and _count of histograms, as PromQL names them).
func exported(t *testing.T, client *http.Client, url string) (map[string]bool, string) {
	t.Helper()
	resp, err := client.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, url)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	names := map[string]bool{}
	for _, m := range sampleName.FindAllStringSubmatch(string(b), -1) {
		names[m[1]] = true
	}
	return names, string(b)
}

// TestObservability runs the loopback cluster (three nodes behind nginx,
// /metrics on their public ports as by default) and a fourth node that ends
// TLS itself and serves its metrics on --metrics-addr, makes traffic, and
// checks: nginx does not pass /metrics through; request ids cross nginx;
// both kinds of /metrics listener answer; and every metric the dashboard
// and the alert rules name is exported.
func TestObservability(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// The fourth node: TLS, metrics listener, same Redis and prefix.
	certFile, keyFile, pool := selfSigned(t, c.dir)
	n4 := &node{id: "n4", port: freePort(t), log: filepath.Join(c.dir, "n4.log")}
	metricsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	n4.p = startProc(t, n4.id, n4.log, nil, c.bin, "--redis", c.redis.URL(), "--prefix", c.redis.Prefix,
		"--secret", testSecret, "--admin-token", adminToken, "--node-id", n4.id, "--addr", n4.addr(),
		"--metrics-addr", metricsAddr, "--tls-cert", certFile, "--tls-key", keyFile, "--log-format", "json",
		// an rpc hook that nothing calls: its metrics (the dashboard's Hooks row) are exported
		"--hook-url", "http://127.0.0.1:1", "--hooks", "rpc", "--hook-secret", "ops-hook-secret-0123456789")
	t.Cleanup(n4.p.kill)
	tlsClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	require.Eventually(t, func() bool {
		resp, err := tlsClient.Get("https://" + n4.addr() + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, 20*time.Second, 50*time.Millisecond, "n4 ready over TLS:\n%s", tail(n4.log, 20))

	// Traffic: WebSocket chat and REST says through nginx, a refused
	// WebSocket, a REST say over TLS to n4, a certificate reload.
	alice, bob := newMember(ctx, c, "ops-alice"), newMember(ctx, c, "ops-bob")
	require.NoError(t, alice.connect(ctx))
	require.NoError(t, bob.connect(ctx))
	room, err := alice.join(ctx, "ops")
	require.NoError(t, err)
	_, err = bob.join(ctx, "ops")
	require.NoError(t, err)
	for i := 0; i < 5; i++ {
		_, err := alice.say(ctx, room.ID, fmt.Sprintf("hello %d", i), fmt.Sprintf("r%d", i))
		require.NoError(t, err)
	}
	_, err = c.do(ctx, c.lb, http.MethodPost, "/api/v1/rooms/"+room.ID+"/messages", bob.token, map[string]string{"text": "over REST"}, nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusForbidden, alice.handshake(ctx, "https://evil.example"))
	req, _ := http.NewRequest(http.MethodPost, "https://"+n4.addr()+"/api/v1/rooms/"+room.ID+"/messages", strings.NewReader(`{"text":"over TLS"}`))
	req.Header.Set("Authorization", "Bearer "+bob.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := tlsClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode, "a say over TLS on n4")
	n4.p.signal(syscall.SIGHUP)

	t.Run("nginx does not pass /metrics through", func(t *testing.T) {
		names, _ := exported(t, c.client, "http://"+c.nodes[0].addr()+"/metrics")
		require.True(t, names["chatd_build_info"], "the node itself serves /metrics on its public port")
		for _, path := range []string{"/metrics", "/METRICS", "/metrics/", "//metrics", "/metrics?x=1", "/Metrics//"} {
			req, _ := http.NewRequest(http.MethodGet, "http://"+c.lb+path, nil)
			resp, err := c.client.Do(req)
			require.NoError(t, err)
			var shape struct {
				Error struct{ Code string } `json:"error"`
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&shape), path)
			resp.Body.Close()
			assert.Equal(t, http.StatusNotFound, resp.StatusCode, path)
			assert.Equal(t, "not_found", shape.Error.Code, path)
			assert.Empty(t, resp.Header.Get("X-Request-ID"), "%s was answered by nginx, not passed to a node", path)
		}
	})
	t.Run("request ids cross nginx", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+c.lb+"/healthz", nil)
		req.Header.Set("X-Request-ID", "ops-rid-1")
		resp, err := c.client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, "ops-rid-1", resp.Header.Get("X-Request-ID"), "the client's id reaches chatd and comes back")
		resp, err = c.client.Get("http://" + c.lb + "/healthz")
		require.NoError(t, err)
		resp.Body.Close()
		id := resp.Header.Get("X-Request-ID")
		require.Regexp(t, `^[0-9a-f]{32}$`, id, "nginx's $request_id")
		require.Eventually(t, func() bool {
			b, _ := os.ReadFile(filepath.Join(c.dir, "nginx", "nginx.log"))
			return bytes.Contains(b, []byte("rid="+id))
		}, 5*time.Second, 50*time.Millisecond, "nginx logged the id chatd answered with")
	})
	t.Run("the metrics listener serves, the public port does not", func(t *testing.T) {
		resp, err := tlsClient.Get("https://" + n4.addr() + "/metrics")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusNotFound, resp.StatusCode)
		_, page := exported(t, c.client, "http://"+metricsAddr+"/metrics")
		assert.Contains(t, page, "chatd_tls_cert_expiry_timestamp_seconds ")
		resp, err = c.client.Get("http://" + metricsAddr + "/debug/pprof/")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
	})
	t.Run("the build is the one --version names", func(t *testing.T) {
		out, err := exec.Command(c.bin, "--version").Output()
		require.NoError(t, err)
		m := regexp.MustCompile(`^chatd (\S+) \(revision (\S+), (go\S+)\)\n$`).FindStringSubmatch(string(out))
		require.NotNil(t, m, "--version: %q", out)
		_, page := exported(t, c.client, "http://"+metricsAddr+"/metrics")
		assert.Contains(t, page, fmt.Sprintf(`chatd_build_info{go_version=%q,revision=%q,version=%q} 1`, m[3], m[2], m[1]))
		if head, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil && m[2] != "unknown" {
			assert.Equal(t, strings.TrimSpace(string(head)), strings.TrimSuffix(m[2], "-modified"), "the revision of this checkout")
		} else {
			t.Logf("build not stamped with a VCS revision here (%s): a git worktree, or no git", m[2])
		}
	})
	t.Run("every metric of the dashboard and the alerts is exported", func(t *testing.T) {
		have := map[string]bool{"up": true} // made by Prometheus for each scrape target
		for _, n := range c.nodes {
			names, _ := exported(t, c.client, "http://"+n.addr()+"/metrics")
			for k := range names {
				have[k] = true
			}
		}
		names, _ := exported(t, c.client, "http://"+metricsAddr+"/metrics")
		for k := range names {
			have[k] = true
		}
		exprs, vars := dashboardExprs(t)
		used := metricNames(t, append(exprs, ruleExprs(t)...))
		for _, v := range vars {
			used[v] = "a template variable"
		}
		var missing []string
		for name, expr := range used {
			if !have[name] {
				missing = append(missing, fmt.Sprintf("%s (in %s)", name, expr))
			}
		}
		sort.Strings(missing)
		if assert.Empty(t, missing, "named by the dashboard or the rules but not exported") {
			t.Logf("%d metric names used, all exported by chatd", len(used))
		}
	})
}
