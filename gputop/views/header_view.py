"""The header line's view. No Textual here."""

from __future__ import annotations

import time

from gputop import fmt
from gputop.cells import fit
from gputop.model import Snapshot
from gputop.views.parts import Part, Parts, safe


def mode_text(snapshot: Snapshot) -> Part:
    if not snapshot.driver.available:
        why = safe(snapshot.driver.error, 200) if snapshot.driver.error else "no NVIDIA driver"
        return f"HOST-ONLY ({why})", "warn"
    if snapshot.source in ("demo", "replay"):
        return snapshot.source.upper(), "accent"
    return "live", "ok"


def header_parts(
    snapshot: Snapshot | None,
    *,
    interval: float,
    paused: bool,
    stale: bool,
    gpu_filter: frozenset[int] | None = None,
    text_filter: str = "",
    compact: bool = False,
    error: str | None = None,
    markers: Parts = (),
    clock: bool = False,
) -> Parts:
    """``error``: why the last sample failed (the screen then shows older data);
    ``markers`` follow the mode (REC, READONLY: what a shared screen must say); ``clock``:
    the sample's local time of day at the end (a replay says its own time instead)."""
    gap = " " if compact else "  "
    parts: list[Part] = [] if compact else [("gputop ", "title")]
    if snapshot is None:
        parts.append(("waiting for the first sample…", "dim"))
    elif not snapshot.driver.available:
        parts.append((safe(snapshot.hostname, 64), "title"))
    else:
        d = snapshot.driver
        parts += [
            (safe(snapshot.hostname, 64), "title"),
            (f"{gap}{'drv' if compact else 'driver'} ", "label"),
            (d.driver_version or fmt.NA, ""),
            (f"{gap}CUDA ", "label"),
            (d.cuda_version or fmt.NA, ""),
        ]
    parts += [(f"{gap}every ", "label"), (f"{interval:g}s", "")]
    if snapshot is not None:
        parts += [(gap, ""), mode_text(snapshot)]
    for marker in markers:
        parts += [(gap, ""), marker]
    if paused:
        parts += [(gap, ""), ("PAUSED", "warn-strong")]
    if stale:
        parts += [(gap, ""), ("STALE", "error-strong")]
    if error:
        parts += [(gap, ""), (f"! sampling failed: {safe(error, 80)}", "error-strong")]
    if gpu_filter is not None:
        shown = ",".join(str(i) for i in sorted(gpu_filter)) or "none"
        parts += [(f"{gap}GPU ", "label"), (shown, "accent")]
    if text_filter:
        parts += [(f"{gap}filter ", "label"), (safe(text_filter, 64), "accent")]
    if snapshot is not None and snapshot.tick_seconds is not None:
        tick = fmt.number(snapshot.tick_seconds * 1000, "ms")
        if snapshot.tick_cpu_seconds is not None and not compact:
            tick += f" (cpu {fmt.number(snapshot.tick_cpu_seconds * 1000, 'ms')})"
        parts += [(f"{gap}tick ", "label"), (tick, "")]
    when = None if snapshot is None else fmt.finite(snapshot.time)
    if clock and when is not None and 0 <= when < 2**33:  # within what localtime takes
        parts += [(gap, ""), (time.strftime("%H:%M:%S", time.localtime(when)), "")]
    return tuple(parts)


#: The most cells the recording's length takes in the compact header ("123d04h").
MAX_LENGTH_CELLS = 10


def _clock(epoch: float, same_day_as: float) -> str:
    """'03:00:12', or '11-29 23:10:00' on another day than ``same_day_as``."""
    try:
        same = time.localtime(epoch)[:3] == time.localtime(same_day_as)[:3]
    except (ValueError, OverflowError, OSError):  # a time the platform cannot show
        same = False
    return fmt.clock(epoch, "%H:%M:%S" if same else "%m-%d %H:%M:%S")


def replay_range_parts(
    start: float | None, end: float | None, cursor: float | None, *, compact: bool = False
) -> Parts:
    """Where the replay's cursor is in its recording: '42% of 03:00:00-05:12:40'
    (compact: '42% of 2:12:40', the recording's length); nothing without the times."""
    start, end, cursor = fmt.finite(start), fmt.finite(end), fmt.finite(cursor)
    if start is None or end is None or cursor is None or end < start:
        return ()
    share = 100.0 if end == start else (min(max(cursor, start), end) - start) / (end - start) * 100
    where = fmt.percent(share)
    if compact:
        # A recording's times come from a file: a span of ages is cut, not a line long.
        length = fit(fmt.duration(end - start), MAX_LENGTH_CELLS).rstrip()
        return ((where, "accent"), (f" of {length}", "label"))
    span = f"{_clock(start, cursor)}-{_clock(end, start)}"
    return ((where, "accent"), (" of ", "label"), (span, ""))
