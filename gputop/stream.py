"""``gputop --stream``: JSON lines, one ``--json`` document per tick (docs/json.md).

Ticks run on the writing thread, so a slow reader delays the next tick instead of
piling lines up in memory.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Collection
from typing import Any, TextIO

from gputop.analysis.thresholds import DEFAULT, Thresholds
from gputop.argtypes import EXIT_NO_DRIVER, EXIT_OK
from gputop.model import Snapshot
from gputop.pipeline import Feed
from gputop.present import filter_gpus, to_json_dict
from gputop.sampler import Sampler
from gputop.sources.base import pair_window


def json_line(doc: dict[str, Any]) -> str:
    """One compact JSON line (no newline)."""
    return json.dumps(doc, separators=(",", ":"), allow_nan=False, ensure_ascii=False)


def run(
    sampler: Sampler,
    *,
    thresholds: Thresholds = DEFAULT,
    count: int | None = None,
    select: Callable[[Snapshot], Collection[int] | None] = lambda _s: None,
    out: TextIO | None = None,
    first_window: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Write lines until ``count`` lines; 0, or 3 without a driver (an OSError of ``out``
    is raised).
    ``select``: the GPUs to keep, from the first snapshot (may exit for a bad --gpus)."""
    out = sys.stdout if out is None else out
    feed = Feed(thresholds)
    first_start = clock()
    # Inside the window: the first reading's share of the (incremental) analysis.
    snap = sampler.tick_pair(
        first_window,
        meanwhile=lambda: feed.push(sampler.history()[-1], judge_jobs=False),
        clock=clock,
        sleep=sleep,
    )
    # about when the second reading started (later where the source needs it: GPM)
    tick_start = first_start + pair_window(sampler.source, first_window)
    selection = select(snap)
    if not snap.driver.available:
        why = snap.driver.error or "unknown reason"
        print(
            f"gputop: NVIDIA driver not available: {why} Streaming the host part only.",
            file=sys.stderr,
            flush=True,
        )
    written = 0
    while True:
        diagnosis = feed.push(snap).diagnosis
        assert diagnosis is not None  # a stream's frames are always judged
        diagnosis = diagnosis.only(selection)
        line = json_line(to_json_dict(filter_gpus(snap, selection), diagnosis))
        out.write(line + "\n")  # a failure is the command's to say (gputop.output)
        out.flush()
        written += 1
        if count is not None and written >= count:
            return EXIT_OK if snap.driver.available else EXIT_NO_DRIVER
        wait = tick_start + sampler.interval - clock()
        if wait > 0:
            sleep(wait)
        tick_start = clock()
        snap = sampler.tick_now()
