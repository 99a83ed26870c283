#!/bin/bash
# Starts `flint cluster up --hosted --nodes 1 --groups G` (one node hosting G data groups of one
# member, and a manager) on a fresh directory, runs `flint bench` through the manager with the
# node as --server-pid (so the report gives the node's CPU per operation), and stops the cluster.
#
# usage: scripts/hosted_bench.sh BIN G [flint bench args]
#   Example: scripts/hosted_bench.sh bin/flint 16 --workload cs6450-b --workers 16 --pipeline 1024 \
#     --conns 16 --duration 10s
# With --compare-groups H among the bench args (first), a second cluster hosting H groups is
# started too, and the bench alternates the two (--compare, --compare-pid).
set -u
[ $# -ge 2 ] || { echo "usage: $0 BIN G [--compare-groups H] [flint bench args]" >&2; exit 2; }
BIN=$1; G=$2; shift 2
H=
if [ "${1:-}" = --compare-groups ]; then H=$2; shift 2; fi

die() { echo "$0: $*" >&2; exit 1; }
pids=(); dirs=()
trap 'for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "${dirs[@]}"' EXIT

# up starts a cluster of $1 groups and sets manager and node (the node's pid).
up() {
  local dir; dir=$(mktemp -d /tmp/hosted_bench.XXXX)
  dirs+=("$dir")
  "$BIN" cluster up --hosted --nodes 1 --groups "$1" --dir "$dir/c" >"$dir/up.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 300); do grep -q ' up; Ctrl-C' "$dir/up.log" 2>/dev/null && break; sleep 0.1; done
  grep -q ' up; Ctrl-C' "$dir/up.log" || die "cluster up did not start: $(cat "$dir/up.log")"
  manager=$(sed -n 's/^manager: \([^ ]*\).*/\1/p' "$dir/up.log")
  node=
  for f in /proc/[0-9]*/cmdline; do
    if tr '\0' ' ' <"$f" 2>/dev/null | grep -q -- "--dir $dir/c/n1 "; then node=${f#/proc/}; node=${node%/cmdline}; fi
  done
  [ -n "$node" ] || die "no node process for $dir"
}

up "$G"; ma=$manager; na=$node
if [ -n "$H" ]; then
  up "$H"
  "$BIN" bench --target "flint://$ma" --server-pid "$na" --compare "flint://$manager" --compare-pid "$node" "$@"
else
  "$BIN" bench --target "flint://$ma" --server-pid "$na" "$@"
fi
