"""Cost of one sampling tick on a busy node, measured on the fake libnvidia-ml.so.1.

Not a timed test: a script that prints a table. Run from the repository root:

    python bench/bench_sampler.py [--ticks 50] [--quick]
    python bench/bench_sampler.py --gpm [--ticks 30] [--rounds 5]

``--gpm`` (issue 30): the same busy GPUs twice, alternated round by round: as Hopper GPUs
with GPM and 18 active NVLink links each (``fakenvml.hopper``: every GPM metric and both
NVLink counters read per tick), and with GPM and NVLink off (the pre-Hopper path). The
reader's clock steps 1 s per reading so that every tick takes a GPM sample and computes
its metrics (GPM needs samples 100 ms apart; back-to-back ticks would skip them).

Each scenario is N GPUs x P compute processes, every process with a fresh utilization
sample, and nvmlDeviceGetPcieThroughput sleeping 20 ms per call like real hardware. The
fake answers in microseconds otherwise, so the figures are gputop's own cost (Python,
pynvml, ctypes) plus the PCIe wait, not a real driver's.

Measurements, one function each, all in one run:
- ``NvmlReader.read``: the NVML source alone, in this process;
- ``Sampler tick``: a whole tick (NVML + host + /proc holders scan) through LiveSource;
- ``gputop --once`` and ``nvitop -1``: each a fresh process on the same fake library and
  scenario, CPU time of the whole process (user + system, from wait4), median of runs.
  gputop's --once also waits 0.1 s between its two readings (rates need two): wall time,
  not CPU.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests import fakenvml  # noqa: E402

PCIE_SLEEP_MS = 20


@dataclass(frozen=True)
class Result:
    what: str  # the measurement
    gpus: int
    procs: int  # per GPU
    ticks: int
    cpu_ms: float  # mean CPU time per tick, all threads of this process
    wall_ms: float  # mean wall time per tick
    wall_max_ms: float


def scenario_path(n_gpus: int, n_procs: int, directory: Path, hopper: bool = False) -> Path:
    scenario = fakenvml.many_gpus(n_gpus, n_procs, pcie_sleep_ms=PCIE_SLEEP_MS)
    if hopper:
        as_hopper(scenario)
    name = f"bench-{n_gpus}x{n_procs}{'-hopper' if hopper else ''}.txt"
    return scenario.write(directory / name)


def as_hopper(scenario: fakenvml.Scenario) -> fakenvml.Scenario:
    """The same GPUs, processes and samples, with GPM and 18 active NVLink links each, going
    round the other GPUs (``fakenvml.hopper``); changed in place, and returned."""
    for g, gpu in enumerate(scenario.gpus):
        made = fakenvml.hopper(g, len(scenario.gpus))
        gpu.gpm, gpu.gpm_metrics = made.gpm, made.gpm_metrics
        gpu.nvlink_version, gpu.nvlinks = made.nvlink_version, made.nvlinks
        gpu.nvlink_kib_step = made.nvlink_kib_step
    return scenario


class SteppingClock:
    """A monotonic clock for the NVML reader that moves 1 s per reading: every tick is a
    GPM pair and a counter rate, as at the dashboard's 1 s interval."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def _timed(ticks: int, tick: Callable[[], object]) -> tuple[float, float, float]:
    cpu: list[float] = []
    wall: list[float] = []
    for _ in range(ticks):
        c0, w0 = time.process_time(), time.perf_counter()
        tick()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return 1000 * sum(cpu) / ticks, 1000 * sum(wall) / ticks, 1000 * max(wall)


def measure_reader(n_gpus: int, n_procs: int, ticks: int, directory: Path) -> Result:
    """NvmlReader.read() in this process (the fake loaded in-process)."""
    from gputop.sources.nvml import NvmlReader

    fakenvml.load_in_process()
    os.environ[fakenvml.SCENARIO_ENV] = str(scenario_path(n_gpus, n_procs, directory))
    reader = NvmlReader()
    try:
        if not reader.driver.available:
            raise RuntimeError(f"NVML did not start on the fake: {reader.driver.error}")
        gpus, errors = reader.read()  # warm-up: static info, thread pool
        if len(gpus) != n_gpus or errors:
            raise RuntimeError(f"unexpected first read: {len(gpus)} GPUs, {errors}")
        cpu, wall, wall_max = _timed(ticks, reader.read)
    finally:
        reader.close()
    return Result("NvmlReader.read", n_gpus, n_procs, ticks, cpu, wall, wall_max)


