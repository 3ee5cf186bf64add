#!/usr/bin/env python3
"""How fast the dashboard starts and what it costs idle: gputop, nvitop, a bare Textual app
and the stack's floor.

    python bench/bench_start.py [--rounds 5] [--scenarios 8x2,8x16] [--size 200x50]
                                [--rss-at 20] [--seconds 30] [--age 60] [--quick]
                                [--tree DIR ...]

Each program runs in its own detached tmux pane of the same size (``bench_ui.py``'s
panes), on the same fake 8-GPU scenario (tests/fakenvml; ``8xN``: N real ``sleep``
processes per GPU, started ``--age`` seconds before the first round, so that they are
past their first minute as on a server whose jobs run for hours), at a 1 s interval. A
round has two parts, in a start order that rotates from round to round, so no program is
always first or last:
- the starts: each program alone, started, timed to its first frame and ended before
  the next one starts (one still running would take CPU from the start being timed);
- the steady state: all of them started one after the other and left running together.

Reported per program and round, and as medians over the rounds:
- first frame: seconds from starting the pane until GPU data (the 80 GiB total) is on
  screen; for the bare app (one ``Static`` holding such a text) its first paint;
- RSS: VmRSS ``--rss-at`` seconds after the program started (steady part);
- CPU: user+system time over the ``--seconds`` window that begins once all of them run,
  as % of one core (steady part).

The floor is the least any Textual program on gputop's stack does before it can show GPU
data: the bare app, plus pynvml and psutil imported, NVML initialised, each GPU's name and
memory and the host's CPU and RAM read once, and shown in the one ``Static``. It never
updates (its CPU is not a figure to compare). Against the bare app it says what the stack
alone costs before any of gputop's own code runs.

Then the goals of issue 32 as ratios within the run: gputop's first frame against the
floor's (goal <= 1.2), gputop's RSS minus the floor's (goal <= 8 MiB), and gputop's CPU
against nvitop's (goal <= 0.5); and issue 23's, against the bare app. The load average
is printed with each round: the machine's other load moves every figure, so compare
within a run.

``--tree DIR`` (repeatable): run the gputop of that checkout (default: this one), to
compare trees within one run: ``gputop0``, ``gputop1``, ... in the order given, each
started in its own tree (``python -m`` imports the working directory's package first),
each against the floor and nvitop of the same run.

``--starts N``: only the timed starts, N rotating rounds, no steady part (no RSS or CPU):
more starts in the same time, for the first frame alone.

``--waiter control|poll``: how a first frame is found (``bench_ui.wait_first_frame``):
the arrival of the output block after which the screen shows the marker (tmux's control
mode; the default, polling where tmux lacks it), or the first capture that shows it when
the pane is captured every 20 ms (the old way: a figure a poll late); with ``--starts``,
``control,poll`` starts each program once per waiter in every round (``floor/poll``...).

``--quick`` (development): 2 rounds, 8x2 only, RSS at 6 s, CPU over 8 s (``--age 0`` to
start at once).
Needs tmux, gcc (to build the fake) and nvitop. Prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import bench_ui  # noqa: E402
from bench.bench_ui import (  # noqa: E402
    WAITERS,
    Pane,
    cpu_seconds,
    memory_mib,
    rotated,
    scenario_for,
    start_pane,
    tmux,
    tmux_server,
    wait_first_frame,
    warm_bytecode,
)
from tests.fakenvml import subprocess_env  # noqa: E402

#: Seconds between one timed start and the next (the ended program's pane is gone).
SETTLE_S = 0.5

#: The floor: Textual's own start and idle cost, one widget whose text the bench waits for.
BARE_APP = (
    "from textual.app import App\n"
    "from textual.widgets import Static\n"
    "class Bare(App):\n"
    "    def compose(self):\n"
    "        yield Static('NVIDIA H100 80GB HBM3   0 / 80 GiB')\n"
    "Bare().run()\n"
)
#: The floor of gputop's stack (see the module's doc): what the bare app's goals leave for
#: gputop's own code once pynvml, psutil and NVML have had their share.
FLOOR_APP = (
    "import psutil, pynvml\n"
    "pynvml.nvmlInit()\n"
    "lines = []\n"
    "for i in range(pynvml.nvmlDeviceGetCount()):\n"
    "    h = pynvml.nvmlDeviceGetHandleByIndex(i)\n"
    "    m = pynvml.nvmlDeviceGetMemoryInfo(h)\n"
    "    lines.append(f'{i} {pynvml.nvmlDeviceGetName(h)}  {m.used >> 30} / {m.total >> 30} GiB')\n"
    "vm = psutil.virtual_memory()\n"
    "lines.append(f'CPU {psutil.cpu_percent()} %  RAM {vm.used >> 30} / {vm.total >> 30} GiB')\n"
    "from textual.app import App\n"
    "from textual.widgets import Static\n"
    "class Floor(App):\n"
    "    def compose(self):\n"
    "        yield Static('\\n'.join(lines))\n"
    "Floor().run()\n"
)
TOOLS = ("gputop", "nvitop", "bare", "floor")


@dataclass
class Figures:
    tool: str
    first_frame_s: float | None = None
    rss_mib: float | None = None
    cpu_percent: float | None = None
    note: str = ""


def commands() -> dict[str, str]:
    """Each program's command by name (gputop's, the same for every tree)."""
    py = shlex.quote(sys.executable)
    nvitop = shutil.which("nvitop") or str(Path(sys.executable).parent / "nvitop")
    plain = "env -u PYTHONDONTWRITEBYTECODE"
    return {
        "gputop": f"{plain} {py} -m gputop --interval 1",
        "nvitop": f"{plain} {shlex.quote(nvitop)} --interval 1",
        "bare": f"{plain} {py} -c {shlex.quote(BARE_APP)}",
        "floor": f"{plain} {py} -c {shlex.quote(FLOOR_APP)}",
    }


@dataclass
class Program:
    """One program of the run: its command, environment and working directory."""

    command: str
    env: dict[str, str]
    cwd: Path = ROOT
    waiter: str | None = None  # None: bench_ui's

    def start(self, tool: str, size: tuple[int, int]) -> Pane:
        return start_pane(tool, self.command, self.env, size, self.cwd, self.waiter)


def by_waiter(progs: dict[str, Program], waiters: list[str]) -> dict[str, Program]:
    """Each program once per waiter, ``NAME/WAITER`` (the same program, timed both ways in
    one run); one waiter: unchanged."""
    if len(waiters) < 2:
        return progs
    return {
        f"{name}/{w}": Program(p.command, p.env, p.cwd, w)
        for w in waiters
        for name, p in progs.items()
    }


def programs(env: dict[str, str], trees: list[Path]) -> dict[str, Program]:
    """``gputop`` (one tree) or ``gputop0``, ``gputop1``... (one per tree), then the rest."""
    cmd = commands()
    named = (
        {"gputop": trees[0]} if len(trees) == 1 else {f"gputop{i}": t for i, t in enumerate(trees)}
    )
    out = {
        name: Program(cmd["gputop"], dict(env, PYTHONPATH=str(t)), t) for name, t in named.items()
    }
    out.update((tool, Program(cmd[tool], env)) for tool in TOOLS if tool != "gputop")
    return out


def time_starts(
    order: list[str], progs: dict[str, Program], size: tuple[int, int]
) -> dict[str, float | None]:
    """Each program started alone, timed to its first frame and ended."""
    first: dict[str, float | None] = {}
    for tool in order:
        pane = progs[tool].start(tool, size)
        try:
            wait_first_frame(pane)
            first[tool] = pane.first_frame_s
        finally:
            tmux("kill-session", "-t", pane.session, check=False)
        time.sleep(SETTLE_S)
    return first


def run_round(
    order: list[str],
    progs: dict[str, Program],
    size: tuple[int, int],
    rss_at: float,
    seconds: float,
) -> list[Figures]:
    first = time_starts(order, progs, size)
    panes: list[Pane] = []
    try:
        for tool in order:
            pane = progs[tool].start(tool, size)
            panes.append(pane)
            wait_first_frame(pane)
            pane.first_frame_s = first[tool]
        live = [p for p in panes if not p.note]
        rss: dict[str, float | None] = {}
        for p in live:
            p.cpu0 = cpu_seconds(p.pid)
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds or len(rss) < len(live):
            now = time.monotonic()
            for p in live:
                if p.tool not in rss and now - p.started >= rss_at:
                    rss[p.tool] = memory_mib(p.pid)[0]
            time.sleep(0.1)
        t1 = time.monotonic()
        out = []
        for p in panes:
            if p.note or not Path(f"/proc/{p.pid}").exists():
                out.append(Figures(p.tool, p.first_frame_s, note=p.note or "exited"))
                continue
            cpu = 100.0 * (cpu_seconds(p.pid) - p.cpu0) / (t1 - t0)
            out.append(Figures(p.tool, p.first_frame_s, rss.get(p.tool), cpu))
        return out
    finally:
        for p in panes:
            tmux("kill-session", "-t", p.session, check=False)


def _f(v: float | None, spec: str) -> str:
    return "n/a" if v is None else format(v, spec)


def print_table(title: str, rows: list[Figures]) -> None:
    print(title)
    print(f"    {'program':<8} {'first frame':>12} {'RSS MiB':>9} {'CPU % of a core':>16}")
    for r in rows:
        print(
            f"    {r.tool:<8} {_f(r.first_frame_s, '.3f') + ' s':>12} {_f(r.rss_mib, '.1f'):>9} "
            f"{_f(r.cpu_percent, '.2f'):>16}  {r.note}"
        )


def median_of(tool: str, rows: list[Figures]) -> Figures:
    def med(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return statistics.median(known) if known else None

    mine = [r for r in rows if r.tool == tool]
    return Figures(
        tool,
        med([r.first_frame_s for r in mine]),
        med([r.rss_mib for r in mine]),
        med([r.cpu_percent for r in mine]),
        f"median of {len(mine)}",
    )


def print_goals(m: dict[str, Figures], gputop: str = "gputop") -> None:
    g, n, b, f = m[gputop], m["nvitop"], m["bare"], m["floor"]
    print(f"  {gputop}:")

    def ratio(a: float | None, c: float | None) -> str:
        return "n/a" if a is None or not c else f"{a / c:.2f}"

    def minus(a: float | None, c: float | None) -> str:
        return _f(None if a is None or c is None else a - c, "+.1f")

    first = ratio(g.first_frame_s, f.first_frame_s)
    print(f"  first frame, gputop / floor (goal <= 1.2): {first}")
    print(f"  RSS, gputop - floor (goal <= +8):        {minus(g.rss_mib, f.rss_mib)} MiB")
    print(f"  CPU, gputop / nvitop (goal <= 0.5):      {ratio(g.cpu_percent, n.cpu_percent)}")
    print(f"  first frame, gputop / bare first paint: {ratio(g.first_frame_s, b.first_frame_s)}")
    print(f"  first frame, floor / bare first paint:  {ratio(f.first_frame_s, b.first_frame_s)}")
    print(f"  first frame, gputop / nvitop:           {ratio(g.first_frame_s, n.first_frame_s)}")
    rss = minus(g.rss_mib, b.rss_mib)
    print(f"  RSS, gputop - bare:                     {rss} MiB")
    print(f"  RSS, floor - bare:                      {minus(f.rss_mib, b.rss_mib)} MiB")


def print_starts(
    tools: list[str], progs: dict[str, Program], size: tuple[int, int], rounds: int
) -> None:
    """``--starts``: the first frames of ``rounds`` rotating rounds, and each one's
    median and mean against the floor's."""
    got: dict[str, list[float]] = {t: [] for t in tools}
    for r in range(rounds):
        order = rotated(tools, r)
        for tool, s in time_starts(order, progs, size).items():
            if s is not None:
                got[tool].append(s)
    print(f"  first frame, {rounds} starts each (load at the end {os.getloadavg()[0]:.2f}):")
    for tool, v in got.items():
        if not v:
            print(f"    {tool:<8} n/a")
            continue
        _, slash, waiter = tool.partition("/")
        floors = got["floor" + slash + waiter]  # the floor timed the same way
        floor = statistics.median(floors) if floors else None
        med = statistics.median(v)
        vs = f"{med / floor:.2f} x the floor's" if floor else ""
        print(f"    {tool:<8} median {med:.3f} s, mean {statistics.mean(v):.3f} s  {vs}")


