#!/usr/bin/env python3
"""The diagnosis per dashboard tick: jobs + verdicts over the recent history.

    python bench/bench_analysis.py [--ticks 20] [--plain-ticks 3] [--only 16x64-600s]

Each scenario fills a history (one snapshot a second), then times ``--ticks`` ticks:
one new snapshot appended, the oldest dropped (the dashboard hands the analysis the
last ``lookback_seconds`` = 600 s with the default thresholds), and the analysis run:

- ``plain``: what the dashboard did before ``Analyzer``: ``build_jobs(newest)`` then
  ``all_verdicts(history, jobs)`` (every window snapshot's jobs rebuilt each call);
- ``cached``: ``Analyzer.update(history)``: every job judged;
- ``cached-gpu``: ``Analyzer.update(history, judge_jobs=False)``: the GPU verdicts only
  (the main screen shows GPU verdicts only).

Scenarios: ``demo8-600s`` (the demo source: 8 GPUs, 600 s of history), and the
synthetic big node of ``tests/builders.py``'s ``busy_node_snapshots`` (16 GPUs x 64
processes, two DataLoader workers each: 1,024 jobs, ~3,100 processes) with a full 20 s window only
(``16x64-20s``) and with 600 s of history (``16x64-600s``, the dashboard's case), and
the same node as 128 jobs of 8 ranks each (``16x64r8-600s``).

Prints median and max ms per tick. It is not a test; on a busy machine run it twice.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gputop.analysis.jobs import build_jobs  # noqa: E402
from gputop.analysis.thresholds import DEFAULT  # noqa: E402
from gputop.analysis.verdict import Analyzer  # noqa: E402
from gputop.model import Snapshot  # noqa: E402
from gputop.sources.demo import DemoSource  # noqa: E402
from tests.builders import all_verdicts, busy_node_snapshots  # noqa: E402

START = 1_700_000_000.0


def demo() -> Iterator[Snapshot]:
    source = DemoSource(seed=0, start_time=START, step=1.0)
    while True:
        yield source.snapshot()


SCENARIOS: dict[str, tuple[Callable[[], Iterator[Snapshot]], int]] = {
    "demo8-600s": (demo, 600),
    "16x64-20s": (lambda: busy_node_snapshots(16, 64), int(DEFAULT.window_seconds) + 1),
    "16x64-600s": (lambda: busy_node_snapshots(16, 64), 600),
    "16x64r8-600s": (lambda: busy_node_snapshots(16, 64, ranks=8), 600),
}


def plain(history: list[Snapshot]) -> None:
    jobs = build_jobs(history[-1])
    all_verdicts(history, jobs, DEFAULT)


def run(make: Callable[[], Iterator[Snapshot]], size: int, method: str, ticks: int) -> list[float]:
    snaps = make()
    history = [next(snaps) for _ in range(size)]
    analyzer = Analyzer(DEFAULT)
    if method != "plain":  # the first call builds the whole window: not a steady tick
        analyzer.update(history)
    costs = []
    for _ in range(ticks):
        history = [*history[1:], next(snaps)]
        t0 = time.perf_counter()
        if method == "plain":
            plain(history)
        else:
            analyzer.update(history, judge_jobs=method == "cached")
        costs.append(time.perf_counter() - t0)
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ticks", type=int, default=20, help="timed ticks (cached)")
    parser.add_argument("--plain-ticks", type=int, default=3, help="timed ticks (plain)")
    parser.add_argument("--only", choices=sorted(SCENARIOS), action="append")
    parser.add_argument("--no-plain", action="store_true", help="skip the slow plain path")
    args = parser.parse_args()
    methods = ["cached", "cached-gpu"] if args.no_plain else ["plain", "cached", "cached-gpu"]
    print(f"{'scenario':<14} {'method':<11} {'median ms':>10} {'max ms':>8}")
    for name in args.only or SCENARIOS:
        make, size = SCENARIOS[name]
        for method in methods:
            gc.collect()
            n = args.plain_ticks if method == "plain" else args.ticks
            costs = run(make, size, method, n)
            print(
                f"{name:<14} {method:<11} {statistics.median(costs) * 1000:>10.1f} "
                f"{max(costs) * 1000:>8.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
