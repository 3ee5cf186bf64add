#!/usr/bin/env python3
"""gputop on a big node: sampler tick cost, tick wall time and memory, on the fake NVML.

    python bench/bench_scale.py [--ticks 30] [--host-procs 2000] [--quick]

Scenarios (tests/fakenvml ``many_gpus``; ``nvmlDeviceGetPcieThroughput`` sleeps 20 ms
per call like real hardware):

- ``8x64`` and ``16x64``: 8 / 16 GPUs with 64 compute processes each whose pids are not
  in this PID namespace (NVML work, no host look-ups);
- ``8x64+host`` and ``16x64+host``: the same with real processes: the bench forks
  ``--host-procs`` sleeping processes (default 2,000) and lists 64 per GPU of them as
  GPU processes, so the host side (process rows, the /proc scan, the /dev/nvidia
  holder scan over every process) works at that scale too.

Each scenario runs ``LiveSource`` + ``Sampler.tick_now()`` in this process, with the
holder scan on its real 5 s cadence at a 1 s interval (a virtual monotonic clock that
advances 1 s per tick), after two warm-up ticks. Reported per scenario:

- CPU ms per tick: user+system CPU of the whole process (every thread, the PCIe thread
  pool included) over each tick, mean and max;
- wall ms per tick, mean and max;
- RSS after the ticks (MiB), and the memory one more snapshot in the history costs
  (KiB, tracemalloc over ``--ticks`` more ticks with nothing evicted): times 3,600 for
  an hour of history at 1 s;
- ``--once --json``: wall seconds of the whole command in a subprocess and its peak RSS.

Structure: one function per measurement returning a ``Result``; ``MEASUREMENTS`` lists
them. The UI figures (frame cost, key latency) belong beside them as functions of the
same shape (``measure_ui_frame``, ``measure_key_latency``: they get the same
``Scenario`` and return a ``Result``).
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from tests import fakenvml  # noqa: E402
from tests.fakenvml import FakeGpu, FakeProcess, FakeSample, MiB, Scenario  # noqa: E402

PCIE_SLEEP_MS = 20
PROCS_PER_GPU = 64


@dataclass(frozen=True)
class Case:
    """One scenario: GPUs x processes, with or without real host processes."""

    gpus: int
    procs: int = PROCS_PER_GPU
    host: bool = False

    @property
    def name(self) -> str:
        return f"{self.gpus}x{self.procs}{'+host' if self.host else ''}"


@dataclass
class Result:
    what: str
    case: str
    figures: dict[str, float] = field(default_factory=dict)  # name -> value (units in name)


# ---------------------------------------------------------------------------- host processes


@contextmanager
def host_processes(n: int) -> Iterator[list[int]]:
    """``n`` sleeping processes (one forking parent, in its own session); their pids."""
    code = (
        "import os, sys, time\n"
        f"n = {n}\n"
        "pids = []\n"
        "for _ in range(n - 1):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        while True: time.sleep(3600)\n"
        "    pids.append(pid)\n"
        "print(' '.join(map(str, [os.getpid(), *pids])), flush=True)\n"
        "while True: time.sleep(3600)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        pids = [int(x) for x in proc.stdout.readline().split()]
        if len(pids) != n:
            raise RuntimeError(f"started {len(pids)} of {n} host processes")
        yield pids
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def scenario_for(case: Case, host_pids: list[int]) -> Scenario:
    if not case.host:
        # Pids far above any pid_max of this host: "another PID namespace".
        return fakenvml.many_gpus(case.gpus, case.procs, PCIE_SLEEP_MS, first_pid=4_200_000)
    gpus = []
    for g in range(case.gpus):
        # host_pids[0] is their parent: not a GPU process (all the others are its children)
        pids = host_pids[1 + g * case.procs : 1 + (g + 1) * case.procs]
        gpus.append(
            FakeGpu(
                util_gpu=(g * 7) % 101,
                processes=[FakeProcess(p, (k + 1) * 64 * MiB) for k, p in enumerate(pids)],
                samples=[FakeSample(p, sm=k % 101) for k, p in enumerate(pids)],
                sleeps_ms={"nvmlDeviceGetPcieThroughput": PCIE_SLEEP_MS},
            )
        )
    return Scenario(gpus=gpus)


# ---------------------------------------------------------------------------- measurements


def _rss_mib() -> float:
    return psutil.Process().memory_info().rss / MiB


def measure_sampler(case: Case, scenario: Path, ticks: int) -> Result:
    """LiveSource + Sampler.tick_now() in this process."""
    from gputop.sampler import Sampler
    from gputop.sources.live import LiveSource

    os.environ[fakenvml.SCENARIO_ENV] = str(scenario)
    clock = iter(range(10**9))
    source = LiveSource(monotonic=lambda: float(next(clock)))
    sampler = Sampler(source, interval=1.0, history=3600)
    try:
        if not source.driver.available:
            raise RuntimeError(f"NVML did not start on the fake: {source.driver.error}")
        for _ in range(2):
            sampler.tick_now()
        cpu: list[float] = []
        wall: list[float] = []
        for _ in range(ticks):
            c0, w0 = time.process_time(), time.perf_counter()
            snap = sampler.tick_now()
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - w0)
        n_rows = sum(len(g.processes) for g in snap.gpus)
        if len(snap.gpus) != case.gpus or n_rows != case.gpus * case.procs:
            raise RuntimeError(f"unexpected snapshot: {len(snap.gpus)} GPUs, {n_rows} rows")
        gc.collect()
        rss = _rss_mib()
        tracemalloc.start(1)
        try:
            sampler.tick_now()
            gc.collect()
            traced = tracemalloc.get_traced_memory()[0]
            for _ in range(ticks):  # history grows by `ticks` snapshots, none evicted
                sampler.tick_now()
            gc.collect()
            per_snapshot_kib = (tracemalloc.get_traced_memory()[0] - traced) / 1024 / ticks
        finally:
            tracemalloc.stop()
    finally:
        sampler.stop()
    return Result(
        "sampler tick",
        case.name,
        {
            "cpu ms mean": 1000 * sum(cpu) / ticks,
            "cpu ms max": 1000 * max(cpu),
            "wall ms mean": 1000 * sum(wall) / ticks,
            "wall ms max": 1000 * max(wall),
            "rows": float(len(snap.processes)),
            "RSS MiB": rss,
            "KiB/snapshot": per_snapshot_kib,
        },
    )


def measure_once_json(case: Case, scenario: Path, ticks: int) -> Result:
    """``python -m gputop --once --json`` in a subprocess: wall time and peak RSS."""
    env = fakenvml.subprocess_env(scenario)
    env["PYTHONPATH"] = str(ROOT)
    w0 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-c", _ONCE_WITH_PEAK_RSS],
        env=env,
        cwd=ROOT,
        capture_output=True,
        timeout=120,
    )
    wall = time.perf_counter() - w0
    if r.returncode != 0:
        raise RuntimeError(f"--once --json failed: {r.stderr.decode()[-500:]}")
    peak = int(r.stderr.decode().rsplit("maxrss=", 1)[1].split()[0])  # KiB
    return Result(
        "--once --json",
        case.name,
        {
            "wall s": wall,
            "peak RSS MiB": peak / 1024,
            "JSON MiB": len(r.stdout) / MiB,
        },
    )


_ONCE_WITH_PEAK_RSS = """
import resource, runpy, sys
sys.argv = ["gputop", "--once", "--json"]
try:
    runpy.run_module("gputop", run_name="__main__")
