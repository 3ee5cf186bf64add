"""Parts, ``(text, role)``, that every view is made of, and the small drawings the
panels share. A role is a word that ``gputop.ui.roles`` maps to theme colours, so the
meaning always shows as words too. No Textual here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import lru_cache

from gputop import fmt
from gputop.cells import cell_width, fit

#: Layout breakpoints: below either, compact one-line rows; below tiny, a message only.
COMPACT_WIDTH = 100
COMPACT_HEIGHT = 30
MIN_WIDTH = 50
MIN_HEIGHT = 14
#: Refresh interval steps for + / -, seconds.
INTERVAL_STEPS = (0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0)
Part = tuple[str, str]  # (text, role); role "" = plain
Parts = tuple[Part, ...]
LEVELS = " ▁▂▃▄▅▆▇█"
BAR_USED = "█"
BAR_RESERVED = "▓"
BAR_FREE = "░"
NO_VALUE = "·"
#: A process status as every screen and --once say it, where the word differs from the
#: model's (JSON and the exporter keep the model's "dead"): one word for one fact.
STATUS_WORDS: dict[str, str] = {"dead": "exited"}
EXITED = STATUS_WORDS["dead"]


def plain(parts: Iterable[Part]) -> str:
    return "".join(text for text, _ in parts)


@lru_cache(maxsize=4096)
def safe(text: str | None, limit: int | None = 512) -> str:
    """Untrusted text without escape sequences and control characters: the UI's own
    line of defence (sources clean text already; rich keeps ESC)."""
    cleaned = fmt.clean_text(text, limit)
    return fmt.NA if cleaned is None else cleaned


def fit_parts(parts: Parts, width: int) -> Parts:
    """Parts padded or cut to exactly ``width`` cells, as ``fit`` does one text."""
    if width <= 0:
        return ()
    sizes = [cell_width(text) for text, _ in parts]
    total = sum(sizes)
    if total <= width:
        return parts if total == width else (*parts, (" " * (width - total), ""))
    out: list[Part] = []
    room = width - 1  # the ellipsis takes the last cell
    for (text, role), cells in zip(parts, sizes, strict=True):
        if cells < room:
            out.append((text, role))
            room -= cells
            continue
        out.append((fit(text + "…", room + 1) if cells > room else text + "…", role))
        break
    return tuple(out)


def level(value: float | None) -> str:
    """One cell of a fixed 0-100 % scale: 0 is blank, anything above 0 at least ▁."""
    value = fmt.finite(value)
    if value is None:
        return NO_VALUE
    v = min(max(value, 0.0), 100.0)
    return LEVELS[min(8, math.ceil(v / 100.0 * 8))]


def bar_cells(percent: float | None, width: int) -> int:
    percent = fmt.finite(percent)
    if percent is None:
        return 0
    return round(min(max(percent, 0.0), 100.0) / 100.0 * width)


def bar(percent: float | None, width: int) -> Parts:
    if fmt.finite(percent) is None:
        return ((NO_VALUE * width, "dim"),)
    n = bar_cells(percent, width)
    return ((BAR_USED * n, "bar"), (BAR_FREE * (width - n), "bar-free"))


def memory_bar(used_pct: float | None, reserved_pct: float | None, width: int) -> Parts:
    """Used (█), driver-reserved (▓), free (░): readable without colour."""
    if fmt.finite(used_pct) is None:
        return ((NO_VALUE * width, "dim"),)
    used = bar_cells(used_pct, width)
    total = (used_pct or 0.0) + (fmt.finite(reserved_pct) or 0.0)
    reserved = max(0, bar_cells(total, width) - used)
    return (
        (BAR_USED * used, "bar-mem"),
        (BAR_RESERVED * reserved, "bar-reserved"),
        (BAR_FREE * (width - used - reserved), "bar-free"),
    )


def used_total(used: float | None, total: float | None) -> str:
    """'1.5GiB/8.0GiB'."""
    return f"{fmt.bytes_(used)}/{fmt.bytes_(total)}"


def gpu_ranges(gpus: Iterable[int], empty: str = "-") -> str:
    """(6, 0, 1, 2, 3) -> '0-3,6': runs of three or more GPUs as ranges, of two '0,1'."""
    parts: list[str] = []
    run: list[int] = []
    for g in [*sorted(gpus), None]:
        if run and g != run[-1] + 1:
            parts.append(f"{run[0]}-{run[-1]}" if len(run) >= 3 else ",".join(map(str, run)))
            run = []
        if g is not None:
            run.append(g)
    return ",".join(parts) or empty


def pct4(v: float | None) -> str:
    return fit(fmt.percent(v), 4, ">")


def pct5(v: float | None) -> str:
    """' 98%', ' 100%': a percentage with a space before it, so that it never joins the
    bar drawn before it ("██████100%")."""
    return " " + pct4(v)
