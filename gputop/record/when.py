"""Times as people type them, in local time (the forms: docs/recording.md, "TIME").
A bare clock time (``03:00``) is the most recent such moment not in the future."""

from __future__ import annotations

import datetime as dt
import math
import re

from gputop.argtypes import echo

# ASCII digits only: \d, float() and int() also take fullwidth ones.
_AGO = re.compile(
    r"^(\d+(?:\.\d+)?)\s*(s|sec|secs|m|min|mins|h|hr|hrs|hour|hours|d|day|days)\s+ago$", re.ASCII
)
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$", re.ASCII)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
#: Epoch seconds a time may take: 1970 to the end of year 9999 (what dates can show).
SPAN = (0.0, 253402300799.0)


def parse_time(text: str, now: float) -> float:
    """Epoch seconds for ``text``; ``now`` (epoch seconds) anchors relative forms.
    Raises ValueError with a one-line message."""
    t = _parse(text, now)
    if not (math.isfinite(t) and SPAN[0] <= t <= SPAN[1]):
        raise ValueError(f"not a time: {echo(text)} (from 1970 to the year 9999)")
    return t


def _parse(text: str, now: float) -> float:
    s = " ".join(text.strip().lower().split())  # the words; ISO forms take either case
    if not s:
        raise ValueError("an empty time")
    if s == "now":
        return now
    if s.startswith("@"):
        try:
            if not s[1:].isascii():
                raise ValueError
            return float(s[1:])
        except ValueError:
            raise ValueError(f"not a time: {echo(text)}") from None
    m = _AGO.match(s)
    if m:
        return now - float(m.group(1)) * _UNITS[m.group(2)[0]]
    today = dt.datetime.fromtimestamp(now).date()
    for word, day in (("yesterday", today - dt.timedelta(days=1)), ("today", today)):
        if s.startswith(word + " ") or s == word:
            rest = s[len(word) :].strip() or "00:00"
            return dt.datetime.combine(day, _clock(rest, text)).timestamp()
    if _CLOCK.match(s):
        when = dt.datetime.combine(today, _clock(s, text))
        if when.timestamp() > now:
            when -= dt.timedelta(days=1)
        return when.timestamp()
    try:
        # T and Z are upper case to fromisoformat; a space may stand for the T (and before
        # an offset), so it is kept as typed.
        return dt.datetime.fromisoformat(s.upper()).timestamp()
    except ValueError:
        e_g = "'2026-11-30 03:00', '03:00', '2h ago', 'yesterday 23:10'"
        raise ValueError(f"not a time: {echo(text)} (e.g. {e_g})") from None


def _clock(s: str, text: str) -> dt.time:
    m = _CLOCK.match(s)
    if not m:
        raise ValueError(f"not a time of day: {echo(text)} (e.g. 03:00 or 23:10:30)")
    h, mi, sec = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    if h > 23 or mi > 59 or sec > 59:
        raise ValueError(f"not a time of day: {echo(text)}")
    return dt.time(h, mi, sec)
