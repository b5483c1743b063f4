package main

import (
	"debug/elf"
	"debug/macho"
	"debug/pe"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRelease runs scripts/release.sh into a temporary directory: six
// binaries of the right format and architecture, a SHA256SUMS that
// sha256sum -c verifies, the JavaScript SDK's tarball, and a chatd that
// says the version it was stamped with. The image is built only where a
// Docker daemon answers; otherwise the script must say it skipped it.
func TestRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-builds chatd six times")
	}
	for _, tool := range []string{"bash", "git", "npm", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CHATD_TEST_STRICT") == "1" {
				t.Fatalf("%s is not installed (CHATD_TEST_STRICT=1)", tool)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
	const version = "v0.0.0-releasetest"
	dist := t.TempDir()
	cmd := exec.Command("bash", filepath.Join("..", "..", "scripts", "release.sh"), version)
	cmd.Env = append(os.Environ(), "DIST="+dist)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "release.sh:\n%s", out)

	t.Run("six binaries of the right format and architecture", func(t *testing.T) {
		for _, c := range []struct{ os, arch string }{
			{"linux", "amd64"}, {"linux", "arm64"},
			{"darwin", "amd64"}, {"darwin", "arm64"},
			{"windows", "amd64"}, {"windows", "arm64"},
		} {
			name := "chatd-" + version + "-" + c.os + "-" + c.arch
			if c.os == "windows" {
				name += ".exe"
			}
			p := filepath.Join(dist, name)
			if !assert.FileExists(t, p) {
				continue
			}
			assert.Equal(t, c.arch, binaryArch(t, c.os, p), name)
		}
	})

	t.Run("SHA256SUMS verifies every file", func(t *testing.T) {
		sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
		require.NoError(t, err)
		assert.Len(t, strings.Split(strings.TrimSpace(string(sums)), "\n"), 7+strings.Count(string(out), "OCI image"), "six binaries, the SDK tarball (and the image)")
		check := exec.Command("sha256sum", "-c", "SHA256SUMS")
		check.Dir = dist
		res, err := check.CombinedOutput()
		assert.NoError(t, err, "%s", res)
	})

	t.Run("the SDK tarball is there", func(t *testing.T) {
		tgz, err := filepath.Glob(filepath.Join(dist, "chatd-client-*.tgz"))
		require.NoError(t, err)
		assert.Len(t, tgz, 1)
	})

	t.Run("chatd --version names the version", func(t *testing.T) {
		bin := filepath.Join(dist, "chatd-"+version+"-linux-amd64")
		if !hostRuns("linux", "amd64") {
			t.Skip("this machine does not run linux/amd64 binaries")
		}
		v, err := exec.Command(bin, "--version").Output()
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(string(v), "chatd "+version+" (revision "), "%s", v)
	})

	t.Run("the image is built or its skip declared", func(t *testing.T) {
		if strings.Contains(string(out), "SKIPPED image") {
			return
		}
		assert.FileExists(t, filepath.Join(dist, "chatd-"+version+"-image.tar"))
	})
}

// binaryArch reads the architecture of an executable of goos.
func binaryArch(t *testing.T, goos, path string) string {
	t.Helper()
	switch goos {
	case "linux":
		f, err := elf.Open(path)
		require.NoError(t, err)
		defer f.Close()
		return map[elf.Machine]string{elf.EM_X86_64: "amd64", elf.EM_AARCH64: "arm64"}[f.Machine]
	case "darwin":
		f, err := macho.Open(path)
		require.NoError(t, err)
		defer f.Close()
		return map[macho.Cpu]string{macho.CpuAmd64: "amd64", macho.CpuArm64: "arm64"}[f.Cpu]
	case "windows":
		f, err := pe.Open(path)
		require.NoError(t, err)
		defer f.Close()
		return map[uint16]string{pe.IMAGE_FILE_MACHINE_AMD64: "amd64", pe.IMAGE_FILE_MACHINE_ARM64: "arm64"}[f.Machine]
	}
	return ""
}

// hostRuns reports whether this machine runs goos/goarch binaries.
func hostRuns(goos, goarch string) bool {
	return runtime.GOOS == goos && runtime.GOARCH == goarch
}
