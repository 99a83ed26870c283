#!/usr/bin/env bash
# Produces the flint bench tables of docs/BENCHMARKS.md: Flint (spawned from
# bin/flint with --fsync never) against a fresh redis-server with persistence
# off, the driver's null-target ceiling, and worker-count and pipeline sweeps
# of each server. Raw output (result.json, bench.txt, plots) goes to OUTDIR,
# by default results/bench, which git ignores.
# Usage: [DURATION=5s] scripts/bench_report.sh [OUTDIR]
# Needs: make build; apt-get install redis-server.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-results/bench}
dur=${DURATION:-5s}
spawn=(--spawn --spawn-args "--fsync never") # like Redis here: no fsync
mkdir -p "$out"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize no --loglevel warning &
redis_pid=$!
trap 'kill $redis_pid 2>/dev/null || true' EXIT
sleep 0.5

for w in cs6450-b ycsb-a ycsb-b ycsb-c ycsb-f; do
  echo "== $w: flint vs redis, 4 workers, pipeline 64"
  bin/flint bench "${spawn[@]}" --compare "redis://127.0.0.1:$port" --compare-pid "$redis_pid" \
    --workload "$w" --workers 4 --pipeline 64 --duration "$dur" --out "$out/$w" | tail -8
done

echo "== driver ceiling (null target)"
bin/flint bench --target null --workers 2 --pipeline 64 --duration "$dur" --out "$out/null" | grep -E "resources|all"

echo "== worker sweep, cs6450-b, pipeline 1"
bin/flint bench "${spawn[@]}" --workload cs6450-b --sweep workers=1,2,4,8,16,32,64 --duration "$dur" \
  --out "$out/sweep-flint" | grep -E "^ *(workers|[0-9])" || true
bin/flint bench --target "redis://127.0.0.1:$port" --server-pid "$redis_pid" --workload cs6450-b \
  --sweep workers=1,2,4,8,16,32,64 --duration "$dur" --out "$out/sweep-redis" | grep -E "^ *(workers|[0-9])" || true

echo "== pipeline sweep, cs6450-b, 4 workers"
bin/flint bench "${spawn[@]}" --workload cs6450-b --workers 4 --sweep pipeline=8,32,64,128,256 --duration "$dur" \
  --out "$out/pipeline-sweep-flint" | grep -E "^pipeline=" || true
bin/flint bench --target "redis://127.0.0.1:$port" --server-pid "$redis_pid" --workload cs6450-b --workers 4 \
  --sweep pipeline=8,32,64,128,256 --duration "$dur" --out "$out/pipeline-sweep-redis" | grep -E "^pipeline=" || true
