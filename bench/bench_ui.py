#!/usr/bin/env python3
"""What the dashboard costs to watch: gputop against nvitop on the same fake 8-GPU node.

    python bench/bench_ui.py [--seconds 30] [--rounds 3] [--tools gputop,nvitop] [--size 200x50]
                             [--every 30] [--hopper]

The tools run side by side, each in its own detached tmux pane of the given size, at a
1 s interval, against the fake ``libnvidia-ml.so.1`` (tests/fakenvml) describing 8 GPUs
with 2 compute processes each. The 16 processes are real (``sleep`` children of this
script), so both tools also do their per-process host work.

A round starts the tools one after the other (each one's first frame is timed while the
ones before it run), waits 2 s, then measures all of them over the same window, so that
the machine's load from anything else falls on every tool alike. The start order
alternates between rounds. Medians over the rounds are printed last.

Reported per tool:
- first frame: seconds from starting the pane until GPU data (the 80 GiB total) is on screen
  (``tmux capture-pane`` polled every 20 ms, so up to ~0.03 s late);
- CPU: user+system time of the tool's process (all its threads) over the window, as % of
  one core (clock-tick resolution: 1/(100 x seconds), 0.03 % for 30 s);
- RSS at the end of the window and the peak RSS (VmHWM).

Both tools load byte code compiled beforehand into a private cache, as an installed
package would (see ``warm_bytecode``).

Needs tmux, gcc (to build the fake) and nvitop (``pip install nvitop``). Prints figures;
it is not a test. The machine's other load shows as noise: run several rounds.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakenvml import (  # noqa: E402
    PROFILES,
    FakeGpu,
    FakeProcess,
    FakeSample,
    GiB,
    Scenario,
    subprocess_env,
)

# The fake GPUs' total memory (80 GiB) as either tool may print it: on screen = data arrived.
# (nvitop hides GPU names in its compact layout, so the name is not a usable marker.)
DATA_MARKER = re.compile(r"\b80(?:\.0+)?\s?GiB|\b81920\s?MiB")
SETTLE_S = 2.0
POLL_S = 0.02
SOCKET = f"gputop-bench-{os.getpid()}"  # a private tmux server, killed at the end


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


#: A function and the same function timed.
Timer = Callable[[str, Callable[..., Any]], Callable[..., Any]]


def thread_timer(spent: dict[str, float]) -> Timer:
    """``timed(name, fn)``: ``fn`` wrapped so that each call adds the calling thread's CPU
    time to ``spent[name]`` (the tick-part benches wrap a source's parts with it)."""

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*a: Any, **k: Any) -> Any:
            t0 = time.thread_time()
            try:
                return fn(*a, **k)
            finally:
                spent[name] = spent.get(name, 0.0) + time.thread_time() - t0

        return wrapper

    return timed


def tmux(*args: str, check: bool = True) -> str:
    out = subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True, check=check)
    return out.stdout


def scenario_for(pids: list[int], per_gpu: int = 2, driver: str = "r560") -> Scenario:
    """8 GPUs, ``per_gpu`` of ``pids`` on each, on a ``driver`` of the fake's profiles
    (the newest: PCIe from the byte counters, no PCIe thread). Their links carry nothing:
    a rate from counters that grow at each read varies with the tick's length, a
    throughput answer does not, and a value that changes costs every consumer a redraw;
    with no traffic both read 0 at every tick."""
    gpus = []
    for g in range(8):
        mine = pids[per_gpu * g : per_gpu * g + per_gpu]
        gpus.append(
            FakeGpu(
                util_gpu=(37 * g) % 101,
                memory_used=(8 + 8 * g) * GiB,
                processes=[
                    FakeProcess(pid, used_memory=(k % 4 + 2) * GiB) for k, pid in enumerate(mine)
                ],
                samples=[
                    FakeSample(pid, sm=20 + 10 * (k % 8), mem=5 + k % 8)
                    for k, pid in enumerate(mine)
                ],
                pcie_tx_kbps=0,
                pcie_rx_kbps=0,
            )
        )
    return PROFILES[driver].scenario(gpus=gpus)


@dataclass
class Pane:
    tool: str
    session: str
    pid: int
    started: float
    first_frame_s: float | None = None
    cpu0: float = 0.0
    note: str = ""