finally:
    sys.stderr.write(f"maxrss={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\\n")
"""


Measurement = Callable[[Case, Path, int], Result]
MEASUREMENTS: list[Measurement] = [measure_sampler, measure_once_json]
CASES = [Case(8), Case(16), Case(8, host=True), Case(16, host=True)]


def table(results: list[Result]) -> str:
    lines = []
    for what in dict.fromkeys(r.what for r in results):
        rows = [r for r in results if r.what == what]
        names = list(dict.fromkeys(k for r in rows for k in r.figures))
        head = f"{what:<14} {'case':<11}" + "".join(f"{n:>14}" for n in names)
        lines += [head, "-" * len(head)]
        for r in rows:
            cells = "".join(f"{r.figures.get(n, float('nan')):>14.2f}" for n in names)
            lines.append(f"{'':<14} {r.case:<11}{cells}")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ticks", type=int, default=30)
    parser.add_argument("--host-procs", type=int, default=2000)
    parser.add_argument("--quick", action="store_true", help="5 ticks, 500 host processes")
    args = parser.parse_args(argv)
    ticks = 5 if args.quick else args.ticks
    n_host = 500 if args.quick else args.host_procs
    n_host = max(n_host, 1 + max(c.gpus * c.procs for c in CASES if c.host))
    fakenvml.load_in_process()
    directory = fakenvml.BUILD_DIR / "bench"
    directory.mkdir(parents=True, exist_ok=True)
    results: list[Result] = []
    t0 = time.perf_counter()
    with host_processes(n_host) as pids:
        spawn_s = time.perf_counter() - t0
        for case in CASES:
            path = scenario_for(case, pids).write(directory / f"scale-{case.name}.txt")
            for measure in MEASUREMENTS:
                results.append(measure(case, path, ticks))
    print(
        f"fake NVML, PCIe throughput {PCIE_SLEEP_MS} ms per call; {n_host} host processes "
        f"(started in {spawn_s:.1f} s); {ticks} ticks; {os.cpu_count()} CPUs; "
        f"load {os.getloadavg()[0]:.2f}"
    )
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
