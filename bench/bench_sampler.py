"""Cost of one sampling tick on a busy node, measured on the fake libnvidia-ml.so.1.

Not a timed test: a script that prints a table. Run from the repository root:

    python bench/bench_sampler.py [--ticks 50] [--quick]

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


def scenario_path(n_gpus: int, n_procs: int, directory: Path) -> Path:
    scenario = fakenvml.many_gpus(n_gpus, n_procs, pcie_sleep_ms=PCIE_SLEEP_MS)
    return scenario.write(directory / f"bench-{n_gpus}x{n_procs}.txt")


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
    args = parser.parse_args(argv)
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