@contextlib.contextmanager
def fake_gpus_in_process(per_gpu: int) -> Iterator[list[int]]:
    """The fake 8 GPUs x ``per_gpu`` real ``sleep`` processes (``scenario_for``), with the
    fake NVML loaded in this process and its scenario set for it; yields the pids. The
    processes end and the scenario goes with the block."""
    from tests import fakenvml

    procs = [subprocess.Popen(["sleep", "3600"]) for _ in range(8 * per_gpu)]
    try:
        with tempfile.TemporaryDirectory(prefix="gputop-bench-") as d:
            pids = [p.pid for p in procs]
            path = scenario_for(pids, per_gpu).write(Path(d) / "s.txt")
            fakenvml.load_in_process()
            os.environ[fakenvml.SCENARIO_ENV] = str(path)
            yield pids
    finally:
        for p in procs:
            p.kill()
            p.wait()


def start_pane(
    tool: str, command: str, env: dict[str, str], size: tuple[int, int], cwd: Path = ROOT
) -> Pane:
    """``cwd``: where the command runs; ``python -m gputop`` imports the gputop there
    before any on PYTHONPATH."""
    session = f"{tool}-{os.getpid()}"
    env_args: list[str] = []
    for key in ("LD_LIBRARY_PATH", "FAKE_NVML_SCENARIO", "PYTHONPATH", "PYTHONPYCACHEPREFIX"):
        if key in env:
            env_args += ["-e", f"{key}={env[key]}"]
    w, h = size
    started = time.monotonic()
    tmux(
        "new-session", "-d", "-s", session, "-x", str(w), "-y", str(h), *env_args,
        "-c", str(cwd), f"exec {command}",
        ";", "set-option", "-t", session, "remain-on-exit", "on",  # keep a crash readable
    )  # fmt: skip
    pid = int(tmux("list-panes", "-t", session, "-F", "#{pane_pid}").split()[0])
    return Pane(tool, session, pid, started)


def wait_first_frame(pane: Pane, timeout: float = 60.0) -> None:
    """Poll the pane until GPU data is on screen; sets ``first_frame_s`` or ``note``."""
    deadline = pane.started + timeout
    while time.monotonic() < deadline:
        screen = tmux("capture-pane", "-p", "-t", pane.session, check=False)
        if DATA_MARKER.search(screen):
            pane.first_frame_s = time.monotonic() - pane.started
            return
        if not Path(f"/proc/{pane.pid}").exists():
            last = [line.strip() for line in screen.splitlines() if line.strip()][-4:]
            pane.note = "exited: " + " | ".join(last)
            return
        time.sleep(POLL_S)
    pane.note = f"no GPU memory total on screen within {timeout:.0f} s"


def run_round(
    tools: list[str], commands: dict[str, str], env: dict[str, str], seconds: float,
    size: tuple[int, int], every: float = 0.0,
) -> list[Result]:  # fmt: skip
    panes: list[Pane] = []
    try:
        for tool in tools:
            pane = start_pane(tool, commands[tool], env, size)
            panes.append(pane)
            wait_first_frame(pane)
        time.sleep(SETTLE_S)
        live = [p for p in panes if not p.note]
        for p in live:
            p.cpu0 = cpu_seconds(p.pid)
        t0 = time.monotonic()
        if every > 0:  # interim figures: does either tool's cost drift as it runs?
            last = {p.tool: (cpu_seconds(p.pid), t0) for p in live}
            while time.monotonic() - t0 < seconds - 1e-3:
                time.sleep(min(every, seconds - (time.monotonic() - t0)))
                now = time.monotonic()
                parts = []
                for p in live:
                    c, (c0, s0) = cpu_seconds(p.pid), last[p.tool]
                    parts.append(f"{p.tool} {100.0 * (c - c0) / (now - s0):.2f} %")
                    last[p.tool] = (c, now)
                print(f"    {now - t0:5.0f} s: " + ", ".join(parts), flush=True)
        else:
            time.sleep(seconds)
        t1 = time.monotonic()
        results = []
        for p in panes:
            if p.note or not Path(f"/proc/{p.pid}").exists():
                results.append(
                    Result(p.tool, p.first_frame_s, None, None, None, p.note or "exited")
                )
                continue
            cpu = 100.0 * (cpu_seconds(p.pid) - p.cpu0) / (t1 - t0)
            rss, hwm = memory_mib(p.pid)
            if os.environ.get("BENCH_KEEP_SCREEN"):
                Path(f"/tmp/{p.session}.txt").write_text(
                    tmux("capture-pane", "-p", "-t", p.session, check=False)
                )
            results.append(Result(p.tool, p.first_frame_s, cpu, rss, hwm))
        return results
    finally:
        for p in panes:
            tmux("kill-session", "-t", p.session, check=False)


