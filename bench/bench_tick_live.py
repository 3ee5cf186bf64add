#!/usr/bin/env python3
"""The sampler's tick part by part in a running sampler (1 s apart, caches cold between).

    python bench/bench_tick_live.py [--per-gpu 2] [--settle 65] [--ticks 30]

``bench_tick_parts.py`` runs the ticks back to back with a stepped clock; this runs the
dashboard's ``Sampler`` on the live source every 1 s with a ``Feed`` on its thread (as the
dashboard does, without the UI), on the fake 8 GPUs x N real ``sleep`` processes
(``bench_ui.scenario_for``), lets it settle ``--settle`` seconds (the diagnosis window full,
the processes past their first minute), then reads each part's thread CPU
(``time.thread_time`` around it) over ``--ticks`` ticks, and the sampler thread's CPU from
``schedstat``. Between two ticks the machine runs other work, so a tick costs more than
back to back. The wrappers add a little. Prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.bench_ui import fake_gpus_in_process, thread_timer  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-gpu", type=int, default=2)
    parser.add_argument("--settle", type=float, default=65.0)
    parser.add_argument("--ticks", type=int, default=30)
    args = parser.parse_args(argv)
    with fake_gpus_in_process(args.per_gpu):
        return run(args.per_gpu, args.settle, args.ticks)


def run(per_gpu: int, settle: float, ticks: int) -> int:
    import gputop.sources.nvml as nvml_module
    import gputop.sources.procfs as procfs
    from gputop.pipeline import Feed
    from gputop.sampler import Sampler, make_source
    from gputop.ui.app import HISTORY

    source: Any = make_source(False, None)
    spent: dict[str, float] = {}

    timed = thread_timer(spent)

    nvml, host = source._nvml, source._host
    nvml_module.check_gpus = timed("  of which the model's check", nvml_module.check_gpus)
    nvml.read = timed("NVML read", nvml.read)
    host.read_host = timed("host read (/proc/stat, meminfo, ...)", host.read_host)
    host.read_processes = timed("GPU processes' rows (/proc/PID/*)", host.read_processes)
    host._tree_scan = timed("  of which finding the tree", host._tree_scan)
    for name in ("read_real_uid", "read_cmdline", "read_io"):
        setattr(procfs, name, timed(f"  of which {name}", getattr(procfs, name)))
    source._holders = timed("/dev/nvidia holders scan (every 10 s)", source._holders)
    feed = Feed(history=HISTORY)
    push = timed("diagnosis (Feed.push)", feed.push)
    source.snapshot = timed("snapshot, all", source.snapshot)
    sampler = Sampler(source, interval=1.0, history=HISTORY, on_snapshot=push)
    sampler.start()
    try:
        time.sleep(settle)
        spent.clear()
        thread = sampler._thread
        assert thread is not None and thread.native_id is not None
        stat = f"/proc/self/task/{thread.native_id}/schedstat"
        with open(stat, encoding="ascii") as f:
            cpu0 = int(f.read().split()[0])
        n0 = sampler.ticks
        while sampler.ticks - n0 < ticks:
            time.sleep(0.1)
        with open(stat, encoding="ascii") as f:
            cpu1 = int(f.read().split()[0])
        n = sampler.ticks - n0
        measured = dict(spent)
    finally:
        sampler.stop()
    print(
        f"8 GPUs x {per_gpu}, {n} ticks 1 s apart after {settle:g} s, load average "
        f"{os.getloadavg()[0]:.2f}: ms of thread CPU per tick"
    )
    print(f"  {'the sampler thread, all (schedstat)':44s} {cpu1 / 1e6 / n - cpu0 / 1e6 / n:7.3f}")
    order = [
        "snapshot, all",
        "NVML read",
        "  of which the model's check",
        "host read (/proc/stat, meminfo, ...)",
        "GPU processes' rows (/proc/PID/*)",
        "  of which finding the tree",
        "  of which read_real_uid",
        "  of which read_cmdline",
        "  of which read_io",
        "/dev/nvidia holders scan (every 10 s)",
        "diagnosis (Feed.push)",
    ]
    for name in order:
        print(f"  {name:44s} {1000 * measured.get(name, 0.0) / n:7.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
