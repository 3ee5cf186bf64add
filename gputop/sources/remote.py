"""One line of a remote ``gputop --stream`` (or ``--json``), read as untrusted data: every
value type-checked against the model. :func:`summarize` reads what a fleet row shows (every
line), :func:`to_snapshot` the whole snapshot (the host opened in the dashboard)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gputop.model import (
    LIMITS,
    MAX_ITEMS,
    SCHEMA_VERSION,
    SEVERITIES,
    GpuMemory,
    GpuSample,
    Snapshot,
    Utilization,
    Verdict,
    clean_text,
    decoder,
    said,
    within,
)

#: A line above this many bytes is refused (far above what a real host writes).
MAX_LINE_BYTES = 8 * 2**20


class LineError(ValueError):
    """A line that is not a gputop snapshot (the message: one short line)."""


class FutureSchema(LineError):
    """A snapshot of a newer schema than this gputop reads."""

    def __init__(self, schema: int) -> None:
        super().__init__(
            f"schema {schema} is newer than this gputop reads ({SCHEMA_VERSION}): "
            "update gputop here"
        )


@dataclass(frozen=True, slots=True)
class GpuCell:
    """One GPU as a fleet row shows it."""

    index: int
    util: float | None  # percent
    mem_used: int | None  # bytes
    mem_total: int | None
    lost: bool
    verdict: Verdict | None  # as the remote host judged it
    users: tuple[str, ...] = ()  # owners of the GPU's processes, cleaned

    @property
    def mem_percent(self) -> float | None:
        if self.mem_used is None or not self.mem_total:
            return None
        return 100.0 * self.mem_used / self.mem_total


@dataclass(frozen=True, slots=True)
class HostReport:
    """What one line says about a host, for the fleet screen."""

    time: float  # the snapshot's own time (the remote clock)
    hostname: str  # the name the host gives itself
    gpus: tuple[GpuCell, ...]
    users: tuple[str, ...]  # every user with a GPU process, sorted
    source: str  # "nvml", "demo", "host-only", ...
    driver_error: str | None  # why the remote has no NVIDIA driver; None: it has one


def parse_line(line: bytes | str) -> dict[str, Any]:
    """The JSON object of one line, schema-checked. Raises LineError / FutureSchema."""
    if len(line) > MAX_LINE_BYTES:
        raise LineError(f"line of {len(line)} bytes is over the {MAX_LINE_BYTES} byte limit")
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        raise LineError(f"not JSON: {_preview(line)}") from None
    if not isinstance(data, dict):
        raise LineError(f"not a JSON object: {_preview(line)}")
    schema = data.get("schema")
    if isinstance(schema, bool) or not isinstance(schema, int):
        raise LineError("not a gputop snapshot (no schema number)")
    if schema > SCHEMA_VERSION:
        raise FutureSchema(schema)
    if schema < 1:
        raise LineError(f"unknown schema {schema}")
    if not isinstance(data.get("gpus", []), list) or not isinstance(data.get("time"), int | float):
        raise LineError("not a gputop snapshot (no time or GPU list)")
    if not within(data["time"], *LIMITS[Snapshot, "time"]):
        raise LineError(f"not a gputop snapshot (its time {said(data['time'])} is out of range)")
    return data


def _preview(line: bytes | str) -> str:
    text = line[:60] if isinstance(line, str) else line[:60].decode("utf-8", "replace")
    return repr(clean_text(text, 60) or "")


# The model's checked decoding of one value: None where it is not one.
_num = decoder(float | None, checked=True)
_int = decoder(int | None, checked=True)


def _bounded(value: Any, cls: type, name: str) -> Any:
    """``value`` if within the model's LIMITS, else None (the snapshot check's bounds)."""
    return value if within(value, *LIMITS[cls, name]) else None


def text_of(value: Any, limit: int) -> str | None:
    """``value`` cleaned (at most ``limit`` characters) when a string, else None."""
    return clean_text(value, limit) if isinstance(value, str) else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value[:MAX_ITEMS] if isinstance(value, list) else []


def _verdict(value: Any) -> Verdict | None:
    value = _dict(value)
    kind = text_of(value.get("kind"), 64)
    if not kind:
        return None
    severity = text_of(value.get("severity"), 16) or "info"
    return Verdict(
        kind=kind,
        label=text_of(value.get("label"), 128) or kind,
        severity=severity if severity in SEVERITIES else "info",
        evidence=text_of(value.get("evidence"), 1024) or "",
        advice=text_of(value.get("advice"), 1024) or "",
    )


def summarize(data: dict[str, Any]) -> HostReport:
    """The fleet row's part of a parsed line (see :func:`parse_line`)."""
    users_by_pid: dict[int, str] = {}
    for p in map(_dict, _list(data.get("processes"))):
        pid, user = _int(p.get("pid")), text_of(p.get("user"), 64)
        if pid is not None and user:
            users_by_pid[pid] = user
    cells: list[GpuCell] = []
    every: set[str] = set()
    for i, g in enumerate(map(_dict, _list(data.get("gpus")))):
        mem = _dict(g.get("memory"))
        users: set[str] = set()
        for p in map(_dict, _list(g.get("processes"))):
            user = text_of(p.get("user"), 64) or users_by_pid.get(_int(p.get("pid")))
            if user:
                users.add(user)
        every |= users
        index = _bounded(g.get("index"), GpuSample, "index")
        total = _bounded(mem.get("total"), GpuMemory, "total")
        used = _bounded(mem.get("used"), GpuMemory, "used")
        cells.append(
            GpuCell(
                index=i if index is None else index,
                util=_bounded(_dict(g.get("utilization")).get("gpu"), Utilization, "gpu"),
                mem_used=None if total is not None and used is not None and used > total else used,
                mem_total=total,
                lost=g.get("lost") is True,
                verdict=_verdict(g.get("verdict")),
                users=tuple(sorted(users)),
            )
        )
    driver = _dict(data.get("driver"))
    available = driver.get("available") is not False
    return HostReport(
        time=_num(data.get("time")) or 0.0,
        hostname=text_of(data.get("hostname"), 128) or "?",
        gpus=tuple(cells),
        users=tuple(sorted(every)),
        source=text_of(data.get("source"), 32) or "?",
        driver_error=None if available else text_of(driver.get("error"), 256) or "no NVIDIA driver",
    )


def to_snapshot(data: dict[str, Any]) -> Snapshot:
    """The whole snapshot of a parsed line, every field checked; LineError when even
    time, hostname or driver is unusable."""
    data = dict(data)
    data.setdefault("driver", {"available": False, "error": "not reported"})
    data.setdefault("hostname", "?")
    try:
        return Snapshot.from_dict(data, checked=True)
    except ValueError:
        raise LineError("not a gputop snapshot (time, hostname or driver unusable)") from None
