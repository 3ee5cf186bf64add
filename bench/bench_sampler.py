"""Cost of one sampling tick on a busy node, measured on the fake libnvidia-ml.so.1.

Not a timed test: a script that prints a table. Run from the repository root:

    python bench/bench_sampler.py [--ticks 50] [--quick]

Each scenario is N GPUs x P compute processes, every process with a fresh utilization
sample, and nvmlDeviceGetPcieThroughput sleeping 20 ms per call like real hardware. The
fake answers in microseconds otherwise, so the figures are gputop's own cost (Python,
pynvml, ctypes) plus the PCIe wait, not a real driver's.

One function per measurement (``measure_reader`` ...) returning a ``Result``; add new ones
(the full sampler, ``gputop --once`` vs ``nvitop -1`` in a subprocess) beside it and list
them in ``MEASUREMENTS``.
"""

from __future__ import annotations

import argparse
import os
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


Measurement = Callable[[int, int, int, Path], Result]
MEASUREMENTS: list[Measurement] = [measure_reader]
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
