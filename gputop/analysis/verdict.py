"""Recent history -> one verdict per GPU and per job: is it bound by the GPU or by its input?

Pure and deterministic: the same history and thresholds give the same verdicts.

The history is a sequence of snapshots, oldest first (sorted here by ``time`` anyway).
Most findings look at the *window*: the snapshots no older than ``WINDOW_SECONDS``
before the newest, or the newest ``MIN_SAMPLES`` snapshots when that reaches further
back (slow sampling intervals). A job is judged on the window ticks it existed in.
"idle memory holder" looks at the whole history given, and the process start times.

Every condition that applies becomes a finding with a rank; the lowest rank is the
verdict's ``kind``, the other kinds are listed in ``also`` (by rank). Ranks, first wins:

 1. lost                       a GPU of the scope fell off the bus (nothing else is judged)
 2. idle memory holder         util <= IDLE_UTIL for IDLE_HOLDER_SECONDS while memory is held
 3. idle                       GPU only: no process, no held memory, util <= IDLE_UTIL throughout
 4. warming up                 too little window (MIN_SAMPLES / MIN_SECONDS); only
                               "memory nearly full" is still reported, in ``also``
 5. throttled (thermal/HW)     HW slowdown, thermal or power-brake reason while busy
 6. transfer-bound: pcie       util < UTIL_HIGH while RX or TX is near the link capacity
 7. input-bound: disk          util < UTIL_HIGH, job in D state / high iowait while reading
 8. input-bound: cpu workers   util < UTIL_HIGH, the job's workers near a full core each
 9. input-bound: main process  util low or oscillating, a main process near a full core,
                               workers idle or none
10. input-bound: cpu workers   util < UTIL_HIGH and the host CPU saturated
11. input-bound: disk          util < UTIL_HIGH, host disk read near its observed peak
12. underused                  util low or oscillating, no cause seen
13. link degraded              busy, PCIe link below its max gen or width
14. gpu-bound                  util mean >= UTIL_HIGH
15. moderate                   util steady between UTIL_LOW and UTIL_HIGH, no cause seen
16. throttled (power cap)      SW power cap while busy (normal at full load on many GPUs)
17. memory nearly full         used / total >= MEM_NEARLY_FULL (caching allocators do this)
18. unknown                    GPU utilization not reported (MIG mode, vGPU...)

Cost: the plain functions (``all_verdicts``...) build every window snapshot's jobs on
each call. A caller that judges a growing history tick after tick (the dashboard) uses
:class:`Analyzer` instead: same results, but each snapshot's own work is done once while
it is in the window, each job's window signals and each scope's idle-holder run are
carried from call to call, so a call costs about the new snapshot plus a small
aggregation per GPU and per job.

"util low or oscillating" (starved): mean < UTIL_LOW, or mean < UTIL_HIGH with standard
deviation >= UTIL_OSCILLATION. Findings for a GPU below UTIL_HIGH but not starved
(steady, moderate use) carry severity "info" instead of "warn". A busy main thread alone
proves nothing on a busy GPU (CUDA syncs spin), hence its stricter condition.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from gputop.analysis.jobs import Job, build_jobs, process_index
from gputop.analysis.thresholds import DEFAULT, Thresholds
from gputop.fmt import bytes_, duration, rate
from gputop.model import GpuSample, ProcessInfo, Snapshot

# --- kinds -------------------------------------------------------------------------------
LOST = "lost"
IDLE_HOLDER = "idle memory holder"
IDLE = "idle"
WARMING_UP = "warming up"
THROTTLED = "throttled"
TRANSFER_PCIE = "transfer-bound: pcie"
INPUT_DISK = "input-bound: disk"
INPUT_CPU = "input-bound: cpu workers"
INPUT_MAIN = "input-bound: main process"
UNDERUSED = "underused"
LINK_DEGRADED = "link degraded"
GPU_BOUND = "gpu-bound"
MODERATE = "moderate"
MEMORY_FULL = "memory nearly full"
UNKNOWN = "unknown"

KINDS: tuple[str, ...] = (
    LOST,
    IDLE_HOLDER,
    IDLE,
    WARMING_UP,
    THROTTLED,
    TRANSFER_PCIE,
    INPUT_DISK,
    INPUT_CPU,
    INPUT_MAIN,
    UNDERUSED,
    LINK_DEGRADED,
    GPU_BOUND,
    MODERATE,
    MEMORY_FULL,
    UNKNOWN,
)

LABELS: dict[str, str] = {
    LOST: "GPU lost",
    IDLE_HOLDER: "idle memory holder",
    IDLE: "idle",
    WARMING_UP: "warming up",
    THROTTLED: "throttled",
    TRANSFER_PCIE: "transfer-bound: PCIe",
    INPUT_DISK: "input-bound: disk",
    INPUT_CPU: "input-bound: CPU workers",
    INPUT_MAIN: "input-bound: main process",
    UNDERUSED: "GPU underused",
    LINK_DEGRADED: "PCIe link degraded",
    GPU_BOUND: "GPU-bound",
    MODERATE: "moderately busy",
    MEMORY_FULL: "memory nearly full",
    UNKNOWN: "cannot tell",
}

SEVERITIES = ("ok", "info", "warn", "bad")

# Ranks (lower wins); see the module docstring.
_R_LOST, _R_HOLDER, _R_IDLE, _R_WARMING = 1, 2, 3, 4
_R_THROTTLE_HARD, _R_PCIE, _R_DISK_STRONG, _R_WORKERS, _R_MAIN = 5, 6, 7, 8, 9
_R_HOST_CPU, _R_DISK_WEAK, _R_UNDERUSED, _R_LINK, _R_GPU_BOUND = 10, 11, 12, 13, 14
_R_MODERATE, _R_THROTTLE_SOFT, _R_MEMORY, _R_UNKNOWN = 15, 16, 17, 18

# PCIe per-lane payload rate per direction, bytes/s, by generation (encoding included).
LANE_BYTES_PER_S: dict[int, float] = {
    1: 2.5e9 * 8 / 10 / 8,
    2: 5e9 * 8 / 10 / 8,
    3: 8e9 * 128 / 130 / 8,
    4: 16e9 * 128 / 130 / 8,
    5: 32e9 * 128 / 130 / 8,
    6: 64e9 * 242 / 256 / 8,
}


@dataclass(frozen=True, slots=True)
class Verdict:
    kind: str  # one of KINDS
    label: str  # for people
    evidence: str  # the numbers behind it, one line
    advice: str  # what to try, one line
    severity: str  # "ok" | "info" | "warn" | "bad"
    also: tuple[str, ...] = ()  # other kinds that apply, by rank

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "label": self.label,
            "severity": self.severity,
            "evidence": self.evidence,
            "advice": self.advice,
            "also": list(self.also),
        }


def verdict_to_dict(verdict: Verdict) -> dict[str, Any]:
    """The JSON form: {kind, label, severity, evidence, advice, also: [kind...]}."""
    return verdict.to_dict()


@dataclass(frozen=True, slots=True)
class _Finding:
    rank: int
    kind: str
    severity: str
    evidence: str
    advice: str


def _verdict(findings: list[_Finding]) -> Verdict:
    findings = sorted(findings, key=lambda f: f.rank)
    first = findings[0]
    also: list[str] = []
    for f in findings[1:]:
        if f.kind != first.kind and f.kind not in also:
            also.append(f.kind)
    return Verdict(
        first.kind, LABELS[first.kind], first.evidence, first.advice, first.severity, tuple(also)
    )


# --- small statistics ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Stats:
    mean: float
    low: float
    high: float
    stdev: float
    n: int


def _stats(values: Iterable[float | None]) -> _Stats | None:
    known = [float(v) for v in values if v is not None]
    if not known:
        return None
    mean = sum(known) / len(known)
    var = sum((v - mean) ** 2 for v in known) / len(known)
    return _Stats(mean, min(known), max(known), math.sqrt(var), len(known))


def _mean(values: Iterable[float | None]) -> float | None:
    known = [float(v) for v in values if v is not None]  # as _stats(values).mean
    return sum(known) / len(known) if known else None


def _pct(value: float) -> str:
    return f"{value:.0f} %"


def _seconds(value: float) -> str:
    """'19 s', '9 s'; a fraction below 10 s keeps its tenth ('0.5 s', a one-shot window)."""
    if value >= 10 or round(value, 1) == round(value):
        return f"{value:.0f} s"
    return f"{value:.1f} s"


def _gpus_text(gpus: Sequence[int]) -> str:
    if len(gpus) == 1:
        return f"GPU {gpus[0]}"
    return "GPUs " + ",".join(str(g) for g in gpus)


# --- what one snapshot gives (cached while it is in the window) ------------------------


@dataclass(frozen=True, slots=True)
class _JobTick:
    """One job in one snapshot: what the window aggregates (``_signals``)."""

    job: Job
    disk_sleep: bool  # a member in D state
    read: float | None  # job read bytes/s
    worker_pids: tuple[int, ...]  # the workers with a known CPU...
    worker_cpu: tuple[float, ...]  # ...and their CPU (% of one core)
    main_pids: tuple[int, ...]  # the main processes with a known CPU...
    main_cpu: tuple[float, ...]  # ...and theirs


class _Tick:
    """The per-snapshot work of the verdicts, done once per snapshot: the pid index, the
    jobs and their per-sample features, and (memoized per GPU set) the scope samples.
    Depends on the snapshot and the thresholds only."""

    __slots__ = (
        "_held",
        "_idle",
        "_pids",
        "_samples",
        "feats",
        "jobs",
        "lost",
        "procs",
        "snap",
        "time",
    )

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.time = snap.time
        self.lost = [g for g in snap.gpus if g.lost]
        self.procs = index = process_index(snap)
        self.jobs: dict[str, Job] = {j.id: j for j in build_jobs(snap)}
        feats: dict[str, _JobTick] = {}
        for job_id, job in self.jobs.items():
            wp, wc = _known_cpu(job.worker_pids, index)
            mp, mc = _known_cpu(job.main_pids, index)
            feats[job_id] = _JobTick(
                job, bool(job.disk_sleep), job.read_bytes_per_s, wp, wc, mp, mc
            )
        self.feats = feats
        self._samples: dict[tuple[int, ...], list[GpuSample]] = {}
        self._idle: dict[tuple[int, ...], bool] = {}
        self._held: dict[tuple[int, ...], bool] = {}
        self._pids: dict[tuple[int, ...], frozenset[int]] = {}

    def samples(self, gpus: tuple[int, ...]) -> list[GpuSample]:
        """``_scope_samples(snap, gpus)``, memoized (callers never change the list)."""
        out = self._samples.get(gpus)
        if out is None:
            out = self._samples[gpus] = _scope_samples(self.snap, gpus)
        return out

    def idle_and_held(
        self, gpus: tuple[int, ...], pids: frozenset[int] | None, t: Thresholds
    ) -> bool:
        """``_idle_and_held`` on this snapshot, from memoized parts."""
        samples = self.samples(gpus)
        if not samples:
            return False
        idle = self._idle.get(gpus)
        if idle is None:
            idle = self._idle[gpus] = _all_idle(samples, t)
        if not idle:
            return False
        if pids is not None:
            on = self._pids.get(gpus)
            if on is None:
                on = self._pids[gpus] = frozenset(p.pid for g in samples for p in g.processes)
            return not on.isdisjoint(pids)
        held = self._held.get(gpus)
        if held is None:
            held = self._held[gpus] = all(_held(self.snap, g, t) for g in samples)
        return held


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


def _idle_and_held(
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
    return all(_held(snap, g, t) for g in samples)


# --- context shared by all verdicts of one call -----------------------------------------


@dataclass(frozen=True, slots=True)
class _Group:
    """The GPU side of a verdict: depends only on the GPUs and the window ticks judged
    (shared by every job with the same GPUs present in the same ticks)."""

    window_samples: list[list[GpuSample]]
    early: _Finding | None  # "warming up" or "unknown": the verdict stops there
    base: str
    busy: bool
    starved: bool
    severity: str  # of the waiting findings
    throttle_link: list[_Finding]
    pcie: list[_Finding]  # empty when busy


@dataclass(frozen=True, slots=True)
class _Window:
    """One job across the window: its per-tick features (None where absent)."""

    present: tuple[bool, ...]
    feats: list[_JobTick | None]


class _Track:
    """One job across the window, kept up to date from one call to the next by
    :class:`Analyzer` (a tick in: ``push``; the oldest out: ``pop``), so that its
    signals cost O(its processes) per call instead of O(window). The means are still
    sums over the window's values in window order (``sum`` of a deque): exactly what
    the plain path computes."""

    __slots__ = ("dsleep", "feats", "mcols", "reads", "run", "seqs", "wcols")

    def __init__(self) -> None:
        self.seqs: deque[int] = deque()  # sequence numbers of the ticks it is in
        self.feats: deque[_JobTick] = deque()
        # The newest ``run`` feats list the same worker and main pids; wcols/mcols hold
        # the CPU of each of those pids over them, oldest first.
        self.run = 0
        self.wcols: list[deque[float]] = []
        self.mcols: list[deque[float]] = []
        self.reads: deque[float] = deque()  # known reads, oldest first
        self.dsleep = 0

    def push(self, seq: int, f: _JobTick) -> None:
        feats = self.feats
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
        self.seqs.append(seq)
        feats.append(f)
        if f.read is not None:
            self.reads.append(float(f.read))
        if f.disk_sleep:
            self.dsleep += 1

    def pop(self) -> None:
        self.seqs.popleft()
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

    def signals(self) -> _JobSignals:
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
                for _, m in _per_pid_means(
                    [f.worker_pids for f in feats], [f.worker_cpu for f in feats]
                )
            ]
            main_means = _per_pid_means([f.main_pids for f in feats], [f.main_cpu for f in feats])
        reads = self.reads
        return _make_signals(
            last.job,
            worker_means,
            main_means,
            self.dsleep,
            len(feats),
            sum(reads) / len(reads) if reads else None,
        )


@dataclass(slots=True)
class _Context:
    t: Thresholds
    history: list[Snapshot]  # the full history, oldest first
    window: list[Snapshot]  # a suffix of ``history``
    ticks: list[_Tick]  # one per window snapshot
    base: int = 0  # sequence number of history[0] (idle-holder run memo)
    runs: _Runs | None = None
    _disk_peak: tuple[float | None] | None = None
    _host: tuple[float | None, float | None, str] | None = None
    _disk_now: tuple[float | None] | None = None
    groups: dict[tuple[tuple[int, ...], tuple[bool, ...] | None], _Group] = field(
        default_factory=dict
    )
    signals: dict[str, _JobSignals | None] = field(default_factory=dict)
    job_windows: dict[str, _Window] = field(default_factory=dict)
    memory_full: dict[tuple[int, ...], _Finding | None] = field(default_factory=dict)
    # The analyzer's job tracks, valid while its generation is still ``generation``.
    analyzer: Analyzer | None = None
    generation: int = 0
    _all_present: tuple[bool, ...] | None = None

    def track(self, job_id: str) -> _Track | None:
        a = self.analyzer
        if a is None or a._generation != self.generation:
            return None
        return a._tracks.get(job_id)

    def present(self, job_id: str) -> tuple[bool, ...]:
        """Whether the job is in each window tick."""
        track = self.track(job_id)
        if track is not None and len(track.seqs) == len(self.ticks):
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

    def job_window(self, job_id: str) -> _Window:
        out = self.job_windows.get(job_id)
        if out is None:
            feats = [tk.feats.get(job_id) for tk in self.ticks]
            present = tuple(f is not None for f in feats)
            # a job judged on its own id may be unknown to the snapshots' jobs
            out = self.job_windows[job_id] = _Window(present, feats)
        return out

    def idle_and_held(self, i: int, gpus: tuple[int, ...], pids: frozenset[int] | None) -> bool:
        """``_idle_and_held`` on history[i]; memoized when history[i] is in the window."""
        w = i - (len(self.history) - len(self.window))
        if w >= 0:
            return self.ticks[w].idle_and_held(gpus, pids, self.t)
        return _idle_and_held(self.history[i], gpus, pids, self.t)

    def run_start(self, gpus: tuple[int, ...], pids: frozenset[int] | None) -> int:
        """Index of the first snapshot of the idle-and-held run that ends the history
        (``len(history)`` when the newest snapshot is not idle-and-held)."""
        if self.runs is not None:
            return self.runs.start(self, gpus, pids)
        start = len(self.history)
        while start > 0 and self.idle_and_held(start - 1, gpus, pids):
            start -= 1
        return start


class _Runs:
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

    def start(self, ctx: _Context, gpus: tuple[int, ...], pids: frozenset[int] | None) -> int:
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


def _select(history: Sequence[Snapshot], t: Thresholds) -> tuple[list[Snapshot], list[Snapshot]]:
    """(the full history sorted by time, the window: a suffix of it)."""
    full = sorted(history, key=lambda s: s.time)
    end = full[-1].time
    window = [s for s in full if s.time >= end - t.window_seconds]
    if len(window) < t.min_samples:  # slow sampling: at least MIN_SAMPLES snapshots
        window = full[-t.min_samples :]
    return full, window


def _context(history: Sequence[Snapshot], t: Thresholds) -> _Context | None:
    """A context with nothing cached (the plain functions): a throwaway :class:`Analyzer`
    that keeps no job tracks (they would be built for one use)."""
    return Analyzer(t).context(history, track=False)


# --- per-scope series -----------------------------------------------------------------


def _scope_samples(snap: Snapshot, gpus: Sequence[int]) -> list[GpuSample]:
    return [g for g in snap.gpus if g.index in gpus and not g.lost]


def _mig_without_util(window: Sequence[Sequence[GpuSample]]) -> bool:
    """The latest samples are all of GPUs in MIG mode without a utilization."""
    latest = next((samples for samples in reversed(window) if samples), ())
    return bool(latest) and all(g.mig_mode and g.utilization.gpu is None for g in latest)


def _unknown_util(gpus: tuple[int, ...], window: Sequence[Sequence[GpuSample]]) -> _Finding:
    """No utilization in the window: why, in words (MIG mode says so itself)."""
    latest = next((samples for samples in reversed(window) if samples), ())
    mig = [g for g in latest if g.mig_mode]
    if mig:
        devices = sum(len(g.mig_devices) for g in mig)
        return _Finding(
            _R_UNKNOWN,
            UNKNOWN,
            "info",
            f"{_gpus_text(tuple(g.index for g in mig))} in MIG mode"
            + (f" ({devices} MIG devices)" if devices else "")
            + ": NVML gives no GPU utilization for a partitioned GPU, so busy or starved "
            "cannot be told from it",
            "See memory and processes per MIG device; per-instance activity needs DCGM "
            "profiling (GPM) metrics",
        )
    return _Finding(
        _R_UNKNOWN,
        UNKNOWN,
        "info",
        f"{_gpus_text(gpus)}: GPU utilization not reported (vGPU or an old driver?)",
        "Use per-process SM % or DCGM profiling metrics instead",
    )


def _util_of(samples: Sequence[GpuSample]) -> float | None:
    return _mean(g.utilization.gpu for g in samples)


def _held(snap: Snapshot, gpu: GpuSample, t: Thresholds) -> bool:
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


def _memory_text(samples: Sequence[GpuSample]) -> str:
    used = [g.memory.used for g in samples if g.memory.used is not None]
    if not used:
        return "memory use n/a"
    return f"holding {bytes_(sum(used))}"


def _throttle_class(reasons: tuple[str, ...] | None) -> tuple[list[str], list[str]]:
    """(hard, soft) reason names among the decoded clock event reasons."""
    hard: list[str] = []
    soft: list[str] = []
    for reason in reasons or ():
        key = "".join(c for c in reason.lower() if c.isalpha())
        if "thermal" in key or "hwslowdown" in key or "powerbrake" in key:
            hard.append(reason)
        elif "powercap" in key:
            soft.append(reason)
    return hard, soft


def _link_capacity(gpu: GpuSample) -> float | None:
    """Current per-direction capacity: the max link scaled down to the current gen/width."""
    p = gpu.pcie
    cap = p.link_max_bytes_per_s
    if cap is None or cap <= 0:
        if p.gen in LANE_BYTES_PER_S and p.width:
            return LANE_BYTES_PER_S[p.gen] * p.width
        return None
    if p.gen in LANE_BYTES_PER_S and p.max_gen in LANE_BYTES_PER_S and p.width and p.max_width:
        cap *= (LANE_BYTES_PER_S[p.gen] * p.width) / (LANE_BYTES_PER_S[p.max_gen] * p.max_width)
    return cap


# --- the judge --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Scope:
    gpus: tuple[int, ...]
    job_ids: tuple[str, ...]  # jobs whose processes explain the GPU's state
    job: Job | None  # set when judging a job


def _judge(ctx: _Context, scope: _Scope) -> Verdict:
    # 1. lost
    lost = [g for g in ctx.lost if g.index in scope.gpus]
    if lost:
        g = lost[0]
        reason = g.lost_reason or "no reason given"
        return _verdict(
            [
                _Finding(
                    _R_LOST,
                    LOST,
                    "bad",
                    f"GPU {g.index} is lost: {reason}",
                    "Check dmesg for Xid errors; a lost GPU usually needs a reset or reboot",
                )
            ]
        )

    findings: list[_Finding] = []

    # memory nearly full (latest sample)
    full = _memory_full(ctx, scope.gpus)
    if full is not None:
        findings.append(full)

    # 2. idle memory holder (whole history)
    holder = _idle_holder(ctx, scope)
    if holder is not None:
        findings.append(holder)
        return _verdict(findings)

    # 3. idle (GPU scope only)
    if scope.job is None:
        idle = _idle(ctx, scope, [tk.samples(scope.gpus) for tk in ctx.ticks])
        if idle is not None:
            return _verdict([idle])

    # 4. warming up; the GPU side, shared by every scope on the same GPUs and ticks.
    # A job is judged on the ticks it existed in only.
    present = None if scope.job is None else ctx.present(scope.job.id)
    group = _group(ctx, scope.gpus, present)
    if group.early is not None:
        findings.append(group.early)
        return _verdict(findings)
    base = group.base
    findings.extend(group.throttle_link)

    causes: list[_Finding] = []
    if not group.busy:
        causes.extend(group.pcie)
        causes.extend(_input_causes(ctx, scope, base, group.starved, group.severity))
    findings.extend(causes)

    if group.busy:
        findings.append(
            _Finding(
                _R_GPU_BOUND,
                GPU_BOUND,
                "ok",
                base,
                "The GPU is the bottleneck and the input keeps up: speed-ups must come from the "
                "model side (mixed precision, torch.compile, larger batch)",
            )
        )
    elif not causes:
        note = _no_host_view_note(ctx, scope)
        if group.starved:
            findings.append(
                _Finding(
                    _R_UNDERUSED,
                    UNDERUSED,
                    "warn",
                    base + note,
                    "The GPU waits but no host cause is visible: profile a step "
                    "(torch.profiler) to see what it waits for",
                )
            )
        else:
            findings.append(
                _Finding(
                    _R_MODERATE,
                    MODERATE,
                    "info",
                    base + note,
                    "Steady partial use: profile a step (torch.profiler) if you expected more",
                )
            )
    return _verdict(findings)


def _memory_full(ctx: _Context, gpus: tuple[int, ...]) -> _Finding | None:
    if gpus in ctx.memory_full:
        return ctx.memory_full[gpus]
    t = ctx.t
    out: _Finding | None = None
    for g in ctx.ticks[-1].samples(gpus):
        used, total = g.memory.used, g.memory.total
        if (
            used is not None
            and total is not None
            and total > 0
            and used / total >= t.mem_nearly_full
        ):
            out = _Finding(
                _R_MEMORY,
                MEMORY_FULL,
                "warn",
                f"GPU {g.index} memory {bytes_(used)} of {bytes_(total)} "
                f"({100 * used / total:.0f} %)",
                "Close to out of memory: lower the batch size or enable activation "
                "checkpointing if it OOMs (caching allocators also fill memory on purpose)",
            )
            break
    ctx.memory_full[gpus] = out
    return out


def _group(ctx: _Context, gpus: tuple[int, ...], present: tuple[bool, ...] | None) -> _Group:
    """The GPU side of the verdict on ``gpus`` over the window ticks where ``present``
    (None: a GPU scope, judged on the ticks where its GPUs have samples)."""
    key = (gpus, present)
    done = ctx.groups.get(key)
    if done is not None:
        return done
    t = ctx.t
    window_samples = [tk.samples(gpus) for tk in ctx.ticks]
    if present is None:
        ticks = [tk.time for tk, samples in zip(ctx.ticks, window_samples, strict=True) if samples]
    else:
        window_samples = [
            samples if here else [] for samples, here in zip(window_samples, present, strict=True)
        ]
        ticks = [tk.time for tk, here in zip(ctx.ticks, present, strict=True) if here]
    span = ticks[-1] - ticks[0] if ticks else 0.0
    early: _Finding | None = None
    base = ""
    busy = starved = False
    severity = "info"
    throttle_link: list[_Finding] = []
    pcie: list[_Finding] = []
    util = None
    mig_unknown = _mig_without_util(window_samples)
    if mig_unknown:
        # waiting does not help: NVML never gives utilization for a partitioned GPU
        early = _unknown_util(gpus, window_samples)
    elif len(ticks) < t.min_samples or span < t.min_seconds:
        early = _Finding(
            _R_WARMING,
            WARMING_UP,
            "info",
            f"{len(ticks)} samples over {span:.1f} s; need {t.min_samples} samples and "
            f"{t.min_seconds:g} s",
            "Wait a few seconds for a verdict",
        )
    else:
        util = _stats([_util_of(samples) for samples in window_samples])
        if util is None:
            early = _unknown_util(gpus, window_samples)
    if early is None and util is not None:
        base = (
            f"util mean {_pct(util.mean)} (min {util.low:.0f}, max {util.high:.0f})"
            f" over {_seconds(span)}"
        )
        if len(gpus) > 1:
            base += f" on {_gpus_text(gpus)}"
        busy = util.mean >= t.util_high
        starved = util.mean < t.util_low or (not busy and util.stdev >= t.util_oscillation)
        severity = "warn" if starved else "info"
        if not busy and util.stdev >= t.util_oscillation:
            base = base.replace(" over ", f", oscillating (sd {util.stdev:.0f}) over ", 1)
        throttle_link = _throttle(ctx, window_samples, base) + _link(ctx, window_samples, base)
        if not busy:
            pcie = _pcie(ctx, window_samples, base, severity)
    out = _Group(window_samples, early, base, busy, starved, severity, throttle_link, pcie)
    ctx.groups[key] = out
    return out


def _no_host_view_note(ctx: _Context, scope: _Scope) -> str:
    latest_jobs = ctx.latest_jobs
    jobs = [latest_jobs[j] for j in scope.job_ids if j in latest_jobs]
    if jobs and all(j.visible is not True for j in jobs):
        return "; its processes are not visible from here (other PID namespace?)"
    if not jobs and scope.job is None:
        return "; no process listed"
    return ""


def _idle(ctx: _Context, scope: _Scope, window_samples: list[list[GpuSample]]) -> _Finding | None:
    t = ctx.t
    present = [
        (tk.snap, samples) for tk, samples in zip(ctx.ticks, window_samples, strict=True) if samples
    ]
    if not present:
        return None
    for snap, samples in present:
        for g in samples:
            if _held(snap, g, t):
                return None
            if g.utilization.gpu is not None and g.utilization.gpu > t.idle_util:
                return None
    util = _stats(_util_of(samples) for _, samples in present)
    util_text = "util n/a" if util is None else f"util max {util.high:.0f} %"
    return _Finding(
        _R_IDLE, IDLE, "ok", f"no processes, {util_text} over {_seconds(ctx.span)}", "Free for work"
    )


def _idle_holder(ctx: _Context, scope: _Scope) -> _Finding | None:
    t = ctx.t
    job = scope.job
    pids = frozenset(job.main_pids) if job is not None else None

    # The first snapshot of the run of idle-and-held snapshots that ends the history.
    history = ctx.history
    start = ctx.run_start(scope.gpus, pids)
    if start == len(history):
        return None
    idle_for = history[-1].time - history[start].time
    memory = _memory_text(ctx.ticks[-1].samples(scope.gpus))
    if idle_for >= t.idle_holder_seconds:
        evidence = f"util <= {t.idle_util:g} % for {duration(idle_for)}; {memory}"
    elif start == 0 and idle_for >= t.idle_holder_min_observed:
        ages = _holder_ages(ctx, scope)
        if not ages or min(ages) < t.idle_holder_seconds:
            return None
        evidence = (
            f"util <= {t.idle_util:g} % for all {duration(idle_for)} observed; "
            f"running for {duration(min(ages))}; {memory}"
        )
    else:
        return None
    return _Finding(
        _R_HOLDER,
        IDLE_HOLDER,
        "warn",
        evidence,
        "Holds GPU memory without using the GPU: stop it if it is finished or stuck",
    )


def _holder_ages(ctx: _Context, scope: _Scope) -> list[float]:
    latest = ctx.latest
    procs = ctx.ticks[-1].procs
    if scope.job is not None:
        pids = list(scope.job.main_pids)
    else:
        pids = [p.pid for g in ctx.ticks[-1].samples(scope.gpus) for p in g.processes]
    ages: list[float] = []
    for pid in pids:
        info = procs.get(pid)
        if info is None or info.create_time is None:
            return []  # one unknown age: cannot claim they are all old
        ages.append(latest.time - info.create_time)
    return ages


def _throttle(ctx: _Context, window_samples: list[list[GpuSample]], base: str) -> list[_Finding]:
    t = ctx.t
    busy = 0
    hard_n = soft_n = 0
    hard_names: set[str] = set()
    where: set[int] = set()
    for samples in window_samples:
        for g in samples:
            if g.utilization.gpu is None or g.utilization.gpu < t.util_low:
                continue
            busy += 1
            hard, soft = _throttle_class(g.clock_event_reasons)
            if hard:
                hard_n += 1
                hard_names.update(hard)
                where.add(g.index)
            elif soft:
                soft_n += 1
    total = sum(len(s) for s in window_samples)
    if total == 0 or busy < total / 2:
        return []
    out: list[_Finding] = []
    if hard_n >= t.throttle_fraction * busy:
        out.append(
            _Finding(
                _R_THROTTLE_HARD,
                THROTTLED,
                "bad",
                f"{', '.join(sorted(hard_names))} in {hard_n} of {busy} busy samples on "
                f"{_gpus_text(sorted(where))}; {base}",
                "Clocks are cut by heat or a hardware slowdown: check cooling, fans, airflow",
            )
        )
    elif hard_n + soft_n >= t.throttle_fraction * busy:
        out.append(
            _Finding(
                _R_THROTTLE_SOFT,
                THROTTLED,
                "info",
                f"power cap in {hard_n + soft_n} of {busy} busy samples; {base}",
                "Running at its power limit: normal at full load; raise the limit only if "
                "cooling allows",
            )
        )
    return out


def _link(ctx: _Context, window_samples: list[list[GpuSample]], base: str) -> list[_Finding]:
    t = ctx.t
    busy = degraded = 0
    worst: GpuSample | None = None
    total = sum(len(s) for s in window_samples)
    for samples in window_samples:
        for g in samples:
            if g.utilization.gpu is None or g.utilization.gpu < t.util_low:
                continue
            p = g.pcie
            if None in (p.gen, p.max_gen, p.width, p.max_width):
                continue
            busy += 1
            assert p.gen is not None and p.max_gen is not None
            assert p.width is not None and p.max_width is not None
            if p.gen < p.max_gen or p.width < p.max_width:
                degraded += 1
                worst = g
    if total == 0 or busy < total / 2 or worst is None:
        return []
    if degraded < t.link_degraded_fraction * busy:
        return []
    p = worst.pcie
    return [
        _Finding(
            _R_LINK,
            LINK_DEGRADED,
            "warn",
            f"GPU {worst.index} link gen{p.gen} x{p.width}, max gen{p.max_gen} x{p.max_width}, "
            f"in {degraded} of {busy} busy samples; {base}",
            "Reseat the card or riser, check BIOS PCIe settings and the slot",
        )
    ]


def _pcie(
    ctx: _Context, window_samples: list[list[GpuSample]], base: str, severity: str
) -> list[_Finding]:
    t = ctx.t
    best: tuple[float, str, int, float] | None = None  # (ratio, direction, gpu, rate)
    # One pass over the window: each sample's link capacity is computed once for both
    # directions. index -> [(sum of ratios, sum of rates, count)] for rx, tx.
    sums: dict[int, list[list[float]]] = {}
    for samples in window_samples:
        for g in samples:
            rx, tx = g.pcie.rx_bytes_per_s, g.pcie.tx_bytes_per_s
            if rx is None and tx is None:
                continue
            cap = _link_capacity(g)
            if cap is None or cap <= 0:
                continue
            acc = sums.get(g.index)
            if acc is None:
                acc = sums[g.index] = [[0.0, 0.0, 0], [0.0, 0.0, 0]]
            for value, slot in ((rx, acc[0]), (tx, acc[1])):
                if value is not None:
                    slot[0] += value / cap
                    slot[1] += value
                    slot[2] += 1
    for index in sorted(sums):
        for direction, (ratio_sum, rate_sum, n) in zip(("rx", "tx"), sums[index], strict=True):
            if not n:
                continue
            ratio = ratio_sum / n
            if best is None or ratio > best[0]:
                best = (ratio, direction, index, rate_sum / n)
    if best is None or best[0] < t.pcie_near_max:
        return []
    ratio, direction, index, mean_rate = best
    words = "host->GPU (RX)" if direction == "rx" else "GPU->host (TX)"
    return [
        _Finding(
            _R_PCIE,
            TRANSFER_PCIE,
            severity,
            f"{base}; PCIe {words} {rate(mean_rate)} = {100 * ratio:.0f} % of the link"
            f" on GPU {index}",
            "Copies saturate PCIe: pin memory with non_blocking copies, send smaller dtypes "
            "(uint8 images, decode on GPU), keep data on the GPU",
        )
    ]


# --- process-tree causes ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _JobSignals:
    job: Job
    workers: int
    worker_cpu: float | None  # mean over workers of each worker's window mean
    main_cpu: float | None  # the busiest main process's window mean
    main_pid: int | None
    dsleep_ticks: int
    ticks: int
    read: float | None  # job read bytes/s, window mean


def _per_pid_means(
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


def _make_signals(
    last: Job,
    worker_means: list[float],
    main_means: list[tuple[int, float]],
    dsleep: int,
    ticks: int,
    read: float | None,
) -> _JobSignals:
    busiest = sorted(((m, pid) for pid, m in main_means), reverse=True)
    return _JobSignals(
        job=last,
        workers=last.workers,
        worker_cpu=sum(worker_means) / len(worker_means) if worker_means else None,
        main_cpu=busiest[0][0] if busiest else None,
        main_pid=busiest[0][1] if busiest else None,
        dsleep_ticks=dsleep,
        ticks=ticks,
        read=read,
    )


def _signals(ctx: _Context, job_id: str) -> _JobSignals | None:
    if job_id in ctx.signals:
        return ctx.signals[job_id]
    track = ctx.track(job_id)
    out: _JobSignals | None
    if track is not None:
        out = track.signals()
    else:
        # Means in the window order, each pid's in the order of its first appearance
        # (what the track computes too: the float sums come out the same).
        feats = [f for f in ctx.job_window(job_id).feats if f is not None]
        if not feats:
            out = None
        else:
            worker_means = [
                m
                for _, m in _per_pid_means(
                    [f.worker_pids for f in feats], [f.worker_cpu for f in feats]
                )
            ]
            main_means = _per_pid_means([f.main_pids for f in feats], [f.main_cpu for f in feats])
            out = _make_signals(
                feats[-1].job,
                worker_means,
                main_means,
                sum(1 for f in feats if f.disk_sleep),
                len(feats),
                _mean([f.read for f in feats]),
            )
    ctx.signals[job_id] = out
    return out


def _host_text(ctx: _Context) -> tuple[float | None, float | None, str]:
    if ctx._host is not None:
        return ctx._host
    cpu = _mean(s.host.cpu_percent for s in ctx.window if s.host is not None)
    iowait = _mean(s.host.iowait_percent for s in ctx.window if s.host is not None)
    parts = []
    if cpu is not None:
        parts.append(f"host CPU {_pct(cpu)}")
    if iowait is not None:
        parts.append(f"iowait {_pct(iowait)}")
    ctx._host = (cpu, iowait, ", ".join(parts))
    return ctx._host


def _input_causes(
    ctx: _Context, scope: _Scope, base: str, starved: bool, severity: str
) -> list[_Finding]:
    t = ctx.t
    host_cpu, iowait, host_text = _host_text(ctx)
    host_suffix = f"; {host_text}" if host_text else ""
    if ctx._disk_now is None:
        ctx._disk_now = (
            _mean(s.host.disk.read_bytes_per_s for s in ctx.window if s.host is not None),
        )
    disk_now = ctx._disk_now[0]

    out: list[_Finding] = []
    for job_id in scope.job_ids:
        sig = _signals(ctx, job_id)
        if sig is None:
            continue
        who = "" if scope.job is not None else f"job {sig.job.root_pid}: "
        read_text = "reads n/a" if sig.read is None else f"reads {rate(sig.read)}"
        reading = sig.read is None or sig.read >= t.disk_min_read

        # disk, strong: processes in D state, or high iowait while the job reads
        if sig.ticks and sig.dsleep_ticks >= t.disk_sleep_fraction * sig.ticks:
            out.append(
                _Finding(
                    _R_DISK_STRONG,
                    INPUT_DISK,
                    severity,
                    f"{base}; {who}a process in disk wait (D state) in {sig.dsleep_ticks} of "
                    f"{sig.ticks} samples, {read_text}{host_suffix}",
                    "Storage is too slow: copy the data set to local NVMe or RAM, use a "
                    "sharded/streaming format, or raise prefetch_factor",
                )
            )
        elif iowait is not None and iowait >= t.iowait_high and reading:
            out.append(
                _Finding(
                    _R_DISK_STRONG,
                    INPUT_DISK,
                    severity,
                    f"{base}; {who}{read_text}{host_suffix}",
                    "Storage is too slow: copy the data set to local NVMe or RAM, use a "
                    "sharded/streaming format, or raise prefetch_factor",
                )
            )

        # workers near a full core each
        if sig.workers > 0 and sig.worker_cpu is not None and sig.worker_cpu >= t.worker_busy_cpu:
            out.append(
                _Finding(
                    _R_WORKERS,
                    INPUT_CPU,
                    severity,
                    f"{base}; {who}{sig.workers} workers at {_pct(sig.worker_cpu)} of a core each"
                    f"{host_suffix}",
                    "DataLoader workers are maxed out: raise num_workers (if cores are free) or "
                    "make preprocessing cheaper (decode/augment on GPU, e.g. DALI)",
                )
            )

        # main process near a full core, workers idle or none (only when starved)
        if starved and sig.main_cpu is not None and sig.main_cpu >= t.main_busy_cpu:
            idle_workers = sig.workers == 0 or (
                sig.worker_cpu is not None and sig.worker_cpu <= t.worker_idle_cpu
            )
            if idle_workers:
                workers_text = (
                    "no workers"
                    if sig.workers == 0
                    else f"{sig.workers} workers at {_pct(sig.worker_cpu or 0.0)} of a core each"
                )
                out.append(
                    _Finding(
                        _R_MAIN,
                        INPUT_MAIN,
                        severity,
                        f"{base}; {who}main process {sig.main_pid} at {_pct(sig.main_cpu)} of a "
                        f"core, {workers_text}{host_suffix}",
                        "The Python loop is the bottleneck: move preprocessing into DataLoader "
                        "workers, avoid .item()/.cpu() host syncs each step, use larger batches",
                    )
                )

        # host CPU saturated
        if host_cpu is not None and host_cpu >= t.host_cpu_saturated:
            out.append(
                _Finding(
                    _R_HOST_CPU,
                    INPUT_CPU,
                    severity,
                    f"{base}; host CPU saturated ({_pct(host_cpu)}); {who}"
                    f"{sig.workers} workers, tree at {_pct(sig.job.cpu_percent or 0.0)} of a core",
                    "The host has no CPU left: cheaper preprocessing, fewer competing "
                    "processes, or preprocess the data set offline",
                )
            )

        # disk, weak: host disk reads near the highest rate seen, while the job reads
        if (
            disk_now is not None
            and (disk_peak := ctx.disk_peak) is not None
            and disk_peak > 0
            and disk_now >= t.disk_near_peak * disk_peak
            and sig.read is not None
            and sig.read >= t.disk_min_read
        ):
            out.append(
                _Finding(
                    _R_DISK_WEAK,
                    INPUT_DISK,
                    severity,
                    f"{base}; {who}{read_text}; disk reads {rate(disk_now)}, "
                    f"{100 * disk_now / disk_peak:.0f} % of the peak {rate(disk_peak)} seen"
                    f"{host_suffix}",
                    "Reads run at the disk's limit: cache the data set in RAM or local NVMe, "
                    "or use a compressed/sharded format",
                )
            )
    return out


# --- public API -------------------------------------------------------------------------


def window(history: Sequence[Snapshot], thresholds: Thresholds = DEFAULT) -> list[Snapshot]:
    """The snapshots the window covers (oldest first)."""
    return _select(history, thresholds)[1] if history else []


def _gpu_verdicts(ctx: _Context) -> dict[int, Verdict]:
    # The latest jobs on each GPU, in the latest jobs' order (one pass over the jobs).
    by_gpu: dict[int, list[Job]] = {}
    for j in ctx.latest_jobs.values():
        for g in set(j.gpus):
            by_gpu.setdefault(g, []).append(j)
    out: dict[int, Verdict] = {}
    for gpu in ctx.latest.gpus:
        jobs = sorted(by_gpu.get(gpu.index, ()), key=lambda j: (-(j.gpu_memory or 0), j.root_pid))
        out[gpu.index] = _judge(ctx, _Scope((gpu.index,), tuple(j.id for j in jobs), None))
    return out


def _todo(ctx: _Context, jobs: Sequence[Job] | Mapping[str, Job] | None) -> dict[str, Job]:
    if jobs is None:
        todo = list(ctx.latest_jobs.values())
    elif isinstance(jobs, Mapping):
        todo = list(jobs.values())
    else:
        todo = list(jobs)
    return {job.id: job for job in todo}


def _job_verdict(ctx: _Context, job: Job) -> Verdict:
    return _judge(ctx, _Scope(job.gpus, (job.id,), job))


def _job_verdicts(
    ctx: _Context, jobs: Sequence[Job] | Mapping[str, Job] | None
) -> dict[str, Verdict]:
    return {job_id: _job_verdict(ctx, job) for job_id, job in _todo(ctx, jobs).items()}


class JobVerdicts(Mapping[str, Verdict]):
    """Job id -> verdict, each judged the first time it is read (then kept).

    What :meth:`Analyzer.update` returns: the GPU verdicts need every job's signals
    anyway, but a view that shows a few jobs only pays for those. ``dict(...)`` judges
    them all. Bound to the history it was made from: reading it later gives the same
    verdicts (it keeps that window alive while referenced)."""

    __slots__ = ("_ctx", "_done", "_jobs")

    def __init__(self, ctx: _Context | None, jobs: dict[str, Job]) -> None:
        self._ctx = ctx
        self._jobs = jobs
        self._done: dict[str, Verdict] = {}

    def __getitem__(self, job_id: str) -> Verdict:
        done = self._done.get(job_id)
        if done is None:
            job = self._jobs[job_id]  # KeyError for a job not judged
            assert self._ctx is not None
            done = self._done[job_id] = _job_verdict(self._ctx, job)
        return done

    def __iter__(self) -> Iterator[str]:
        return iter(self._jobs)

    def __len__(self) -> int:
        return len(self._jobs)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._jobs

    def __repr__(self) -> str:
        return f"JobVerdicts({len(self._jobs)} jobs, {len(self._done)} judged)"


class Analysis(NamedTuple):
    """What :meth:`Analyzer.update` returns (unpacks as a 3-tuple)."""

    gpu_verdicts: dict[int, Verdict]  # GPU index -> verdict, for the newest snapshot's GPUs
    job_verdicts: JobVerdicts  # job id -> verdict (judged on first read)
    jobs: tuple[Job, ...]  # the newest snapshot's jobs (``build_jobs``), sorted as it sorts


class Analyzer:
    """The verdicts of a history that grows one snapshot at a time, at the cost of the
    new snapshot plus the window's aggregation (the dashboard's path).

    Snapshots are immutable, so what the verdicts compute from one snapshot alone (its
    jobs, pid index, per-job CPU/disk features, per-GPU-set samples and idle flags) is
    kept while it is in the window, keyed by the snapshot object itself; the "idle
    memory holder" runs are carried from one call to the next (extended by the new
    snapshots instead of walking back through the history). The results are exactly
    those of :func:`all_verdicts` on the same history, whatever history each call is
    given: when it is not the previous one cut at the start and extended at the end, the
    carried state is dropped and rebuilt.

    Not thread-safe: use one per consumer thread. Memory: the window's per-snapshot
    work and one small record per scope; nothing older.

    ::

        analyzer = Analyzer(thresholds)
        gpu_v, job_v, jobs = analyzer.update(history)   # each tick, history oldest first
    """

    def __init__(self, thresholds: Thresholds = DEFAULT) -> None:
        self.thresholds = thresholds
        self._ticks: dict[int, _Tick] = {}  # id(snapshot) -> its work; tick.snap pins it
        self._full: list[Snapshot] = []  # the previous call's sorted history
        self._base = 0  # sequence number of _full[0]
        self._runs = _Runs()
        self._generation = 0  # one per call: a context reads the tracks of its own only
        self._tracks: dict[str, _Track] = {}  # job id -> its track over the window
        self._window: tuple[int, list[_Tick]] = (0, [])  # (sequence number of [0], ticks)

    def jobs(self, snapshot: Snapshot) -> tuple[Job, ...]:
        """``build_jobs(snapshot)``, from the cache when the snapshot is in the window."""
        tick = self._ticks.get(id(snapshot))
        if tick is not None and tick.snap is snapshot:
            return tuple(tick.jobs.values())
        return build_jobs(snapshot)

    def _tick(self, snap: Snapshot) -> _Tick:
        tick = self._ticks.get(id(snap))
        if tick is None or tick.snap is not snap:  # id() of a collected snapshot reused
            tick = _Tick(snap)
        return tick

    def _sequence(self, full: list[Snapshot]) -> tuple[int, bool]:
        """(the sequence number of full[0], whether it continues the previous call's
        numbering): it does when ``full`` is the previous history cut at the start and
        extended at the end; otherwise the numbering starts afresh above every number
        given so far, and what was carried between calls is dropped."""
        prev = self._full
        if prev:
            last = prev[-1]
            for i in range(len(full) - 1, -1, -1):
                if full[i] is last:
                    cut = len(prev) - (i + 1)
                    if cut >= 0 and all(
                        a is b for a, b in zip(full[: i + 1], prev[cut:], strict=True)
                    ):
                        return self._base + cut, True
                    break
        self._runs = _Runs()
        return self._base + len(prev) + 1, False

    def _slide(self, first: int, ticks: list[_Tick], continued: bool) -> None:
        """Bring the job tracks to the window ``ticks`` (sequence numbers from ``first``):
        drop the ticks that left it, add the new ones; rebuild when it did not slide."""
        tracks = self._tracks
        last = first + len(ticks) - 1
        pfirst, pticks = self._window
        plast = pfirst + len(pticks) - 1
        if continued and pticks and first >= pfirst and last >= plast:
            for seq in range(pfirst, min(first, plast + 1)):
                for job_id in pticks[seq - pfirst].feats:
                    gone = tracks[job_id]
                    gone.pop()
                    if not gone.feats:
                        del tracks[job_id]
            new = range(max(plast + 1, first), last + 1)
        else:
            tracks.clear()
            new = range(first, last + 1)
        for seq in new:
            for job_id, f in ticks[seq - first].feats.items():
                track = tracks.get(job_id)
                if track is None:
                    track = tracks[job_id] = _Track()
                track.push(seq, f)
        self._window = (first, ticks)

    def context(self, history: Sequence[Snapshot], track: bool = True) -> _Context | None:
        """The context one call judges with; ``track``: keep the job tracks (worth it
        when called again with the next history)."""
        if not history:
            return None
        t = self.thresholds
        full, window = _select(history, t)
        base, continued = self._sequence(full)
        ticks = [self._tick(s) for s in window]
        self._full, self._base = full, base
        self._ticks = {id(tk.snap): tk for tk in ticks}  # the window only
        self._runs.prune(base + len(full) - 2)  # scopes not judged last call or this one
        self._generation += 1
        if not track:
            self._tracks, self._window = {}, (0, [])
            return _Context(t, full, window, ticks, base, self._runs)
        self._slide(base + len(full) - len(window), ticks, continued)
        return _Context(
            t, full, window, ticks, base, self._runs, analyzer=self, generation=self._generation
        )

    def update(
        self,
        history: Sequence[Snapshot],
        jobs: Sequence[Job] | Mapping[str, Job] | None = None,
    ) -> Analysis:
        """``(gpu_verdicts, job_verdicts, jobs)`` for ``history`` (oldest first; sorted by
        time anyway): what ``build_jobs(history[-1])`` and ``all_verdicts(history, jobs,
        thresholds)`` give. ``jobs``: the jobs to judge (default: the newest snapshot's).
        The job verdicts are judged when read (:class:`JobVerdicts`)."""
        ctx = self.context(history)
        if ctx is None:
            return Analysis({}, JobVerdicts(None, {}), ())
        latest_jobs = tuple(ctx.latest_jobs.values())
        return Analysis(_gpu_verdicts(ctx), JobVerdicts(ctx, _todo(ctx, jobs)), latest_jobs)


def gpu_verdicts(
    history: Sequence[Snapshot], thresholds: Thresholds = DEFAULT
) -> dict[int, Verdict]:
    """One verdict per GPU of the newest snapshot, keyed by GPU index."""
    ctx = _context(history, thresholds)
    return {} if ctx is None else _gpu_verdicts(ctx)


def job_verdicts(
    history: Sequence[Snapshot],
    jobs: Sequence[Job] | Mapping[str, Job] | None = None,
    thresholds: Thresholds = DEFAULT,
) -> dict[str, Verdict]:
    """One verdict per job, keyed by job id. ``jobs`` defaults to the newest snapshot's."""
    ctx = _context(history, thresholds)
    return {} if ctx is None else _job_verdicts(ctx, jobs)


def all_verdicts(
    history: Sequence[Snapshot],
    jobs: Sequence[Job] | Mapping[str, Job] | None = None,
    thresholds: Thresholds = DEFAULT,
) -> tuple[dict[int, Verdict], dict[str, Verdict]]:
    """``(gpu_verdicts, job_verdicts)`` in one pass (the window's jobs are built once).
    Over a growing history, :class:`Analyzer` gives the same for a fraction of the cost."""
    ctx = _context(history, thresholds)
    if ctx is None:
        return {}, {}
    return _gpu_verdicts(ctx), _job_verdicts(ctx, jobs)
