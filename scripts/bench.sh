#!/usr/bin/env bash
# Runs every `go test -bench` benchmark of the module's packages, with
# -benchmem, and writes the output to a file (and the terminal).
#
#   scripts/bench.sh                     # all packages with benchmarks, -benchtime 1s
#   BENCHTIME=200ms scripts/bench.sh     # shorter
#   scripts/bench.sh ./rooms ./ranking   # only these packages
#   OUT=bench.txt scripts/bench.sh
#
# Benchmarks that need Redis use a real redis-server when it is on PATH
# (internal/redistest), else miniredis: install redis-server for figures
# worth comparing. The load generator against running nodes is
# `go run ./cmd/chatbench` (see cmd/chatbench/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
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
	echo "# $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(go version | cut -d' ' -f3), $(redis-server --version 2>/dev/null | cut -d' ' -f3 || echo 'no redis-server')"
	go test -run '^$' -bench . -benchmem -benchtime "$benchtime" -count 1 "${pkgs[@]}"
} 2>&1 | tee "$out"
echo "written to $out" >&2
