#!/usr/bin/env python3
"""The dashboard's start, phase by phase, one after the other on one thread, against the
floor's (bench_start.py's floor program): where gputop's extra time before its first frame
goes, without the tmux pane or the paint.

    python bench/start_phases.py [--runs 7] [--per-gpu 2] [--tree DIR ...]

Each run is a fresh interpreter on the fake 8 GPUs x ``--per-gpu`` processes (byte code
warmed) that
notes the milliseconds since its first line at the end of each phase:
- gputop: the CLI imported; the live source made (psutil, pynvml, gputop's sources, NVML
  initialised); the first tick (as the dashboard takes it: since issue 32 §5's ``first2``
  the GPUs and the host only); the UI imported (Textual, the widgets); the first
  snapshot's processes read (``LiveSource.complete``; where a tree has it); the first
  snapshot judged (``Feed.push``, with the diagnosis' modules where the UI does not import
  them). The last two come after the first frame in the dashboard;
- the floor: psutil and pynvml imported; NVML initialised and read once; Textual's app and
  ``Static`` imported.
What is left after that (the app's start, compose, CSS, the first paint) is in
``profile_start.py``'s timeline. ``--tree DIR`` (repeatable): each checkout's gputop, the
runs alternating. Medians are printed. Needs gcc (the fake). Prints figures; not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_ui import scenario_for, warm_bytecode  # noqa: E402
from tests.fakenvml import subprocess_env  # noqa: E402

GPUTOP = """
import time; t0 = time.perf_counter(); marks = {}
def mark(name): marks[name] = round((time.perf_counter() - t0) * 1000, 1)
import gputop.cli
mark("cli imported")
from gputop.sampler import Sampler, make_source
sampler = Sampler(make_source(False, None), interval=1.0, history=2)
mark("source made")
try:  # the dashboard's first tick: its processes read after the first frame, where it can
    sampler.tick_now(processes=False)
except TypeError:  # a tree from before that
    sampler.tick_now()
mark("first tick")
import gputop.ui.app
mark("ui imported")
complete = getattr(sampler.source, "complete", None)
if complete is not None:
    complete(sampler.latest())
mark("processes read")
from gputop.pipeline import Feed
Feed().push(sampler.latest(), publish=False)
mark("first diagnosis")
import json; print(json.dumps(marks))
"""

FLOOR = """
import time; t0 = time.perf_counter(); marks = {}
def mark(name): marks[name] = round((time.perf_counter() - t0) * 1000, 1)
import psutil, pynvml
mark("psutil, pynvml imported")
pynvml.nvmlInit()
for i in range(pynvml.nvmlDeviceGetCount()):
    h = pynvml.nvmlDeviceGetHandleByIndex(i)
    pynvml.nvmlDeviceGetMemoryInfo(h), pynvml.nvmlDeviceGetName(h)
psutil.virtual_memory(), psutil.cpu_percent()
mark("read once")
from textual.app import App
from textual.widgets import Static
mark("textual imported")
import json; print(json.dumps(marks))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--per-gpu", type=int, default=2, help="processes per GPU (8 GPUs)")
    parser.add_argument("--tree", action="append", type=Path, help="a gputop checkout")
    args = parser.parse_args(argv)
    trees = [t.resolve() for t in args.tree or [ROOT]]
    children = [subprocess.Popen(["sleep", "3600"]) for _ in range(8 * args.per_gpu)]
    runs: dict[str, list[dict[str, float]]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="gputop-phases-") as tmp:
            path = scenario_for([c.pid for c in children], args.per_gpu).write(
                Path(tmp) / "scenario.txt"
            )
            env = subprocess_env(path)
            for tree in trees:
                warm_bytecode(dict(env, PYTHONPATH=str(tree)), Path(tmp) / "pycache", "", tree)
            env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            programs = [(f"gputop {t}", GPUTOP, t) for t in trees]
            programs.append(("floor", FLOOR, ROOT))
            for _ in range(args.runs):
                for name, code, tree in programs:
                    out = subprocess.run(
                        [sys.executable, "-c", code],
                        env=dict(env, PYTHONPATH=str(tree)),
                        cwd=tree,  # -c puts the working directory first on sys.path
                        capture_output=True,
                        text=True,
                        check=False,
                    )
                    if out.returncode != 0:
                        print(f"{name}: failed\n{out.stderr[-2000:]}", file=sys.stderr)
                        return 1
                    runs.setdefault(name, []).append(json.loads(out.stdout.splitlines()[-1]))
    finally:
        for c in children:
            c.kill()
            c.wait()
    print(
        f"8 GPUs x {args.per_gpu}: milliseconds since the interpreter ran the first line, "
        f"medians of {args.runs}:"
    )
    for name, got in runs.items():
        med = {k: statistics.median(m[k] for m in got) for k in got[0]}
        print(f"  {name}: " + ", ".join(f"{k} {v:.1f}" for k, v in med.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
