#!/usr/bin/env python3
"""Side-by-side throughput of Flint and redis-server with the same client.

Runs redis-benchmark against a fresh `flint serve` and a fresh `redis-server`
alternately (A B A B ...), for --pairs pairs, and prints per-pair ratios and
medians of throughput, p99 latency and server CPU time per operation (utime +
stime of the server process from /proc, divided by requests served).

With --null, each pair also runs scripts/nullserver.c, a server that answers
+OK to every command and does nothing else: no server, Redis or Flint, can be
faster with the same client on the same machine, so its rate bounds any target.

Needs redis-server and redis-benchmark (apt-get install redis-server
redis-tools) and a built bin/flint; --null also needs gcc. Example:

    scripts/bench_vs_redis.py --pairs 3 -- -P 64 -c 50 -t get,set -r 1000000 -n 2000000
"""
import argparse
import atexit
import csv
import io
import json
import os
import socket
import statistics
import shutil
import subprocess
import sys
import tempfile
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_ticks(pid):
    """The process's user and system time so far, in clock ticks (CLK_TCK a second)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])  # utime, stime


def cpu_seconds(pid):
    return sum(cpu_ticks(pid)) / CLK_TCK


def wait_port(port, proc, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("server did not start listening")


def build_null(tmp):
    """Compiles scripts/nullserver.c into tmp and returns the binary's path."""
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nullserver.c")
    out = os.path.join(tmp, "nullserver")
    subprocess.run(["gcc", "-O2", "-o", out, src], check=True)
    return out


def start(kind, port, args, extra, data_dir):
    if kind == "null":
        cmd = [args.null_bin, str(port)]
    elif kind == "flint":
        cmd = [args.flint, "serve", "--addr", f"127.0.0.1:{port}", "--log-level", "warn",
               "--dir", data_dir] + extra
    else:
        cmd = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning",
               "--dir", data_dir] + extra
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port, proc)
    return proc


def info(port, section="persistence"):
    """Returns a section of INFO as a dict (Flint reports fsync counts in persistence)."""
    with socket.create_connection(("127.0.0.1", port), 5) as c:
        c.sendall(f"*2\r\n$4\r\nINFO\r\n${len(section)}\r\n{section}\r\n".encode())
        data = b""
        while not data.endswith(b"\r\n") or data.count(b"\r\n") < 2 or len(data) < int(data[1:data.index(b"\r\n")]):
            chunk = c.recv(65536)
            if not chunk:
                break
            data += chunk
    lines = data.decode().split("\r\n")[1:]
    return dict(l.split(":", 1) for l in lines if ":" in l)


def run_once(kind, args, bench_args):
    port = free_port()
    extra = {"flint": args.flint_args, "redis": args.redis_args}.get(kind, "").split()
    data_dir = tempfile.mkdtemp(prefix=f"bench-{kind}-")
    proc = start(kind, port, args, extra, data_dir)
    try:
        cpu0, t0 = cpu_seconds(proc.pid), time.time()
        out = subprocess.run(["redis-benchmark", "-p", str(port), "--csv", "-q"] + bench_args,
                             check=True, capture_output=True, text=True).stdout
        cpu, wall = cpu_seconds(proc.pid) - cpu0, time.time() - t0
        persistence = info(port) if kind == "flint" else {}
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(data_dir, ignore_errors=True)
    rows = list(csv.DictReader(io.StringIO(out)))
    total = sum(requests(bench_args) for _ in rows)
    tests = {r["test"]: {"rps": float(r["rps"]), "p50": float(r["p50_latency_ms"]),
                         "p99": float(r["p99_latency_ms"])} for r in rows}
    if "fsyncs" in persistence:
        tests["_fsync"] = {"per_s": int(persistence["fsyncs"]) / wall,
                           "writes_per_fsync": float(persistence["writes_per_fsync"])}
    return tests, cpu, total


