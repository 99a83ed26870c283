#!/usr/bin/env python3
"""Where the machine's time goes with fsync on and off, under one flint bench workload.

Runs the workload against a fresh `flint serve --fsync always`, then a fresh
`--fsync never`, alternately, for --pairs pairs. While each run is measured it
samples /proc/stat, and prints one line per run: throughput, the server's and
the driver's CPU per operation (from flint bench), the whole machine's busy
time per operation, and its time split as /proc/stat splits it (user, system,
idle, iowait, irq, softirq, steal), over the measured part of the run only.
Over the same part it also samples the server: its user and system time per
operation (/proc/PID/stat), its threads' context switches per 1,000
operations (/proc/PID/task/*/status), and its fsyncs (INFO persistence), per
command it counted in the window (INFO stats).
Then the ratio of each pair and their median.

    scripts/fsync_cpu.py --pairs 5 -- --workload cs6450-b --workers 16 --pipeline 1024 --conns 16
"""
import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time

from bench_vs_redis import cpu_ticks, free_port, info, wait_port

FIELDS = ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"]


def cpu_times():
    """The first line of /proc/stat: jiffies spent in each of FIELDS, machine-wide."""
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:1 + len(FIELDS)]]


def server_counts(pid, port):
    """The server's user and system jiffies, its threads' context switches
    (voluntary and not; a thread that has exited no longer counts), its
    fsyncs and the commands it has processed, so far."""
    switches = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/status") as f:
                for l in f:
                    if l.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")):
                        switches += int(l.split()[1])
        except OSError:  # the thread exited
            pass
    fsyncs = int(info(port).get("fsyncs", 0))
    commands = int(info(port, "stats")["total_commands_processed"])
    return [*cpu_ticks(pid), switches, fsyncs, commands]


class Sampler(threading.Thread):
    """Samples /proc/stat and the server's counts (see server_counts) every
    interval seconds, with the time of each sample, until stopped or a
    sample fails (between then raises its error)."""

    def __init__(self, pid, port, interval=0.5):
        super().__init__(daemon=True)
        self.pid, self.port = pid, port
        self.interval, self.samples, self.stop, self.error = interval, [], threading.Event(), None

    def run(self):
        while not self.stop.is_set():
            try:
                self.samples.append((time.time(), cpu_times(), server_counts(self.pid, self.port)))
            except OSError as e:
                self.error = e
                return
            self.stop.wait(self.interval)

    def between(self, start, end):
        """The jiffies spent in each field and the change in each of the
        server's counts between the first sample after start and the last one
        before end, and the seconds between those samples."""
        if self.error is not None:
            raise SystemExit(f"fsync_cpu: sampling the server failed: {self.error}")
        win = [s for s in self.samples if start <= s[0] <= end]
        if len(win) < 2:
            raise SystemExit("fsync_cpu: the run was too short to sample; use a longer --duration")
        (t0, a, sa), (t1, b, sb) = win[0], win[-1]
        return [y - x for x, y in zip(a, b)], [y - x for x, y in zip(sa, sb)], t1 - t0


def started(stamp):
    """The Unix time of a result.json timestamp (RFC 3339 in UTC, up to nanoseconds)."""
    whole, _, frac = stamp.rstrip("Z").partition(".")
    t = datetime.datetime.fromisoformat(whole).replace(tzinfo=datetime.timezone.utc).timestamp()
    return t + float("0." + frac) if frac else t


def one_run(flint, fsync, bench_args, duration):
    """Runs the workload on a fresh server and returns its line's values."""
    port, data = free_port(), tempfile.mkdtemp(prefix="fsync-cpu-")
    out = tempfile.mkdtemp(prefix="fsync-cpu-out-")
    server = subprocess.Popen([flint, "serve", "--addr", f"127.0.0.1:{port}", "--dir", data, "--fsync", fsync],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sampler = Sampler(server.pid, port)
    try:
        wait_port(port, server)
        sampler.start()
        bench = subprocess.run([flint, "bench", "--target", f"flint://127.0.0.1:{port}", "--server-pid",
                                str(server.pid), "--duration", duration, "--out", out] + bench_args,
                               capture_output=True, text=True)
        if bench.returncode != 0:
            raise SystemExit(f"fsync_cpu: flint bench failed:\n{bench.stderr}")
        with open(os.path.join(out, "result.json")) as f:
            run = json.load(f)["runs"][0]
        start = started(run["started"])
        sampler.stop.set()
        sampler.join()
        jiffies, counts, secs = sampler.between(start + 0.5, start + run["elapsed_s"] - 0.5)
    finally:
        sampler.stop.set()
        if sampler.is_alive():
            sampler.join()
        server.terminate()
        server.wait()
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
    total = sum(jiffies)
    busy = total - jiffies[FIELDS.index("idle")] - jiffies[FIELDS.index("iowait")]
    hz = os.sysconf("SC_CLK_TCK")
    user, system, switches, fsyncs, ops = counts
    return {
        "fsync": fsync,
        "ops_per_s": run["ops_per_s"],
        "server_ns_per_op": run["server_cpu_ns_per_op"],
        "driver_ns_per_op": run["driver_cpu_ns_per_op"],
        "busy_ns_per_op": busy / hz * 1e9 / secs / run["ops_per_s"],
        "split": {n: 100 * j / total for n, j in zip(FIELDS, jiffies)},
        "server_user_ns_per_op": user / hz * 1e9 / ops,
        "server_system_ns_per_op": system / hz * 1e9 / ops,
        "server_switches_per_kop": 1000 * switches / ops,
        "fsyncs_per_s": fsyncs / secs,
    }


def line(r):
    split = " ".join(f"{n} {v:.1f}%" for n, v in r["split"].items() if n != "nice")
    return (f"fsync {r['fsync']:6} {r['ops_per_s']:9,.0f} ops/s  cpu/op server {r['server_ns_per_op']:.0f} ns"
            f" (user {r['server_user_ns_per_op']:.0f}, system {r['server_system_ns_per_op']:.0f})"
            f" driver {r['driver_ns_per_op']:.0f} ns machine {r['busy_ns_per_op']:.0f} ns  {split}"
            f"  server switches/kop {r['server_switches_per_kop']:.2f} fsyncs/s {r['fsyncs_per_s']:.0f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--flint", default="bin/flint")
    ap.add_argument("--duration", default="20s", help="measured time of each run")
    ap.add_argument("--json", help="write every run's values to this file, e.g. results/NAME.json (git ignores results/)")
    ap.add_argument("bench_args", nargs=argparse.REMAINDER, help="flint bench flags, after --")
    args = ap.parse_args()
    bench_args = args.bench_args[1:] if args.bench_args[:1] == ["--"] else args.bench_args
    if args.pairs < 1:
        raise SystemExit("fsync_cpu: --pairs must be at least 1")
    runs, ratios = [], []
    for i in range(args.pairs):
        pair = [one_run(args.flint, mode, bench_args, args.duration) for mode in ("always", "never")]
        for r in pair:
            print(line(r), flush=True)
        ratios.append(pair[0]["ops_per_s"] / pair[1]["ops_per_s"])
        print(f"pair {i + 1}: always / never {ratios[-1]:.3f}", flush=True)
        runs += pair
    print(f"ratios {' · '.join(f'{r:.3f}' for r in ratios)}, median {statistics.median(ratios):.3f}")
    if args.json:
        os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"bench_args": bench_args, "duration": args.duration, "runs": runs, "ratios": ratios}, f, indent=1)


if __name__ == "__main__":
    main()
