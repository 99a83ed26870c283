#!/usr/bin/env bash
# Cold start of flint serve: time from process start to serving, recovering
# from the log alone and from a snapshot alone, next to the time `cat` takes
# to read the same files. Usage:
#
#   scripts/cold_start.sh [keys] [value-bytes]     # default 1000000 4096 (about 4 GiB)
#
# RUNS (default 2) sets how many starts of each kind are timed. BASELINE, a
# path to another flint binary, times a start of it after each start of
# bin/flint, on the same files and as cold: an A/B comparison that the
# disk's drift affects less than two separate runs of this script.
#
# Needs a built bin/flint and about 3x the data size in free memory and disk.
# Dropping the page cache needs root; without it the runs are warm-cache.
set -euo pipefail
keys=${1:-1000000}
size=${2:-4096}
flint=$(pwd)/bin/flint
runs=${RUNS:-2}
baseline=${BASELINE:-}
dir=$(mktemp -d /var/tmp/flint-cold.XXXXXX)
pid=
trap '[ -z "$pid" ] || kill "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
addr=127.0.0.1:$port
never=(--snapshot-entries 1000000000000 --snapshot-bytes 1000000000000000)

now() { date +%s.%N; }
# drop_caches empties the page cache, then waits $SETTLE seconds (default
# 10): in a guest with free page reporting, as on the project's machine, the
# kernel hands freed memory back to the host about 2 s after it is freed,
# and a run that starts sooner reuses pages the host still backs. Such runs
# are warmer than a real cold start, by a varying amount (`cat` of 4 GiB:
# 5.0 to 13.5 s right after the drop, 9.3 to 10.9 s after 5 s).
drop_caches() {
  sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || echo "(could not drop the page cache: warm runs)"
  sleep "${SETTLE:-10}"
}

# start launches flint serve (or the binary $1) and sets took to the
# seconds until it accepts a connection.
start() {
  local t0; t0=$(now)
  "${1:-$flint}" serve --addr "$addr" --dir "$dir" --log-level info "${never[@]}" >/dev/null 2>>"$dir/serve.log" &
  pid=$!
  until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do sleep 0.01; done
  took=$(echo "$(now) - $t0" | bc)
}

stop() { kill -TERM "$pid"; wait "$pid" || true; }

catTime() { local t0; t0=$(now); cat "$@" > /dev/null; echo "$(now) - $t0" | bc; }

# timeStarts times $runs cold starts, labelled $1, each between two cold
# `cat`s, labelled $2, of the files after them (this disk's speed drifts by
# 2x within minutes), and a cold start of $baseline after each, if set.
timeStarts() {
  local what=$1 files=$2; shift 2
  for _ in $(seq "$runs"); do
    drop_caches; echo "  cat of the $files $(catTime "$@") s"
    drop_caches; start; echo "$what serving after $took s"; stop
    [ -z "$baseline" ] || { drop_caches; start "$baseline"; echo "  baseline, $what serving after $took s"; stop; }
  done
  drop_caches; echo "  cat of the $files $(catTime "$@") s"
}

echo "loading $keys keys of $size bytes into $dir"
start
"$flint" bench --target "flint://$addr" --workload ycsb-c --records "$keys" --value-size "$size" \
  --workers 8 --pipeline 16 --duration 1s > /dev/null
stop
du -sh "$dir/wal" "$dir/snap"

timeStarts "log alone:     " "log:       " "$dir"/wal/*.wal

start
"$flint" cli -port "$port" SAVE > /dev/null
"$flint" cli -port "$port" SET cold-start-marker 1 > /dev/null
"$flint" cli -port "$port" SAVE > /dev/null
stop
du -sh "$dir/wal" "$dir/snap"
drop_caches # the 8 GB of page cache that SAVE filled takes longer to hand back
newest=$(ls "$dir"/snap/*.snap | tail -1)
timeStarts "snapshot alone:" "snapshot:  " "$newest"
grep -E "replica ready|snapshot written" "$dir/serve.log" | sed 's/^/  log: /'
