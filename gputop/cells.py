"""Terminal cell widths: the one place that decides how many columns text takes.

CJK and emoji take two cells, combining marks and format characters none.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache
from typing import Final

ELLIPSIS = "…"


def is_wide(ch: str) -> bool:
    return unicodedata.east_asian_width(ch) in ("W", "F")


#: The characters gputop draws itself beside its ASCII (bars, sparklines, marks): one cell
#: each, answered without Unicode's database, whose tables a lookup pages in (a shared
#: library's data, a fault-around at a time) for the whole run. tests/ui/test_cells.py holds
#: each answer to the database's.
OWN_GLYPHS: Final = frozenset("▁▂▃▄▅▆▇█░▒▓│▏…·°≥≤▼▲↑↓→←›×")


@lru_cache(maxsize=8192)
def char_cells(ch: str) -> int:
    """Cells one character takes: 2, 1, or 0 (combining marks, format characters)."""
    if ch.isascii() or ch in OWN_GLYPHS:
        return 1
    if is_wide(ch):
        return 2
    if unicodedata.combining(ch) or unicodedata.category(ch) in ("Cf", "Mn", "Me"):
        return 0
    return 1


def cell_width(text: str) -> int:
    if text.isascii():
        return len(text)
    return sum(map(char_cells, text))


def cut(text: str, width: int) -> tuple[str, int]:
    """The longest start of ``text`` within ``width`` cells, and the cells it takes."""
    used = 0
    for i, ch in enumerate(text):
        w = char_cells(ch)
        if used + w > width:
            return text[:i], used
        used += w
    return text, used


def truncate(text: str, width: int) -> str:
    """``text`` cut to at most ``width`` cells, ending with '…' when cut (no padding)."""
    if cell_width(text) <= width:
        return text
    kept, _ = cut(text, width - 1)
    return kept + ELLIPSIS


def fit(text: str, width: int, align: str = "<") -> str:
    """Pad or cut ``text`` to exactly ``width`` cells (cut with an ellipsis); ``align``
    is "<", ">" or "^". Wide characters count as two: columns stay aligned."""
    if width <= 0:
        return ""
    if text.isascii():
        if len(text) > width:
            return text[: width - 1] + ELLIPSIS if width > 1 else text[:width]
        return f"{text:{align}{width}}"
    cells = cell_width(text)
    if cells > width:
        room = max(1, width - 1)  # one cell: no room for the ellipsis
        kept, used = cut(text, room)
        return kept + " " * (room - used) + (ELLIPSIS if width > 1 else "")
    pad = width - cells
    left = {">": pad, "^": pad // 2}.get(align, 0)
    return " " * left + text + " " * (pad - left)
