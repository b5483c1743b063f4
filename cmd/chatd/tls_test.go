package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/wsclient"
	"github.com/chatd/chatd/protocol"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "chatd test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue writes a server certificate for 127.0.0.1 (serial, common name cn)
// and its key to certFile and keyFile.
func (ca *testCA) issue(t *testing.T, serial int64, cn, certFile, keyFile string) {
	t.Helper()
	ca.issueFor(t, serial, cn, certFile, keyFile, time.Now().Add(-time.Hour), time.Now().Add(12*time.Hour))
}

// issueFor is issue with a validity window of its own.
func (ca *testCA) issueFor(t *testing.T, serial int64, cn, certFile, keyFile string, notBefore, notAfter time.Time) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: cn},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	// written next to the files and renamed over them, as a certificate
	// manager does, so that chatd never reads half a file
	write := func(path string, block *pem.Block) {
		tmp := path + ".tmp"
		require.NoError(t, os.WriteFile(tmp, pem.EncodeToMemory(block), 0o600))
		require.NoError(t, os.Rename(tmp, path))
	}
	write(certFile, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	write(keyFile, &pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// servedSerial makes a new TLS handshake and returns the serial of the
// certificate the server presents (verified against the CA).
func servedSerial(t *testing.T, addr string, ca *testCA) int64 {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.pool, ServerName: "127.0.0.1"})
	require.NoError(t, err)
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// startTLSChatd runs chatd serving TLS from certFile and keyFile until the
// test ends, and returns its base URL as it logged it, the process, its
// log, and the channel its exit arrives on (put it back for the cleanup
// after reading it).
func startTLSChatd(t *testing.T, certFile, keyFile string) (string, *exec.Cmd, *logBuffer, chan error) {
	t.Helper()
	logs := &logBuffer{}
	cmd := chatdCommand(nil, "--addr", "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", keyFile, "--secret", secret)
	cmd.Stderr = logs
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	var base string
	require.Eventually(t, func() bool {
		if m := listening.FindStringSubmatch(logs.String()); m != nil {
			base = m[1] + "://" + m[2]
			return true
		}
		return false
	}, 20*time.Second, 10*time.Millisecond, "chatd did not log its address:\n%s", logs)
	return base, cmd, logs, exited
}

func TestTLSWebSocketAndReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca := newCA(t)
	ca.issue(t, 100, "first", certFile, keyFile)

	base, cmd, logs, exited := startTLSChatd(t, certFile, keyFile)
	require.True(t, strings.HasPrefix(base, "https://"), "the log says https: %s", base)
	addr := strings.TrimPrefix(base, "https://")
	assert.Contains(t, logs.String(), "TLS certificate loaded")

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool}}}
	resp, err := client.Post(base+"/api/v1/session", "application/json", strings.NewReader(`{"user":"tls-alice"}`))
	require.NoError(t, err)
	var sess struct{ Token string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&sess))
	resp.Body.Close()
	require.NotEmpty(t, sess.Token)

	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, TLSClientConfig: &tls.Config{RootCAs: ca.pool}}
	u := url.URL{Scheme: "wss", Host: addr, Path: "/ws", RawQuery: "token=" + url.QueryEscape(sess.Token)}
	ws, _, err := wsclient.Dial(context.Background(), u.String(), &wsclient.Options{Dialer: &d})
	require.NoError(t, err, "wss:// handshake verified against the test CA")
	defer ws.Close()
	next := func(types ...string) protocol.ServerEvent {
		t.Helper()
		ev, err := ws.Next(10*time.Second, types...)
		require.NoError(t, err, "waiting for %v", types)
		return ev.ServerEvent
	}
	next(protocol.TypeHello)
	require.NoError(t, ws.Send(protocol.Join{Lobby: "tls"}))
	room := next(protocol.TypeJoined).(protocol.Joined).Room.ID
	require.NoError(t, ws.Send(protocol.Say{Room: room, Text: "over TLS", Ref: "r1"}))
	var acked, delivered bool
	for !acked || !delivered { // the ack and the message, in either order
		switch ev := next(protocol.TypeAck, protocol.TypeMessage).(type) {
		case protocol.Ack:
			acked = acked || ev.Ref == "r1"
		case protocol.MessageEvent:
			delivered = delivered || ev.Message.Text == "over TLS"
		}
	}
	assert.Empty(t, ws.Bad())

	require.Equal(t, int64(100), servedSerial(t, addr, ca))

	t.Run("SIGHUP serves a new certificate from the next handshake", func(t *testing.T) {
		ca.issue(t, 200, "second", certFile, keyFile)
		require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))
		require.Eventually(t, func() bool { return strings.Contains(logs.String(), "TLS certificate reloaded") }, 10*time.Second, 10*time.Millisecond)
		assert.Equal(t, int64(200), servedSerial(t, addr, ca))
		assert.Contains(t, logs.String(), "CN=second")
		// the WebSocket opened before the reload goes on
		require.NoError(t, ws.Send(protocol.Ping{Ref: "p1"}))
		next(protocol.TypePong)
	})
	t.Run("a bad reload is logged and the certificate in use stays", func(t *testing.T) {
		require.NoError(t, os.WriteFile(certFile, []byte("-----BEGIN CERTIFICATE-----\nnot a certificate\n"), 0o600))
		require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))
		require.Eventually(t, func() bool { return strings.Contains(logs.String(), "TLS certificate reload failed") }, 10*time.Second, 10*time.Millisecond)
		assert.Equal(t, int64(200), servedSerial(t, addr, ca))
	})
	t.Run("SIGTERM still drains and exits 0", func(t *testing.T) {
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			require.NoError(t, err, "exit 0:\n%s", logs)
		case <-time.After(30 * time.Second):
			t.Fatal("chatd did not exit within 30 s of SIGTERM")
		}
	})
}

