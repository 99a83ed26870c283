#!/bin/bash
# Runs redis-benchmark against two server command lines, fresh servers alternated, and prints
# each run's CSV line with the server's CPU ticks (utime+stime, in 1/`getconf CLK_TCK` s) and each
# pair's ratio.
# Odd pairs run A first and even pairs B first, so that a drift over the run favours neither.
#
# usage: scripts/ab_servers.sh PAIRS "cmdA" "cmdB" -- <redis-benchmark args>
#   cmdA, cmdB: flint serve command lines (the script appends --log-level error); ADDR and DIR
#   are replaced by 127.0.0.1:7401 and a fresh temporary directory, removed after the run.
#   Example:
#   scripts/ab_servers.sh 8 "bin/flint serve --addr ADDR --dir DIR" \
#     "/tmp/flint-old serve --addr ADDR --dir DIR" -- -P 64 -c 50 -t set -r 1000000 -n 3000000
set -u
if [ $# -lt 4 ] || [ "$4" != -- ]; then
  echo "usage: $0 PAIRS \"cmdA\" \"cmdB\" -- <redis-benchmark args>" >&2; exit 2
fi
PAIRS=$1; A=$2; B=$3; shift 4

die() { echo "$0: $*" >&2; exit 1; }

# run starts the server command $1 on a fresh directory, runs redis-benchmark with the other
# arguments against it, stops it and prints the CSV line. It runs in a command substitution,
# whose EXIT trap stops the server and removes the directory however the run ends: so dir and
# pid are the subshell's globals, which the trap still sees after run returns. The server's
# output goes to stderr, not into the substitution.
run() {
  local cmd=$1; shift
  dir=$(mktemp -d /tmp/ab_servers.XXXX)
  local c=${cmd//DIR/$dir}; c=${c//ADDR/127.0.0.1:7401}
  eval "$c --log-level error >&2 &"
  pid=$!
  trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
  for _ in $(seq 50); do redis-cli -p 7401 ping >/dev/null 2>&1 && break; sleep 0.1; done
  if ! kill -0 "$pid" 2>/dev/null || ! redis-cli -p 7401 ping >/dev/null 2>&1; then die "server did not start: $c"; fi
  local t0; t0=$(awk '{print $14+$15}' "/proc/$pid/stat")
  local out; out=$(redis-benchmark -p 7401 -q --csv "$@" 2>/dev/null | tail -1)
  local t1; t1=$(awk '{print $14+$15}' "/proc/$pid/stat") || die "server exited during the run: $c"
  [ -n "$out" ] || die "redis-benchmark printed nothing against: $c"
  echo "$out,cpu_ticks=$((t1 - t0))"
}

for i in $(seq "$PAIRS"); do
  if [ $((i % 2)) = 1 ]; then
    a=$(run "$A" "$@") || exit 1; b=$(run "$B" "$@") || exit 1
  else
    b=$(run "$B" "$@") || exit 1; a=$(run "$A" "$@") || exit 1
  fi
  ra=$(echo "$a" | cut -d, -f2 | tr -d '"'); rb=$(echo "$b" | cut -d, -f2 | tr -d '"')
  echo "pair $i A: $a"
  echo "pair $i B: $b"
  echo "pair $i ratio A/B $(python3 -c "print(round($ra/$rb,3))")"
done
