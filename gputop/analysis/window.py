"""The window cache: what the verdicts compute from one snapshot alone (kept while the
snapshot is in the window) and what :class:`~gputop.analysis.verdict.Analyzer` carries
from one call to the next.

- ``Tick``: one snapshot's jobs, pid index, per-job features, per-GPU-set samples;
- ``Track``: one job across the window (pushed and popped as the window slides);
- ``Runs``: the "idle memory holder" runs, extended by new snapshots;
- ``Context``: what one call judges with (the window, its ticks, memoized groups and
  signals), read by the rules (:mod:`gputop.analysis.rules`).
"""

from __future__ import annotations

import bisect
import math
import operator
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from gputop.analysis.jobs import Job, JobStructure, build_jobs_reusing, process_index
from gputop.analysis.kinds import Finding
from gputop.analysis.thresholds import Thresholds
from gputop.model import (
    CLOCK_EVENT_EFFECTS,
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
from gputop.pcie import lane_bytes_per_s


@dataclass(frozen=True, slots=True)
class JobTick:
    """One job in one snapshot: what the window aggregates (``_signals``)."""

    job: Job
    disk_sleep: bool  # a member in D state
    read: float | None  # job read bytes/s
    worker_pids: tuple[int, ...]  # the workers with a known CPU...
    worker_cpu: tuple[float, ...]  # ...and their CPU (% of one core)
    main_pids: tuple[int, ...]  # the main processes with a known CPU...
    main_cpu: tuple[float, ...]  # ...and theirs


class Tick:
    """The per-snapshot work of the verdicts, done once per snapshot: the pid index, the
    jobs and their per-sample features, and (memoized per GPU set) the scope samples.
    Depends on the snapshot and the thresholds only."""

    __slots__ = (
        "_ageless",
        "_before",
        "_by_gpu",
        "_gpu",
        "_held",
        "_idle",
        "_pids",
        "_samples",
        "feats",
        "jobs",
        "lost",
        "procs",
        "snap",
        "structure",
        "time",
    )

    def __init__(self, snap: Snapshot, previous: Tick | None = None) -> None:
        """``previous``: the tick of the snapshot before, whose jobs are taken over when
        this snapshot gives ``build_jobs`` the same input (see ``_same_jobs``), and whose
        jobs' structure is reused when only their values moved (``build_jobs_reusing``)."""
        self.snap = snap
        self.time = snap.time
        self.lost = [g for g in snap.gpus if g.lost]
        self.procs: dict[int, ProcessInfo]
        self.jobs: dict[str, Job]
        self.feats: dict[str, JobTick]
        self._ageless: bool | None = None
        self._by_gpu: dict[int, tuple[str, ...]] | None = None
        self.structure: JobStructure  # of the jobs: the next snapshot's may reuse it
        if previous is not None and _same_jobs(previous, snap):
            self.procs = previous.procs
            self.jobs = previous.jobs
            self.structure = previous.structure
            self.feats = previous.feats
            self._ageless = previous._ageless
            self._by_gpu = previous._by_gpu
        else:
            self.procs = index = process_index(snap)
            jobs, self.structure = build_jobs_reusing(
                snap, None if previous is None else previous.structure, index
            )
            self.jobs = {j.id: j for j in jobs}
            feats: dict[str, JobTick] = {}
            for job_id, job in self.jobs.items():
                wp, wc = _known_cpu(job.worker_pids, index)
                mp, mc = _known_cpu(job.main_pids, index)
                feats[job_id] = JobTick(
                    job, bool(job.disk_sleep), job.read_bytes_per_s, wp, wc, mp, mc
                )
            self.feats = feats
        self._samples: dict[tuple[int, ...], list[GpuSample]] = {}
        self._gpu: dict[tuple[int, ...], GpuTick] = {}
        # The snapshot before's GPU parts, samples and unlisted holders: a part made of
        # the very same samples is shared (``gpu``). Its maps only, not its tick.
        self._before = (
            None
            if previous is None
            else (previous._gpu, previous._samples, previous.snap.unlisted_holders)
        )
        self._idle: dict[tuple[int, ...], bool] = {}
        self._held: dict[tuple[int, ...], bool] = {}
        self._pids: dict[tuple[int, ...], frozenset[int]] = {}

    def job_ids_by_gpu(self) -> dict[int, tuple[str, ...]]:
        """GPU index -> the ids of the jobs on it, by GPU memory (most first), then root
        pid: the jobs a GPU's verdict looks at (memoized, and taken over with the jobs)."""
        if self._by_gpu is None:
            by_gpu: dict[int, list[Job]] = {}
            for j in self.jobs.values():
                for g in set(j.gpus):
                    by_gpu.setdefault(g, []).append(j)
            self._by_gpu = {
                g: tuple(
                    j.id for j in sorted(jobs, key=lambda j: (-(j.gpu_memory or 0), j.root_pid))
                )
                for g, jobs in by_gpu.items()
            }
        return self._by_gpu

    def ageless(self) -> bool:
        """Whether no job here knows its start (create time), so none has an age that
        moves on with the time (memoized, and taken over with the jobs)."""
        if self._ageless is None:
            self._ageless = all(j.create_time is None for j in self.jobs.values())
        return self._ageless

    def samples(self, gpus: tuple[int, ...]) -> list[GpuSample]:
        """``_scope_samples(snap, gpus)``, memoized (callers never change the list)."""
        out = self._samples.get(gpus)
        if out is None:
            out = self._samples[gpus] = _scope_samples(self.snap, gpus)
        return out

    def gpu(self, gpus: tuple[int, ...], t: Thresholds) -> GpuTick:
        """What the GPU side of a verdict takes from this snapshot's samples of ``gpus``
        (:class:`GpuTick`), memoized: computed once while the snapshot is in the window
        instead of once per call."""
        out = self._gpu.get(gpus)
        if out is None:
            samples = self.samples(gpus)
            before = self._before
            if before is not None:  # the snapshot before's part, when made of the same
                part, their = before[0].get(gpus), before[1].get(gpus)  # samples objects
                if (
                    part is not None
                    and their is not None
                    and len(their) == len(samples)
                    and all(map(operator.is_, their, samples))
                    and before[2] == self.snap.unlisted_holders  # what ``held`` reads
                ):
                    out = part
            if out is None:
                out = GpuTick(self.snap, samples, t)
            self._gpu[gpus] = out
        return out

    def idle(self, gpus: tuple[int, ...], t: Thresholds) -> bool:
        """Whether ``gpus`` have samples here and all are idle (memoized): the first half
        of ``idle_and_held``."""
        idle = self._idle.get(gpus)
        if idle is None:
            samples = self.samples(gpus)
            idle = self._idle[gpus] = bool(samples) and _all_idle(samples, t)
        return idle

    def idle_and_held(
        self, gpus: tuple[int, ...], pids: frozenset[int] | None, t: Thresholds
    ) -> bool:
        """``idle_and_held`` on this snapshot, from memoized parts."""
        if not self.idle(gpus, t):
            return False
        samples = self.samples(gpus)
        if pids is not None:
            on = self._pids.get(gpus)
            if on is None:
                on = self._pids[gpus] = frozenset(p.pid for g in samples for p in g.processes)
            return not on.isdisjoint(pids)
        out = self._held.get(gpus)
        if out is None:
            out = self._held[gpus] = all(held(self.snap, g, t) for g in samples)
        return out


class GpuTick:
    """One snapshot's share of the window loops of the GPU side of a verdict (the rules'
    ``_idle``, ``_group``, ``_throttle``, ``_link``, ``_pcie``), for one GPU set: the
    same per-sample values those loops compute, and per-tick counts of them. What the
    window adds up from these is what the loops over the samples give: integer counts
    and sets merged, the floats (utilization means, PCIe ratios and rates) the very
    values each loop computes, added in the same order by the caller."""

    __slots__ = (
        "degraded",
        "hard_n",
        "hard_names",
        "link_busy",
        "mig_unknown",
        "n",
        "pcie",
        "quiet",
        "soft_n",
        "throttle_busy",
        "util",
        "where",
        "worst",
    )

    def __init__(self, snap: Snapshot, samples: Sequence[GpuSample], t: Thresholds) -> None:
        self.n = len(samples)  # samples (a lost GPU has none)
        self.util = util_of(samples)  # their mean utilization (None: none known)
        # all latest samples in MIG mode without utilization (``_mig_without_util``)
        self.mig_unknown = bool(samples) and all(
            g.mig_mode and g.utilization.gpu is None for g in samples
        )
        # ``_idle``: no sample held or above IDLE_UTIL
        self.quiet = not any(
            held(snap, g, t) or (g.utilization.gpu is not None and g.utilization.gpu > t.idle_util)
            for g in samples
        )
        # ``_throttle``: busy samples, those with a hard / soft reason, the hard reasons
        # and the GPUs they were on
        busy = hard_n = soft_n = 0
        hard_names: set[str] = set()
        where: set[int] = set()
        # ``_link``: busy samples with a known link, those below the max, the last one
        link_busy = degraded = 0
        worst: GpuSample | None = None
        # ``_pcie``: (index, (RX / capacity, RX), (TX / capacity, TX)) of each sample with
        # a rate and a capacity, in sample order (None: that direction not known)
        pcie: list[tuple[int, tuple[float, float] | None, tuple[float, float] | None]] = []
        for g in samples:
            util = g.utilization.gpu
            if util is not None and util >= t.util_low:
                busy += 1
                hard, soft = throttle_class(g.clock_event_reasons)
                if hard:
                    hard_n += 1
                    hard_names.update(hard)
                    where.add(g.index)
                elif soft:
                    soft_n += 1
                p = g.pcie
                if (
                    p.gen is not None
                    and p.max_gen is not None
                    and p.width is not None
                    and p.max_width is not None
                ):
                    link_busy += 1
                    if p.gen < p.max_gen or p.width < p.max_width:
                        degraded += 1
                        worst = g
            rx, tx = g.pcie.rx_bytes_per_s, g.pcie.tx_bytes_per_s
            if rx is None and tx is None:
                continue
            cap = link_capacity(g)
            if cap is None or cap <= 0:
                continue
            pcie.append(
                (
                    g.index,
                    None if rx is None else (rx / cap, rx),
                    None if tx is None else (tx / cap, tx),
                )
            )
        self.throttle_busy, self.hard_n, self.soft_n = busy, hard_n, soft_n
        self.hard_names, self.where = frozenset(hard_names), frozenset(where)
        self.link_busy, self.degraded, self.worst = link_busy, degraded, worst
        self.pcie = tuple(pcie)


def mean(values: Iterable[float | None]) -> float | None:
    known = [float(v) for v in values if v is not None]  # as _stats(values).mean
    return sum(known) / len(known) if known else None


def util_of(samples: Sequence[GpuSample]) -> float | None:
    return mean(g.utilization.gpu for g in samples)


def throttle_class(reasons: tuple[str, ...] | None) -> tuple[list[str], list[str]]:
    """(hard, soft) reason names among the decoded clock event reasons."""
    hard: list[str] = []
    soft: list[str] = []
    for reason in reasons or ():
        effect = CLOCK_EVENT_EFFECTS.get(reason)
        if effect == "hard":
            hard.append(reason)
        elif effect == "soft":
            soft.append(reason)
    return hard, soft


def link_capacity(gpu: GpuSample) -> float | None:
    """Current per-direction capacity: the max link scaled down to the current gen/width."""
    p = gpu.pcie
    cap = p.link_max_bytes_per_s
    lane = lane_bytes_per_s(p.gen)
    if cap is None or cap <= 0:
        if lane is not None and p.width:
            return lane * p.width
        return None
    max_lane = lane_bytes_per_s(p.max_gen)
    if lane is not None and max_lane is not None and p.width and p.max_width:
        cap *= (lane * p.width) / (max_lane * p.max_width)
    return cap


def _same_jobs(previous: Tick, snap: Snapshot) -> bool:
    """Whether ``build_jobs(snap)`` is ``previous``'s jobs: it reads only the process rows,
    each GPU's index, lost flag, process rows and utilization, and the time (a job's
    ``age``). The sources give an unchanged row, process tuple or GPU sample as the same
    object from tick to tick, so this is a few identity checks; any change (a process's
    CPU, a new pid) makes the jobs built again."""
    before = previous.snap
    if snap.processes is not before.processes or len(snap.gpus) != len(before.gpus):
        return False
    for g, h in zip(snap.gpus, before.gpus, strict=True):
        if g is h:
            continue
        if (
            g.index != h.index
            or g.lost != h.lost
            or g.processes is not h.processes
            or g.utilization.gpu != h.utilization.gpu
        ):
            return False
    # a job's age moves on with the time, unless no job knows its start
    return snap.time == before.time or previous.ageless()


def _known_cpu(
    pids: tuple[int, ...], index: dict[int, ProcessInfo]
) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """(pids, CPU %) of those of ``pids`` whose CPU is known."""
    out_pids: list[int] = []
    out_cpu: list[float] = []
    for pid in pids:
        row = index.get(pid)
        if row is not None and row.cpu_percent is not None:
            out_pids.append(pid)
            out_cpu.append(row.cpu_percent)
    return tuple(out_pids), tuple(out_cpu)


def _all_idle(samples: Sequence[GpuSample], t: Thresholds) -> bool:
    return all(g.utilization.gpu is not None and g.utilization.gpu <= t.idle_util for g in samples)


def idle_and_held(
    snap: Snapshot, gpus: tuple[int, ...], pids: frozenset[int] | None, t: Thresholds
) -> bool:
    """GPUs ``gpus`` idle in ``snap`` while held: by the pids ``pids`` (a job), or by
    anything (``pids`` None: a GPU)."""
    samples = _scope_samples(snap, gpus)
    if not samples:
        return False
    if not _all_idle(samples, t):
        return False
    if pids is not None:
        return any(p.pid in pids for g in samples for p in g.processes)
    return all(held(snap, g, t) for g in samples)


def _scope_samples(snap: Snapshot, gpus: Sequence[int]) -> list[GpuSample]:
    return [g for g in snap.gpus if g.index in gpus and not g.lost]


def held(snap: Snapshot, gpu: GpuSample, t: Thresholds) -> bool:
    if gpu.processes:
        return True
    if any(h.gpu == gpu.index for h in snap.unlisted_holders):
        return True
    used, total = gpu.memory.used, gpu.memory.total
    return (
        used is not None
        and total is not None
        and total > 0
        and used / total >= t.held_memory_fraction
    )


# The look-back forms' shared parts: no per-form Clocks() and Pcie() (the defaults), and
# one Utilization per whole percentage (what NVML gives).
_NO_CLOCKS = Clocks()
_NO_PCIE = Pcie()
_NO_UTIL = Utilization()
_WHOLE_UTIL = tuple(Utilization(gpu=float(v)) for v in range(101))


def _form_util(util: Utilization, before: GpuSample | None) -> Utilization:
    """What a form keeps of a utilization: its ``gpu`` (``_all_idle``), shared."""
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
    if before is not None:
        had = before.memory
        if had.used == memory.used and had.total == memory.total:
            return had
        if had.total == memory.total:  # the same total's object
            return GpuMemory(total=had.total, used=memory.used)
    return GpuMemory(total=memory.total, used=memory.used)


def lookback_form(snap: Snapshot, before: Snapshot | None) -> Snapshot:
    """``snap`` reduced to what the verdicts read from a snapshot outside the window (the
    look-back): its time, the host disk read rate (``disk_peak``) and what
    ``idle_and_held`` reads (each GPU's index, lost flag, utilization (``gpu``) and
    memory (used, total), the pids on it, the unlisted holders). A few hundred bytes
    instead of the whole snapshot (its process rows, host processes and per-core CPU).

    ``before``: the form of the snapshot before, whose parts are shared where they are
    equal (a GPU's form, its pid tuple, the bare ``GpuProcess(pid)`` rows, the host)."""
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


@dataclass(frozen=True, slots=True)
class Group:
    """The GPU side of a verdict: depends only on the GPUs and the window ticks judged
    (shared by every job with the same GPUs present in the same ticks)."""

    early: Finding | None  # "warming up" or "unknown": the verdict stops there
    base: str
    busy: bool
    starved: bool
    severity: str  # of the waiting findings
    throttle_link: list[Finding]
    pcie: list[Finding]  # empty when busy


@dataclass(frozen=True, slots=True)
class JobWindow:
    """One job across the window: its per-tick features (None where absent)."""

    present: tuple[bool, ...]
    feats: list[JobTick | None]


class Track:
    """One job across the window, kept up to date from one call to the next by
    :class:`Analyzer` (a tick in: ``push``; the oldest out: ``pop``), so that its
    signals cost O(its processes) per call instead of O(window). The means are still
    sums over the window's values in window order (``sum`` of a deque): exactly what
    the plain path computes."""

    __slots__ = ("_memo", "cause", "dsleep", "feats", "mcols", "reads", "run", "same", "wcols")

    def __init__(self) -> None:
        self.feats: deque[JobTick] = deque()  # one per window tick it is in
        # The newest ``run`` feats list the same worker and main pids; wcols/mcols hold
        # the CPU of each of those pids over them, oldest first.
        self.run = 0
        self.wcols: list[deque[float]] = []
        self.mcols: list[deque[float]] = []
        self.reads: deque[float] = deque()  # known reads, oldest first
        self.dsleep = 0
        # The newest ``same`` feats are one object (a job whose input did not change:
        # ``Tick`` takes it over); while that is all of them, the signals are a function
        # of that object and the count, kept in ``_memo``.
        self.same = 0
        self._memo: tuple[JobTick, int, JobSignals] | None = None
        # The rules' reading of the signals (``_cause_flags``): kept with the signals'
        # object it was made from, so valid while ``signals()`` gives that object.
        self.cause: tuple[JobSignals, int] | None = None

    def steady(self, f: JobTick | None) -> bool:
        """Whether ``pop()`` then ``push(f)`` would leave this track as it is: every tick
        in it is ``f`` (so the one popped is ``f`` too, and each column, the reads and
        the counts get back the values they lose). The slide then skips both."""
        feats = self.feats
        return self.same == len(feats) and bool(feats) and feats[-1] is f

    def push(self, f: JobTick) -> None:
        feats = self.feats
        self.same = self.same + 1 if feats and feats[-1] is f else 1
        if feats and f.worker_pids == feats[-1].worker_pids and f.main_pids == feats[-1].main_pids:
            self.run += 1
            for col, value in zip(self.wcols, f.worker_cpu, strict=True):
                col.append(value)
            for col, value in zip(self.mcols, f.main_cpu, strict=True):
                col.append(value)
        else:
            self.run = 1
            self.wcols = [deque((value,)) for value in f.worker_cpu]
            self.mcols = [deque((value,)) for value in f.main_cpu]
        feats.append(f)
        if f.read is not None:
            self.reads.append(float(f.read))
        if f.disk_sleep:
            self.dsleep += 1

    def pop(self) -> None:
        f = self.feats.popleft()
        if len(self.feats) < self.run:  # it was part of the run
            self.run -= 1
            for col in self.wcols:
                col.popleft()
            for col in self.mcols:
                col.popleft()
        if f.read is not None:
            self.reads.popleft()
        if f.disk_sleep:
            self.dsleep -= 1
        self.same = min(self.same, len(self.feats))

    def signals(self) -> JobSignals:
        feats = self.feats
        last = feats[-1]
        n = len(feats)
        uniform = self.same == n
        memo = self._memo
        if uniform and memo is not None and memo[0] is last and memo[1] == n:
            return memo[2]
        out = self._signals()
        self._memo = (last, n, out) if uniform else None
        return out

    def _signals(self) -> JobSignals:
        feats = self.feats
        last = feats[-1]
        if self.run == len(feats):  # the same processes throughout
            worker_means = [sum(col) / len(col) for col in self.wcols]
            main_means = [
                (pid, sum(col) / len(col))
                for pid, col in zip(last.main_pids, self.mcols, strict=True)
            ]
        else:
            worker_means = [
                m
                for _, m in per_pid_means(
                    [f.worker_pids for f in feats], [f.worker_cpu for f in feats]
                )
            ]
            main_means = per_pid_means([f.main_pids for f in feats], [f.main_cpu for f in feats])
        reads = self.reads
        return make_signals(
            last.job,
            worker_means,
            main_means,
            self.dsleep,
            len(feats),
            sum(reads) / len(reads) if reads else None,
        )


@dataclass(frozen=True, slots=True)
class HostView:
    """The host side of the window, the same for every scope of one call."""

    cpu: float | None  # host CPU %, window mean
    iowait: float | None  # host iowait %, window mean
    suffix: str  # "; host CPU 93 %, iowait 4 %" (or "")
    disk_now: float | None  # host disk reads, window mean
    iowait_high: bool
    saturated: bool  # host CPU

    @staticmethod
    def of(window: Sequence[Snapshot], t: Thresholds) -> HostView:
        hosts = [s.host for s in window if s.host is not None]
        cpu = mean(h.cpu_percent for h in hosts)
        iowait = mean(h.iowait_percent for h in hosts)
        parts = []
        if cpu is not None:
            parts.append(f"host CPU {cpu:.0f} %")
        if iowait is not None:
            parts.append(f"iowait {iowait:.0f} %")
        text = ", ".join(parts)
        return HostView(
            cpu,
            iowait,
            f"; {text}" if text else "",
            mean(h.disk.read_bytes_per_s for h in hosts),
            iowait is not None and iowait >= t.iowait_high,
            cpu is not None and cpu >= t.host_cpu_saturated,
        )


#: (GPU set, ticks present): the key of a GPU group.
GroupKey = tuple[tuple[int, ...], tuple[bool, ...]]
#: (window parts, span, ticks, group): a group with what it was judged from.
KeptGroup = tuple[list["GpuTick | None"], float, int, Group]


class Carried:
    """What :class:`~gputop.analysis.verdict.Analyzer` carries from one call to the next
    that the rules read: each job's track over the window (valid for the call of its
    ``generation``), and the GPU groups of the last call and of this one."""

    __slots__ = ("generation", "groups_before", "groups_now", "tracks")

    def __init__(self) -> None:
        self.generation = 0  # one per call: a context reads the tracks of its own only
        self.tracks: dict[str, Track] = {}  # job id -> its track over the window
        self.groups_before: dict[GroupKey, KeptGroup] = {}
        self.groups_now: dict[GroupKey, KeptGroup] = {}


@dataclass(slots=True)
class Context:
    t: Thresholds
    history: list[Snapshot]  # the full history, oldest first
    window: list[Snapshot]  # a suffix of ``history``
    ticks: list[Tick]  # one per window snapshot
    base: int = 0  # sequence number of history[0] (idle-holder run memo)
    runs: Runs | None = None
    _disk_peak: tuple[float | None] | None = None
    _host: HostView | None = None
    groups: dict[tuple[tuple[int, ...], tuple[bool, ...] | None], Group] = field(
        default_factory=dict
    )
    signals: dict[str, JobSignals | None] = field(default_factory=dict)
    causes: dict[str, tuple[JobSignals, int] | None] = field(default_factory=dict)
    job_windows: dict[str, JobWindow] = field(default_factory=dict)
    memory_full: dict[tuple[int, ...], Finding | None] = field(default_factory=dict)
    parts: dict[tuple[int, ...], list[GpuTick]] = field(default_factory=dict)
    # What the analyzer carries; its job tracks are valid while its generation is still
    # ``generation``.
    carried: Carried | None = None
    generation: int = 0
    _all_present: tuple[bool, ...] | None = None

    def gpu_parts(self, gpus: tuple[int, ...]) -> list[GpuTick]:
        """Each window tick's :class:`GpuTick` of ``gpus`` (memoized for the call)."""
        out = self.parts.get(gpus)
        if out is None:
            t = self.t
            out = self.parts[gpus] = [tk._gpu.get(gpus) or tk.gpu(gpus, t) for tk in self.ticks]
        return out

    def track(self, job_id: str) -> Track | None:
        c = self.carried
        if c is None or c.generation != self.generation:
            return None
        return c.tracks.get(job_id)

    @property
    def host(self) -> HostView:
        """The host side of the window (computed once)."""
        done = self._host
        if done is None:
            done = self._host = HostView.of(self.window, self.t)
        return done

    def present(self, job_id: str) -> tuple[bool, ...]:
        """Whether the job is in each window tick."""
        track = self.track(job_id)
        if track is not None and len(track.feats) == len(self.ticks):
            if self._all_present is None:
                self._all_present = (True,) * len(self.ticks)
            return self._all_present
        return self.job_window(job_id).present

    @property
    def disk_peak(self) -> float | None:
        """The highest host disk read rate in the whole history (computed once)."""
        if self._disk_peak is None:
            rates = [s.host.disk.read_bytes_per_s for s in self.history if s.host is not None]
            known = [r for r in rates if r is not None]
            self._disk_peak = (max(known) if known else None,)
        return self._disk_peak[0]

    @property
    def latest(self) -> Snapshot:
        return self.window[-1]

    @property
    def lost(self) -> list[GpuSample]:
        """The newest snapshot's lost GPUs, in its order."""
        return self.ticks[-1].lost

    @property
    def span(self) -> float:
        return self.window[-1].time - self.window[0].time

    @property
    def latest_jobs(self) -> dict[str, Job]:
        return self.ticks[-1].jobs

    def job_window(self, job_id: str) -> JobWindow:
        out = self.job_windows.get(job_id)
        if out is None:
            feats = [tk.feats.get(job_id) for tk in self.ticks]
            present = tuple(f is not None for f in feats)
            # a job judged on its own id may be unknown to the snapshots' jobs
            out = self.job_windows[job_id] = JobWindow(present, feats)
        return out

    def idle_and_held(self, i: int, gpus: tuple[int, ...], pids: frozenset[int] | None) -> bool:
        """``idle_and_held`` on history[i]; memoized when history[i] is in the window."""
        w = i - (len(self.history) - len(self.window))
        if w >= 0:
            return self.ticks[w].idle_and_held(gpus, pids, self.t)
        return idle_and_held(self.history[i], gpus, pids, self.t)

    def run_start(self, gpus: tuple[int, ...], pids: frozenset[int] | None) -> int:
        """Index of the first snapshot of the idle-and-held run that ends the history
        (``len(history)`` when the newest snapshot is not idle-and-held)."""
        if self.runs is not None:
            return self.runs.start(self, gpus, pids)
        start = len(self.history)
        while start > 0 and self.idle_and_held(start - 1, gpus, pids):
            start -= 1
        return start


class Runs:
    """Memo of the idle-and-held runs between calls: scope -> (sequence number of the
    snapshot it was computed at, sequence number of the run's first snapshot or None,
    exact). ``exact`` is False when the run reached the start of the history it was
    computed on (it may have begun earlier). Sequence numbers are given by
    :class:`Analyzer`: consecutive in a history that only grows at the end and is cut at
    the start; never reused."""

    __slots__ = ("memo",)

    def __init__(self) -> None:
        self.memo: dict[
            tuple[tuple[int, ...], frozenset[int] | None], tuple[int, int | None, bool]
        ] = {}

    def start(self, ctx: Context, gpus: tuple[int, ...], pids: frozenset[int] | None) -> int:
        n = len(ctx.history)
        base = ctx.base
        latest = base + n - 1
        key = (gpus, pids)
        memo = self.memo.get(key)
        if (
            memo is not None
            and base - 1 <= memo[0] <= latest
            and (memo[2] or memo[1] is None or memo[1] <= base)
        ):
            seq_at, first, exact = memo
            for seq in range(seq_at + 1, latest + 1):
                if ctx.idle_and_held(seq - base, gpus, pids):
                    if first is None:
                        first, exact = seq, True
                else:
                    first = None
        else:
            start = n
            while start > 0 and ctx.idle_and_held(start - 1, gpus, pids):
                start -= 1
            first = None if start == n else base + start
            exact = start > 0
        if memo is None or memo[0] <= latest:
            self.memo[key] = (latest, first, exact)
        return n if first is None else max(0, first - base)

    def prune(self, oldest: int) -> None:
        """Forget the scopes last computed before sequence number ``oldest``."""
        stale = [k for k, v in self.memo.items() if v[0] < oldest]
        for k in stale:
            del self.memo[k]


_time = operator.attrgetter("time")


def split_window(
    history: Sequence[Snapshot], t: Thresholds
) -> tuple[list[Snapshot], list[Snapshot]]:
    """(the full history sorted by time, the window: a suffix of it)."""
    full = sorted(history, key=_time)
    end = full[-1].time
    if math.isnan(sum(map(_time, full))):  # NaN times: no order (kept as it was)
        window = [s for s in full if s.time >= end - t.window_seconds]
    else:  # ordered times: the snapshots from the window's start on
        window = full[bisect.bisect_left(full, end - t.window_seconds, key=_time) :]
    if len(window) < t.min_samples:  # slow sampling: at least MIN_SAMPLES snapshots
        window = full[-t.min_samples :]
    return full, window


@dataclass(frozen=True, slots=True)
class JobSignals:
    job: Job
    workers: int
    worker_cpu: float | None  # mean over workers of each worker's window mean
    main_cpu: float | None  # the busiest main process's window mean
    main_pid: int | None
    dsleep_ticks: int
    ticks: int
    read: float | None  # job read bytes/s, window mean


def per_pid_means(
    pids: list[tuple[int, ...]], cpus: list[tuple[float, ...]]
) -> list[tuple[int, float]]:
    """(pid, mean CPU over the ticks it has one), pids in order of first appearance."""
    first = pids[0]
    if all(p == first for p in pids):  # the usual case: the same processes every tick
        return [
            (pid, sum(col) / len(col))
            for pid, col in zip(first, zip(*cpus, strict=True), strict=True)
        ]
    per_pid: dict[int, list[float]] = {}
    for tick_pids, tick_cpus in zip(pids, cpus, strict=True):
        for pid, cpu in zip(tick_pids, tick_cpus, strict=True):
            values = per_pid.get(pid)
            if values is None:
                per_pid[pid] = [cpu]
            else:
                values.append(cpu)
    return [(pid, sum(v) / len(v)) for pid, v in per_pid.items()]


def make_signals(
    last: Job,
    worker_means: list[float],
    main_means: list[tuple[int, float]],
    dsleep: int,
    ticks: int,
    read: float | None,
) -> JobSignals:
    busiest = sorted(((m, pid) for pid, m in main_means), reverse=True)
    return JobSignals(
        job=last,
        workers=last.workers,
        worker_cpu=sum(worker_means) / len(worker_means) if worker_means else None,
        main_cpu=busiest[0][0] if busiest else None,
        main_pid=busiest[0][1] if busiest else None,
        dsleep_ticks=dsleep,
        ticks=ticks,
        read=read,
    )
