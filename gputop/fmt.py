"""The one place where values become short strings for people.

``None`` always becomes ``NA`` ("n/a"): a missing value is never shown as 0; so does
NaN or an infinity, which no formatter turns into a crash.
"""

from __future__ import annotations

import math
import time

from gputop.model import clean_text as clean_text  # its home: checked decoding

NA = "n/a"

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def finite(value: float | None) -> float | None:
    """``value`` if a finite number, else None: what every formatter and chart shows."""
    try:
        return value if value is not None and math.isfinite(value) else None
    except OverflowError:  # an int past a float's range
        return None


def bytes_(value: float | None, digits: int = 1) -> str:
    """1536 -> '1.5KiB'; None -> 'n/a'."""
    v = finite(value)
    if v is None:
        return NA
    v, i = float(v), 0
    while abs(v) >= 1024 and i < len(_UNITS) - 1:
        v, i = v / 1024, i + 1
    return f"{v:.0f}B" if i == 0 else f"{v:.{digits}f}{_UNITS[i]}"


#: GPU memory moves to the next unit from this many of one, so that its figure keeps
#: three digits before the point at most and fits the compact table's column.
MEMORY_STEP = 1000


def memory(value: float | None) -> str:
    """GPU memory in one style on every screen and at every width: binary units, one
    decimal, at most three digits before the point ('999.9MiB', '1.0GiB', '19.0GiB')."""
    v = finite(value)
    if v is None:
        return NA
    v, i = float(v), 0
    while abs(v) >= MEMORY_STEP and i < len(_UNITS) - 1:
        v, i = v / 1024, i + 1
    return f"{v:.0f}B" if i == 0 else f"{v:.1f}{_UNITS[i]}"


def rate(value: float | None) -> str:
    """Bytes per second: '12.3MiB/s'."""
    return NA if finite(value) is None else bytes_(value) + "/s"


def number(value: float | None, unit: str = "", digits: int = 0) -> str:
    return NA if finite(value) is None else f"{value:.{digits}f}{unit}"


def shown(value: float | None, text: str) -> str:
    """``value`` in the format string ``text`` (a metric's ``GpuMetric.text``: "{:.0f}%")."""
    return NA if finite(value) is None else text.format(value)


def percent(value: float | None, digits: int = 0) -> str:
    return number(value, "%", digits)


def ratio_percent(part: float | None, whole: float | None) -> float | None:
    """part/whole in percent, None when either is unknown or whole is 0."""
    part, whole = finite(part), finite(whole)
    return None if part is None or whole is None or whole <= 0 else finite(100.0 * part / whole)


def since(now: float | None, then: float | None) -> float | None:
    """Seconds from ``then`` to ``now`` (at least 0), None when either is unknown."""
    now, then = finite(now), finite(then)
    return None if now is None or then is None else finite(max(0.0, now - then))


def clock(epoch: float | None, form: str = "%H:%M:%S") -> str:
    """Local time of ``epoch`` seconds in ``form``; n/a where the platform has none."""
    epoch = finite(epoch)
    try:
        return NA if epoch is None else time.strftime(form, time.localtime(epoch))
    except (ValueError, OverflowError, OSError):
        return NA


def duration(seconds: float | None) -> str:
    """Elapsed time like ps: '59s', '12:03', '3:04:05', '2d03h'."""
    return _elapsed(seconds, to_the_second=True)


def running_time(seconds: float | None) -> str:
    """A running time whose text changes at most once a minute after its first minute:
    '59s', '12m', '3h04m', '2d03h'. A live table repaints a row only when its text
    changes; ``duration``'s seconds would repaint every row every second."""
    return _elapsed(seconds, to_the_second=False)


def _elapsed(seconds: float | None, *, to_the_second: bool) -> str:
    seconds = finite(seconds)
    if seconds is None:
        return NA
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}:{s % 60:02d}" if to_the_second else f"{s // 60}m"
    if s < 86400:
        hours, minutes = s // 3600, s % 3600 // 60
        return f"{hours}:{minutes:02d}:{s % 60:02d}" if to_the_second else f"{hours}h{minutes:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"
