"""The input-bound rules: the GPU waits while a job's DataLoader workers, its main
process or the disk are at their limit, or the host CPU is saturated. A snapshot's share
is a :class:`JobTick` per job; a :class:`Track` carries a job's window between calls.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

from gputop.analysis.gpu_rules import mean, pct
from gputop.analysis.jobs import Job
from gputop.analysis.kinds import RULES, Finding, KindSpec, finding
from gputop.analysis.thresholds import Thresholds
from gputop.fmt import rate
from gputop.model import ProcessInfo, Snapshot

DISK_STRONG = RULES["disk_strong"]
WORKERS = RULES["workers"]
MAIN = RULES["main"]
LAUNCH = RULES["launch"]
HOST_CPU = RULES["host_cpu"]
DISK_WEAK = RULES["disk_weak"]


# --- per tick --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobTick:
    """One job in one snapshot: what its window signals are made of."""

    job: Job
    disk_sleep: bool  # a member in D state
    read: float | None  # job read bytes/s
    worker_pids: tuple[int, ...]  # the workers with a known CPU...
    worker_cpu: tuple[float, ...]  # ...and their CPU (% of one core)
    main_pids: tuple[int, ...]  # the main processes with a known CPU...
    main_cpu: tuple[float, ...]  # ...and theirs

    @staticmethod
    def of(job: Job, index: dict[int, ProcessInfo]) -> JobTick:
        wp, wc = _known_cpu(job.worker_pids, index)
        mp, mc = _known_cpu(job.main_pids, index)
        return JobTick(job, bool(job.disk_sleep), job.read_bytes_per_s, wp, wc, mp, mc)


def _known_cpu(
    pids: tuple[int, ...], index: dict[int, ProcessInfo]
) -> tuple[tuple[int, ...], tuple[float, ...]]:
    known = [
        (pid, row.cpu_percent)
        for pid in pids
        if (row := index.get(pid)) is not None and row.cpu_percent is not None
    ]
    return tuple(pid for pid, _ in known), tuple(cpu for _, cpu in known)


# --- over the window -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobSignals:
    """What a job did over the window: its workers' and main process's CPU, its reads."""

    job: Job
    workers: int
    worker_cpu: float | None  # mean over workers of each worker's window mean
    main_cpu: float | None  # the busiest main process's window mean
    main_pid: int | None
    dsleep_ticks: int
    ticks: int
    read: float | None  # job read bytes/s, window mean


def per_pid_means(
    ticks: Iterable[tuple[tuple[int, ...], tuple[float, ...]]],
) -> list[tuple[int, float]]:
    """(pid, mean CPU over the (pids, CPUs) ticks it has one), pids in order of appearance."""
    per_pid: dict[int, list[float]] = {}
    for pids, cpus in ticks:
        for pid, cpu in zip(pids, cpus, strict=True):
            per_pid.setdefault(pid, []).append(cpu)
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


def signals_of(feats: Sequence[JobTick]) -> JobSignals:
    """A job's signals from its ticks in the window (not empty), in window order."""
    worker_means = [m for _, m in per_pid_means((f.worker_pids, f.worker_cpu) for f in feats)]
    main_means = per_pid_means((f.main_pids, f.main_cpu) for f in feats)
    return make_signals(
        feats[-1].job,
        worker_means,
        main_means,
        sum(1 for f in feats if f.disk_sleep),
        len(feats),
        mean([f.read for f in feats]),
    )


