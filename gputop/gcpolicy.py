"""The cyclic garbage collector's settings for gputop's long-running processes.

The dashboard, the fleet screen and the exporter hold a long history of immutable
snapshots and allocate many short-lived objects per tick or frame. With Python's
default thresholds (700, 10, 10) the collector runs dozens of times a second and its
full passes walk the whole history. So, once started: the objects alive then (modules,
NVML handles, the first snapshot) are frozen out of collection, and collections run
less often. The history is bounded, so memory stays bounded (bench/bench_ui.py
measures the saving).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

#: Cyclic-GC thresholds while a long-running gputop process runs.
GC_THRESHOLDS = (10_000, 50, 100)


def tune() -> None:
    """Freeze what is alive now and collect less often, for the rest of the process."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


@contextlib.contextmanager
def tuned() -> Iterator[None]:
    """:func:`tune` for the duration of the block; the settings before come back after."""
    before = gc.get_threshold()
    tune()
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()
