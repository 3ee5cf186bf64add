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

"util low or oscillating" (starved): mean < UTIL_LOW, or mean < UTIL_HIGH with standard
deviation >= UTIL_OSCILLATION. Findings for a GPU below UTIL_HIGH but not starved
(steady, moderate use) carry severity "info" instead of "warn". A busy main thread alone
proves nothing on a busy GPU (CUDA syncs spin), hence its stricter condition.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gputop.analysis.jobs import Job, build_jobs
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
    s = _stats(values)
    return None if s is None else s.mean


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


# --- context shared by all verdicts of one call -----------------------------------------


@dataclass(slots=True)
class _Context:
    t: Thresholds
    history: list[Snapshot]  # the full history, oldest first
    window: list[Snapshot]
    procs: list[dict[int, ProcessInfo]] = field(default_factory=list)  # per window tick
    jobs: list[dict[str, Job]] = field(default_factory=list)  # per window tick
    _disk_peak: tuple[float | None] | None = None

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
    def span(self) -> float:
        return self.window[-1].time - self.window[0].time


def _context(history: Sequence[Snapshot], t: Thresholds) -> _Context | None:
    if not history:
        return None
    full = sorted(history, key=lambda s: s.time)
    end = full[-1].time
    window = [s for s in full if s.time >= end - t.window_seconds]
    if len(window) < t.min_samples:  # slow sampling: at least MIN_SAMPLES snapshots
        window = full[-t.min_samples :]
    ctx = _Context(t, full, window)
    for snap in window:
        index: dict[int, ProcessInfo] = {}
        for info in snap.processes:
            index.setdefault(info.pid, info)
        for gpu in snap.gpus:
            for proc in gpu.processes:
                if proc.host is not None:
                    index.setdefault(proc.pid, proc.host)
        ctx.procs.append(index)
        ctx.jobs.append({j.id: j for j in build_jobs(snap)})
    return ctx


# --- per-scope series -----------------------------------------------------------------


def _scope_samples(snap: Snapshot, gpus: Sequence[int]) -> list[GpuSample]:
    return [g for g in snap.gpus if g.index in gpus and not g.lost]


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
    t = ctx.t
    latest = ctx.latest
    gpus_text = _gpus_text(scope.gpus)

    # 1. lost
    lost = [g for g in latest.gpus if g.index in scope.gpus and g.lost]
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
    window_samples = [_scope_samples(s, scope.gpus) for s in ctx.window]
    latest_samples = _scope_samples(latest, scope.gpus)

    # memory nearly full (latest sample)
    for g in latest_samples:
        used, total = g.memory.used, g.memory.total
        if (
            used is not None
            and total is not None
            and total > 0
            and used / total >= t.mem_nearly_full
        ):
            findings.append(
                _Finding(
                    _R_MEMORY,
                    MEMORY_FULL,
                    "warn",
                    f"GPU {g.index} memory {bytes_(used)} of {bytes_(total)} "
                    f"({100 * used / total:.0f} %)",
                    "Close to out of memory: lower the batch size or enable activation "
                    "checkpointing if it OOMs (caching allocators also fill memory on purpose)",
                )
            )
            break

    # 2. idle memory holder (whole history)
    holder = _idle_holder(ctx, scope)
    if holder is not None:
        findings.append(holder)
        return _verdict(findings)

    # 3. idle (GPU scope only)
    if scope.job is None:
        idle = _idle(ctx, scope, window_samples)
        if idle is not None:
            return _verdict([idle])

    # 4. warming up
    ticks = [s.time for s, samples in zip(ctx.window, window_samples, strict=True) if samples]
    if scope.job is not None:
        # A job is judged on the ticks it existed in only.
        present = [scope.job.id in jobs for jobs in ctx.jobs]
        window_samples = [
            samples if here else [] for samples, here in zip(window_samples, present, strict=True)
        ]
        ticks = [s.time for s, here in zip(ctx.window, present, strict=True) if here]
    span = ticks[-1] - ticks[0] if ticks else 0.0
    if len(ticks) < t.min_samples or span < t.min_seconds:
        findings.append(
            _Finding(
                _R_WARMING,
                WARMING_UP,
                "info",
                f"{len(ticks)} samples over {span:.1f} s; need {t.min_samples} samples and "
                f"{t.min_seconds:g} s",
                "Wait a few seconds for a verdict",
            )
        )
        return _verdict(findings)

    util_series = [_util_of(samples) for samples in window_samples]
    util = _stats(util_series)
    if util is None:
        findings.append(
            _Finding(
                _R_UNKNOWN,
                UNKNOWN,
                "info",
                f"{gpus_text}: GPU utilization not reported (MIG mode or vGPU?)",
                "Use per-process SM % or DCGM profiling metrics instead",
            )
        )
        return _verdict(findings)

    base = (
        f"util mean {_pct(util.mean)} (min {util.low:.0f}, max {util.high:.0f})"
        f" over {_seconds(span)}"
    )
    if len(scope.gpus) > 1:
        base += f" on {gpus_text}"
    busy = util.mean >= t.util_high
    starved = util.mean < t.util_low or (not busy and util.stdev >= t.util_oscillation)
    waiting_severity = "warn" if starved else "info"
    if not busy and util.stdev >= t.util_oscillation:
        base = base.replace(" over ", f", oscillating (sd {util.stdev:.0f}) over ", 1)

    findings.extend(_throttle(ctx, window_samples, base))
    findings.extend(_link(ctx, window_samples, base))

    causes: list[_Finding] = []
    if not busy:
        causes.extend(_pcie(ctx, window_samples, base, waiting_severity))
        causes.extend(_input_causes(ctx, scope, base, starved, waiting_severity))
    findings.extend(causes)

    if busy:
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
        if starved:
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