def measure_sampler(n_gpus: int, n_procs: int, ticks: int, directory: Path) -> Result:
    """Sampler.tick_now() over LiveSource: NVML, host, process look-ups, holders scan."""
    from gputop.sampler import Sampler
    from gputop.sources.live import LiveSource

    fakenvml.load_in_process()
    os.environ[fakenvml.SCENARIO_ENV] = str(scenario_path(n_gpus, n_procs, directory))
    sampler = Sampler(LiveSource(), interval=1.0)
    try:
        first = sampler.tick_now()  # warm-up
        if len(first.gpus) != n_gpus:
            raise RuntimeError(f"unexpected first tick: {len(first.gpus)} GPUs")
        cpu, wall, wall_max = _timed(ticks, sampler.tick_now)
    finally:
        sampler.stop()
    return Result("Sampler tick", n_gpus, n_procs, ticks, cpu, wall, wall_max)


def measure_gpm(n_gpus: int, n_procs: int, ticks: int, directory: Path, hopper: bool) -> Result:
    """Sampler.tick_now() over LiveSource, the GPUs as Hopper (GPM + NVLink) or not."""
    from gputop.sampler import Sampler
    from gputop.sources.live import LiveSource
    from gputop.sources.nvml import NvmlReader

    fakenvml.load_in_process()
    os.environ[fakenvml.SCENARIO_ENV] = str(scenario_path(n_gpus, n_procs, directory, hopper))
    reader = NvmlReader()
    reader._clock = SteppingClock()  # every tick a GPM pair (see the top)
    sampler = Sampler(LiveSource(nvml=reader), interval=1.0)
    try:
        sampler.tick_now()  # warm-up: static info, the first GPM sample and counters
        second = sampler.tick_now()
        if len(second.gpus) != n_gpus:
            raise RuntimeError(f"unexpected tick: {len(second.gpus)} GPUs")
        got = [_inside_read(g) for g in second.gpus]
        if any(got) != hopper or (hopper and not all(got)):
            raise RuntimeError(f"GPM/NVLink read {got} where hopper={hopper}")
        cpu, wall, wall_max = _timed(ticks, sampler.tick_now)
    finally:
        sampler.stop()
    what = "tick, GPM + NVLink" if hopper else "tick, without"
    return Result(what, n_gpus, n_procs, ticks, cpu, wall, wall_max)


def _inside_read(gpu: object) -> bool:
    """Whether a sample has GPM activity and an NVLink rate (False on a tree before them:
    ``--only without`` measures such a tree too, for the before/after table)."""
    activity, nvlink = getattr(gpu, "activity", None), getattr(gpu, "nvlink", None)
    sm = getattr(activity, "sm", None)
    return sm is not None and getattr(nvlink, "rx_bytes_per_s", None) is not None


GPM_SIZES = [(8, 16), (16, 16), (16, 64)]


def main_gpm(ticks: int, rounds: int, sizes: list[tuple[int, int]], only: str = "") -> int:
    """Issue 30's cost: the added GPM and NVLink reads against the same tick without them."""
    fakenvml.build()
    directory = fakenvml.BUILD_DIR / "bench"
    directory.mkdir(parents=True, exist_ok=True)
    print(f"fake NVML, PCIe reads sleep {PCIE_SLEEP_MS} ms; {rounds} rounds of {ticks} ticks,")
    print("the two modes alternated; CPU ms per Sampler tick (process CPU), median of rounds")
    head = f"{'GPUs':>4} {'procs/GPU':>9} {'without':>9} {'GPM+NVLink':>10}"
    head += f" {'added':>8} {'added %':>8}"
    print(head)
    print("-" * len(head))
    for g, p in sizes:
        plain: list[float] = []
        hop: list[float] = []
        for _ in range(rounds):
            if only != "with":
                plain.append(measure_gpm(g, p, ticks, directory, hopper=False).cpu_ms)
            if only != "without":
                hop.append(measure_gpm(g, p, ticks, directory, hopper=True).cpu_ms)
        a = statistics.median(plain) if plain else math.nan
        b = statistics.median(hop) if hop else math.nan
        print(f"{g:>4} {p:>9} {a:>9.2f} {b:>10.2f} {b - a:>8.2f} {100 * (b - a) / a:>7.1f}%")
        print(f"{'':>14} rounds without {[round(x, 2) for x in plain]}")
        print(f"{'':>14} rounds with    {[round(x, 2) for x in hop]}")
    return 0


