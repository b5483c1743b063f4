#!/usr/bin/env bash
# Builds a release of chatd into dist/ (or $DIST):
#
#	scripts/release.sh v0.1.0
#
#   chatd-<version>-<os>-<arch>[.exe]  chatd for linux, darwin and windows on
#                                      amd64 and arm64: static (CGO_ENABLED=0),
#                                      -trimpath, the version stamped into
#                                      main.version (chatd --version says it)
#   chatd-client-<npm version>.tgz     the JavaScript SDK (npm pack of sdk/js)
#   SHA256SUMS                         of all of the above (sha256sum -c SHA256SUMS)
#   chatd-<version>-image.tar          the OCI image of deploy/Dockerfile
#                                      (docker save), only where a Docker
#                                      daemon answers; otherwise the script
#                                      says "SKIPPED image" and the rest is built
#
# The version defaults to `git describe --tags --always --dirty`. Builds are
# reproducible: the same commit and Go version give the same bytes (no
# paths, no build ids, no timestamps; the VCS revision Go stamps is the
# commit's). Cross-builds share the Go build cache; two run at a time
# (RELEASE_JOBS).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin

version=${1:-$(git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)}
case $version in
  v[0-9]*) ;;
  *) version=v0.0.0-$version ;;
esac
dist=${DIST:-dist}
jobs=${RELEASE_JOBS:-2}
rm -rf "$dist"
mkdir -p "$dist"
dist=$(cd "$dist" && pwd)

echo "release: chatd $version into $dist"
targets="linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64"
build() {
  local os=${1%/*} arch=${1#*/} ext=
  [ "$os" = windows ] && ext=.exe
  local out="$dist/chatd-$version-$os-$arch$ext"
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath \
    -ldflags="-s -w -buildid= -X main.version=$version" -o "$out" ./cmd/chatd
  echo "release: built $(basename "$out")"
}
export -f build
export version dist
# shellcheck disable=SC2086
printf '%s\n' $targets | xargs -P "$jobs" -I{} bash -c 'build {}'
n=$(find "$dist" -name 'chatd-*' -type f | wc -l)
[ "$n" -eq 6 ] || { echo "release: $n binaries built, want 6" >&2; exit 1; }

echo "release: npm pack sdk/js"
command -v npm >/dev/null || { echo "release: npm is missing (Node 20+ packs sdk/js)" >&2; exit 1; }
# npm pack runs prepack (tsc writes the type declarations): it needs the
# dev dependencies of package-lock.json.
[ -d sdk/js/node_modules ] || (cd sdk/js && npm ci --no-audit --no-fund >/dev/null)
(cd sdk/js && npm pack --silent --pack-destination "$dist" >/dev/null)
ls "$dist"/chatd-client-*.tgz >/dev/null

(cd "$dist" && sha256sum -- * > SHA256SUMS)

if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  echo "release: OCI image chatd:$version from deploy/Dockerfile"
  docker build -q -f deploy/Dockerfile --build-arg CHATD_VERSION="$version" -t "chatd:$version" . >/dev/null
  docker save -o "$dist/chatd-$version-image.tar" "chatd:$version"
  (cd "$dist" && sha256sum -- "chatd-$version-image.tar" >> SHA256SUMS)
else
  echo "release: SKIPPED image: no Docker daemon answers (docker info failed); the binaries, the SDK tarball and SHA256SUMS are built"
fi
echo "release: done"
(cd "$dist" && ls -l)
