#!/usr/bin/env python3
"""What the dashboard costs to watch: gputop against nvitop on the same fake 8-GPU node.

    python bench/bench_ui.py [--seconds 30] [--tools gputop,nvitop] [--size 200x50]

Each tool runs alone, one after the other, in its own detached tmux pane of the given size,
at a 1 s interval, against the fake ``libnvidia-ml.so.1`` (tests/fakenvml) describing
8 GPUs with 2 compute processes each. The 16 processes are real (``sleep`` children of
this script), so both tools also do their per-process host work.

Reported per tool:
- first frame: seconds from starting the pane until GPU data (the 80 GiB total) is on screen
  (``tmux capture-pane`` polled every 20 ms);
- CPU: user+system time of the tool's process over the window (after the first frame and
  a 2 s settle), as % of one core;
- RSS at the end of the window and the peak RSS (VmHWM).

Needs tmux, gcc (to build the fake) and nvitop (``pip install nvitop``). Prints figures;
it is not a test. On a busy machine, run it more than once.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakenvml import FakeGpu, FakeProcess, FakeSample, GiB, Scenario, subprocess_env  # noqa: E402

# The fake GPUs' total memory (80 GiB) as either tool may print it: on screen = data arrived.
# (nvitop hides GPU names in its compact layout, so the name is not a usable marker.)
DATA_MARKER = re.compile(r"\b80(?:\.0+)?\s?GiB|\b81920\s?MiB")
SETTLE_S = 2.0
POLL_S = 0.02
SOCKET = f"gputop-bench-{os.getpid()}"  # a private tmux server; it exits with its last pane


@dataclass
class Result:
    tool: str
    first_frame_s: float | None
    cpu_percent: float | None
    rss_mib: float | None
    peak_rss_mib: float | None
    note: str = ""


def _clock_ticks() -> int:
    return os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` (all its threads) from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is the state (field 3); utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / _clock_ticks()


def memory_mib(pid: int) -> tuple[float | None, float | None]:
    """(VmRSS, VmHWM) in MiB."""
    rss = hwm = None
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) / 1024
    return rss, hwm


def tmux(*args: str, check: bool = True) -> str:
    out = subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True, check=check)
    return out.stdout


def scenario_for(pids: list[int]) -> Scenario:
    gpus = []
    for g in range(8):
        mine = pids[2 * g : 2 * g + 2]
        gpus.append(
            FakeGpu(
                util_gpu=(37 * g) % 101,
                memory_used=(8 + 8 * g) * GiB,
                processes=[
                    FakeProcess(pid, used_memory=(k + 2) * GiB) for k, pid in enumerate(mine)
                ],
                samples=[FakeSample(pid, sm=20 + 10 * k, mem=5 + k) for k, pid in enumerate(mine)],
            )
        )
    return Scenario(gpus=gpus)


def run_tool(
    tool: str, command: str, env: dict[str, str], seconds: float, size: tuple[int, int]
) -> Result:
    session = f"gputop-bench-{tool}-{os.getpid()}"
    env_args: list[str] = []
    for key in ("LD_LIBRARY_PATH", "FAKE_NVML_SCENARIO", "PYTHONPATH"):
        if key in env:
            env_args += ["-e", f"{key}={env[key]}"]
    w, h = size
    start = time.monotonic()
    tmux(
        "new-session", "-d", "-s", session, "-x", str(w), "-y", str(h), *env_args,
        "-c", str(ROOT), f"exec {command}",
        ";", "set-option", "-t", session, "remain-on-exit", "on",  # keep a crash readable
    )  # fmt: skip
    try:
        pid = int(tmux("list-panes", "-t", session, "-F", "#{pane_pid}").split()[0])
        first: float | None = None
        deadline = start + 60
        while time.monotonic() < deadline:
            screen = tmux("capture-pane", "-p", "-t", session, check=False)
            if DATA_MARKER.search(screen):
                first = time.monotonic() - start
                break
            if not Path(f"/proc/{pid}").exists():
                last = [line.strip() for line in screen.splitlines() if line.strip()][-4:]
                return Result(tool, None, None, None, None, "exited: " + " | ".join(last))
            time.sleep(POLL_S)
        if first is None:
            return Result(tool, None, None, None, None, "no GPU memory total on screen within 60 s")
        time.sleep(SETTLE_S)
        cpu0, t0 = cpu_seconds(pid), time.monotonic()
        time.sleep(seconds)
        cpu1, t1 = cpu_seconds(pid), time.monotonic()
        rss, hwm = memory_mib(pid)
        if os.environ.get("BENCH_KEEP_SCREEN"):
            Path(f"/tmp/{session}.txt").write_text(
                tmux("capture-pane", "-p", "-t", session, check=False)
            )
        return Result(tool, first, 100.0 * (cpu1 - cpu0) / (t1 - t0), rss, hwm)
    finally:
        tmux("kill-session", "-t", session, check=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="measured window per tool")
    parser.add_argument("--tools", default="gputop,nvitop")
    parser.add_argument("--size", default="200x50", help="pane size, COLSxROWS")
    args = parser.parse_args(argv)
    w, h = (int(v) for v in args.size.lower().split("x"))
    if shutil.which("tmux") is None:
        print("tmux not found", file=sys.stderr)
        return 2

    nvitop = shutil.which("nvitop") or str(Path(sys.executable).parent / "nvitop")
    commands = {
        "gputop": f"{shlex.quote(sys.executable)} -m gputop --interval 1",
        "nvitop": f"{shlex.quote(nvitop)} --interval 1",
    }
    children = [subprocess.Popen(["sleep", "3600"]) for _ in range(16)]
    try:
        with tempfile.TemporaryDirectory(prefix="gputop-bench-") as tmp:
            path = scenario_for([c.pid for c in children]).write(Path(tmp) / "scenario.txt")
            env = subprocess_env(path)
            env["PYTHONPATH"] = str(ROOT)
            results = [
                run_tool(tool, commands[tool], env, args.seconds, (w, h))
                for tool in args.tools.split(",")
            ]
    finally:
        for c in children:
            c.kill()
            c.wait()

    print(f"{w}x{h} tmux pane, 8 GPUs x 2 processes (fake NVML), interval 1 s, "
          f"{args.seconds:.0f} s window, {os.cpu_count()} CPUs")  # fmt: skip
    print(f"{'tool':<8} {'first frame':>12} {'CPU % of a core':>16} {'RSS MiB':>9} {'peak MiB':>9}")
    for r in results:

        def f(v: float | None, spec: str) -> str:
            return "n/a" if v is None else format(v, spec)

        print(
            f"{r.tool:<8} {f(r.first_frame_s, '.2f') + ' s':>12} {f(r.cpu_percent, '.2f'):>16} "
            f"{f(r.rss_mib, '.1f'):>9} {f(r.peak_rss_mib, '.1f'):>9}  {r.note}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