def warm_bytecode(env: dict[str, str], prefix: Path, nvitop: str, cwd: Path = ROOT) -> None:
    """Compile both tools' modules once into a private byte-code cache that the panes use.

    An installed package has its byte code compiled (pip does it); a checkout run with
    PYTHONDONTWRITEBYTECODE=1 would compile gputop's sources again at every start and
    count that in its first frame. Both tools get the same cache (``env -u`` in their
    commands drops PYTHONDONTWRITEBYTECODE).
    """
    env["PYTHONPYCACHEPREFIX"] = str(prefix)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    gputop_modules = "gputop.cli, gputop.sources.live, gputop.sources.nvml, gputop.ui.app"
    nvitop_python = Path(nvitop).resolve().parent / "python"
    for python, modules in (
        (sys.executable, gputop_modules),
        (str(nvitop_python) if nvitop_python.exists() else sys.executable, "nvitop.cli"),
    ):
        subprocess.run(
            [python, "-c", f"import {modules}"], env=env, cwd=cwd, check=False, capture_output=True
        )


def _f(v: float | None, spec: str) -> str:
    return "n/a" if v is None else format(v, spec)


def print_table(title: str, results: list[Result]) -> None:
    print(title)
    print(
        f"  {'tool':<8} {'first frame':>12} {'CPU % of a core':>16} {'RSS MiB':>9} {'peak MiB':>9}"
    )
    for r in results:
        print(
            f"  {r.tool:<8} {_f(r.first_frame_s, '.2f') + ' s':>12} {_f(r.cpu_percent, '.2f'):>16} "
            f"{_f(r.rss_mib, '.1f'):>9} {_f(r.peak_rss_mib, '.1f'):>9}  {r.note}"
        )


def medians(tool: str, results: list[Result]) -> Result:
    def med(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return statistics.median(known) if known else None

    mine = [r for r in results if r.tool == tool]
    return Result(
        tool,
        med([r.first_frame_s for r in mine]),
        med([r.cpu_percent for r in mine]),
        med([r.rss_mib for r in mine]),
        med([r.peak_rss_mib for r in mine]),
        f"median of {len(mine)}",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="measured window per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (medians are printed)")
    parser.add_argument("--tools", default="gputop,nvitop")
    parser.add_argument("--size", default="200x50", help="pane size, COLSxROWS")
    parser.add_argument(
        "--every", type=float, default=0.0, help="also print CPU %% every N s of the window"
    )
    parser.add_argument(
        "--hopper",
        action="store_true",
        help="the GPUs with GPM and 18 NVLink links each (SM, TC and NVL on screen)",
    )
    args = parser.parse_args(argv)
    w, h = (int(v) for v in args.size.lower().split("x"))
    if shutil.which("tmux") is None:
        print("tmux not found", file=sys.stderr)
        return 2

    nvitop = shutil.which("nvitop") or str(Path(sys.executable).parent / "nvitop")
    commands = {
        "gputop": f"env -u PYTHONDONTWRITEBYTECODE {shlex.quote(sys.executable)} -m gputop"
        " --interval 1",
        "nvitop": f"env -u PYTHONDONTWRITEBYTECODE {shlex.quote(nvitop)} --interval 1",
    }
    tools = args.tools.split(",")
    unknown = [t for t in tools if t not in commands]
    if unknown:
        parser.error(f"unknown tool: {', '.join(unknown)}")
    children = [subprocess.Popen(["sleep", "3600"]) for _ in range(16)]
    all_results: list[Result] = []
    # A session that outlives the rounds: the private tmux server would otherwise exit
    # with the last pane of one round while the next round starts its first.
    tmux("new-session", "-d", "-s", "keep", "-x", "20", "-y", "5", "exec sleep 3600")
    try:
        with tempfile.TemporaryDirectory(prefix="gputop-bench-", ignore_cleanup_errors=True) as tmp:
            scenario = scenario_for([c.pid for c in children])
            if args.hopper:
                from bench.bench_sampler import as_hopper

                as_hopper(scenario)
            path = scenario.write(Path(tmp) / "scenario.txt")
            env = subprocess_env(path)
            env["PYTHONPATH"] = str(ROOT)
            warm_bytecode(env, Path(tmp) / "pycache", nvitop)
            print(
                f"{w}x{h} tmux panes side by side, 8 GPUs x 2 processes (fake NVML"
                f"{', Hopper: GPM and NVLink' if args.hopper else ''}), "
                f"interval 1 s, {args.seconds:.0f} s window, {os.cpu_count()} CPUs, "
                f"load average {os.getloadavg()[0]:.2f}"
            )
            for n in range(args.rounds):
                order = tools if n % 2 == 0 else tools[::-1]
                results = run_round(order, commands, env, args.seconds, (w, h), args.every)
                all_results += results
                print_table(f"round {n + 1} (started in this order):", results)
    finally:
        tmux("kill-server", check=False)
        for c in children:
            c.kill()
            c.wait()
    print_table("medians:", [medians(t, all_results) for t in tools])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