def _no_host_view_note(ctx: _Context, scope: _Scope) -> str:
    latest_jobs = ctx.jobs[-1]
    jobs = [latest_jobs[j] for j in scope.job_ids if j in latest_jobs]
    if jobs and all(j.visible is not True for j in jobs):
        return "; its processes are not visible from here (other PID namespace?)"
    if not jobs and scope.job is None:
        return "; no process listed"
    return ""


def _idle(ctx: _Context, scope: _Scope, window_samples: list[list[GpuSample]]) -> _Finding | None:
    t = ctx.t
    present = [
        (s, samples) for s, samples in zip(ctx.window, window_samples, strict=True) if samples
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
    pids = set(job.main_pids) if job is not None else set()

    def idle_and_held(snap: Snapshot) -> bool:
        samples = _scope_samples(snap, scope.gpus)
        if not samples:
            return False
        if not all(
            g.utilization.gpu is not None and g.utilization.gpu <= t.idle_util for g in samples
        ):
            return False
        if job is not None:
            return any(p.pid in pids for g in samples for p in g.processes)
        return all(_held(snap, g, t) for g in samples)

    # Walk back from the newest snapshot to the first that is not idle-and-held.
    history = ctx.history
    start = len(history)
    while start > 0 and idle_and_held(history[start - 1]):
        start -= 1
    if start == len(history):
        return None
    idle_for = history[-1].time - history[start].time
    latest_samples = _scope_samples(ctx.latest, scope.gpus)
    memory = _memory_text(latest_samples)
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
    procs = ctx.procs[-1]
    if scope.job is not None:
        pids = list(scope.job.main_pids)
    else:
        pids = [p.pid for g in _scope_samples(latest, scope.gpus) for p in g.processes]
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
    gpus = sorted({g.index for samples in window_samples for g in samples})
    for index in gpus:
        for direction in ("rx", "tx"):
            ratios: list[float] = []
            rates: list[float] = []
            for samples in window_samples:
                for g in samples:
                    if g.index != index:
                        continue
                    value = g.pcie.rx_bytes_per_s if direction == "rx" else g.pcie.tx_bytes_per_s
                    cap = _link_capacity(g)
                    if value is None or cap is None or cap <= 0:
                        continue
                    ratios.append(value / cap)
                    rates.append(value)
            if not ratios:
                continue
            ratio = sum(ratios) / len(ratios)
            if best is None or ratio > best[0]:
                best = (ratio, direction, index, sum(rates) / len(rates))
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


def _signals(ctx: _Context, job_id: str) -> _JobSignals | None:
    per_worker: dict[int, list[float]] = {}
    per_main: dict[int, list[float]] = {}
    dsleep = ticks = 0
    reads: list[float | None] = []
    last: Job | None = None
    for jobs, procs in zip(ctx.jobs, ctx.procs, strict=True):
        job = jobs.get(job_id)
        if job is None:
            continue
        last = job
        ticks += 1
        if job.disk_sleep:
            dsleep += 1
        reads.append(job.read_bytes_per_s)
        for pid in job.worker_pids:
            info = procs.get(pid)
            if info is not None and info.cpu_percent is not None:
                per_worker.setdefault(pid, []).append(info.cpu_percent)
        for pid in job.main_pids:
            info = procs.get(pid)
            if info is not None and info.cpu_percent is not None:
                per_main.setdefault(pid, []).append(info.cpu_percent)
    if last is None:
        return None
    worker_means = [sum(v) / len(v) for v in per_worker.values()]
    main_means = sorted(((sum(v) / len(v), pid) for pid, v in per_main.items()), reverse=True)
    return _JobSignals(
        job=last,
        workers=last.workers,
        worker_cpu=sum(worker_means) / len(worker_means) if worker_means else None,
        main_cpu=main_means[0][0] if main_means else None,
        main_pid=main_means[0][1] if main_means else None,
        dsleep_ticks=dsleep,
        ticks=ticks,
        read=_mean(reads),
    )


def _host_text(ctx: _Context) -> tuple[float | None, float | None, str]:
    cpu = _mean(s.host.cpu_percent for s in ctx.window if s.host is not None)
    iowait = _mean(s.host.iowait_percent for s in ctx.window if s.host is not None)
    parts = []
    if cpu is not None:
        parts.append(f"host CPU {_pct(cpu)}")
    if iowait is not None:
        parts.append(f"iowait {_pct(iowait)}")
    return cpu, iowait, ", ".join(parts)


def _input_causes(
    ctx: _Context, scope: _Scope, base: str, starved: bool, severity: str
) -> list[_Finding]:
    t = ctx.t
    host_cpu, iowait, host_text = _host_text(ctx)
    host_suffix = f"; {host_text}" if host_text else ""
    disk_now = _mean(s.host.disk.read_bytes_per_s for s in ctx.window if s.host is not None)
    disk_peak = ctx.disk_peak

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
            and disk_peak is not None
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
    ctx = _context(history, thresholds)
    return [] if ctx is None else ctx.window


def _gpu_verdicts(ctx: _Context) -> dict[int, Verdict]:
    latest_jobs = ctx.jobs[-1]
    out: dict[int, Verdict] = {}
    for gpu in ctx.latest.gpus:
        jobs = sorted(
            (j for j in latest_jobs.values() if gpu.index in j.gpus),
            key=lambda j: (-(j.gpu_memory or 0), j.root_pid),
        )
        out[gpu.index] = _judge(ctx, _Scope((gpu.index,), tuple(j.id for j in jobs), None))
    return out


def _job_verdicts(
    ctx: _Context, jobs: Sequence[Job] | Mapping[str, Job] | None
) -> dict[str, Verdict]:
    if jobs is None:
        todo = list(ctx.jobs[-1].values())
    elif isinstance(jobs, Mapping):
        todo = list(jobs.values())
    else:
        todo = list(jobs)
    return {job.id: _judge(ctx, _Scope(job.gpus, (job.id,), job)) for job in todo}


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
    """``(gpu_verdicts, job_verdicts)`` in one pass (the window's jobs are built once)."""
    ctx = _context(history, thresholds)
    if ctx is None:
        return {}, {}
    return _gpu_verdicts(ctx), _job_verdicts(ctx, jobs)
