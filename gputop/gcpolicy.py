"""The cyclic garbage collector's settings for gputop's long-running processes.

They hold a long, bounded history of immutable snapshots: with the default thresholds
the collector would run often and its full passes walk all of it. So what is alive at
start is frozen out of collection, and collections run less often.
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
    """:func:`tune` for the duration of the block."""
    before = gc.get_threshold()
    tune()
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()
