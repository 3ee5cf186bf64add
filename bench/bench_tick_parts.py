#!/usr/bin/env python3
"""Where the sampler's settled tick goes, part by part (issue 32 §5): CPU per tick.

    python bench/bench_tick_parts.py [--per-gpu 2] [--settle 70] [--ticks 60]

The dashboard's tick without the dashboard: ``LiveSource`` on the fake 8 GPUs x N real
``sleep`` processes (``bench_ui.scenario_for``, the scenario ``bench_idle.py`` runs), each
snapshot pushed to a ``Feed`` as the app does (the diagnosis). The clocks are stepped 1 s
per tick, so that ``--settle`` ticks run at once and fill the diagnosis window as a
dashboard does in that many seconds; then ``--ticks`` ticks are measured. Prints each
part's thread CPU time per tick (``time.thread_time``, no profiler): the NVML read, the
host read, the GPU processes' rows, the /dev/nvidia holders scan, the snapshot's other
work, and the diagnosis. The fake answers NVML in microseconds and its values do not
move, unlike a real GPU's. Prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.bench_ui import fake_gpus_in_process, thread_timer  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-gpu", type=int, default=2)
    parser.add_argument("--settle", type=int, default=70, help="ticks before the measured ones")
    parser.add_argument("--ticks", type=int, default=60)
    args = parser.parse_args(argv)

    with fake_gpus_in_process(args.per_gpu):
        return run(args.settle, args.ticks, args.per_gpu)


def run(settle: int, ticks: int, per_gpu: int) -> int:
    from gputop.pipeline import Feed
    from gputop.sources.live import LiveSource

    now = [time.time(), time.monotonic()]
    source = LiveSource(clock=lambda: now[0], monotonic=lambda: now[1])
    feed = Feed(history=300)
    spent: dict[str, float] = {}

    timed = thread_timer(spent)

    import gputop.sources.nvml as nvml_module

    nvml, host = source._nvml, source._host
    nvml_module.check_gpus = timed("  of which the model's check", nvml_module.check_gpus)
    nvml._read_all = timed("  of which the NVML calls", nvml._read_all)
    nvml.read = timed("NVML read (incl. the model's check)", nvml.read)
    host.read_host = timed("host read (/proc/stat, meminfo, ...)", host.read_host)
    host.read_processes = timed("GPU processes' rows (/proc/PID/*)", host.read_processes)
    source._holders = timed("/dev/nvidia holders scan", source._holders)
    try:
        for k in range(settle + ticks):
            if k == settle:
                spent.clear()
            t0 = time.thread_time()
            snap = source.snapshot()
            spent["snapshot, all"] = spent.get("snapshot, all", 0.0) + time.thread_time() - t0
            t0 = time.thread_time()
            feed.push(snap)
            spent["diagnosis (Feed.push)"] = spent.get("diagnosis (Feed.push)", 0.0) + (
                time.thread_time() - t0
            )
            now[0] += 1.0
            now[1] += 1.0
    finally:
        source.close()
    total = spent["snapshot, all"] + spent["diagnosis (Feed.push)"]
    outer = ("snapshot, all", "diagnosis (Feed.push)")
    parts = sum(v for k, v in spent.items() if k not in outer and not k.startswith(" "))
    spent["snapshot, the rest"] = spent["snapshot, all"] - parts
    print(f"8 GPUs x {per_gpu}, {ticks} ticks after {settle}: ms of thread CPU per tick")
    subparts = [k for k in spent if k.startswith(" ")]  # the NVML read's own, printed under it
    for name in [k for k in spent if not k.startswith(" ")]:
        value = spent[name]
        print(f"  {name:40s} {1000 * value / ticks:7.3f}  {100 * value / total:5.1f} %")
        if name.startswith("NVML read"):
            for sub in subparts:
                ms, share = 1000 * spent[sub] / ticks, 100 * spent[sub] / total
                print(f"  {sub:40s} {ms:7.3f}  {share:5.1f} %")
    print(f"  {'tick, all':40s} {1000 * total / ticks:7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
