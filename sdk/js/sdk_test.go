package jssdk_test

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jssdk "github.com/chatd/chatd/sdk/js"
)

// TestNPM runs the SDK's own tests (npm test: the typecheck, then node's
// test runner against chatd nodes it builds from this repository and
// starts on a private redis-server, and headless Chromium). Without node,
// npm or node_modules (npm ci here) it skips, and fails under
// CHATD_TEST_STRICT=1.
func TestNPM(t *testing.T) {
	missing := func(why string) {
		if os.Getenv("CHATD_TEST_STRICT") == "1" {
			t.Fatalf("%s (CHATD_TEST_STRICT=1)", why)
		}
		t.Skip(why)
	}
	for _, tool := range []string{"node", "npm", "redis-server", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing(tool + " is not installed")
		}
	}
	if _, err := os.Stat(filepath.Join("node_modules", "typescript")); err != nil {
		missing("sdk/js/node_modules is missing: run `npm ci` in sdk/js")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "test")
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("npm test: %v after %v\n%s", err, time.Since(start).Round(time.Millisecond), out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	t.Logf("npm test passed in %v: %s", time.Since(start).Round(time.Millisecond), strings.Join(tail(lines, 8), " | "))
}

func tail(s []string, n int) []string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestSourceEmbedded checks that the embedded files are the SDK's source:
// every src/*.js, byte for byte, and index.js at the root of FS.
func TestSourceEmbedded(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("src", "*.js"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no src/*.js: %v", err)
	}
	for _, f := range files {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := fs.ReadFile(jssdk.FS(), filepath.Base(f))
		if err != nil {
			t.Fatalf("%s is not embedded: %v", f, err)
		}
		if string(got) != string(want) {
			t.Fatalf("%s: the embedded copy differs", f)
		}
	}
	entries, err := fs.ReadDir(jssdk.FS(), ".")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(files) {
		t.Fatalf("FS holds %d files, src has %d", len(entries), len(files))
	}
}
