"""The cyclic garbage collector's settings for gputop's long-running processes.

They hold a long, bounded history of immutable snapshots: with the default thresholds
the collector would run often and its full passes walk all of it. So what is alive at
start is frozen out of collection, and collections run less often.

A start makes tens of thousands of objects (modules, classes, Textual's styles) that live
for the whole run, and very few cycles: collecting while they are made only walks them
again and again. So the ``gputop`` command holds the collector from its first line
(:func:`hold`) until the start is over: a dashboard releases it after its first frame
with one collection of what the start left, then freezes what is alive
(:func:`release`); every other mode releases it as soon as its arguments are read.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

#: Cyclic-GC thresholds while a long-running gputop process runs.
GC_THRESHOLDS = (10_000, 50, 100)

_held = False  # hold() disabled the collector and release() has not enabled it yet


def hold() -> None:
    """No cyclic collection until :func:`release` (a no-op where it is off already)."""
    global _held
    if gc.isenabled():
        gc.disable()
        _held = True


def holding() -> bool:
    """Whether :func:`hold` holds the collector now."""
    return _held


def release(*, settle: bool = False) -> None:
    """Collection again, if :func:`hold` held it. ``settle``: first collect what the
    start left and freeze what is alive (the long-lived part), as :func:`tune` would
    have frozen at its call."""
    global _held
    if not _held:
        return
    _held = False
    if settle:
        gc.collect()
        gc.freeze()
    gc.enable()


def tune() -> None:
    """Collect less often for the rest of the process, and freeze what is alive now; while
    the start holds the collector, the freeze waits for ``release(settle=True)`` (else the
    start's garbage would be frozen with it)."""
    if not _held:
        gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


@contextlib.contextmanager
def tuned() -> Iterator[None]:
    """:func:`tune` for the duration of the block (and the collector released at its end,
    if the start still held it)."""
    before = gc.get_threshold()
    tune()
    try:
        yield
    finally:
        release()
        gc.set_threshold(*before)
        gc.unfreeze()
