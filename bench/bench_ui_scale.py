#!/usr/bin/env python3
"""The dashboard at scale, headless: frame cost, key latency and memory of GpuTopApp.

    python bench/bench_ui_scale.py [--ticks 100] [--interval 0.1] [--presses 20]

For each configuration (16 GPUs x 64 processes at 200x50; 8 GPUs x 2 processes at 80x24)
the real app runs under Textual's pilot, fed by a real Sampler over LiveSource (NVML
through the in-process fake ``libnvidia-ml.so.1`` of tests/fakenvml, host through psutil
and /proc). Reported:

- apply_frame: wall time of each ``GpuTopApp.apply_frame`` call during ``--ticks``
  ticks (verdicts + drawing the widgets; Textual's own compositing happens after it),
  median and max, in ms;
- key latency: time from the key ``s`` (sort by the next column) entering the app as the
  terminal driver sends it until the table holds its rows in the new order and shows the
  arrow on the new column (polled every 2 ms) and the screen has processed the
  repaint, median and p95 over ``--presses`` presses
  while the sampler keeps ticking;
- RSS of this process after the ticks, and its peak (VmHWM), in MiB (Python + Textual +
  the fake library: compare between runs, not with a standalone process).

Needs gcc (to build the fake). Prints figures; it is not a test. On a busy machine, run
it more than once.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests import fakenvml  # noqa: E402
from tests.fakenvml import many_gpus  # noqa: E402


@dataclass
class Config:
    gpus: int
    procs: int
    size: tuple[int, int]

    @property
    def label(self) -> str:
        return f"{self.gpus} GPUs x {self.procs} procs at {self.size[0]}x{self.size[1]}"


CONFIGS = (Config(16, 64, (200, 50)), Config(8, 2, (80, 24)))


def _status_mib(field: str) -> float | None:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return None


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def run_one(cfg: Config, ticks: int, interval: float, presses: int, tmp: Path) -> None:
    from textual import events

    from gputop.sampler import Sampler
    from gputop.sources.live import LiveSource
    from gputop.sources.nvml import NvmlReader
    from gputop.ui.app import GpuTopApp
    from gputop.views import process_view

    scenario = tmp / f"scenario-{cfg.gpus}x{cfg.procs}.txt"
    many_gpus(cfg.gpus, cfg.procs).write(scenario)
    os.environ[fakenvml.SCENARIO_ENV] = str(scenario)

    source = LiveSource(nvml=NvmlReader(), holders=lambda _m, _l: (), hostname="bench")
    sampler = Sampler(source, interval=interval)
    app = GpuTopApp(sampler)
    applied: list[float] = []
    original = app.apply_frame

    def timed(frame: Any) -> bool:
        t0 = time.perf_counter()
        try:
            return original(frame)
        finally:
            applied.append(time.perf_counter() - t0)

    app.apply_frame = timed  # type: ignore[method-assign]
    try:
        async with app.run_test(size=cfg.size) as pilot:
            deadline = time.monotonic() + ticks * interval * 20 + 30
            while sampler.ticks < ticks and time.monotonic() < deadline:
                await pilot.pause(0.05)
            await pilot.pause()
            ticked = sampler.ticks
            rss = _status_mib("VmRSS")
            peak = _status_mib("VmHWM")
            frames = list(applied)

            latencies: list[float] = []
            shown = {c.key for c in process_view.visible_columns(app.compact)}
            for _ in range(presses):
                before = app.sort_key
                t0 = time.perf_counter()
                # The key goes in as the terminal driver would send it. (pilot.press then
                # waits for the whole process to go idle, sampler thread included.)
                key_event = events.Key("s", "s")
                key_event.set_sender(app)
                assert app._driver is not None
                app._driver.send_message(key_event)
                wanted_for: tuple[Any, str] | None = None
                want: list[str] = []
                while True:
                    key = app.sort_key
                    snap = app.snapshot
                    if key != before and snap is not None:
                        # once per (snapshot, key): at 1,024 rows, working the order out
                        # at every poll would take the app's own thread from it
                        if wanted_for is None or wanted_for[0] is not snap or wanted_for[1] != key:
                            rows = process_view.table_rows(
                                process_view.process_rows(snap), sort_key=key
                            )
                            wanted_for, want = (snap, key), [r.key for r in rows]
                        got = [str(r.key.value) for r in app.table.ordered_rows]
                        arrows = [
                            str(c.key.value)
                            for c in app.table.ordered_columns
                            if "▲" in c.label.plain or "▼" in c.label.plain
                        ]
                        # a newer snapshot may have arrived: compare with the one shown
                        if got == want and arrows == ([key] if key in shown else []):
                            break
                    await asyncio.sleep(0.002)
                await pilot._wait_for_screen()  # and the widgets have processed the repaint
                latencies.append(time.perf_counter() - t0)
    finally:
        sampler.stop()

    ms = 1000.0
    print(f"{cfg.label}:")
    if frames:
        print(
            f"  apply_frame over {len(frames)} frames ({ticked} ticks at {interval:g}s): "
            f"median {statistics.median(frames) * ms:.1f} ms, max {max(frames) * ms:.1f} ms"
        )
    print(
        f"  key latency (s, {presses} presses): median {statistics.median(latencies) * ms:.0f} ms, "
        f"p95 {_pct(latencies, 95) * ms:.0f} ms, max {max(latencies) * ms:.0f} ms"
    )
    print(f"  RSS after {ticked} ticks: {rss:.1f} MiB (peak {peak:.1f} MiB)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ticks", type=int, default=100, help="sampler ticks per configuration")
    parser.add_argument("--interval", type=float, default=0.1, help="sampler interval, seconds")
    parser.add_argument("--presses", type=int, default=20, help="key presses timed")
    parser.add_argument(
        "--only",
        choices=[f"{c.gpus}x{c.procs}" for c in CONFIGS],
        help="run one configuration only (each is best run in a fresh process for RSS)",
    )
    args = parser.parse_args()
    os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
    fakenvml.load_in_process()
    with tempfile.TemporaryDirectory(prefix="gputop-bench-") as tmp:
        for cfg in CONFIGS:
            if args.only and args.only != f"{cfg.gpus}x{cfg.procs}":
                continue
            asyncio.run(run_one(cfg, args.ticks, args.interval, args.presses, Path(tmp)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
