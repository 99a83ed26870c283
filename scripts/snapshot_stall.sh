#!/bin/bash
# Do background snapshots stall writes? Loads a fresh durable `flint serve` with about 950,000
# keys of 128 bytes, then runs the same redis-benchmark SET command again and again on it, with
# a BGSAVE started a second into every other run, alternating which comes first, and prints
# each run's CSV line (rps, avg, min, p50, p95, p99, max latency in ms) with the snapshot that
# ran during it (INFO persistence), and the medians of p99 and max for each kind of run.
#
# usage: scripts/snapshot_stall.sh PAIRS -- <redis-benchmark args>
#   Example: scripts/snapshot_stall.sh 5 -- -c 1 -t set -r 1000000 -d 128 -n 20000
#   Needs bin/flint (make build), redis-server's tools (redis-benchmark, redis-cli), python3.
set -u
if [ $# -lt 2 ] || [ "$2" != -- ]; then
  echo "usage: $0 PAIRS -- <redis-benchmark args>" >&2; exit 2
fi
PAIRS=$1; shift 2
PORT=7402
dir=$(mktemp -d /tmp/snapshot_stall.XXXX)
bin/flint serve --addr 127.0.0.1:$PORT --dir "$dir" --log-level warn >&2 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 50); do redis-cli -p $PORT ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p $PORT ping >/dev/null || { echo "$0: flint serve did not start" >&2; exit 1; }

redis-benchmark -p $PORT -q -P 64 -c 50 -t set -r 1000000 -d 128 -n 3000000 >/dev/null 2>&1
echo "# loaded: $(redis-cli -p $PORT dbsize) keys"

field() { redis-cli -p $PORT info persistence | tr -d '\r' | grep "^$1:" | cut -d: -f2; }

# run KIND ARGS...: one redis-benchmark run; KIND snap starts a BGSAVE a second in and waits
# for it to end (at most 60 s) before printing.
run() {
  local kind=$1; shift
  local before; before=$(field last_snapshot_index)
  local saver=
  if [ "$kind" = snap ]; then (sleep 1; redis-cli -p $PORT bgsave >/dev/null) & saver=$!; fi
  local out; out=$(redis-benchmark -p $PORT -q --csv "$@" 2>/dev/null | tail -1)
  if [ -n "$saver" ]; then
    wait "$saver"
    for _ in $(seq 600); do [ "$(field last_snapshot_index)" != "$before" ] && break; sleep 0.1; done
  fi
  local idx; idx=$(field last_snapshot_index)
  local snap="none (last at index $idx)"
  [ "$idx" != "$before" ] && snap="index $before to $idx, $(field last_snapshot_bytes) bytes in $(field last_snapshot_duration_ms) ms"
  echo "$kind $out snapshot: $snap"
}

lines=$dir/runs.txt
for i in $(seq "$PAIRS"); do
  if [ $((i % 2)) = 1 ]; then run snap "$@"; run none "$@"; else run none "$@"; run snap "$@"; fi
done > "$lines"
cat "$lines"
python3 - "$lines" <<'PY'
import statistics, sys
rows = {"snap": [], "none": []}
for line in open(sys.argv[1]):
    kind, rest = line.split(" ", 1)
    f = rest.split(" snapshot:")[0].replace('"', "").split(",")
    rows[kind].append((float(f[6]), float(f[7])))
for kind, r in rows.items():
    print(f"{kind}: median p99 {statistics.median(x[0] for x in r):.3f} ms, "
          f"median max {statistics.median(x[1] for x in r):.3f} ms, max {max(x[1] for x in r):.3f} ms")
PY
