package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// buildInfo is what the binary knows of its own build, from
// runtime/debug.ReadBuildInfo: the version (the stamped release version,
// else the module version: "(devel)" for a build
// from a checkout without a version tag, or a pseudo-version), the VCS
// revision and whether the work tree had uncommitted changes (go build
// stamps both when it runs in a git checkout; -buildvcs=false or a build
// outside one leaves them unknown).
type buildInfo struct {
	Version   string
	Revision  string // "unknown" when not stamped
	Modified  bool
	GoVersion string
}

// version is the release version that scripts/release.sh and
// deploy/Dockerfile stamp with -ldflags "-X main.version=vX.Y.Z". Empty in
// any other build, which reports the module version of its build info.
var version string

func readBuildInfo() buildInfo {
	b := buildInfo{Version: "unknown", Revision: "unknown", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if ok && bi.Main.Version != "" {
		b.Version = bi.Main.Version
	}
	if version != "" {
		b.Version = version
	}
	if !ok {
		return b
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// revision is the revision with "-modified" when the tree was dirty.
func (b buildInfo) revision() string {
	if b.Modified {
		return b.Revision + "-modified"
	}
	return b.Revision
}

// String is the --version line: chatd VERSION (revision REV, GOVERSION).
func (b buildInfo) String() string {
	return fmt.Sprintf("chatd %s (revision %s, %s)", b.Version, b.revision(), b.GoVersion)
}

// collector is the chatd_build_info gauge: always 1, its labels say the
// build, so that a dashboard can count nodes per version and see a rolling
// upgrade progress.
func (b buildInfo) collector() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "chatd_build_info",
		Help: "Always 1; the labels say the build of this node (module version, VCS revision with -modified for a dirty tree, Go version).",
		ConstLabels: prometheus.Labels{
			"version": b.Version, "revision": b.revision(), "go_version": b.GoVersion,
		},
	})
	g.Set(1)
	return g
}
