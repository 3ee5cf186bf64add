#!/usr/bin/env python3
"""Where the dashboard's start goes: a timeline to the first painted frame, gputop against
a bare Textual app, in a real tmux pane on the fake 8 GPUs x ``--per-gpu`` processes.

    python bench/profile_start.py [--runs 5] [--per-gpu 2] [--cprofile FILE]

Each run starts ``gputop --interval 1`` under a probe that notes the seconds since the
interpreter ran the probe (the interpreter's own start comes before) at: the CLI imported,
the UI imported (as the dashboard begins), the app mounted, the first frame drawn, and that
frame painted; then the process's CPU time (all threads, interpreter start included) and
how many modules are loaded, and it quits. The bare app (bench_start.py's) notes the same
at its mount and first paint. The two alternate. Medians are printed last.

``--cprofile FILE``: one more gputop run under cProfile, stats written to FILE. The
collector is held from the probe's first line, as the ``gputop`` command holds it.
Needs tmux and gcc. Prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_start import BARE_APP  # noqa: E402
from bench.bench_ui import scenario_for, warm_bytecode  # noqa: E402
from tests.fakenvml import subprocess_env  # noqa: E402

_panes = itertools.count()

PROBE = """
import json, sys, time
t0 = time.perf_counter()
out, profile = sys.argv[1], sys.argv[2]
marks = {}
def mark(name): marks.setdefault(name, round(time.perf_counter() - t0, 4))
if profile:
    import cProfile; pr = cProfile.Profile(); pr.enable()
from gputop import gcpolicy; gcpolicy.hold()  # as gputop.launch
import gputop.cli as cli
mark("cli imported")

def hook():
    import gputop.ui.app as app
    mark("ui imported")
    mount, apply = app.GpuTopApp.on_mount, app.GpuTopApp.apply_frame
    def on_mount(self):
        mark("mounted"); mount(self)
    def first(self, frame):
        drawn = apply(self, frame)
        if drawn and "first frame" not in marks:
            mark("first frame")
            def painted():
                mark("painted")
                marks["cpu s"] = round(time.process_time(), 4)
                marks["modules"] = len(sys.modules)
                marks["gputop modules"] = len([m for m in sys.modules if m.startswith("gputop")])
                self.exit()
            self.call_after_refresh(painted)
        return drawn
    app.GpuTopApp.on_mount, app.GpuTopApp.apply_frame = on_mount, first

dashboard = cli._dashboard
def hooked(*args, **kwargs):
    hook()
    return dashboard(*args, **kwargs)
cli._dashboard = hooked
try:
    cli.main(["--interval", "1"])
finally:
    if profile:
        pr.disable(); pr.dump_stats(profile)
    open(out, "w").write(json.dumps(marks))
"""

BARE_PROBE = "import json, sys, time\nt0 = time.perf_counter()\n" + BARE_APP.replace(
    "class Bare(App):\n",
    "class Bare(App):\n"
    "    def on_mount(self):\n"
    "        self.m = round(time.perf_counter() - t0, 4)\n"
    "        self.call_after_refresh(self.done)\n"
    "    def done(self):\n"
    "        marks = {'mounted': self.m, 'painted': round(time.perf_counter() - t0, 4),\n"
    "                 'cpu s': round(time.process_time(), 4), 'modules': len(sys.modules)}\n"
    "        open(sys.argv[1], 'w').write(json.dumps(marks))\n"
    "        self.exit()\n",
)


def run_in_pane(argv: list[str], env: dict[str, str], out: Path) -> dict[str, float]:
    out.unlink(missing_ok=True)
    keep = ("LD_LIBRARY_PATH", "FAKE_NVML_SCENARIO", "PYTHONPATH", "PYTHONPYCACHEPREFIX")
    exports = " ".join(f"{k}={shlex.quote(env[k])}" for k in keep if k in env)
    command = f"env -u PYTHONDONTWRITEBYTECODE {exports} {' '.join(map(shlex.quote, argv))}"
    socket = f"gputop-profile-{os.getpid()}-{next(_panes)}"
    tmux = ["tmux", "-L", socket, "-f", "/dev/null"]
    subprocess.run([*tmux, "new-session", "-d", "-x", "200", "-y", "50", "-c", str(ROOT), command])
    try:
        deadline = time.monotonic() + 60
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.1)  # the file is written in one call; let it land
        marks: dict[str, float] = json.loads(out.read_text()) if out.exists() else {}
        return marks
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--per-gpu", type=int, default=2, help="processes per GPU (8 GPUs)")
    parser.add_argument("--cprofile", metavar="FILE", default="")
    args = parser.parse_args(argv)
    children = [subprocess.Popen(["sleep", "3600"]) for _ in range(8 * args.per_gpu)]
    runs: dict[str, list[dict[str, float]]] = {"gputop": [], "bare": []}
    try:
        with tempfile.TemporaryDirectory(prefix="gputop-profile-") as tmp:
            path = scenario_for([c.pid for c in children], args.per_gpu).write(
                Path(tmp) / "scenario.txt"
            )
            env = subprocess_env(path)
            env["PYTHONPATH"] = str(ROOT)
            warm_bytecode(env, Path(tmp) / "pycache", sys.executable)
            out = Path(tmp) / "marks.json"
            py = sys.executable
            for n in range(args.runs):
                for tool in ("gputop", "bare") if n % 2 == 0 else ("bare", "gputop"):
                    cmd = [py, "-c", PROBE, str(out), ""] if tool == "gputop" else []
                    cmd = cmd or [py, "-c", BARE_PROBE, str(out)]
                    marks = run_in_pane(cmd, env, out)
                    runs[tool].append(marks)
                    print(f"{tool:<7} {json.dumps(marks)}", flush=True)
            if args.cprofile:
                marks = run_in_pane([py, "-c", PROBE, str(out), args.cprofile], env, out)
                print(f"cProfile (UI imported on the main thread): {json.dumps(marks)}")
    finally:
        for c in children:
            c.kill()
            c.wait()
    print("medians:")
    for tool, got in runs.items():
        names = [k for k in got[0]] if got else []
        med = {k: statistics.median(m[k] for m in got if k in m) for k in names}
        print(f"  {tool:<7} " + ", ".join(f"{k} {v:g}" for k, v in med.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
