#!/usr/bin/env python3
"""The running dashboard's UI thread once settled, part by part (no profiler).

    python bench/ui_thread_parts.py [--per-gpu 2] [--settle 65] [--seconds 20] [--tree DIR]

Starts ``gputop --interval 1`` in a 200x50 tmux pane on the fake 8 GPUs x N real
processes (``bench_ui.py``'s scenario), lets it settle, then for ``--seconds`` reads the
UI thread's CPU (schedstat) and the thread CPU spent in a few functions on it, each
wrapped once: the frame applied (gputop's views and widgets), Textual's compositor (each
widget's ``render_lines``), the callbacks the event loop ran (timers, message pumps), and
what each widget refreshed. The wrappers cost a little: the thread uses less unwrapped.
Parts nest (the compositor holds the widgets' ``render_lines``); they are not to be added
up. ``--tree DIR``: the gputop of that checkout (default: this one). Needs tmux and gcc.
Prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import json
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

#: The probes' window, after their wrappers: the CPU (schedstat) of ``measured_thread()``
#: is read; settled, the counting runs ``seconds``, then the figures go to
#: ``out`` as JSON and the dashboard quits.
WINDOW = """
import gputop.ui.app as app
def schedstat():
    with open(f"/proc/self/task/{measured_thread().native_id}/schedstat") as f:
        return int(f.read().split()[0])
mount = app.GpuTopApp.on_mount
def on_mount(self):
    mount(self)
    def begin():
        self.window = (time.monotonic(), schedstat())
        active.append(1)
        self.set_timer(seconds, end)
    def end():
        active.clear()
        t0, cpu0 = self.window
        with open(out, "w") as f:
            json.dump({"seconds": time.monotonic() - t0, "thread_ns": schedstat() - cpu0,
                       "spent": spent, "calls": calls}, f)
        self.exit()
    self.set_timer(settle, begin)
app.GpuTopApp.on_mount = on_mount
import gputop.cli as cli
cli.main(["--interval", "1"])
"""

#: The probes' start: the window's arguments, the counters, and ``count``/``wrap``, which
#: count a wrapped call's thread CPU only on ``measured_thread()`` (each probe names it).
HEAD = """
import collections, functools, json, sys, threading, time
out, settle, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
spent, calls, active = collections.Counter(), collections.Counter(), []
def count(label, t0):
    if active and threading.current_thread() is measured_thread():
        spent[label] += time.thread_time_ns() - t0; calls[label] += 1
def wrap(owner, name, label=None):
    plain, label = getattr(owner, name), label or f"{owner.__name__}.{name}"
    @functools.wraps(plain)
    def wrapped(*args, **kw):
        t0 = time.thread_time_ns()
        try:
            return plain(*args, **kw)
        finally:
            count(label, t0)
    setattr(owner, name, wrapped)
"""

PROBE = """
import asyncio
measured_thread = threading.main_thread  # the dashboard's timers and widgets run there
from textual import _compositor, screen, widget
import gputop.ui.app as app, gputop.ui.gpu_panel as gpu_panel, gputop.ui.lines as lines
import gputop.ui.process_table as process_table
for owner, name in ((app.GpuTopApp, "apply_frame"), (app.GpuTopApp, "_render_header"),
                    (app.GpuTopApp, "_render_table"), (app.GpuTopApp, "_check_stale"),
                    (gpu_panel.GpuPanel, "show"), (lines.PartsLines, "set_lines"),
                    (process_table.ProcessTable, "show"), (screen.Screen, "_on_timer_update"),
                    (_compositor.Compositor, "render_update")):
    wrap(owner, name)
render_lines = widget.Widget.render_lines
def rendering(self, crop):
    t0 = time.thread_time_ns()
    try:
        return render_lines(self, crop)
    finally:
        count(f"  render_lines {type(self).__name__}#{self.id or ''}", t0)
