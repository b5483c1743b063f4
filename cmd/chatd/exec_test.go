package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain runs main instead of the tests when CHATD_TEST_MAIN=1: the test
// binary re-executed as chatd, to see its exit status, its stdout and how
// it takes signals, without building another binary.
func TestMain(m *testing.M) {
	if os.Getenv("CHATD_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// chatdCommand is the test binary as chatd with args and the environment
// (only CHATD_TEST_MAIN and PATH from the test's: no CHATD_* leaks in).
func chatdCommand(environ []string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append([]string{"CHATD_TEST_MAIN=1", "PATH=" + os.Getenv("PATH")}, environ...)
	return cmd
}

// execChatd runs chatd to its end: stdout, stderr and the exit status.
func execChatd(t *testing.T, environ []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := chatdCommand(environ, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return stdout.String(), stderr.String(), ee.ExitCode()
	}
	require.NoError(t, err)
	return stdout.String(), stderr.String(), 0
}

func TestExitStatus(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("addr: \":8080\"\nlog-levl: debug\n"), 0o600))
	good := filepath.Join(dir, "good.yaml")
	require.NoError(t, os.WriteFile(good, []byte("addr: \"127.0.0.1:0\"\n"), 0o600))

	t.Run("--version prints and exits 0", func(t *testing.T) {
		out, errOut, code := execChatd(t, nil, "--version")
		assert.Equal(t, 0, code)
		assert.Regexp(t, `^chatd \S+ \(revision \S+, go1\.\d+[^)]*\)\n$`, out)
		assert.Empty(t, errOut)
	})
	t.Run("--version exits 0 whatever else is wrong", func(t *testing.T) {
		_, _, code := execChatd(t, []string{"CHATD_ADDR=nowhere"}, "--version")
		assert.Equal(t, 0, code)
	})
	t.Run("--print-config exits 0", func(t *testing.T) {
		out, _, code := execChatd(t, []string{"CHATD_CONFIG=" + good}, "--print-config")
		assert.Equal(t, 0, code)
		assert.Contains(t, out, `addr: "127.0.0.1:0" # `+good+":1")
	})
	t.Run("an unknown key exits 2 naming the file and line", func(t *testing.T) {
		out, errOut, code := execChatd(t, nil, "--config", bad)
		assert.Equal(t, 2, code)
		assert.Empty(t, out)
		assert.Equal(t, "chatd: "+bad+`:2: unknown key "log-levl"`, strings.SplitN(errOut, " (", 2)[0])
	})
	t.Run("a bad file from CHATD_CONFIG exits 2", func(t *testing.T) {
		_, errOut, code := execChatd(t, []string{"CHATD_CONFIG=" + bad}, "--print-config")
		assert.Equal(t, 2, code)
		assert.Contains(t, errOut, bad+":2:")
	})
	t.Run("a bad flag exits 2 in one line", func(t *testing.T) {
		_, errOut, code := execChatd(t, nil, "--log-format", "xml")
		assert.Equal(t, 2, code)
		assert.Equal(t, "chatd: --log-format \"xml\": expected text or json\n", errOut)
	})
	t.Run("-h exits 0 and lists --config", func(t *testing.T) {
		_, errOut, code := execChatd(t, nil, "-h")
		assert.Equal(t, 0, code)
		for _, f := range []string{"-config", "CHATD_CONFIG", "-print-config", "-version", "-metrics-addr", "-log-format", "-tls-cert"} {
			assert.Contains(t, errOut, f)
		}
	})
}
