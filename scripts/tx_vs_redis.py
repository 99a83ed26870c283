#!/usr/bin/env python3
"""Transactions of Flint and redis-server side by side, with `flint bench`.

For each of --pairs pairs, runs each workload (default tx-5, then sets-5:
MULTI + 5 SETs + EXEC, and the same 5 SETs without MULTI/EXEC) once against
a fresh `flint serve` (started by `flint bench --spawn`) and once against a
fresh redis-server, Flint first in odd pairs and Redis first in even ones.
Prints each run with the load average before it, each pair's Flint/Redis
ratios of throughput, p99 and server CPU per operation, Flint's tx-5/sets-5
ratios of throughput and server CPU per operation, and the medians.

Durability: by default durable Flint (fsync always) against redis-server
--appendonly yes --appendfsync always; with --no-fsync, Flint --fsync never
against --save "" --appendonly no. Arguments after -- go to every
`flint bench` run. Needs redis-server and a built bin/flint. Example:

    scripts/tx_vs_redis.py --pairs 5 -- --duration 5s --workers 16 --conns 16
"""
import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

from bench_vs_redis import free_port, wait_port

BENCH_LINE = re.compile(r"^BenchmarkFlint/[^/\s]+/target=\S+\t\d+\t[\d.]+ ns/op\t([\d.]+) ops/s\t\d+ p50-ns\t(\d+) p99-ns"
                        r"\t\d+ p99.9-ns(?:\t(\d+) server-cpu-ns/op)?$", re.M)
ERRORS = re.compile(r"^issued \d+ = acknowledged \d+ \+ errors (\d+)", re.M)


def bench(args, target_args, workload):
    """Runs flint bench and returns (ops/s, p99 ms, server CPU µs per op)."""
    cmd = [args.flint, "bench", "--workload", workload] + target_args + args.bench_args
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    m, e = BENCH_LINE.search(out), ERRORS.search(out)
    if not m or not e or int(e.group(1)) != 0:
        raise RuntimeError(f"{' '.join(cmd)}: no result, or errors:\n{out}")
    return float(m.group(1)), int(m.group(2)) / 1e6, int(m.group(3) or 0) / 1e3


def run_flint(args, workload):
    spawn = "--fsync never" if args.no_fsync else ""
    return bench(args, ["--spawn", "--spawn-args", spawn], workload)


def run_redis(args, workload):
    port, data = free_port(), tempfile.mkdtemp(prefix="tx-redis-")
    durability = ["--appendonly", "no"] if args.no_fsync else ["--appendonly", "yes", "--appendfsync", "always"]
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--daemonize", "no", "--loglevel", "warning", "--dir", data] + durability,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, proc)
        return bench(args, ["--target", f"redis://127.0.0.1:{port}", "--server-pid", str(proc.pid)], workload)
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(data, ignore_errors=True)


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--flint", default="bin/flint")
    ap.add_argument("--no-fsync", action="store_true", help="Flint --fsync never against Redis without persistence")
    ap.add_argument("--workloads", default="tx-5,sets-5")
    ap.add_argument("bench_args", nargs=argparse.REMAINDER, help="arguments for flint bench after --")
    args = ap.parse_args()
    args.bench_args = [a for a in args.bench_args if a != "--"]
    workloads = args.workloads.split(",")
    ratios = {w: [] for w in workloads}
    tx_over_sets = []
    for i in range(args.pairs):
        flint = {}
        for w in workloads:
            order = ("flint", "redis") if i % 2 == 0 else ("redis", "flint")
            res = {}
            for kind in order:
                load = loadavg()
                res[kind] = (run_flint if kind == "flint" else run_redis)(args, w)
                print(f"pair {i + 1} {w:7} {kind:5} load {load:>5}  {res[kind][0]:9.0f} ops/s  p99 {res[kind][1]:7.2f} ms"
                      f"  server cpu {res[kind][2]:7.1f} µs/op", flush=True)
            f, r = res["flint"], res["redis"]
            ratio = (f[0] / r[0], f[1] / r[1], f[2] / r[2] if r[2] else 0)
            ratios[w].append(ratio)
            flint[w] = f
            print(f"pair {i + 1} {w:7} flint/redis: ops/s {ratio[0]:.3f}  p99 {ratio[1]:.3f}  cpu/op {ratio[2]:.3f}", flush=True)
        if "tx-5" in flint and "sets-5" in flint:
            tx, sets = flint["tx-5"], flint["sets-5"]
            tx_over_sets.append((tx[0] / sets[0], tx[2] / sets[2]))
            print(f"pair {i + 1} flint tx-5/sets-5: ops/s {tx_over_sets[-1][0]:.3f}  server cpu/op {tx_over_sets[-1][1]:.3f}",
                  flush=True)
    print(f"\nmedians over {args.pairs} pairs ({'no fsync' if args.no_fsync else 'durable'}), flint bench {' '.join(args.bench_args)}")
    for w in workloads:
        med = [statistics.median(r[j] for r in ratios[w]) for j in range(3)]
        print(f"{w:7} flint/redis: ops/s {med[0]:.3f}  p99 {med[1]:.3f}  server cpu/op {med[2]:.3f}")
    if tx_over_sets:
        print(f"flint tx-5/sets-5: ops/s {statistics.median(r[0] for r in tx_over_sets):.3f}"
              f"  server cpu/op {statistics.median(r[1] for r in tx_over_sets):.3f}")


if __name__ == "__main__":
    sys.exit(main())