func TestTLSBadCertificateExits2(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	other := filepath.Join(dir, "other.key")
	ca := newCA(t)
	ca.issue(t, 1, "one", certFile, keyFile)
	ca.issue(t, 2, "two", filepath.Join(dir, "two.crt"), other)
	for name, args := range map[string][]string{
		"a missing file":     {"--tls-cert", filepath.Join(dir, "none.crt"), "--tls-key", keyFile},
		"a key of another":   {"--tls-cert", certFile, "--tls-key", other},
		"not a certificate":  {"--tls-cert", keyFile, "--tls-key", keyFile},
		"a key without cert": {"--tls-key", keyFile},
	} {
		t.Run(name, func(t *testing.T) {
			_, errOut, code := execChatd(t, nil, append([]string{"--addr", "127.0.0.1:0"}, args...)...)
			assert.Equal(t, 2, code, errOut)
			assert.Contains(t, errOut, "--tls-")
			assert.NotContains(t, errOut, "chatd listening")
		})
	}
}

// TestTLSReloadRefusesAPairOutOfItsValidity: a SIGHUP with a certificate
// that expired (notAfter 2020) or is not valid yet is refused — logged at
// WARN, counted in chatd_tls_cert_reloads_total{result="error"} — and the
// old certificate is still served (the expired one was swapped in, "INFO
// reloaded", before).
func TestTLSReloadRefusesAPairOutOfItsValidity(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca := newCA(t)
	ca.issue(t, 100, "good", certFile, keyFile)

	base, cmd, logs, _ := startTLSChatd(t, certFile, keyFile)
	addr := strings.TrimPrefix(base, "https://")
	require.Equal(t, int64(100), servedSerial(t, addr, ca))
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool}}}
	refusals := func() string {
		resp, err := client.Get(base + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		p, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		m := regexp.MustCompile(`(?m)^chatd_tls_cert_reloads_total\{result="error"\} (\d+)$`).FindSubmatch(p)
		if m == nil {
			return "0"
		}
		return string(m[1])
	}

	for i, tc := range []struct {
		name                string
		notBefore, notAfter time.Time
		says                string
	}{
		{"expired", time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), "expired"},
		{"not yet valid", time.Now().Add(24 * time.Hour), time.Now().Add(48 * time.Hour), "not valid before"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ca.issueFor(t, int64(200+i), tc.name, certFile, keyFile, tc.notBefore, tc.notAfter)
			before := strings.Count(logs.String(), "TLS certificate reload failed")
			require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))
			require.Eventually(t, func() bool { return strings.Count(logs.String(), "TLS certificate reload failed") > before },
				10*time.Second, 10*time.Millisecond, "no refusal logged:\n%s", logs)
			assert.Regexp(t, `level=WARN msg="TLS certificate reload failed on SIGHUP: refused[^\n]*`+tc.says, logs.String())
			assert.NotContains(t, logs.String(), "TLS certificate reloaded")
			assert.Equal(t, int64(100), servedSerial(t, addr, ca), "the old certificate is still served")
			assert.Equal(t, strconv.Itoa(i+1), refusals())
		})
	}
}