def _process_cost(argv: list[str], env: dict[str, str], runs: int) -> tuple[float, float, float]:
    """Median CPU ms (user + system of the whole process), median and max wall ms."""
    cpu: list[float] = []
    wall: list[float] = []
    for _ in range(runs):
        w0 = time.perf_counter()
        proc = subprocess.Popen(
            argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall.append(1000 * (time.perf_counter() - w0))
        proc.returncode = os.waitstatus_to_exitcode(status)
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        if proc.stderr:
            proc.stderr.close()
        if proc.returncode != 0:
            raise RuntimeError(f"{argv} exited {proc.returncode}: {err[-500:]}")
        cpu.append(1000 * (usage.ru_utime + usage.ru_stime))
    return statistics.median(cpu), statistics.median(wall), max(wall)


def measure_once(n_gpus: int, n_procs: int, runs: int, directory: Path) -> Result:
    env = fakenvml.subprocess_env(scenario_path(n_gpus, n_procs, directory))
    env["PYTHONPATH"] = str(ROOT)
    argv = [sys.executable, "-m", "gputop", "--once"]
    cpu, wall, wall_max = _process_cost(argv, env, runs)
    return Result("gputop --once", n_gpus, n_procs, runs, cpu, wall, wall_max)


def measure_nvitop(n_gpus: int, n_procs: int, runs: int, directory: Path) -> Result:
    nvitop = shutil.which("nvitop") or str(Path(sys.executable).with_name("nvitop"))
    if not Path(nvitop).exists():
        raise RuntimeError("nvitop is not installed: pip install -e '.[bench]'")
    env = fakenvml.subprocess_env(scenario_path(n_gpus, n_procs, directory))
    cpu, wall, wall_max = _process_cost([nvitop, "-1"], env, runs)
    return Result("nvitop -1", n_gpus, n_procs, runs, cpu, wall, wall_max)


Measurement = Callable[[int, int, int, Path], Result]
MEASUREMENTS: list[Measurement] = [measure_reader, measure_sampler]
#: Whole processes: "ticks" is the number of runs; CPU and wall are medians per run.
PROCESS_MEASUREMENTS: list[Measurement] = [measure_once, measure_nvitop]
RUNS = 5
SIZES = [(8, 16), (8, 64), (16, 16), (16, 64)]


def table(results: list[Result]) -> str:
    head = f"{'measurement':<20} {'GPUs':>4} {'procs/GPU':>9} {'ticks':>5} "
    head += f"{'CPU ms/tick':>11} {'wall ms/tick':>12} {'wall max ms':>11}"
    lines = [head, "-" * len(head)]
    for r in results:
        lines.append(
            f"{r.what:<20} {r.gpus:>4} {r.procs:>9} {r.ticks:>5} "
            f"{r.cpu_ms:>11.2f} {r.wall_ms:>12.2f} {r.wall_max_ms:>11.2f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ticks", type=int, default=50)
    parser.add_argument("--quick", action="store_true", help="5 ticks, smallest and largest")
    parser.add_argument("--gpm", action="store_true", help="GPM + NVLink against without")
    parser.add_argument("--rounds", type=int, default=5, help="--gpm: rounds per mode")
    parser.add_argument(
        "--only", choices=["with", "without"], default="", help="--gpm: one mode only"
    )
    args = parser.parse_args(argv)
    if args.gpm:
        sizes = GPM_SIZES[:1] if args.quick else GPM_SIZES
        return main_gpm(args.ticks, args.rounds, sizes, args.only)
    ticks = 5 if args.quick else args.ticks
    sizes = [SIZES[0], SIZES[-1]] if args.quick else SIZES
    fakenvml.build()
    directory = fakenvml.BUILD_DIR / "bench"
    directory.mkdir(parents=True, exist_ok=True)
    results = [m(g, p, ticks, directory) for m in MEASUREMENTS for g, p in sizes]
    print(f"fake NVML, nvmlDeviceGetPcieThroughput sleeping {PCIE_SLEEP_MS} ms per call")
    print(table(results))
    runs = 3 if args.quick else RUNS
    side_by_side = [m(g, p, runs, directory) for g, p in sizes for m in PROCESS_MEASUREMENTS]
    print()
    print(f"one-shot, whole process, median of {runs} runs (ticks = runs; CPU and wall per run)")
    print(table(side_by_side))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
