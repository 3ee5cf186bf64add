"""The process table's view: a snapshot in; rows, columns, filter, sort, notes out."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

from gputop import fmt
from gputop.analysis.jobs import process_index
from gputop.model import (
    ENVIRONMENT_NAMES,
    PROCESSES_PENDING,
    Probe,
    ProcessInfo,
    Snapshot,
    processes_pending,
)
from gputop.views.parts import EXITED, Parts, safe
from gputop.views.probe_view import probe_cell


@dataclass(frozen=True, slots=True)
class Column:
    """One column of the process table: its key, label, widths and alignment."""

    key: str
    label: str
    wide: int  # width in the wide layout; 0 = hidden
    compact: int  # width in the compact layout; 0 = hidden
    right: bool = False  # numbers align right

    def width(self, compact: bool) -> int:
        return self.compact if compact else self.wide

    @property
    def align(self) -> str:
        return ">" if self.right else "<"


COLUMNS: tuple[Column, ...] = (
    Column("tag", " ", 1, 1),
    Column("gpu", "GPU", 3, 3, right=True),
    Column("pid", "PID", 8, 7, right=True),
    Column("user", "USER", 10, 8),
    Column("type", "TYPE", 4, 0),
    Column("mem", "GPU-MEM", 9, 8, right=True),
    Column("sm", "SM%", 4, 4, right=True),
    Column("cpu", "CPU%", 6, 5, right=True),
    Column("rss", "RSS", 9, 0, right=True),
    Column("read", "READ/s", 10, 0, right=True),
    Column("time", "TIME", 10, 8, right=True),
    Column("probe", "PROBE", 21, 9),  # only when a row's process runs gputop's probe
    Column("owner", "OWNER", 30, 0),  # compact: the start of COMMAND
    Column("command", "COMMAND", 0, 0),  # takes the rest of the width
)
MIN_COMMAND_WIDTH = 12


def visible_columns(
    compact: bool, owners: bool = False, probes: bool = False
) -> tuple[Column, ...]:
    """``owners``: a row has an owner (else OWNER would be an empty column); ``probes``:
    a row has a probe (PROBE)."""
    wanted = {"owner": owners, "probe": probes}
    return tuple(
        c for c in COLUMNS if c.key == "command" or (c.width(compact) and wanted.get(c.key, True))
    )


def column_widths(
    total_width: int, compact: bool, owners: bool = False, probes: bool = False
) -> dict[str, int]:
    """Fixed widths, COMMAND the rest; each cell has its own gap (``cell_padding`` is 0)."""
    cols = visible_columns(compact, owners, probes)
    widths = {c.key: c.width(compact) for c in cols if c.key != "command"}
    gaps = len(cols) - 1  # one gap before every column but the first
    used = sum(widths.values()) + gaps
    widths["command"] = max(MIN_COMMAND_WIDTH, total_width - used)
    return widths


@dataclass(frozen=True, slots=True)
class ProcRow:
    """One row of the process table: a GPU process or a holder, with its cells."""

    key: str  # "gpu:pid" ("?:pid" for a holder on an unknown GPU)
    gpu: int | None
    pid: int
    kind: str  # "gpu" | "holder"
    visible: bool | None  # None: the host side is unknown
    user: str | None
    command: str  # as shown (safe)
    type: str
    gpu_memory: int | None
    sm_percent: float | None
    cpu_percent: float | None
    rss: int | None
    read_bytes_per_s: float | None
    elapsed: float | None
    create_time: float | None
    owner: str | None = None  # owner_label: "pod ns/name", "slurm 81234.0", ...
    owner_detail: str | None = None  # with the container, the Slurm job's name and user
    stop: str | None = None  # what users would rather run: "kubectl delete pod -n ns name"
    probe: Probe | None = None  # what the process's probe measured (None: no probe)
    # the named variables of its environment (None: not readable by gputop)
    environment: tuple[tuple[str, str], ...] | None = None

    def cell_text(self, key: str, *, compact: bool) -> str:
        if key == "mem":
            return fmt.memory(self.gpu_memory)
        if key == "command":
            return f"[{self.owner}] {self.command}" if compact and self.owner else self.command
        if key == "probe":
            p = self.probe
            return (
                "" if p is None else probe_cell(p.data_wait_ratio, p.step_seconds, compact=compact)
            )
        return _CELL_TEXT[key](self)

    def sort_value(self, key: str) -> float | str | None:
        return _SORT_VALUE[key](self)


#: Column key -> the value its sort orders by (None: unknown, always last).
_SORT_VALUE: dict[str, Callable[[ProcRow], float | str | None]] = {
    "gpu": lambda r: -1 if r.gpu is None else r.gpu,
    "pid": lambda r: r.pid,
    "user": lambda r: r.user.lower() if r.user else None,
    "mem": lambda r: r.gpu_memory,
    "sm": lambda r: r.sm_percent,
    "cpu": lambda r: r.cpu_percent,
    "rss": lambda r: r.rss,
    "read": lambda r: r.read_bytes_per_s,
    "time": lambda r: r.elapsed,
    "command": lambda r: r.command.lower() if r.visible is not False else None,
}
#: The columns a sort can order by, in the order the sort key steps through them.
SORT_KEYS = tuple(_SORT_VALUE)


def time_text(elapsed: float | None) -> str:
    """A process's running time as the process tables spell it (the dashboard's TIME,
    ``--once``'s): minutes after its first minute, so a live row's text, and so the row,
    changes at most once a minute. The exact time is on the process screen."""
    return fmt.running_time(elapsed)


#: Column key -> its cell's text (the layout-dependent MEM and COMMAND aside).
_CELL_TEXT: dict[str, Callable[[ProcRow], str]] = {
    "gpu": lambda r: "?" if r.gpu is None else str(r.gpu),
    "pid": lambda r: str(r.pid),
    "user": lambda r: safe(r.user, 64),
    "type": lambda r: r.type,
    "sm": lambda r: fmt.percent(r.sm_percent),
    "cpu": lambda r: fmt.number(r.cpu_percent, digits=1),
    "rss": lambda r: fmt.bytes_(r.rss),
    "read": lambda r: fmt.rate(r.read_bytes_per_s),
    "time": lambda r: time_text(r.elapsed),
    "owner": lambda r: r.owner or "",
}

INVISIBLE = "pid not visible (other PID namespace)"


def _command_text(info: ProcessInfo | None) -> str:
    if info is None:
        return fmt.NA
    text = safe(info.command or info.name, 2048) if (info.command or info.name) else ""
    if info.status == "dead":
        return f"{EXITED} {text}".rstrip()
    if info.status == "zombie":
        return f"[zombie] {text}".rstrip()
    return text or fmt.NA


def _owner_cells(info: ProcessInfo | None) -> dict[str, str | None]:
    owner = None if info is None else info.owner
    if owner is None:
        return {}
    # Here: the first frame has no process rows yet (processes_pending), nor this module.
    from gputop.sources.owners import owner_detail, owner_label, stop_command

    cells = {"owner": owner_label(owner), "owner_detail": owner_detail(owner)}
    cells["stop"] = stop_command(owner)
    return {k: None if v is None else safe(v, 512) for k, v in cells.items()}


def row_key(gpu: int | None, pid: int) -> str:
    return f"{'?' if gpu is None else gpu}:{pid}"


def _elapsed(now: float, info: ProcessInfo | None) -> float | None:
    return fmt.since(now, None if info is None else info.create_time)


def process_rows(snapshot: Snapshot) -> list[ProcRow]:
    """Every GPU process and every unlisted /dev/nvidia* holder, unsorted, unfiltered;
    none while the processes are being read (the notes say so): a row without its owner,
    user and command would read as if they had been read."""
    if processes_pending(snapshot):
        return []
    rows: list[ProcRow] = []
    seen: set[str] = set()
    now = snapshot.time
    index = process_index(snapshot)
    for g in snapshot.gpus:
        for p in g.processes:
            info = p.host if p.host is not None else index.get(p.pid)
            key = row_key(g.index, p.pid)
            if key in seen:
                continue
            seen.add(key)
            visible = None if info is None else info.visible
            if visible is False:
                info = None
            command = INVISIBLE if visible is False else _command_text(info)
            rows.append(
                ProcRow(
                    key=key,
                    gpu=g.index,
                    pid=p.pid,
                    kind="gpu",
                    visible=visible,
                    user=info.user if info else None,
                    command=command,
                    type=safe(p.type, 8),
                    gpu_memory=p.gpu_memory,
                    sm_percent=p.sm_percent,
                    cpu_percent=info.cpu_percent if info else None,
                    rss=info.rss if info else None,
                    read_bytes_per_s=info.read_bytes_per_s if info else None,
                    elapsed=_elapsed(now, info),
                    create_time=info.create_time if info else None,
                    probe=info.probe if info else None,
                    environment=info.environment if info else None,
                    **_owner_cells(info),
                )
            )
    for h in snapshot.unlisted_holders:
        key = row_key(h.gpu, h.pid)
        if key in seen:
            continue
        seen.add(key)
        info = index.get(h.pid)
        if info is not None and not info.visible:
            info = None
        dev = f"/dev/nvidia{h.minor_number}" if h.minor_number is not None else "/dev/nvidia?"
        what = safe(h.command or h.name or (info.command if info else None), 2048)
        rows.append(
            ProcRow(
                key=key,
                gpu=h.gpu,
                pid=h.pid,
                kind="holder",
                visible=True,
                user=h.user if h.user is not None else (info.user if info else None),
                command=f"[holds {dev}, not listed by NVML] {what}",
                type="-",
                gpu_memory=None,
                sm_percent=None,
                cpu_percent=info.cpu_percent if info else None,
                rss=info.rss if info else None,
                read_bytes_per_s=info.read_bytes_per_s if info else None,
                elapsed=_elapsed(now, info),
                create_time=info.create_time if info else None,
            )
        )
    return rows


def matches(row: ProcRow, text: str) -> bool:
    needle = text.strip().lower()
    if not needle:
        return True
    fields = (row.command, row.owner or "", row.user or "", str(row.pid))
    return any(needle in field.lower() for field in fields)


def sort_rows(rows: Sequence[ProcRow], key: str, reverse: bool = False) -> list[ProcRow]:
    """Sort by ``key``; unknown values (None) always last; ties by (gpu, pid)."""
    placed = sorted(rows, key=lambda r: (r.gpu if r.gpu is not None else -1, r.pid))
    value = _SORT_VALUE[key]
    valued = [(value(r), r) for r in placed]  # each row's value once
    known = [(v, r) for v, r in valued if v is not None]
    known.sort(key=lambda vr: vr[0], reverse=reverse)
    return [r for _, r in known] + [r for v, r in valued if v is None]


def table_rows(
    rows: Iterable[ProcRow],
    *,
    gpus: Collection[int] | None = None,
    text: str = "",
    sort_key: str = "gpu",
    reverse: bool = False,
) -> list[ProcRow]:
    """The rows on ``gpus`` (None: every GPU) that match ``text``, sorted."""
    shown = [r for r in rows if (gpus is None or r.gpu in gpus) and matches(r, text)]
    return sort_rows(shown, sort_key, reverse)


#: SampleError metrics about the process list or per-process values: without a word on
#: screen, an empty table would read as "no processes".
PROCESS_METRICS = frozenset(
    {
        "compute_processes",
        "graphics_processes",
        "processes",
        "process_utilization",
        "unlisted_holders",
    }
)
#: Notes shown at most; the rest are counted.
MAX_NOTES = 3


def _process_note(metric: str | None, message: str) -> str:
    denied = "permission" in message.lower()
    if denied and metric in ("compute_processes", "graphics_processes"):
        return "process info not permitted (NVML NoPermission): processes missing from the table"
    if denied and metric == "process_utilization":
        return "per-process GPU utilization not permitted (SM% n/a)"
    return message


def process_notes(snapshot: Snapshot | None) -> tuple[Parts, ...]:
    """What the process table cannot show and why, one line per problem."""
    if snapshot is None:
        return ()
    if processes_pending(snapshot):  # for a moment, not a problem: no "!"
        return (((PROCESSES_PENDING.message, "dim"),),)
    gpus_by_note: dict[str, list[int]] = {}
    # A process list NVML does not support raises no error: say it, or the empty table
    # would read as "no processes" (a refused one is said below, from its error).
    said = {e.gpu for e in snapshot.errors if e.metric in PROCESS_METRICS}
    for g in snapshot.gpus:
        if g.processes_unavailable and not g.lost and g.index not in said:
            why = safe(g.processes_unavailable, 200)
            gpus_by_note.setdefault(f"process list unavailable ({why})", []).append(g.index)
    for e in snapshot.errors:
        if e.metric not in PROCESS_METRICS:
            continue
        message = safe(e.message, 300)
        if e.gpu is not None:
            message = message.removeprefix(f"GPU {e.gpu}: ")
        note = _process_note(e.metric, message)
        found = gpus_by_note.setdefault(note, [])
        if e.gpu is not None and e.gpu not in found:
            found.append(e.gpu)
    lines: list[Parts] = []
    for note, gpus in list(gpus_by_note.items())[:MAX_NOTES]:
        where = f"GPU {','.join(str(g) for g in sorted(gpus))}: " if gpus else ""
        lines.append((("! ", "warn"), (where, "label"), (note, "warn")))
    hidden = len(gpus_by_note) - MAX_NOTES
    if hidden > 0:
        lines.append(((f"  +{hidden} more process problems", "dim"),))
    return tuple(lines)


# --- one process in detail (the process screen) ---

#: What the process screen says when gputop could not read the environment.
NO_ENVIRONMENT = "n/a (read only where the kernel lets gputop: the process's owner, or root)"

#: (seconds relative to the newest snapshot, GPU memory bytes, SM %) of one process.
ProcPoint = tuple[float, float | None, float | None]


def find_row(rows: Iterable[ProcRow], key: str, create_time: float | None) -> ProcRow | None:
    """The row ``key`` ("gpu:pid") of the same process: a reused pid (another start
    time) is another process."""
    for r in rows:
        if r.key == key:
            same = create_time is None or r.create_time is None or r.create_time == create_time
            return r if same else None
    return None


def process_timeline(
    history: Sequence[Snapshot], gpu: int | None, pid: int, create_time: float | None
) -> list[ProcPoint]:
    """The process's GPU memory and SM % in each snapshot of ``history`` (None where it
    was not listed, or NVML gave no value)."""
    if not history:
        return []
    newest = fmt.finite(history[-1].time)
    out: list[ProcPoint] = []
    for snap in history:
        when = fmt.finite(snap.time)
        x = math.nan if when is None or newest is None else when - newest
        sample = None if gpu is None else snap.gpu(gpu)
        found = None
        for p in () if sample is None else sample.processes:
            born = None if p.host is None else p.host.create_time
            if p.pid == pid and (create_time is None or born is None or born == create_time):
                found = p
                break
        if found is None:
            out.append((x, None, None))
        else:
            out.append((x, fmt.finite(found.gpu_memory), fmt.finite(found.sm_percent)))
    return out


def process_facts(row: ProcRow, *, ended: bool = False) -> list[Parts]:
    """The process screen's lines above its charts: who, where, how much, the owner,
    the environment of interest, and the whole command (the screen wraps it)."""
    where = "GPU ?" if row.gpu is None else f"GPU {row.gpu}"
    lines: list[Parts] = [
        (
            ("pid ", "label"),
            (str(row.pid), ""),
            ("  user ", "label"),
            (safe(row.user, 64), ""),
            ("  on ", "label"),
            (where, "accent"),
            ("  type ", "label"),
            (row.type, ""),
            *((("  ended", "warn-strong"),) if ended else ()),
        ),
        (
            ("GPU memory ", "label"),
            (fmt.bytes_(row.gpu_memory), ""),
            ("  SM ", "label"),
            (fmt.percent(row.sm_percent), ""),
            ("  CPU ", "label"),
            (fmt.percent(row.cpu_percent, 1), ""),
            ("  RSS ", "label"),
            (fmt.bytes_(row.rss), ""),
            ("  read ", "label"),
            (fmt.rate(row.read_bytes_per_s), ""),
            ("  running for ", "label"),
            (fmt.duration(row.elapsed), ""),
        ),
    ]
    if row.probe is not None:
        p = row.probe
        lines.append(
            (("probe ", "label"), (probe_cell(p.data_wait_ratio, p.step_seconds, False), ""))
        )
    if row.owner_detail or row.owner:
        lines.append((("owner ", "label"), (row.owner_detail or row.owner or "", "")))
    if row.stop:
        lines.append((("to stop it ", "label"), (row.stop, "")))
    # Before the command: a long command line wraps to many lines and may need scrolling.
    lines.append(environment_parts(row.environment))
    lines.append((("command ", "label"), (row.command, "")))
    return lines


def environment_parts(environment: tuple[tuple[str, str], ...] | None) -> Parts:
    """'environment CUDA_VISIBLE_DEVICES=2,3 RANK=1', of the variables gputop reads."""
    head: Parts = (("environment ", "label"),)
    if environment is None:
        return (*head, (NO_ENVIRONMENT, "dim"))
    if not environment:
        return (*head, (f"none of {', '.join(ENVIRONMENT_NAMES)} set", "dim"))
    shown: list[tuple[str, str]] = []
    for i, (name, value) in enumerate(environment):
        shown += [(" " if i else "", ""), (f"{safe(name, 64)}=", "label"), (safe(value, 256), "")]
    return (*head, *shown)