def requests(bench_args):
    n = 100000
    if "-n" in bench_args:
        n = int(bench_args[bench_args.index("-n") + 1])
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--flint", default="bin/flint")
    ap.add_argument("--flint-args", default="")
    ap.add_argument("--redis-args", default="")
    ap.add_argument("--null", action="store_true", help="also run scripts/nullserver.c in each pair")
    ap.add_argument("--json", help="write all results to this file, e.g. results/NAME.json (git ignores results/)")
    ap.add_argument("bench_args", nargs=argparse.REMAINDER, help="arguments for redis-benchmark after --")
    args = ap.parse_args()
    bench_args = [a for a in args.bench_args if a != "--"]
    kinds = ("flint", "redis")
    if args.null:
        kinds += ("null",)
        tmp = tempfile.mkdtemp(prefix="nullserver-")
        atexit.register(shutil.rmtree, tmp, True)
        args.null_bin = build_null(tmp)
    results = []
    for i in range(args.pairs):
        pair = {}
        for kind in kinds:
            tests, cpu, total = run_once(kind, args, bench_args)
            pair[kind] = {"tests": tests, "cpu_s": cpu, "requests": total,
                          "cpu_us_per_op": 1e6 * cpu / total}
        results.append(pair)
        line = [f"pair {i + 1}:"]
        for t in pair["flint"]["tests"]:
            if t == "_fsync":
                fs = pair["flint"]["tests"][t]
                line.append(f"flint fsyncs/s {fs['per_s']:.0f} writes/fsync {fs['writes_per_fsync']:.1f}")
                continue
            f, r = pair["flint"]["tests"][t], pair["redis"]["tests"][t]
            line.append(f"{t} flint {f['rps']:.0f}/s redis {r['rps']:.0f}/s ratio {f['rps'] / r['rps']:.2f}")
            if args.null:
                n = pair["null"]["tests"][t]["rps"]
                line.append(f"null {n:.0f}/s ({n / r['rps']:.2f}x redis)")
        line.append(f"cpu/op flint {pair['flint']['cpu_us_per_op']:.2f}us redis {pair['redis']['cpu_us_per_op']:.2f}us")
        print("  ".join(line), flush=True)
    print(f"\nmedians over {args.pairs} pairs, redis-benchmark {' '.join(bench_args)}")
    print(f"{'test':8} {'flint ops/s':>12} {'redis ops/s':>12} {'ratio':>6} {'flint p99':>10} {'redis p99':>10}")
    for t in results[0]["flint"]["tests"]:
        if t == "_fsync":
            continue
        f = statistics.median(p["flint"]["tests"][t]["rps"] for p in results)
        r = statistics.median(p["redis"]["tests"][t]["rps"] for p in results)
        ratio = statistics.median(p["flint"]["tests"][t]["rps"] / p["redis"]["tests"][t]["rps"] for p in results)
        fp = statistics.median(p["flint"]["tests"][t]["p99"] for p in results)
        rp = statistics.median(p["redis"]["tests"][t]["p99"] for p in results)
        print(f"{t:8} {f:12.0f} {r:12.0f} {ratio:6.2f} {fp:8.3f}ms {rp:8.3f}ms")
        if args.null:
            n = statistics.median(p["null"]["tests"][t]["rps"] for p in results)
            nr = statistics.median(p["null"]["tests"][t]["rps"] / p["redis"]["tests"][t]["rps"] for p in results)
            print(f"{'':8} null server {n:.0f} ops/s, {nr:.2f}x redis (median of per-pair ratios)")
    if "_fsync" in results[0]["flint"]["tests"]:
        fps = statistics.median(p["flint"]["tests"]["_fsync"]["per_s"] for p in results)
        wpf = statistics.median(p["flint"]["tests"]["_fsync"]["writes_per_fsync"] for p in results)
        print(f"flint fsyncs per second {fps:.0f}, writes per fsync {wpf:.1f} (from INFO persistence)")
    fc = statistics.median(p["flint"]["cpu_us_per_op"] for p in results)
    rc = statistics.median(p["redis"]["cpu_us_per_op"] for p in results)
    print(f"server CPU per op (all tests): flint {fc:.3f}us redis {rc:.3f}us ratio {fc / rc:.2f}")
    if args.json:
        os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"bench_args": bench_args, "pairs": results}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
