#!/bin/bash
# Starts `flint cluster up --hosted --nodes 3 --groups G` on a fresh directory, leaves it idle for
# SETTLE seconds, then prints the CPU of each node and of the manager over SECONDS seconds, in
# percent of one core (utime+stime from /proc/PID/stat), and stops the cluster.
#
# usage: scripts/hosted_idle.sh BIN G [SETTLE [SECONDS]]    (defaults: 60 and 10)
#   Example: scripts/hosted_idle.sh bin/flint 1000
set -u
[ $# -ge 2 ] || { echo "usage: $0 BIN G [SETTLE [SECONDS]]" >&2; exit 2; }
BIN=$1; G=$2; SETTLE=${3:-60}; SECONDS_=${4:-10}

die() { echo "$0: $*" >&2; exit 1; }
dir=$(mktemp -d /tmp/hosted_idle.XXXX)
"$BIN" cluster up --hosted --nodes 3 --groups "$G" --dir "$dir/c" >"$dir/up.log" 2>&1 &
up=$!
trap 'kill -INT $up 2>/dev/null; wait $up 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 600); do grep -q ' up; Ctrl-C' "$dir/up.log" 2>/dev/null && break; sleep 0.1; done
grep -q ' up; Ctrl-C' "$dir/up.log" || die "cluster up did not start: $(cat "$dir/up.log")"
sleep "$SETTLE"
! grep -q 'exited\|not listening' "$dir/up.log" || die "a process failed: $(tail -3 "$dir/up.log")"
names=(node1 node2 node3 manager)
pids=("$(pgrep -f -- "--dir $dir/c/n1 ")" "$(pgrep -f -- "--dir $dir/c/n2 ")" "$(pgrep -f -- "--dir $dir/c/n3 ")" \
  "$(pgrep -f -- "--dir $dir/c/manager ")")
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
before=(); for p in "${pids[@]}"; do before+=("$(cpu "$p")"); done
load=$(cut -d' ' -f1 /proc/loadavg)
sleep "$SECONDS_"
tick=$(getconf CLK_TCK)
for i in "${!pids[@]}"; do
  echo "${names[$i]}: $(echo "scale=2; 100*($(cpu "${pids[$i]}")-${before[$i]})/$tick/$SECONDS_" | bc)% of a core"
done
echo "$G groups, load average $load -> $(cut -d' ' -f1 /proc/loadavg), $(date -u '+%Y-%m-%d %H:%M') UTC"