widget.Widget.render_lines = rendering
refresh = widget.Widget.refresh
def refreshing(self, *regions, **kw):
    if active:
        calls[f"  refresh {type(self).__name__}#{self.id or ''}"] += 1
    return refresh(self, *regions, **kw)
widget.Widget.refresh = refreshing
run = asyncio.events.Handle._run
def running(self):
    t0 = time.thread_time_ns()
    try:
        return run(self)
    finally:
        callback = self._callback
        label = getattr(callback, "__qualname__", type(callback).__name__)
        task = getattr(callback, "__self__", None)
        if isinstance(task, asyncio.Task):
            label += " " + getattr(task.get_coro(), "__qualname__", "?")
        count("loop: " + label, t0)
asyncio.events.Handle._run = running
"""


def main(argv: list[str] | None = None) -> int:
    return run_parts(HEAD + PROBE + WINDOW, "UI thread", "gputop-ui-parts", __doc__ or "", argv)


def run_parts(probe_code: str, thread: str, prefix: str, doc: str, argv: list[str] | None) -> int:
    """Run ``probe_code`` (a dashboard with its parts wrapped, writing what it counted as
    JSON) in a 200x50 tmux pane on the fake 8 GPUs x ``--per-gpu``, and print its parts:
    the one run that ``ui_thread_parts.py`` and ``sampler_thread_parts.py`` share."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    parser.add_argument("--per-gpu", type=int, default=2)
    parser.add_argument("--settle", type=float, default=65.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--tree", type=Path, default=ROOT, help="a gputop checkout")
    args = parser.parse_args(argv)
    tree = args.tree.resolve()
    children = [subprocess.Popen(["sleep", "3600"]) for _ in range(8 * args.per_gpu)]
    try:
        with tempfile.TemporaryDirectory(prefix=f"{prefix}-") as tmp:
            scenario = scenario_for([c.pid for c in children], args.per_gpu)
            env = subprocess_env(scenario.write(Path(tmp) / "scenario.txt"))
            env["PYTHONPATH"] = str(tree)
            warm_bytecode(env, Path(tmp) / "pycache", sys.executable)
            out = Path(tmp) / "parts.json"
            keep = ("LD_LIBRARY_PATH", "FAKE_NVML_SCENARIO", "PYTHONPATH", "PYTHONPYCACHEPREFIX")
            exports = " ".join(f"{k}={shlex.quote(env[k])}" for k in keep if k in env)
            window = (str(args.settle), str(args.seconds))
            probe = [sys.executable, "-c", probe_code, str(out), *window]
            command = f"env -u PYTHONDONTWRITEBYTECODE {exports} {shlex.join(probe)}"
            tmux = ["tmux", "-L", f"{prefix}-{id(out)}", "-f", "/dev/null"]
            # In the tree: ``python -c`` puts its working directory first on sys.path.
            new = ["new-session", "-d", "-x", "200", "-y", "50", "-c", str(tree), command]
            subprocess.run([*tmux, *new])
            try:
                deadline = time.monotonic() + args.settle + args.seconds + 60
                while not out.exists() and time.monotonic() < deadline:
                    time.sleep(0.2)
                time.sleep(0.3)
            finally:
                subprocess.run([*tmux, "kill-server"], capture_output=True)
            if not out.exists():
                print("the dashboard ended before the window closed", file=sys.stderr)
                return 1
            got = json.loads(out.read_text())
    finally:
        for c in children:
            c.kill()
            c.wait()
    secs = got["seconds"]
    print(
        f"8 GPUs x {args.per_gpu}, 200x50, 1 s, settled {args.settle:g} s, {secs:.1f} s: "
        f"{thread} {got['thread_ns'] / secs / 1e6:.2f} ms of CPU a second (wrapped); {tree}"
    )
    print(f"  {'ms/s':>7} {'calls/s':>8}  part")
    for label in sorted(got["calls"], key=lambda k: (-got["spent"].get(k, 0), k)):
        ms = got["spent"].get(label, 0) / secs / 1e6
        print(f"  {ms:7.3f} {got['calls'][label] / secs:8.2f}  {label}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
