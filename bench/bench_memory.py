#!/usr/bin/env python3
"""The dashboard's memory as its history fills: is RSS flat once the history is full?

    python bench/bench_memory.py [--per-gpu 16] [--interval 0.1] [--minutes 10] [--every 30]

gputop runs in a detached 200x50 tmux pane (``bench_ui.py``'s panes) on the fake 8 GPUs x
``--per-gpu`` real ``sleep`` processes. The dashboard keeps its last 3,600 snapshots (an
hour at the default 1 s interval); at ``--interval 0.1`` that history fills in about six
minutes instead of an hour, with the same snapshots in it. VmRSS is read every ``--every``
seconds; printed with the ticks the interval allows by then (``elapsed / interval``, an
upper bound: a late tick is not counted out).

Prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import bench_ui as ui  # noqa: E402
from gputop.ui.app import HISTORY  # noqa: E402  (the dashboard's history, in snapshots)
from tests.fakenvml import subprocess_env  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-gpu", type=int, default=16)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--every", type=float, default=30.0)
    args = parser.parse_args(argv)
    children = [subprocess.Popen(["sleep", "7200"]) for _ in range(8 * args.per_gpu)]
    try:
        with tempfile.TemporaryDirectory(prefix="gputop-bench-mem-") as tmp:
            path = ui.scenario_for([c.pid for c in children], args.per_gpu).write(
                Path(tmp) / "scenario.txt"
            )
            env = subprocess_env(path)
            env["PYTHONPATH"] = str(ROOT)
            ui.warm_bytecode(env, Path(tmp) / "pycache", "nvitop")
            py = shlex.quote(sys.executable)
            command = f"env -u PYTHONDONTWRITEBYTECODE {py} -m gputop --interval {args.interval:g}"
            pane = ui.start_pane("gputop", command, env, (200, 50))
            try:
                ui.wait_first_frame(pane)
                if pane.note:
                    print(f"gputop: {pane.note}", file=sys.stderr)
                    return 1
                print(
                    f"8 GPUs x {args.per_gpu} processes (fake NVML), 200x50, "
                    f"--interval {args.interval:g}, history {HISTORY} snapshots, "
                    f"load average {os.getloadavg()[0]:.2f}"
                )
                head = (("seconds", 8), ("ticks <=", 9), ("RSS MiB", 8))
                head += (("peak MiB", 9), ("CPU %", 6))
                print("  " + " ".join(f"{name:>{width}}" for name, width in head))
                last_cpu, last_t = ui.cpu_seconds(pane.pid), time.monotonic()
                end = pane.started + 60 * args.minutes
                while time.monotonic() < end:
                    time.sleep(min(args.every, max(0.0, end - time.monotonic())))
                    now = time.monotonic()
                    rss, peak = ui.memory_mib(pane.pid)
                    cpu = ui.cpu_seconds(pane.pid)
                    elapsed = now - pane.started
                    print(
                        f"  {elapsed:8.0f} {min(int(elapsed / args.interval), 10**9):9d} "
                        f"{rss or 0:8.1f} {peak or 0:9.1f} "
                        f"{100 * (cpu - last_cpu) / (now - last_t):6.1f}",
                        flush=True,
                    )
                    last_cpu, last_t = cpu, now
                print(f"  load average at the end {os.getloadavg()[0]:.2f}")
            finally:
                ui.tmux("kill-session", "-t", pane.session, check=False)
    finally:
        for c in children:
            c.kill()
            c.wait()
        ui.tmux("kill-server", check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
