#!/usr/bin/env python3
"""Why a server's threads leave their CPU, from a `perf record` of sched_switch.

Reads recordings made with call stacks of the kernel's sched:sched_switch
tracepoint for one process, for example a running `flint serve`:

    mount -t tracefs nodev /sys/kernel/tracing   # once, if perf cannot see tracepoints
    perf record -e sched:sched_switch -g -p $(pgrep -f 'flint serve') -o sw.perf -- sleep 3
    scripts/sched_switches.py sw.perf [more.perf ...]

and counts the switches by why the thread left: its state (S sleeping, D
waiting on the disk, R preempted), the kernel function it waits in, the
Go runtime's two innermost scheduler functions on its stack (runtime.stopm:
an idle thread parking; runtime.runqsteal: a spinning thread's 3 µs sleep
while stealing; runtime.sysmon: the monitor thread's sleep), and the
innermost Flint function. Needs perf, and a binary with its symbols.
"""
import collections
import re
import subprocess
import sys

# Kernel functions that say what a switched-out thread waits for.
WAITS = ("do_nanosleep", "futex_do_wait", "folio_wait_bit", "wait_for_completion_io_timeout",
         "bit_wait_io", "ep_poll", "exit_to_user_mode_loop", "irqentry_exit_to_user_mode")
# Runtime frames too common to say anything.
PLUMBING = ("runtime.futex.abi0", "runtime.mcall", "runtime.notesleep", "runtime.usleep.abi0",
            "runtime.futexsleep", "runtime.goexit.abi0")


def frames(lines):
    """The function names of a sample's stack, innermost first."""
    out = []
    for line in lines:
        parts = line.split(None, 1)
        if len(parts) == 2:
            out.append(re.sub(r"\+0x[0-9a-f]+.*", "", parts[1]))
    return out


def classify(sample):
    """The reason a sample's thread was switched out, as a tuple of strings."""
    lines = sample.strip().split("\n")
    state = re.search(r"prev_state=(\S+)", lines[0]).group(1)
    stack = frames(lines[1:])
    wait = next((f for f in stack if f in WAITS), "-")
    runtime = [f for f in stack if f.startswith("runtime.") and f not in PLUMBING][:2]
    flint = next((f for f in stack if "flintkv/flint" in f), "")
    return state, wait, " ".join(runtime), flint


def count(path):
    script = subprocess.run(["perf", "script", "-i", path], capture_output=True, text=True,
                            check=True).stdout
    return collections.Counter(classify(s) for s in script.split("\n\n")
                               if "sched_switch" in s.split("\n", 1)[0])


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for path in sys.argv[1:]:
        c = count(path)
        total = sum(c.values())
        print(f"== {path}: {total} switches")
        for reason, n in c.most_common(15):
            print(f"{n:7d} {100 * n / total:5.1f}%  " + " | ".join(reason))


if __name__ == "__main__":
    main()
