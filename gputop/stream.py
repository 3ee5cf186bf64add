"""``gputop --stream``: JSON lines, one snapshot with its jobs and verdicts per line.

A consumer like the others: source -> sampler -> diagnosis -> here. Each line is the
``--json`` document of one snapshot (:func:`gputop.present.to_json_dict`: schema 1,
each GPU's ``verdict``, the ``jobs`` list) on one line, written and flushed as soon as
it is taken, every ``--interval`` seconds. This is also what a fleet view reads over
SSH (``ssh host gputop --stream``).

- The first line comes after two readings ``first_window`` seconds apart (rates need
  two; the CLI uses ``--once``'s window): its rates cover that short window, every
  later line's cover the interval. Each line says which in ``host.rate_seconds``.
- Ticks run on this thread: a reader that does not keep up (a slow SSH link) delays
  the next tick instead of piling lines up in memory; a late tick is never made up in a
  burst. Nothing is dropped silently: each line is one tick, in order.
- A closed pipe (``gputop --stream | head -3``) ends it quietly with status 0.
- The diagnosis is incremental (a :class:`gputop.pipeline.Feed`): each snapshot is
  pushed to it, and it keeps what the verdicts look back on (the window's snapshots
  whole, the rest compact); the sampler keeps only the first pair.
- Never imports Textual.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Collection
from typing import Any, TextIO

from gputop.analysis.thresholds import DEFAULT, Thresholds
from gputop.model import Snapshot
from gputop.pipeline import Feed
from gputop.present import filter_gpus, to_json_dict
from gputop.sampler import Sampler


def json_line(doc: dict[str, Any]) -> str:
    """One compact JSON line (no newline) of a ``to_json_dict`` document."""
    return json.dumps(doc, separators=(",", ":"), allow_nan=False, ensure_ascii=False)


def _silence(out: TextIO) -> None:
    """After a closed pipe: point the stream's descriptor at /dev/null, so that the
    interpreter's last flush at exit does not complain about the pipe again."""
    try:
        fd = out.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
    except (AttributeError, OSError, ValueError):
        return
    with contextlib.suppress(OSError):
        os.dup2(devnull, fd)
    os.close(devnull)


def _latest(sampler: Sampler) -> Snapshot:
    snap = sampler.latest()
    assert snap is not None  # called after a tick
    return snap


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
    """Write lines until ``count`` lines (None: until stopped) or a closed pipe.

    ``select``: the GPUs to keep, from the first snapshot (it may raise SystemExit for
    a bad ``--gpus``, before any line). Returns 0, or 3 when the NVIDIA driver was not
    available (the lines then carry the host part; the reason goes to stderr once).
    """
    out = sys.stdout if out is None else out
    feed = Feed(thresholds)
    first_start = clock()
    # Inside the window: the first reading's share of the (incremental) analysis.
    snap = sampler.tick_pair(
        first_window,
        meanwhile=lambda: feed.push(_latest(sampler), judge_jobs=False),
        clock=clock,
        sleep=sleep,
    )
    tick_start = first_start + first_window  # about when the second reading started
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
        try:
            out.write(line + "\n")
            out.flush()
        except BrokenPipeError:
            _silence(out)
            return 0
        written += 1
        if count is not None and written >= count:
            return 0 if snap.driver.available else 3
        wait = tick_start + sampler.interval - clock()
        if wait > 0:
            sleep(wait)
        tick_start = clock()
        snap = sampler.tick_now()
