#!/usr/bin/env python3
"""Where the running dashboard's idle CPU goes: cProfile of its UI thread and sampler ticks.

    python bench/profile_idle.py [--per-gpu 2] [--warmup 5] [--seconds 30] [--top 25]
                                 [--out DIR]

Starts ``gputop --interval 1`` in a 200x50 tmux pane on the fake 8 GPUs x N processes,
lets it run ``--warmup`` seconds, then profiles the UI's main thread and the sampler's
ticks for ``--seconds`` and quits. Prints each thread's CPU seconds over the window
(from /proc/self/task; the profiler's overhead included, about double) and the top
entries of each profile by own time; stats files go to ``--out``.
Needs tmux and gcc. Prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import json
import pstats
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_ui import scenario_for, warm_bytecode  # noqa: E402
from tests.fakenvml import subprocess_env  # noqa: E402

PROBE = """
import cProfile, json, os, sys, threading, time
out, warmup, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
profiles = {}
def thread_cpu():
    got = {}
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/stat") as f:
            head, rest = f.read().rsplit(")", 1)
        fields = rest.split()
        got[tid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return got
window = []
import gputop.sampler as sampler
tick = sampler.Sampler._tick
def profiled_tick(self):
    if not window:
        return tick(self)
    pr = profiles.setdefault("sampler", cProfile.Profile())
    pr.enable()
    try:
        return tick(self)
    finally:
        pr.disable()
sampler.Sampler._tick = profiled_tick
import gputop.ui.app as app
after_tick = app.GpuTopApp._from_sampler_thread
def profiled_after_tick(self, snapshot):  # the diagnosis runs here, on the sampler's thread
    if not window:
        return after_tick(self, snapshot)
    pr = profiles.setdefault("sampler", cProfile.Profile())
    pr.enable()
    try:
        return after_tick(self, snapshot)
    finally:
        pr.disable()
app.GpuTopApp._from_sampler_thread = profiled_after_tick
mount = app.GpuTopApp.on_mount
def on_mount(self):
    mount(self)
    def begin():
        self.cpu0, self.t0 = thread_cpu(), time.monotonic()
        window.append(1)
        pr = profiles["main"] = cProfile.Profile(); pr.enable()
        self.set_timer(seconds, end)
    def end():
        profiles["main"].disable()
        window.clear()
        for name, pr in profiles.items():
            pr.dump_stats(f"{out}.{name}.prof")
        cpu1 = thread_cpu()
        json.dump({"seconds": time.monotonic() - self.t0,
                   "threads": {k: round(v - self.cpu0.get(k, 0.0), 3) for k, v in cpu1.items()}},
                  open(out, "w"))
        self.exit()
    self.set_timer(warmup, begin)
app.GpuTopApp.on_mount = on_mount
import gputop.cli as cli
cli.main(["--interval", "1"])
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-gpu", type=int, default=2)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--out", default="")
    args = parser.parse_args(argv)
    children = [subprocess.Popen(["sleep", "3600"]) for _ in range(8 * args.per_gpu)]
    try:
        with tempfile.TemporaryDirectory(prefix="gputop-idle-") as tmp:
            path = scenario_for([c.pid for c in children], args.per_gpu)
            env = subprocess_env(path.write(Path(tmp) / "scenario.txt"))
            env["PYTHONPATH"] = str(ROOT)
            warm_bytecode(env, Path(tmp) / "pycache", sys.executable)
            out = Path(args.out or tmp) / "idle.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            keep = ("LD_LIBRARY_PATH", "FAKE_NVML_SCENARIO", "PYTHONPATH", "PYTHONPYCACHEPREFIX")
            exports = " ".join(f"{k}={shlex.quote(env[k])}" for k in keep if k in env)
            argv_ = [sys.executable, "-c", PROBE, str(out), str(args.warmup), str(args.seconds)]
            command = f"env -u PYTHONDONTWRITEBYTECODE {exports} {shlex.join(argv_)}"
            tmux = ["tmux", "-L", f"gputop-idle-{id(out)}", "-f", "/dev/null"]
            subprocess.run([*tmux, "new-session", "-d", "-x", "200", "-y", "50", command])
            try:
                deadline = time.monotonic() + args.warmup + args.seconds + 60
                while not out.exists() and time.monotonic() < deadline:
                    time.sleep(0.2)
                time.sleep(0.3)
            finally:
                subprocess.run([*tmux, "kill-server"], capture_output=True)
            got = json.loads(out.read_text())
            secs = got["seconds"]
            print(f"8 GPUs x {args.per_gpu}, 200x50, 1 s, window {secs:.1f} s (profiled run)")
            for name, cpu in sorted(got["threads"].items(), key=lambda kv: -kv[1]):
                print(f"  thread {name:<8} {cpu:6.2f} s  {100 * cpu / secs:5.2f} % of a core")
            for prof in sorted(out.parent.glob(f"{out.name}.*.prof")):
                print(f"--- {prof.name}: top {args.top} by own time")
                stats = pstats.Stats(str(prof))
                stats.sort_stats("tottime").print_stats(args.top)
    finally:
        for c in children:
            c.kill()
            c.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
