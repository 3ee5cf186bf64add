"""Where the exporter's idle CPU and memory go: one ``gputop export`` tick, phase by phase,
with a full history (8 GPUs x 16 processes on the fake libnvidia-ml.so.1, as
bench_exporter.py).

``bench_exporter.py`` measures a real exporter for a few minutes, so its history holds
~150 snapshots; the exporter's diagnoser keeps ``lookback_seconds`` of it (600 s at the
defaults: the window's snapshots whole, the rest in the compact look-back form) and its
memory and diagnosis reach their steady state only after 10 minutes.
This script runs the exporter's own pipeline in process (``LiveSource`` -> ``Sampler`` ->
``ExportState.on_snapshot`` -> families, as ``gputop export`` wires them) with a clock
that advances 1 s a tick (snapshot times, rates, the 3 s /proc tree pass and the 5 s
holder scan all follow it), so the history fills in seconds; then it measures
``--ticks`` more ticks:

- thread CPU (``time.thread_time``) of the sampling tick, of ``on_snapshot`` (diagnosis +
  counters) and of one family build: means (what the idle CPU adds up), and medians;
- the process CPU of those ticks minus the main thread's: the PCIe thread pool;
- cyclic GC runs (``gc.callbacks``) with the exporter's GC settings;
- VmRSS with the full look-back (what the exporter settles at after 10 minutes).

    python bench/bench_exporter_tick.py [--ticks 200] [--jobs] [--pcie-ms 20] [--profile]
                                        [--live-pids]

``--profile`` prints the cProfile (thread CPU) of the measured ticks, by own time.
``--live-pids``: the fake lists real processes (``sleep``, started and stopped here)
instead of pids that do not exist on this host, so each tick reads their ``/proc``
files as on a real GPU server (bench_exporter.py's pids are "dead" rows).
``--moving``: every value moves every tick, as on busy real GPUs (utilization, memory,
power, temperature, clocks, PCIe rates, each process's memory and SM %): the fake's
values are otherwise the same every tick, and what did not change is not done again
(shared objects, jobs and verdict parts taken over), which flatters the figure. The
scenario file is rewritten before each tick, outside the measured time; the fake
re-reads it inside the first NVML call (its parse is counted, ~0.1 ms).
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(args: argparse.Namespace) -> None:
    import cProfile
    import io
    import pstats
    import types

    from gputop.analysis.thresholds import DEFAULT
    from gputop.diagnosis import lookback_seconds
    from gputop.exporter.server import ExportState
    from gputop.gcpolicy import GC_THRESHOLDS
    from gputop.sampler import Sampler
    from gputop.sources import host as host_mod
    from gputop.sources.live import LiveSource

    now = [1_800_000_000.0]

    def clock() -> float:  # the snapshot's time: 1 s a tick
        now[0] += 1.0
        return now[0]

    def monotonic() -> float:  # what the cadences see: the same 1 s a tick
        return now[0]

    # The host reader's rates and its /proc tree pass (every 3 s), and the live source's
    # holder scan (every 5 s), run on this clock: as often per tick as in a real run.
    host_mod.time = types.SimpleNamespace(monotonic=monotonic)  # type: ignore[assignment]
    state = ExportState(interval=1.0, with_jobs=args.jobs)
    keep = math.ceil(lookback_seconds(DEFAULT) / 1.0) + 2
    # as gputop export makes it (no CPU frequency: no metric carries it)
    source = LiveSource(host=host_mod.HostReader(cpu_freq=False), clock=clock, monotonic=monotonic)
    sampler = Sampler(source, interval=1.0, history=1)  # as gputop export
    state.on_snapshot(sampler.tick_now())
    gc.freeze()  # as gputop export does after its first tick
    gc.set_threshold(*GC_THRESHOLDS)
    from tests import fakenvml

    scenario = os.environ.get(fakenvml.SCENARIO_ENV)
    pids = [int(p) for p in os.environ.get("GPUTOP_BENCH_PIDS", "").split(",") if p]

    def move(t: int) -> None:
        """Every value of the scenario moves (``--moving``), written before tick t."""
        if not (args.moving and scenario):
            return
        sc = fakenvml.many_gpus(args.gpus, args.procs, args.pcie_ms, pids=pids or None)
        for g, gpu in enumerate(sc.gpus):
            gpu.util_gpu = (g * 7 + t * 13) % 101
            gpu.util_mem = (g * 5 + t * 11) % 101
            gpu.memory_used = (10 + (g + t) % 50) * fakenvml.GiB
            gpu.power_mw = 200_000 + ((g * 31 + t * 17) % 400) * 1000
            gpu.temperature = 40 + (g + t) % 40
            gpu.sm_clock = 1400 + (g * 3 + t * 7) % 500
            gpu.pcie_tx_kbps = 1000 + (g * 101 + t * 997) % 100_000
            gpu.pcie_rx_kbps = 2000 + (g * 103 + t * 991) % 100_000
            for k, (proc, sample) in enumerate(zip(gpu.processes, gpu.samples, strict=True)):
                proc.used_memory = (k + 1 + (t % 3)) * 64 * fakenvml.MiB
                sample.sm = (k + t) % 101
                sample.mem = (k * 3 + t) % 50
        sc.write(scenario)

    for t in range(keep + 20):  # fill the history (and the verdict window) first
        move(t)
        state.on_snapshot(sampler.tick_now())
    rss = _rss_mib()

    collections = [0, 0]  # runs, of which full
    started = [0.0]
    gc_cpu = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.thread_time()
        else:
            collections[0] += 1
            collections[1] += info["generation"] == 2
            gc_cpu[0] += time.thread_time() - started[0]

    gc.callbacks.append(on_gc)
    prof = cProfile.Profile(time.thread_time) if args.profile else None
    sampling: list[float] = []
    diagnosis: list[float] = []
    families: list[float] = []
    p0, t0 = time.process_time(), time.thread_time()
    for t in range(keep + 20, keep + 20 + args.ticks):
        move(t)  # before the clocks start (the CPU of writing the file is the bench's)
        if prof is not None:
            prof.enable()
        c0 = time.thread_time()
        snap = sampler.tick_now()
        c1 = time.thread_time()
        state.on_snapshot(snap)
        c2 = time.thread_time()
        state.families()
        c3 = time.thread_time()
        if prof is not None:
            prof.disable()
        sampling.append(c1 - c0)
        diagnosis.append(c2 - c1)
        families.append(c3 - c2)
    others = (time.process_time() - p0) - (time.thread_time() - t0)
    gc.callbacks.remove(on_gc)
    sampler.stop()

    def ms(values: list[float]) -> str:
        """Mean (what a CPU budget adds up: the 3 s and 5 s passes included), median."""
        mean, median = 1000 * statistics.fmean(values), 1000 * statistics.median(values)
        return f"{mean:.2f} ms (median {median:.2f})"

    whole, compact = state.feed.kept
    total = statistics.fmean(sampling) + statistics.fmean(diagnosis) + others / args.ticks
    print(
        f"gputop export{' --jobs' if args.jobs else ''}{' (live pids)' if args.live_pids else ''}"
        f"{' (every value moving)' if args.moving else ''}"
        f", {whole + compact} snapshots of look-back ({whole} whole, {compact} compact), "
        f"{args.ticks} ticks: sampling {ms(sampling)}, diagnosis + counters "
        f"{ms(diagnosis)}, families {ms(families)} (per scrape, once a tick); other threads "
        f"(PCIe pool) {1000 * others / args.ticks:.2f} ms a tick; cyclic GC {collections[0]} "
        f"runs ({collections[1]} full), {1000 * gc_cpu[0] / args.ticks:.3f} ms a tick; "
        f"VmRSS with the full look-back {rss:.1f} MiB; idle CPU of a tick a second (sampling + "
        f"diagnosis + PCIe pool, means) {100 * total:.2f} % of a core"
    )
    if prof is not None:
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(40)
        print(out.getvalue())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ticks", type=int, default=200, help="ticks measured")
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--procs", type=int, default=16, help="processes per GPU")
    parser.add_argument("--pcie-ms", type=int, default=20, help="PCIe call sleep (fake)")
    parser.add_argument("--jobs", action="store_true", help="as gputop export --jobs")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--live-pids", action="store_true", help="list real processes")
    parser.add_argument("--moving", action="store_true", help="every value moves every tick")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return 0
    from tests import fakenvml

    fakenvml.build()
    sleepers: list[subprocess.Popen[bytes]] = []
    try:
        pids = None
        if args.live_pids:
            for _ in range(args.gpus * args.procs):
                sleepers.append(subprocess.Popen(["sleep", "3600"]))
            pids = [p.pid for p in sleepers]
        with tempfile.TemporaryDirectory(prefix="gputop-bench-tick-") as tmp:
            scenario = Path(tmp) / "scenario.txt"
            fakenvml.many_gpus(args.gpus, args.procs, pcie_sleep_ms=args.pcie_ms, pids=pids).write(
                scenario
            )
            env = fakenvml.subprocess_env(scenario)
            env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
            env["GPUTOP_BENCH_PIDS"] = ",".join(str(p) for p in pids or ())
            argv = [sys.executable, __file__, "--child", *sys.argv[1:]]
            subprocess.run(argv, env=env, check=True)
    finally:
        for p in sleepers:
            p.kill()
            p.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
