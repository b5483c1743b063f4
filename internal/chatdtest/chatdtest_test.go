package chatdtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}

// healthNode returns the node id /healthz names, or "" if it does not
// answer within d.
func healthNode(url string, d time.Duration) string {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/healthz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var out struct {
		Node string `json:"node"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return out.Node
}

// Nodes start ready on their ports, share the admin token, and obey each
// process control: SIGTERM exits cleanly, a restart comes back on the same
// port, a paused node answers nothing until resumed, a killed one is gone.
func TestNodesAndProcessControl(t *testing.T) {
	if testing.Short() {
		t.Skip("starts chatd processes")
	}
	c := Start(t, Options{Nodes: 2})
	require.Len(t, c.Nodes, 2)
	n1, n2 := c.Nodes[0], c.Nodes[1]
	assert.Equal(t, []string{n1.URL, n2.URL}, c.URLs())
	assert.Equal(t, "n1", healthNode(n1.URL, 5*time.Second))
	assert.Equal(t, "n2", healthNode(n2.URL, 5*time.Second))

	// the admin token is the nodes' (and a user token is not needed for /nodes)
	req, _ := http.NewRequest(http.MethodGet, n1.URL+"/api/v1/nodes", nil)
	req.Header.Set("Authorization", "Bearer "+c.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	n1.Stop()
	assert.False(t, n1.Running())
	assert.Equal(t, "", healthNode(n1.URL, time.Second), "stopped")
	n1.Start()
	assert.Equal(t, "n1", healthNode(n1.URL, 5*time.Second), "back on the same port")

	n2.Pause()
	assert.Equal(t, "", healthNode(n2.URL, 500*time.Millisecond), "a paused node answers nothing")
	n2.Resume()
	assert.Equal(t, "n2", healthNode(n2.URL, 5*time.Second))
	assert.True(t, n2.Healthy(context.Background()))

	n2.Kill()
	assert.False(t, n2.Running())
	assert.Error(t, n2.Signal(syscall.SIGTERM), "no process to signal")
	n2.Args = []string{"--log-level", "debug"}
	n2.Restart()
	assert.Equal(t, "n2", healthNode(n2.URL, 5*time.Second))

	n3 := c.AddNode()
	assert.Equal(t, "n3", n3.ID)
	assert.Equal(t, "n3", healthNode(n3.URL, 5*time.Second))
	assert.FileExists(t, n3.Log)
}

// A node that cannot start fails the test with its log, before the
// timeout.
func TestBadFlagsFailWithTheLog(t *testing.T) {
	if testing.Short() {
		t.Skip("starts chatd processes")
	}
	ft := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { _ = recover() }()
		Start(ft, Options{Args: []string{"--auth", "nonsense"}, ReadyTimeout: 20 * time.Second})
	}()
	<-done
	require.NotEmpty(t, ft.fatal)
	assert.Contains(t, ft.fatal, "exited")
	assert.Contains(t, ft.fatal, "--auth")
}

// fakeTB records Fatalf and stops the goroutine with a panic (as
// runtime.Goexit would in a real test).
type fakeTB struct {
	testing.TB
	fatal string
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	panic("fatal")
}

func (f *fakeTB) Helper() {}
