#!/usr/bin/env python3
"""The dashboard's sampler thread alone, settled, per thread: CPU and wakeups (issue 32 §5).

    python bench/bench_sampler_idle.py [--per-gpu 2] [--settle 65] [--seconds 30]
                                       [--tree DIR ...] [--no-pcie]

Each tree's gputop runs, in a process of its own, what the dashboard runs off its UI
thread: a ``Sampler`` on the live source (``make_source``) every 1 s, each snapshot
pushed to a ``Feed`` with the dashboard's history on the sampler's thread (the
diagnosis), no UI. All trees run at once, on the same fake 8 GPUs x ``--per-gpu`` real
``sleep`` processes (``bench_ui.scenario_for``, as ``bench_idle.py``). After ``--settle``
seconds the CPU time of every thread (``schedstat``, nanoseconds) and its context
switches (voluntary, involuntary: from ``status``) are taken over ``--seconds``: the
sampler's thread, the PCIe call threads, the rest. ``--tree DIR`` (repeatable; default
this checkout): compare trees within one run; each starts in its tree (``-c`` imports the
working directory's gputop first). ``--no-pcie``: the GPUs answer NOT_SUPPORTED for PCIe
throughput, so no PCIe thread runs (what the threads cost, at most). Without the UI
thread the figures are steadier than ``bench_idle.py``'s. Needs gcc. Prints figures; it
is not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.bench_ui import scenario_for  # noqa: E402
from tests.fakenvml import subprocess_env  # noqa: E402

#: Run in each tree's process: the dashboard's sampler and feed, then per-thread figures.
PROBE = r"""
import json, os, sys, threading, time
settle, seconds = float(sys.argv[1]), float(sys.argv[2])
from gputop.pipeline import Feed
from gputop.sampler import Sampler, make_source
from gputop.ui.app import HISTORY

def threads():
    names = {str(t.native_id): t.name for t in threading.enumerate()}
    out = {}
    for tid in os.listdir("/proc/self/task"):
        base = f"/proc/self/task/{tid}"
        try:
            with open(f"{base}/schedstat") as f:
                cpu = int(f.read().split()[0]) / 1e9
            name = names.get(tid, "?")
            with open(f"{base}/status") as f:
                got = dict(line.split(":", 1) for line in f if "ctxt_switches" in line)
        except OSError:
            continue
        out[tid] = (name, cpu, int(got["voluntary_ctxt_switches"]),
                    int(got["nonvoluntary_ctxt_switches"]))
    return out

source = make_source(False, None)
feed = Feed(history=HISTORY)
sampler = Sampler(source, interval=1.0, history=HISTORY, on_snapshot=feed.push)
sampler.tick_now()
sampler.start()
time.sleep(settle)
t0, before = time.monotonic(), threads()
time.sleep(seconds)
span, after = time.monotonic() - t0, threads()
sampler.stop()
rows = []
for tid, (name, cpu, vol, inv) in after.items():
    if tid == str(os.getpid()):
        continue  # this script's main thread: it sleeps
    b = before.get(tid, (name, 0.0, 0, 0))
    rows.append((name, cpu - b[1], vol - b[2], inv - b[3]))
print(json.dumps({"span": span, "ticks": sampler.ticks, "threads": rows}))
"""


def group(name: str) -> str:
    if name.startswith("gputop-pcie"):
        return "PCIe call threads"
    if name.startswith("gputop-sampler"):
        return "sampler thread"
    return f"other ({name})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-gpu", type=int, default=2)
    parser.add_argument("--settle", type=float, default=65.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--tree", action="append", type=Path, help="a gputop checkout")
    parser.add_argument(
        "--no-pcie",
        action="store_true",
        help="the GPUs answer NOT_SUPPORTED for PCIe throughput: no PCIe call threads (a bound)",
    )
    args = parser.parse_args(argv)
    trees = [t.absolute() for t in args.tree or [ROOT]]
    children = [subprocess.Popen(["sleep", "3600"]) for _ in range(8 * args.per_gpu)]
    try:
        with tempfile.TemporaryDirectory(prefix="gputop-sampler-idle-") as tmp:
            scenario = scenario_for([c.pid for c in children], args.per_gpu)
            if args.no_pcie:
                for gpu in scenario.gpus:
                    gpu.pcie_tx_kbps = gpu.pcie_rx_kbps = None
            env = subprocess_env(scenario.write(Path(tmp) / "scenario.txt"))
            runs = [
                subprocess.Popen(
                    [sys.executable, "-c", PROBE, str(args.settle), str(args.seconds)],
                    env=dict(env, PYTHONPATH=str(tree)),
                    cwd=tree,
                    stdout=subprocess.PIPE,
                    text=True,
                )
                for tree in trees
            ]
            time.sleep(args.settle)
            load = os.getloadavg()[0]
            outs = [run.communicate()[0] for run in runs]
    finally:
        for c in children:
            c.kill()
            c.wait()
    print(
        f"8 GPUs x {args.per_gpu} (fake NVML), sampler + feed, 1 s, settled {args.settle:g} s, "
        f"window {args.seconds:g} s, load average {load:.2f} at the window's start"
    )
    for tree, out in zip(trees, outs, strict=True):
        got = json.loads(out)
        span = got["span"]
        sums: dict[str, list[float]] = {}
        for name, cpu, vol, inv in got["threads"]:
            s = sums.setdefault(group(name), [0.0, 0.0, 0.0, 0.0])
            s[0], s[1], s[2], s[3] = s[0] + cpu, s[1] + vol, s[2] + inv, s[3] + 1
        total = sum(s[0] for s in sums.values())
        print(f"  {tree}: {100 * total / span:.3f} % of a core")
        for what, (cpu, vol, inv, n) in sorted(sums.items()):
            print(
                f"    {what:<28} x{int(n):<3} {100 * cpu / span:6.3f} %  "
                f"wakeups/s {vol / span:6.1f} voluntary {inv / span:5.1f} involuntary"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
