#!/bin/bash
# Measures a mass expiry: gives about 865,000 keys one deadline (SET ... PXAT, 2M writes over
# 1M random keys), then runs redis-benchmark's unpipelined SET and GET (50 clients) before the
# deadline, across it and after it, printing each run's latency summary (avg min p50 p95 p99
# max, ms), and how long after the deadline the expirer had removed every key (INFO keyspace's
# expires= reaching 0, polled every 200 ms).
#
# usage: scripts/mass_expiry.sh [FLINT]   (default bin/flint; the server listens on 127.0.0.1:7402)
set -eu
flint=${1:-bin/flint}
port=7402
dir=$(mktemp -d)
"$flint" serve --addr 127.0.0.1:$port --dir "$dir" --log-level error & server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$dir"' EXIT
until redis-cli -p $port ping >/dev/null 2>&1; do sleep 0.1; done
deadline=$(( $(date +%s%3N) + 40000 ))
redis-benchmark -p $port -n 2000000 -r 1000000 -P 64 -c 50 -q SET key:__rand_int__ xxx PXAT $deadline >/dev/null
redis-cli -p $port info keyspace | tail -1
bench() {
  redis-benchmark -p $port -n 60000 -r 2000000 -c 50 -t set,get 2>&1 | tr '\r' '\n' |
    grep -A2 "latency summary" | grep -v "latency summary\|avg\|--"
}
echo "before the deadline (SET, then GET):"; bench
while [ "$(date +%s%3N)" -lt $(( deadline - 1000 )) ]; do sleep 0.1; done
(for _ in $(seq 1 300); do
   n=$(redis-cli -p $port info keyspace | grep -o 'expires=[0-9]*')
   if [ "$n" = expires=0 ]; then echo "all removed $(( $(date +%s%3N) - deadline )) ms after the deadline"; break; fi
   sleep 0.2
 done) & poll=$!
echo "across it:"; bench
wait $poll
echo "after:"; bench