class Track:
    """One job across the window, pushed and popped as it slides: :func:`signals_of`'s
    sums, without going over the window."""

    __slots__ = ("_memo", "cause", "dsleep", "feats", "reads", "run", "same")

    def __init__(self) -> None:
        self.feats: deque[JobTick] = deque()  # one per window tick it is in
        # the newest ``run`` feats have the same pids: each process's CPU over them is
        # read from the feats themselves (a copy by column cost a deque per process)
        self.run = 0
        self.reads: deque[float] = deque()  # known reads, oldest first
        self.dsleep = 0
        # the newest ``same`` feats are one object (all of them: ``_memo`` holds)
        self.same = 0
        self._memo: tuple[JobTick, int, JobSignals] | None = None
        self.cause: tuple[JobSignals, int] | None = None

    def steady(self, f: JobTick | None) -> bool:
        """Whether ``pop()`` then ``push(f)`` would leave it unchanged (every tick is ``f``)."""
        feats = self.feats
        return self.same == len(feats) and bool(feats) and feats[-1] is f

    def push(self, f: JobTick) -> None:
        feats = self.feats
        self.same = self.same + 1 if feats and feats[-1] is f else 1
        if feats and f.worker_pids == feats[-1].worker_pids and f.main_pids == feats[-1].main_pids:
            self.run += 1
        else:
            self.run = 1
        feats.append(f)
        if f.read is not None:
            self.reads.append(float(f.read))
        if f.disk_sleep:
            self.dsleep += 1

    def pop(self) -> None:
        f = self.feats.popleft()
        if len(self.feats) < self.run:  # it was part of the run
            self.run -= 1
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
        if self.run != n:  # the processes changed in the window
            out = signals_of(feats)
        else:
            reads, workers = self.reads, len(last.worker_cpu)
            # each process's CPU over the run, oldest first as a column was summed
            rows = [f.worker_cpu + f.main_cpu for f in feats]
            means = [sum(col) / n for col in zip(*rows, strict=True)]
            out = make_signals(
                last.job,
                means[:workers],
                list(zip(last.main_pids, means[workers:], strict=True)),
                self.dsleep,
                n,
                sum(reads) / len(reads) if reads else None,
            )
        self._memo = (last, n, out) if uniform else None
        return out


class HostView:
    """The host side of the window, shared by every scope of one call."""

    def __init__(
        self, window: Sequence[Snapshot], history: Sequence[Snapshot], t: Thresholds
    ) -> None:
        hosts = [s.host for s in window if s.host is not None]
        self.cpu = cpu = mean(h.cpu_percent for h in hosts)  # host CPU %, window mean
        iowait = mean(h.iowait_percent for h in hosts)
        named = (("host CPU", cpu), ("iowait", iowait))
        text = ", ".join(f"{name} {v:.0f} %" for name, v in named if v is not None)
        self.suffix = f"; {text}" if text else ""  # "; host CPU 93 %, iowait 4 %"
        self.disk_now = mean(h.disk.read_bytes_per_s for h in hosts)  # window mean
        self.iowait_high = iowait is not None and iowait >= t.iowait_high
        self.saturated = cpu is not None and cpu >= t.host_cpu_saturated
        self._history = history

    @cached_property
    def disk_peak(self) -> float | None:
        """The highest host disk read rate in the whole history."""
        rates = [s.host.disk.read_bytes_per_s for s in self._history if s.host is not None]
        known = [r for r in rates if r is not None]
        return max(known) if known else None


# --- the rules -------------------------------------------------------------------------

# What a job's window signals alone say, against the thresholds (``cause_flags``).
DSLEEP = 1  # a process in D state in DISK_SLEEP_FRACTION of its ticks
READING = 2  # reads unknown, or at least DISK_MIN_READ
READS = 4  # reads known and at least DISK_MIN_READ
BUSY_WORKERS = 8  # workers, near a full core each
BUSY_MAIN = 16  # a main process near a full core, workers idle or none


def cause_flags(t: Thresholds, sig: JobSignals) -> int:
    read = sig.read
    flags = 0
    if sig.ticks and sig.dsleep_ticks >= t.disk_sleep_fraction * sig.ticks:
        flags |= DSLEEP
    if read is None or read >= t.disk_min_read:
        flags |= READING if read is None else READING | READS
    if sig.workers > 0 and sig.worker_cpu is not None and sig.worker_cpu >= t.worker_busy_cpu:
        flags |= BUSY_WORKERS
    if (
        sig.main_cpu is not None
        and sig.main_cpu >= t.main_busy_cpu
        and (
            sig.workers == 0 or (sig.worker_cpu is not None and sig.worker_cpu <= t.worker_idle_cpu)
        )
    ):
        flags |= BUSY_MAIN
    return flags


def _who(own: bool, sig: JobSignals) -> str:
    """Which job a GPU verdict's cause is about (a job's own verdict: itself)."""
    return "" if own else f"job {sig.job.root_pid}: "


def _read_text(read: float | None) -> str:
    return "reads n/a" if read is None else f"reads {rate(read)}"


