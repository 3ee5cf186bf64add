"""Pure views of the fleet screen: host views in, styled lines out. No Textual here.

A GPU cell is ``util mem verdict``; the word carries the meaning (NO_COLOR-safe).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

from gputop.analysis import kinds as vd
from gputop.cells import cell_width, fit
from gputop.model import Verdict
from gputop.sources.remote import GpuCell
from gputop.sources.streams import HostView, status
from gputop.views.gpu_view import POWER_CAP_WORD, SEVERITY_ROLES, VERDICT_WORDS
from gputop.views.parts import Part, Parts, safe

#: From this width a host's prefix (name, state, GPU count) is one line.
WIDE_WIDTH = 120
#: One GPU cell: " uuu mmm WWWWWWWW".
CELL_WIDTH = 17
NARROW_PREFIX = 12  # name (or state) + a space
WIDE_NAME, WIDE_STATE = 20, 12
WIDE_PREFIX = WIDE_NAME + 1 + WIDE_STATE + 1 + 3 + 1

#: Sort keys, in the order s cycles through them, and their words in the header.
SORT_LABELS = {"host": "host", "worst": "worst verdict", "idle": "idle memory"}

#: Verdict kinds -> the fleet summary's groups (any other kind: "no verdict").
BUSY = (vd.GPU_BOUND, vd.MODERATE, vd.THROTTLED, vd.LINK_DEGRADED, vd.MEMORY_FULL)
STARVED = (vd.TRANSFER_PCIE, vd.INPUT_DISK, vd.INPUT_CPU, vd.INPUT_MAIN, vd.UNDERUSED)
_GROUP_OF = {
    vd.LOST: "lost",
    vd.IDLE_HOLDER: "idle-holding",
    vd.IDLE: "idle",
    **dict.fromkeys(STARVED, "starved"),
    **dict.fromkeys(BUSY, "busy"),
}
GROUPS = ("busy", "starved", "idle-holding", "idle", "lost", "no verdict")

#: Host states, in the summary's order, and their roles.
_STATE_ROLES = {
    "live": "ok",
    "stale": "warn",
    "connecting": "dim",
    "unreachable": "error",
    "no-gputop": "error",
    "schema": "error",
    "bad-data": "error",
}
#: The states of a host that has nothing to show but why.
_PROBLEM_STATES = frozenset(s for s, role in _STATE_ROLES.items() if role == "error")
#: Host states from worst to best (the "worst verdict" sort puts the worst first).
_STATE_RANK = {**dict.fromkeys(_PROBLEM_STATES, 0), "stale": 1, "connecting": 2, "live": 3}
_SEVERITY_RANK = {"bad": 0, "warn": 1, "info": 2, "ok": 3}


def group(cell: GpuCell) -> str:
    """The summary group of one GPU."""
    if cell.lost:
        return "lost"
    return "no verdict" if cell.verdict is None else _GROUP_OF.get(cell.verdict.kind, "no verdict")


def word(v: Verdict | None) -> tuple[str, str]:
    """(verdict word, role) for a cell."""
    if v is None:
        return "n/a", "dim"
    power_cap = v.kind == vd.THROTTLED and v.severity == "info"
    text = POWER_CAP_WORD if power_cap else VERDICT_WORDS.get(v.kind) or safe(v.kind, 8)
    return text, SEVERITY_ROLES.get(v.severity, "")


def _pct(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{min(999.0, max(0.0, value)):3.0f}"


def cell_parts(cell: GpuCell, dim: bool = False) -> Parts:
    """One GPU cell, exactly CELL_WIDTH wide."""
    if cell.lost:
        return ((" n/a n/a ", "dim"), (fit("LOST", 8), "error"))
    text, role = word(cell.verdict)
    nums = f" {_pct(cell.util):>3} {_pct(cell.mem_percent):>3} "
    return ((nums, "dim" if dim else ""), (fit(text, 8), "dim" if dim else role))


@dataclass(frozen=True, slots=True)
class Row:
    """One host as the screen shows it."""

    name: str
    state: str  # live, stale, unreachable... (streams.status)
    shown: str  # "stale 12s"
    detail: str | None  # the error or problem, cleaned
    view: HostView

    @property
    def gpus(self) -> tuple[GpuCell, ...]:
        return () if self.view.report is None else self.view.report.gpus


def rows(views: Iterable[HostView], now: float, interval: float) -> list[Row]:
    out = []
    for v in views:
        state, shown, detail = status(v, now, interval)
        out.append(Row(v.name, state, shown, None if detail is None else safe(detail, 300), v))
    return out


def idle_memory(row: Row) -> int:
    """Bytes held by this host's idle memory holders."""
    return sum(
        c.mem_used or 0
        for c in row.gpus
        if c.verdict is not None and c.verdict.kind == vd.IDLE_HOLDER
    )