@contextlib.contextmanager
def fake_gpus(
    n_per: int, trees: list[Path], tmp: Path, nvitop: str
) -> Iterator[tuple[dict[str, str], float]]:
    """The fake 8 GPUs x ``n_per`` real sleeping processes (ended after the block): the
    programs' environment, with each tree's byte code and nvitop's warmed into a private
    cache under ``tmp``, and when the processes started (``time.monotonic()``)."""
    children = [subprocess.Popen(["sleep", "3600"]) for _ in range(8 * n_per)]
    born = time.monotonic()
    try:
        path = scenario_for([c.pid for c in children], n_per).write(tmp / f"scenario-{n_per}.txt")
        env = subprocess_env(path)
        env["PYTHONPATH"] = str(ROOT)
        for tree in trees:
            warm_bytecode(dict(env, PYTHONPATH=str(tree)), tmp / "pycache", nvitop, tree)
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        yield env, born
    finally:
        for c in children:
            c.kill()
            c.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scenarios", default="8x2,8x16", help="GPUsxPROCESSES per GPU, GPUs 8")
    parser.add_argument("--size", default="200x50", help="pane size, COLSxROWS")
    parser.add_argument("--rss-at", type=float, default=20.0, help="seconds after start")
    parser.add_argument("--seconds", type=float, default=30.0, help="CPU window")
    parser.add_argument(
        "--age", type=float, default=60.0, help="seconds the GPU processes run before round 1"
    )
    parser.add_argument("--quick", action="store_true", help="2 rounds, 8x2, short windows")
    parser.add_argument("--tree", action="append", type=Path, help="a gputop checkout")
    parser.add_argument(
        "--starts",
        type=int,
        metavar="N",
        help="only the timed starts, N rounds (no steady part): first frames, finer",
    )
    parser.add_argument(
        "--waiter",
        default="control",
        help="how a first frame is found: control (the output block that showed it, tmux"
        " control mode; polling where tmux lacks it) or poll (a capture every 20 ms);"
        " with --starts, control,poll times each start both ways, alternated",
    )
    args = parser.parse_args(argv)
    waiters = args.waiter.split(",")
    if not waiters or any(w not in WAITERS for w in waiters):
        parser.error(f"--waiter: one or more of {', '.join(WAITERS)}")
    if len(waiters) > 1 and not args.starts:
        parser.error("--waiter with two waiters needs --starts")
    waiters = list(dict.fromkeys(bench_ui.set_waiter(w) for w in waiters))
    waiter = ",".join(waiters)
    trees = [t.resolve() for t in args.tree or [ROOT]]
    if args.quick:
        args.rounds, args.scenarios, args.rss_at, args.seconds = 2, "8x2", 6.0, 8.0
    w, h = (int(v) for v in args.size.lower().split("x"))
    per_gpu = [int(s.lower().split("x")[1]) for s in args.scenarios.split(",")]
    if shutil.which("tmux") is None:
        print("tmux not found", file=sys.stderr)
        return 2
    nvitop = shutil.which("nvitop") or str(Path(sys.executable).parent / "nvitop")
    with (
        tmux_server(),
        tempfile.TemporaryDirectory(prefix="gputop-bench-", ignore_cleanup_errors=True) as tmp,
    ):
        for n_per in per_gpu:
            with fake_gpus(n_per, trees, Path(tmp), nvitop) as (env, born):
                progs = by_waiter(programs(env, trees), waiters)
                tools = list(progs)
                # A server's GPU processes have mostly run for minutes: past the first
                # minute a process's TIME shows minutes in gputop (seconds in nvitop).
                time.sleep(max(0.0, args.age - (time.monotonic() - born)))
                print(
                    f"8 GPUs x {n_per} processes (fake NVML), {w}x{h} tmux panes, 1 s interval,"
                    f" RSS at {args.rss_at:g} s, CPU over {args.seconds:g} s, processes"
                    f" {args.age:g} s old at round 1, "
                    f"{os.cpu_count()} CPUs, first frames by {waiter}"
                )
                for name, tree in zip(tools, trees, strict=False):
                    print(f"  {name.split('/')[0]}: {tree}")
                if args.starts:
                    print_starts(tools, progs, (w, h), args.starts)
                    continue
                rows: list[Figures] = []
                for r in range(args.rounds):
                    order = rotated(tools, r)
                    load = os.getloadavg()[0]
                    got = run_round(order, progs, (w, h), args.rss_at, args.seconds)
                    rows += got
                    print_table(f"  round {r + 1}, load average {load:.2f}:", got)
                medians = {t: median_of(t, rows) for t in tools}
                print_table("  medians:", list(medians.values()))
                for name in tools[: len(trees)]:
                    print_goals(medians, name)
                end = " / ".join(f"{v:.2f}" for v in os.getloadavg())
                print(f"  load average at the end: {end}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
