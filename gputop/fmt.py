"""The one place where values become short strings for people.

``None`` always becomes ``NA`` ("n/a"): a missing value is never shown as 0.
Untrusted text (process names, command lines, user names, GPU names) goes through
``clean_text`` at the source and through ``rich.markup.escape`` (UI only) before markup.
"""

from __future__ import annotations

import re

NA = "n/a"

# C0 and C1 control characters and DEL; ESC starts ANSI/OSC sequences, which we drop whole.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# Bidirectional overrides and isolates can reorder what follows them on screen.
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")


def clean_text(text: str | bytes | None, limit: int | None = 4096) -> str | None:
    """Strip escape sequences, control characters and bidi overrides from untrusted text.

    Bytes are decoded as UTF-8 with replacement. Newlines, tabs and the Unicode line and
    paragraph separators become spaces.
    ``limit`` caps the length (a command line can be megabytes long).
    """
    if text is None:
        return None
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if limit is not None and len(text) > limit * 2:
        text = text[: limit * 2]
    text = _ANSI.sub("", text)
    text = text.replace("\t", " ").replace("\n", " ").replace("\r", " ")
    # Unicode line and paragraph separators break lines too (str.splitlines, some terminals).
    text = text.replace("\u2028", " ").replace("\u2029", " ")
    text = _CONTROL.sub("", text)
    text = _BIDI.sub("", text)
    # Lone surrogates (from surrogateescape decoding) cannot be encoded for the terminal.
    if any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        text = text.encode("utf-8", "replace").decode("utf-8", "replace")
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def bytes_(value: float | None, digits: int = 1) -> str:
    """1536 -> '1.5KiB'; None -> 'n/a'."""
    if value is None:
        return NA
    v = float(value)
    for unit in _UNITS:
        if abs(v) < 1024 or unit == _UNITS[-1]:
            if unit == "B":
                return f"{v:.0f}B"
            return f"{v:.{digits}f}{unit}"
        v /= 1024
    raise AssertionError("unreachable")


def mib(value: float | None) -> str:
    """GPU memory as nvidia-smi shows it: whole MiB."""
    if value is None:
        return NA
    return f"{value / 2**20:.0f}MiB"


def rate(value: float | None) -> str:
    """Bytes per second: '12.3MiB/s'."""
    if value is None:
        return NA
    return bytes_(value) + "/s"


def number(value: float | None, unit: str = "", digits: int = 0) -> str:
    if value is None:
        return NA
    return f"{value:.{digits}f}{unit}"


def percent(value: float | None, digits: int = 0) -> str:
    return number(value, "%", digits)


def ratio_percent(part: float | None, whole: float | None) -> float | None:
    """part/whole in percent, None when either is unknown or whole is 0."""
    if part is None or whole is None or whole <= 0:
        return None
    return 100.0 * part / whole


def duration(seconds: float | None) -> str:
    """Elapsed time like ps: '59s', '12:03', '3:04:05', '2d03h'."""
    if seconds is None:
        return NA
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}:{s % 60:02d}"
    if s < 86400:
        return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"