def _worst(row: Row) -> tuple[int, int, str]:
    sev = min(
        (_SEVERITY_RANK.get(c.verdict.severity, 2) for c in row.gpus if c.verdict is not None),
        default=4,
    )
    if any(c.lost for c in row.gpus):
        sev = -1
    return (_STATE_RANK.get(row.state, 0), sev, row.name)


def sort_rows(items: Sequence[Row], key: str, reverse: bool = False) -> list[Row]:
    if key == "worst":
        out = sorted(items, key=_worst)
    elif key == "idle":
        out = sorted(items, key=lambda r: (-idle_memory(r), r.name))
    else:
        out = sorted(items, key=lambda r: r.name)
    return out[::-1] if reverse else out


#: The owner fields of a host's processes that ``/`` matches (see docs/owners.md).
OWNER_SEARCH = ("namespace", "pod", "container", "slurm_job", "slurm_job_name", "unit")


def _owner_words(data: Mapping[str, Any] | None) -> Iterator[str]:
    """Each process owner's names in a host's newest line: ``ns/pod`` and the fields."""
    processes = data.get("processes") if data is not None else None
    for p in processes if isinstance(processes, list) else ():
        owner = p.get("owner") if isinstance(p, dict) else None
        if isinstance(owner, dict):
            words = [owner.get(k) for k in OWNER_SEARCH]
            words.append(f"{owner.get('namespace')}/{owner.get('pod')}")
            yield from (w for w in words if isinstance(w, str))


def matches(row: Row, text: str) -> bool:
    """``/`` filter: the host's name (as given or as it names itself), a user on it, or a
    pod, container or Slurm job of its processes."""
    needle = text.strip().lower()
    if not needle or needle in row.name.lower():
        return True
    report = row.view.report
    if report is None:
        return False
    words = chain((report.hostname,), report.users, _owner_words(row.view.data))
    return any(needle in w.lower() for w in words)


def summary_parts(items: Sequence[Row]) -> Parts:
    """ "GPUs 64: busy 30 · starved 12 · idle-holding 4 · ... │ hosts 8: 6 live ..."."""
    counts = dict.fromkeys(GROUPS, 0)
    total = 0
    for r in items:
        if r.state != "live":
            continue  # old data is not counted as today's
        for c in r.gpus:
            counts[group(c)] += 1
            total += 1
    roles = {"busy": "ok", "starved": "warn", "idle-holding": "warn", "lost": "error"}
    parts: list[Part] = [("GPUs ", "label"), (str(total), "title"), (":", "label")]
    for name in GROUPS:
        n = counts[name]
        if n or name != "no verdict":
            parts += [(f" {name} ", "label"), (str(n), roles.get(name, "") if n else "dim")]
    states = Counter(r.state for r in items)
    parts += [("  │ hosts ", "label"), (str(len(items)), "title"), (":", "label")]
    for state in _STATE_ROLES:
        if states[state]:
            parts += [(f" {state} ", "label"), (str(states[state]), _STATE_ROLES[state])]
    return tuple(parts)


def source_lines(via: str, error: str | None, note: str | None) -> list[Parts]:
    """The source's own state above the hosts (none when all is well): why its last answer
    was refused (one line), else how many series it skipped and why the first was."""
    if error:
        return [((f"{safe(via, 80)}: ", "label"), (safe(error, 300), "error"))]
    if note:
        return [((f"{safe(via, 80)}: ", "label"), (safe(note, 300), "warn"))]
    return []


def no_hosts_line(text_filter: str, error: str | None) -> Parts:
    """What the host list says when it shows none."""
    if text_filter:
        return ((f"no host matches {safe(text_filter, 64)!r}", "dim"),)
    if error:
        return (("no hosts: the source failed (the line above); R asks again", "dim"),)
    return (("no hosts yet: waiting for the first answer", "dim"),)