def input_causes(
    t: Thresholds,
    host: HostView,
    causes: Iterable[tuple[JobSignals, int] | None],
    own: bool,
    base: str,
    starved: bool,
    severity: str,
) -> list[Finding]:
    """The host-side causes of the scope's jobs, in job order; a rule already given is
    skipped (it could change nothing). ``own``: the scope is the job itself."""
    host_cpu, host_suffix, disk_now = host.cpu, host.suffix, host.disk_now
    out: list[Finding] = []
    found: set[str] = set()  # rules given

    def add(spec: KindSpec, evidence: str, advice: str, waiting: bool = True) -> None:
        found.add(spec.rule)
        out.append(finding(spec, evidence, advice, severity if waiting else None))

    for got in causes:
        if got is None:
            continue
        sig, flags = got
        read = sig.read

        # disk, strong: processes in D state, or high iowait while the job reads
        if DISK_STRONG.rule not in found:
            evidence = None
            if flags & DSLEEP:
                evidence = (
                    f"{base}; {_who(own, sig)}a process in disk wait (D state) in "
                    f"{sig.dsleep_ticks} of {sig.ticks} samples, {_read_text(read)}{host_suffix}"
                )
            elif host.iowait_high and flags & READING:
                evidence = f"{base}; {_who(own, sig)}{_read_text(read)}{host_suffix}"
            if evidence is not None:
                add(
                    DISK_STRONG,
                    evidence,
                    "Storage is too slow: copy the data set to local NVMe or RAM, use a "
                    "sharded/streaming format, or raise prefetch_factor",
                )

        # workers near a full core each
        if flags & BUSY_WORKERS and WORKERS.rule not in found:
            assert sig.worker_cpu is not None
            add(
                WORKERS,
                f"{base}; {_who(own, sig)}{sig.workers} workers at "
                f"{pct(sig.worker_cpu)} of a core each{host_suffix}",
                "DataLoader workers are maxed out: raise num_workers (if cores are free) or "
                "make preprocessing cheaper (decode/augment on GPU, e.g. DALI)",
            )

        # main process near a full core, workers idle or none; only when starved, since
        # CUDA syncs spin the main thread on a busy GPU
        if starved and flags & BUSY_MAIN and MAIN.rule not in found:
            assert sig.main_cpu is not None
            workers_text = (
                "no workers"
                if sig.workers == 0
                else f"{sig.workers} workers at {pct(sig.worker_cpu or 0.0)} of a core each"
            )
            add(
                MAIN,
                f"{base}; {_who(own, sig)}main process {sig.main_pid} at "
                f"{pct(sig.main_cpu)} of a core, {workers_text}{host_suffix}",
                "The Python loop is the bottleneck: move preprocessing into DataLoader "
                "workers, avoid .item()/.cpu() host syncs each step, use larger batches",
                waiting=False,
            )

        # host CPU saturated
        if host.saturated and HOST_CPU.rule not in found:
            assert host_cpu is not None
            add(
                HOST_CPU,
                f"{base}; host CPU saturated ({pct(host_cpu)}); {_who(own, sig)}{sig.workers} "
                f"workers, tree at {pct(sig.job.cpu_percent or 0.0)} of a core",
                "The host has no CPU left: cheaper preprocessing, fewer competing "
                "processes, or preprocess the data set offline",
            )

        # disk, weak: host disk reads near the highest rate seen, while the job reads
        if (
            flags & READS  # reads known
            and DISK_WEAK.rule not in found
            and disk_now is not None
            and (disk_peak := host.disk_peak or 0.0) > 0
            and disk_now >= t.disk_near_peak * disk_peak
        ):
            add(
                DISK_WEAK,
                f"{base}; {_who(own, sig)}{_read_text(read)}; disk reads {rate(disk_now)}, "
                f"{100 * disk_now / disk_peak:.0f} % of the peak {rate(disk_peak)} seen"
                f"{host_suffix}",
                "Reads run at the disk's limit: cache the data set in RAM or local NVMe, "
                "or use a compressed/sharded format",
            )
    return out


def launch_bound(
    t: Thresholds, causes: Iterable[tuple[JobSignals, int] | None], own: bool, base: str
) -> list[Finding]:
    """A hollow GPU (busy, SMs mostly idle) whose job's main process is at a full core:
    the Python side cannot launch kernels fast enough; the first such job, in job order."""
    for got in causes:
        if got is None:
            continue
        sig = got[0]
        if sig.main_cpu is not None and sig.main_cpu >= t.main_busy_cpu:
            return [
                finding(
                    LAUNCH,
                    f"{base}; {_who(own, sig)}main process {sig.main_pid} at "
                    f"{pct(sig.main_cpu)} of a core",
                    "Python cannot launch kernels fast enough: larger batches, CUDA graphs, "
                    "torch.compile",
                )
            ]
    return []
