#!/usr/bin/env bash
# Runs every `go test -bench` benchmark of the module's packages, with
# -benchmem, and writes the output to a file (and the terminal).
#
#   scripts/bench.sh                     # all packages with benchmarks, -benchtime 1s
#   BENCHTIME=200ms scripts/bench.sh     # shorter
#   scripts/bench.sh ./rooms ./ranking   # only these packages
#   OUT=bench.txt scripts/bench.sh
#
# Strict: benchmarks run with CHATD_TEST_STRICT=1, so one that needs a real
# redis-server (or a cluster, which needs redis-cli too) fails instead of
# skipping or falling back to miniredis; the script refuses to start without
# redis-server. The load generator against running nodes is
# `go run ./cmd/chatbench` (see cmd/chatbench/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
export CHATD_TEST_STRICT=1
command -v redis-server >/dev/null || { echo "bench.sh: redis-server is not on PATH (apt-get install redis-server)" >&2; exit 1; }
benchtime=${BENCHTIME:-1s}
out=${OUT:-tmp/bench-$(date -u +%Y%m%dT%H%M%SZ).txt}
mkdir -p "$(dirname "$out")"
if [ $# -gt 0 ]; then
	pkgs=("$@")
else
	mapfile -t pkgs < <(grep -rl --include='*_test.go' '^func Benchmark' . | xargs -n1 dirname | sort -u)
fi
if [ ${#pkgs[@]} -eq 0 ]; then
	echo "no benchmarks found" >&2
	exit 1
fi
{
	echo "# go test -bench . -benchmem -benchtime $benchtime  ($(date -u +%FT%TZ))"
	echo "# $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(go version | cut -d' ' -f3), $(redis-server --version | cut -d' ' -f3)"
	go test -run '^$' -bench . -benchmem -benchtime "$benchtime" -count 1 "${pkgs[@]}"
} 2>&1 | tee "$out"
echo "written to $out" >&2