def columns_header(width: int) -> Parts:
    """The line above the hosts: what each cell holds."""
    if width >= WIDE_WIDTH:
        prefix = fit("host", WIDE_NAME) + " " + fit("state", WIDE_STATE) + " " + fit("GPU", 3) + " "
    else:
        prefix = fit("host/state", NARROW_PREFIX)
    cells = (" " + fit("ut% mem verdict", CELL_WIDTH - 1)) * cells_per_line(width)
    return ((prefix, "label"), (cells, "label"))


def cells_per_line(width: int) -> int:
    prefix = WIDE_PREFIX if width >= WIDE_WIDTH else NARROW_PREFIX
    return max(1, (width - prefix) // CELL_WIDTH)


def host_lines(row: Row, width: int, selected: bool = False) -> list[Parts]:
    """A host's lines, each exactly ``width`` cells (or shorter, never longer)."""
    wide = width >= WIDE_WIDTH
    per_line = cells_per_line(width)
    name_role = "selected" if selected else "title"
    marker = "›" if selected else " "
    state_role = _STATE_ROLES.get(row.state, "")
    gpus = row.gpus
    count = str(len(gpus)) if row.view.report is not None else "-"
    # What fills the cell area: the GPU cells, or why there are none.
    problem = row.state in _PROBLEM_STATES or not gpus
    if problem:
        if row.detail:
            text = row.detail
        elif row.state == "connecting":
            text = "connecting…"
        elif row.view.report is not None and row.view.report.driver_error:
            text = "no NVIDIA driver: " + safe(row.view.report.driver_error, 200)
        elif row.view.report is not None:
            text = "no GPUs"
        else:
            text = ""
        role = "error" if row.state in _PROBLEM_STATES else "dim"
        body: list[Parts] = [((" " + text, role),)]
    else:
        dim = row.state != "live"
        lines = [gpus[i : i + per_line] for i in range(0, len(gpus), per_line)]
        body = [tuple(part for c in cells for part in cell_parts(c, dim)) for cells in lines]
    # The prefix: one line when wide, two (name, then state) when narrow.
    prefixes: list[Parts]
    if wide:
        prefixes = [
            (
                (marker, name_role),
                (fit(safe(row.name, 128), WIDE_NAME - 1), name_role),
                (" ", ""),
                (fit(row.shown, WIDE_STATE), state_role),
                (" ", ""),
                (fit(count, 3, ">"), ""),
                (" ", ""),
            )
        ]
    else:
        both = f"{row.shown} {count}"
        state = fit(both if len(both) < NARROW_PREFIX else row.shown, NARROW_PREFIX - 1)
        prefixes = [
            ((fit(safe(row.name, 128), NARROW_PREFIX - 1), name_role), (" ", "")),
            ((state, state_role), (" ", "")),
        ]
    indent = WIDE_PREFIX if wide else NARROW_PREFIX
    body += [()] * (len(prefixes) - len(body))
    return [
        (prefixes[i] if i < len(prefixes) else ((" " * indent, ""),)) + _cut(b, width - indent)
        for i, b in enumerate(body)
    ]


def _cut(parts: Parts, room: int) -> Parts:
    """Parts cut to ``room`` cells (with an ellipsis), never padded."""
    out: list[Part] = []
    left = room
    for text, role in parts:
        if left <= 0:
            break
        cells = cell_width(text)
        if cells > left:
            out.append((fit(text, left), role))
            break
        out.append((text, role))
        left -= cells
    return tuple(out)


#: The fleet's markers, for its help screen.
LEGEND = (
    ("live", "a line arrived within the last 3 intervals"),
    ("stale Ns", "no line for N seconds (the connection hangs, or it just dropped)"),
    ("unreachable", "the last attempt failed; its ssh error is shown; retried with backoff"),
    ("no gputop", "the host has no gputop: the install command is shown"),
    ("new schema", "the host's gputop is newer than this one: update this one"),
    ("bad data", "the host sent lines that are not gputop snapshots"),
    ("ut% mem", "GPU utilization and memory used, percent; n/a = not reported"),
)
