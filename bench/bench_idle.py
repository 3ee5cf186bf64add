#!/usr/bin/env python3
"""The dashboard's idle CPU once it has settled: gputop (one or more trees) beside nvitop.

    python bench/bench_idle.py [--per-gpu 2] [--settle 65] [--seconds 20] [--tree DIR ...]
                               [--threads]

All programs run at once, each in its own 200x50 tmux pane (``bench_ui.py``'s panes), on
the same fake 8 GPUs x ``--per-gpu`` real ``sleep`` processes (started with the programs),
at a 1 s interval. After ``--settle`` seconds (past the processes' first minute, and past
the time the dashboard's history charts take to fill at 200 columns) the CPU time of each
program is taken over ``--seconds``, as % of one core; for each gputop also its main (UI)
thread apart from its other threads (the sampler's, Textual's input and output threads).
``--tree DIR`` (repeatable): run the gputop of that checkout (default: this one), to
compare two trees within one run. ``--threads``: each other thread's share too, by
thread id in start order (the sampler's thread starts last). CPU time is read per thread
from ``schedstat`` (nanoseconds), not from the 10 ms clock ticks.
Needs tmux and gcc. Prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_start import commands  # noqa: E402
from bench.bench_ui import (  # noqa: E402
    Pane,
    scenario_for,
    start_pane,
    tmux,
    wait_first_frame,
)
from tests.fakenvml import subprocess_env  # noqa: E402


def thread_cpu(pid: int) -> dict[int, float]:
    """Thread id -> CPU seconds of each live thread of ``pid``, from
    ``/proc/PID/task/TID/schedstat`` (nanoseconds on a CPU: the 10 ms clock ticks of
    ``stat`` are too coarse for threads that run a few ms a second)."""
    out: dict[int, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", encoding="ascii") as f:
                out[int(tid)] = int(f.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):  # the thread ended
            continue
    return out


def process_cpu(pid: int) -> float:
    """CPU seconds of ``pid``'s live threads (schedstat; see :func:`thread_cpu`)."""
    return sum(thread_cpu(pid).values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-gpu", type=int, default=2)
    parser.add_argument("--settle", type=float, default=65.0, help="seconds before the window")
    parser.add_argument("--seconds", type=float, default=20.0, help="the CPU window")
    parser.add_argument("--tree", action="append", type=Path, help="a gputop checkout")
    parser.add_argument(
        "--threads", action="store_true", help="each other thread of gputop too, in start order"
    )
    args = parser.parse_args(argv)
    trees = [t.resolve() for t in args.tree or [ROOT]]
    children = [subprocess.Popen(["sleep", "3600"]) for _ in range(8 * args.per_gpu)]
    panes: list[tuple[str, Pane, Path | None]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="gputop-idle-") as tmp:
            scenario = scenario_for([c.pid for c in children], args.per_gpu)
            env = subprocess_env(scenario.write(Path(tmp) / "scenario.txt"))
            for i, tree in enumerate(trees):
                tree_env = dict(env, PYTHONPATH=str(tree))
                name = f"gputop{i}"
                panes.append(
                    (name, start_pane(name, commands()["gputop"], tree_env, (200, 50), tree), tree)
                )
            nvitop = start_pane("nvitop", commands()["nvitop"], env, (200, 50))
            panes.append(("nvitop", nvitop, None))
            for _, pane, _ in panes:
                wait_first_frame(pane)
            while time.monotonic() - min(p.started for _, p, _ in panes) < args.settle:
                time.sleep(0.2)
            load = os.getloadavg()[0]
            before = {name: (process_cpu(p.pid), thread_cpu(p.pid)) for name, p, _ in panes}
            t0 = time.monotonic()
            time.sleep(args.seconds)
            span = time.monotonic() - t0
            after = {name: (process_cpu(p.pid), thread_cpu(p.pid)) for name, p, _ in panes}
        print(
            f"8 GPUs x {args.per_gpu} (fake NVML), 200x50, 1 s, settled {args.settle:g} s, "
            f"CPU over {span:.1f} s, load average {load:.2f} at the window's start"
        )
        nv = 100 * (after["nvitop"][0] - before["nvitop"][0]) / span
        for name, pane, tree in panes:
            total = 100 * (after[name][0] - before[name][0]) / span
            line = f"  {name:<8} {total:5.2f} % of a core"
            if tree is not None:
                t0s, t1s = before[name][1], after[name][1]
                main_thread = 100 * (t1s.get(pane.pid, 0) - t0s.get(pane.pid, 0)) / span
                line += (
                    f"  (UI thread {main_thread:.2f}, other threads {total - main_thread:.2f};"
                    f" / nvitop {total / nv:.2f})  {tree}"
                    if nv
                    else f"  {tree}"
                )
            print(line)
            if tree is not None and args.threads:
                t0s, t1s = before[name][1], after[name][1]
                others = [
                    f"{tid}: {100 * (t1s[tid] - t0s.get(tid, 0.0)) / span:.2f}"
                    for tid in sorted(t1s)
                    if tid != pane.pid and t1s[tid] > t0s.get(tid, 0.0)
                ]
                print(
                    f"           other threads with CPU in the window (tid: %): {', '.join(others)}"
                )
    finally:
        for _, pane, _ in panes:
            tmux("kill-session", "-t", pane.session, check=False)
        tmux("kill-server", check=False)
        for c in children:
            c.kill()
            c.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
