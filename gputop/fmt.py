"""The one place where values become short strings for people.

``None`` always becomes ``NA`` ("n/a"): a missing value is never shown as 0.
Untrusted text (process names, command lines, user names, GPU names) goes through
``clean_text`` at the source and through ``rich.markup.escape`` (UI only) before markup.
"""

from __future__ import annotations

import codecs
import re
import unicodedata

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


def is_wide(ch: str) -> bool:
    return unicodedata.east_asian_width(ch) in ("W", "F")


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


def percent(value: float | None, digits: int = 0) -> str:
    if value is None:
        return NA
    return f"{value:.{digits}f}%"


def number(value: float | None, unit: str = "", digits: int = 0) -> str:
    if value is None:
        return NA
    return f"{value:.{digits}f}{unit}"


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


# --- terminals and pipes that cannot take UTF-8 -----------------------------------------


def _ascii_table() -> dict[int, str]:
    """Bars, sparklines, box drawing and a few signs -> ASCII look-alikes."""
    table: dict[int, str] = {}
    for code in range(0x2500, 0x2580):  # box drawing
        name = unicodedata.name(chr(code), "")
        if "HORIZONTAL" in name and "VERTICAL" not in name:
            table[code] = "-"
        elif "VERTICAL" in name and "HORIZONTAL" not in name:
            table[code] = "|"
        else:
            table[code] = "+"
    levels = "_.-=#"  # sparkline heights: 1/8 .. 8/8
    for n, ch in enumerate("▁▂▃▄▅▆▇█"):
        table[ord(ch)] = levels[min(len(levels) - 1, n * len(levels) // 8)]
    table.update({ord(c): a for c, a in zip("░▒▓▔▕▏▎▍▌▐▀", ".:#-||||||-", strict=True)})
    table.update(
        {
            ord("…"): "...",
            ord("·"): ".",
            ord("°"): "",
            ord("▲"): "^",
            ord("▼"): "v",
            ord("→"): "->",
            ord("←"): "<-",
            ord("×"): "x",
            ord("—"): "-",
            ord("–"): "-",
            ord("µ"): "u",
        }
    )
    for code in range(0x2580, 0x25A0):  # other block elements
        table.setdefault(code, "#")
    return table


_ASCII = _ascii_table()


def is_utf_encoding(encoding: str | None) -> bool:
    return bool(encoding) and str(encoding).lower().replace("-", "").replace("_", "") in (
        "utf8",
        "utf16",
        "utf32",
        "utf8sig",
    )


def _look_alike(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    bad = exc.object[exc.start : exc.end]
    return "".join(_ASCII.get(ord(c), "?") for c in bad), exc.end


#: The codec error handler of :func:`for_encoding`: ``text.encode(enc, ASCII_LOOK_ALIKE)``.
ASCII_LOOK_ALIKE = "gputop-ascii-look-alike"
codecs.register_error(ASCII_LOOK_ALIKE, _look_alike)


def encode_for(text: str, encoding: str | None) -> bytes:
    """``text`` in ``encoding`` (UTF-8 when None or unknown): what the encoding lacks
    becomes an ASCII look-alike (bars, sparklines, box drawing) or ``?``."""
    try:
        return text.encode(encoding or "utf-8", ASCII_LOOK_ALIKE)
    except LookupError:
        return text.encode("utf-8", ASCII_LOOK_ALIKE)


def for_encoding(text: str, encoding: str | None) -> str:
    """``text`` as it can be shown in ``encoding``: unchanged where the encoding has the
    characters; bars, sparklines and box drawing it lacks become ASCII look-alikes and
    anything else ``?`` (never a literal ``\\u2588``, never a UnicodeEncodeError)."""
    if is_utf_encoding(encoding) or text.isascii():
        return text
    try:
        return text.encode(encoding or "ascii", ASCII_LOOK_ALIKE).decode(encoding or "ascii")
    except LookupError:
        return text.encode("ascii", ASCII_LOOK_ALIKE).decode("ascii")
