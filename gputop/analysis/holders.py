"""The idle memory holder: GPUs idle while held, over the run of such snapshots ending the
history; :func:`lookback_form` reduces a snapshot outside the window to what it reads.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gputop.analysis.gpu_rules import held, scope_samples
from gputop.analysis.kinds import RULES, Finding, finding
from gputop.analysis.thresholds import Thresholds
from gputop.fmt import bytes_, duration
from gputop.model import (
    Clocks,
    GpuMemory,
    GpuProcess,
    GpuSample,
    HostSample,
    Pcie,
    ProcessInfo,
    Snapshot,
    Utilization,
)


def all_idle(samples: Sequence[GpuSample], t: Thresholds) -> bool:
    return all(g.utilization.gpu is not None and g.utilization.gpu <= t.idle_util for g in samples)


def idle_and_held(
    snap: Snapshot, gpus: tuple[int, ...], pids: frozenset[int] | None, t: Thresholds
) -> bool:
    """``gpus`` idle in ``snap`` while held by ``pids`` (None: by anything)."""
    samples = scope_samples(snap, gpus)
    if not samples or not all_idle(samples, t):
        return False
    if pids is not None:
        return any(p.pid in pids for g in samples for p in g.processes)
    return all(held(snap, g, t) for g in samples)


#: A scope of the runs: its GPUs, and its pids (a job's main processes; None: a GPU).
RunKey = tuple[tuple[int, ...], frozenset[int] | None]


@dataclass(slots=True, eq=False)
class Runs:
    """Scope -> (sequence number computed at, the run's first or None, exact: the run did
    not reach the start of its history)."""

    memo: dict[RunKey, tuple[int, int | None, bool]] = field(default_factory=dict)

    def start(self, key: RunKey, n: int, base: int, idle_held: Callable[[int], bool]) -> int:
        """Index of the first snapshot of the run ending the history (``n``: none)."""
        latest = base + n - 1
        memo = self.memo.get(key)
        if (
            memo is not None
            and base - 1 <= memo[0] <= latest
            and (memo[2] or memo[1] is None or memo[1] <= base)
        ):
            seq_at, first, exact = memo
            for seq in range(seq_at + 1, latest + 1):
                if idle_held(seq - base):
                    if first is None:
                        first, exact = seq, True
                else:
                    first = None
        else:
            start = n
            while start > 0 and idle_held(start - 1):
                start -= 1
            first = None if start == n else base + start
            exact = start > 0
        if memo is None or memo[0] <= latest:
            self.memo[key] = (latest, first, exact)
        return n if first is None else max(0, first - base)

    def prune(self, oldest: int) -> None:
        self.memo = {k: v for k, v in self.memo.items() if v[0] >= oldest}


def idle_holder(
    t: Thresholds,
    history: Sequence[Snapshot],
    start: int,
    samples: Sequence[GpuSample],
    procs: dict[int, ProcessInfo],
    pids: Sequence[int],
) -> Finding | None:
    """When the run is long enough, or all the history while every holder is old enough."""
    if start == len(history):
        return None
    idle_for = history[-1].time - history[start].time
    used = [g.memory.used for g in samples if g.memory.used is not None]
    memory = f"holding {bytes_(sum(used))}" if used else "memory use n/a"
    if idle_for >= t.idle_holder_seconds:
        evidence = f"util <= {t.idle_util:g} % for {duration(idle_for)}; {memory}"
    elif start == 0 and idle_for >= t.idle_holder_min_observed:
        born = [None if (info := procs.get(pid)) is None else info.create_time for pid in pids]
        ages = [history[-1].time - b for b in born if b is not None]
        if not ages or len(ages) < len(born) or min(ages) < t.idle_holder_seconds:
            return None  # one unknown age: cannot claim they are all old
        evidence = (
            f"util <= {t.idle_util:g} % for all {duration(idle_for)} observed; "
            f"running for {duration(min(ages))}; {memory}"
        )
    else:
        return None
    return finding(
        RULES["idle_holder"],
        evidence,
        "Holds GPU memory without using the GPU: stop it if it is finished or stuck",
    )


# --- the look-back form ----------------------------------------------------------------

# Parts shared by the forms: one Utilization per whole percentage (what NVML gives).
_NO_CLOCKS = Clocks()
_NO_PCIE = Pcie()
_NO_UTIL = Utilization()
_WHOLE_UTIL = tuple(Utilization(gpu=float(v)) for v in range(101))


def _form_util(util: Utilization, before: GpuSample | None) -> Utilization:
    """What a form keeps of a utilization: its ``gpu`` (``all_idle``), shared."""
    value = util.gpu
    if value is None:
        return _NO_UTIL
    if before is not None and before.utilization.gpu == value:
        return before.utilization
    if 0 <= value <= 100 and value == int(value):  # (an int from JSON too; NaN: no)
        return _WHOLE_UTIL[int(value)]
    return Utilization(gpu=value)


def _form_memory(memory: GpuMemory, before: GpuSample | None) -> GpuMemory:
    """What a form keeps of a GPU's memory: used and total (``held``), shared."""
    had = None if before is None else before.memory
    if had is None or had.total != memory.total:
        return GpuMemory(total=memory.total, used=memory.used)
    return had if had.used == memory.used else GpuMemory(total=had.total, used=memory.used)


def lookback_form(snap: Snapshot, before: Snapshot | None) -> Snapshot:
    """``snap`` reduced to what the verdicts read outside the window (docs/architecture.md,
    "The look-back form"), sharing equal parts with ``before``, the form before it."""
    prev = {} if before is None else {g.index: g for g in before.gpus}
    rows: dict[int, GpuProcess] | None = None  # pid -> the form before's bare row
    gpus: list[GpuSample] = []
    for g in snap.gpus:
        p = prev.get(g.index)
        if g.lost:
            gpus.append(p if p is not None and p.lost else GpuSample(g.index, lost=True))
            continue
        if p is not None and p.lost:
            p = None
        util, memory = _form_util(g.utilization, p), _form_memory(g.memory, p)
        pids = [q.pid for q in g.processes]
        if p is not None and [q.pid for q in p.processes] == pids:
            if p.memory is memory and p.utilization is util:
                gpus.append(p)
                continue
            procs = p.processes
        else:
            if rows is None:
                rows = {q.pid: q for h in prev.values() for q in h.processes}
            procs = tuple(rows.get(pid) or GpuProcess(pid) for pid in pids)
        gpus.append(
            GpuSample(
                g.index,
                memory=memory,
                utilization=util,
                clocks=_NO_CLOCKS,
                pcie=_NO_PCIE,
                processes=procs,
            )
        )
    host, form_host = snap.host, None
    if host is not None:
        had = None if before is None else before.host
        form_host = had if had is not None and had.disk == host.disk else HostSample(disk=host.disk)
    form_gpus = tuple(gpus)
    if (
        before is not None
        and len(before.gpus) == len(gpus)
        and all(map(operator.is_, gpus, before.gpus))
    ):
        form_gpus = before.gpus
    return Snapshot(
        snap.time,
        snap.hostname,
        snap.driver,
        host=form_host,
        gpus=form_gpus,
        unlisted_holders=snap.unlisted_holders,
        source=snap.source,
    )
