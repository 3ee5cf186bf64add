"""The rules: the verdict of one scope (a GPU, or a job across its GPUs) from the
context of one call (:mod:`gputop.analysis.window`). Every condition that applies
becomes a finding of its row of :data:`gputop.analysis.kinds.KIND_SPECS` (kind, rank,
severity, when it applies). The GPU side reads each window tick's :class:`GpuTick`;
``tests/analysis_oracle.py`` holds the same rules over the window's samples, the
oracle they are compared with.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gputop.analysis.jobs import Job
from gputop.analysis.kinds import RULES, Finding, finding, verdict_of
from gputop.analysis.thresholds import Thresholds
from gputop.analysis.window import (
    Context,
    GpuTick,
    Group,
    GroupKey,
    JobSignals,
    make_signals,
    mean,
    per_pid_means,
)
from gputop.fmt import bytes_, duration, rate
from gputop.model import GpuSample, Verdict

# The rows of the kind table (kinds.KIND_SPECS) the rules give findings of.
_LOST = RULES["lost"]
_IDLE_HOLDER = RULES["idle_holder"]
_IDLE = RULES["idle"]
_WARMING_UP = RULES["warming_up"]
_THROTTLE_HARD = RULES["throttle_hard"]
_PCIE = RULES["pcie"]
_DISK_STRONG = RULES["disk_strong"]
_WORKERS = RULES["workers"]
_MAIN = RULES["main"]
_HOST_CPU = RULES["host_cpu"]
_DISK_WEAK = RULES["disk_weak"]
_UNDERUSED = RULES["underused"]
_LINK = RULES["link"]
_GPU_BOUND = RULES["gpu_bound"]
_MODERATE = RULES["moderate"]
_THROTTLE_SOFT = RULES["throttle_soft"]
_MEMORY_FULL = RULES["memory_full"]
_UNKNOWN = RULES["unknown"]


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


def _unknown_util(gpus: tuple[int, ...], window: Sequence[Sequence[GpuSample]]) -> Finding:
    """No utilization in the window: why, in words (MIG mode says so itself)."""
    latest = next((samples for samples in reversed(window) if samples), ())
    mig = [g for g in latest if g.mig_mode]
    if mig:
        devices = sum(len(g.mig_devices) for g in mig)
        return finding(
            _UNKNOWN,
            f"{_gpus_text(tuple(g.index for g in mig))} in MIG mode"
            + (f" ({devices} MIG devices)" if devices else "")
            + ": NVML gives no GPU utilization for a partitioned GPU, so busy or starved "
            "cannot be told from it",
            "See memory and processes per MIG device; per-instance activity needs DCGM "
            "profiling (GPM) metrics",
        )
    return finding(
        _UNKNOWN,
        f"{_gpus_text(gpus)}: GPU utilization not reported (vGPU or an old driver?)",
        "Use per-process SM % or DCGM profiling metrics instead",
    )


def _memory_text(samples: Sequence[GpuSample]) -> str:
    used = [g.memory.used for g in samples if g.memory.used is not None]
    if not used:
        return "memory use n/a"
    return f"holding {bytes_(sum(used))}"


@dataclass(frozen=True, slots=True)
class _Scope:
    gpus: tuple[int, ...]
    job_ids: tuple[str, ...]  # jobs whose processes explain the GPU's state
    job: Job | None  # set when judging a job


def _judge(ctx: Context, scope: _Scope) -> Verdict:
    # 1. lost
    lost = [g for g in ctx.lost if g.index in scope.gpus] if ctx.lost else None
    if lost:
        g = lost[0]
        reason = g.lost_reason or "no reason given"
        return verdict_of(
            [
                finding(
                    _LOST,
                    f"GPU {g.index} is lost: {reason}",
                    "Check dmesg for Xid errors; a lost GPU usually needs a reset or reboot",
                )
            ]
        )

    findings: list[Finding] = []

    # memory nearly full (latest sample)
    full = _memory_full(ctx, scope.gpus)
    if full is not None:
        findings.append(full)

    # 2. idle memory holder (whole history)
    holder = _idle_holder(ctx, scope)
    if holder is not None:
        findings.append(holder)
        return verdict_of(findings)

    # 3. idle (GPU scope only)
    if scope.job is None:
        idle = _idle(ctx, ctx.gpu_parts(scope.gpus))
        if idle is not None:
            return verdict_of([idle])

    # 4. warming up; the GPU side, shared by every scope on the same GPUs and ticks.
    # A job is judged on the ticks it existed in only.
    present = None if scope.job is None else ctx.present(scope.job.id)
    group = _group(ctx, scope.gpus, present)
    if group.early is not None:
        findings.append(group.early)
        return verdict_of(findings)
    base = group.base
    findings.extend(group.throttle_link)

    causes: list[Finding] = []
    if not group.busy:
        causes.extend(group.pcie)
        causes.extend(_input_causes(ctx, scope, base, group.starved, group.severity))
    findings.extend(causes)

    if group.busy:
        findings.append(
            finding(
                _GPU_BOUND,
                base,
                "The GPU is the bottleneck and the input keeps up: speed-ups must come from the "
                "model side (mixed precision, torch.compile, larger batch)",
            )
        )
    elif not causes:
        note = _no_host_view_note(ctx, scope)
        if group.starved:
            findings.append(
                finding(
                    _UNDERUSED,
                    base + note,
                    "The GPU waits but no host cause is visible: profile a step "
                    "(torch.profiler) to see what it waits for",
                )
            )
        else:
            findings.append(
                finding(
                    _MODERATE,
                    base + note,
                    "Steady partial use: profile a step (torch.profiler) if you expected more",
                )
            )
    return verdict_of(findings)


def _memory_full(ctx: Context, gpus: tuple[int, ...]) -> Finding | None:
    if gpus in ctx.memory_full:
        return ctx.memory_full[gpus]
    t = ctx.t
    out: Finding | None = None
    for g in ctx.ticks[-1].samples(gpus):
        used, total = g.memory.used, g.memory.total
        if (
            used is not None
            and total is not None
            and total > 0
            and used / total >= t.mem_nearly_full
        ):
            out = finding(
                _MEMORY_FULL,
                f"GPU {g.index} memory {bytes_(used)} of {bytes_(total)} "
                f"({100 * used / total:.0f} %)",
                "Close to out of memory: lower the batch size or enable activation "
                "checkpointing if it OOMs (caching allocators also fill memory on purpose)",
            )
            break
    ctx.memory_full[gpus] = out
    return out


def _warming(n: int, span: float, t: Thresholds) -> Finding:
    """Too few samples, or too short a span, for a verdict yet."""
    return finding(
        _WARMING_UP,
        f"{n} samples over {span:.1f} s; need {t.min_samples} samples and {t.min_seconds:g} s",
        "Wait a few seconds for a verdict",
    )


def _util_reading(
    util: _Stats, span: float, gpus: tuple[int, ...], t: Thresholds
) -> tuple[str, bool, bool, str]:
    """(the utilization text every finding of a group starts with, busy, starved,
    severity) from the window's utilization statistics."""
    base = (
        f"util mean {_pct(util.mean)} (min {util.low:.0f}, max {util.high:.0f})"
        f" over {_seconds(span)}"
    )
    if len(gpus) > 1:
        base += f" on {_gpus_text(gpus)}"
    busy = util.mean >= t.util_high
    oscillating = not busy and util.stdev >= t.util_oscillation
    starved = util.mean < t.util_low or oscillating
    if oscillating:
        base = base.replace(" over ", f", oscillating (sd {util.stdev:.0f}) over ", 1)
    return base, busy, starved, "warn" if starved else "info"


def _group(ctx: Context, gpus: tuple[int, ...], present: tuple[bool, ...] | None) -> Group:
    """The GPU side of the verdict on ``gpus`` over the window ticks where ``present``
    (None: a GPU scope, judged on the ticks where its GPUs have samples), from each
    window tick's :class:`GpuTick` of ``gpus`` (memoized for the call)."""
    if present is None:
        # A GPU scope is judged on the ticks its GPUs have samples in: the group of a
        # scope present in exactly those (a job there all along) is the same group.
        present = tuple(p.n > 0 for p in ctx.gpu_parts(gpus))
    done = ctx.groups.get((gpus, present))
    if done is None:
        done = ctx.groups[gpus, present] = _group_of_parts(ctx, gpus, present)
    return done


def _group_of_parts(ctx: Context, gpus: tuple[int, ...], present: tuple[bool, ...]) -> Group:
    """The group from each window tick's :class:`GpuTick` of ``gpus`` (made once per
    snapshot) instead of the window's samples (``tests/analysis_oracle.py`` reads the
    samples: the same values, the same order, the same group)."""
    parts = [p if here else None for p, here in zip(ctx.gpu_parts(gpus), present, strict=True)]
    ticks = [tk.time for tk, here in zip(ctx.ticks, present, strict=True) if here]
    span = ticks[-1] - ticks[0] if ticks else 0.0
    # The group is a function of the parts, the number of ticks and the span: the last
    # call's group is this one when they are the same (a GPU whose samples did not change
    # shares one part between snapshots, see ``Tick.gpu``).
    c = ctx.carried
    key: GroupKey = (gpus, present)
    kept = None if c is None else c.groups_before.get(key)
    if (
        kept is not None
        and kept[1] == span
        and kept[2] == len(ticks)
        and len(kept[0]) == len(parts)
        and all(map(operator.is_, kept[0], parts))
    ):
        group = kept[3]
    else:
        group = _group_of(ctx, gpus, parts, ticks, span)
    if c is not None:
        c.groups_now[key] = (parts, span, len(ticks), group)
    return group


def _group_of(
    ctx: Context,
    gpus: tuple[int, ...],
    parts: list[GpuTick | None],
    ticks: list[float],
    span: float,
) -> Group:
    t = ctx.t

    def window_samples() -> list[list[GpuSample]]:  # for the rare early findings only
        return [
            [] if p is None else tk.samples(gpus) for tk, p in zip(ctx.ticks, parts, strict=True)
        ]

    early: Finding | None = None
    base = ""
    busy = starved = False
    severity = "info"
    throttle_link: list[Finding] = []
    pcie: list[Finding] = []
    util = None
    latest = next((p for p in reversed(parts) if p is not None and p.n), None)
    if latest is not None and latest.mig_unknown:
        early = _unknown_util(gpus, window_samples())
    elif len(ticks) < t.min_samples or span < t.min_seconds:
        early = _warming(len(ticks), span, t)
    else:
        util = _stats([None if p is None else p.util for p in parts])
        if util is None:
            early = _unknown_util(gpus, window_samples())
    if early is None and util is not None:
        base, busy, starved, severity = _util_reading(util, span, gpus, t)
        here = [p for p in parts if p is not None]
        throttle_link = _throttle(ctx, here, base) + _link(ctx, here, base)
        if not busy:
            pcie = _pcie(ctx, here, base, severity)
    return Group(early, base, busy, starved, severity, throttle_link, pcie)


def _no_host_view_note(ctx: Context, scope: _Scope) -> str:
    latest_jobs = ctx.latest_jobs
    jobs = [latest_jobs[j] for j in scope.job_ids if j in latest_jobs]
    if jobs and all(j.visible is not True for j in jobs):
        return "; its processes are not visible from here (other PID namespace?)"
    if not jobs and scope.job is None:
        return "; no process listed"
    return ""


def _idle(ctx: Context, parts: Sequence[GpuTick]) -> Finding | None:
    """Idle: no process, no held memory, util <= IDLE_UTIL in every window tick where
    the GPUs have samples (from each tick's :class:`GpuTick`)."""
    present = [p for p in parts if p.n]
    if not present or not all(p.quiet for p in present):
        return None
    return _idle_finding(ctx, _stats(p.util for p in present))


def _idle_finding(ctx: Context, util: _Stats | None) -> Finding:
    util_text = "util n/a" if util is None else f"util max {util.high:.0f} %"
    return finding(_IDLE, f"no processes, {util_text} over {_seconds(ctx.span)}", "Free for work")


def _idle_holder(ctx: Context, scope: _Scope) -> Finding | None:
    t = ctx.t
    if not ctx.ticks[-1].idle(scope.gpus, t):
        # The newest snapshot is not idle-and-held (not idle, or no sample): no run ends
        # the history, whatever came before (what ``run_start`` would find out).
        return None
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
    return finding(
        _IDLE_HOLDER,
        evidence,
        "Holds GPU memory without using the GPU: stop it if it is finished or stuck",
    )


def _holder_ages(ctx: Context, scope: _Scope) -> list[float]:
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


def _throttle(ctx: Context, parts: Sequence[GpuTick], base: str) -> list[Finding]:
    """``_throttle`` from each window tick's :class:`GpuTick` (integer counts, sets)."""
    busy = hard_n = soft_n = total = 0
    hard_names: set[str] = set()
    where: set[int] = set()
    for p in parts:
        total += p.n
        busy += p.throttle_busy
        soft_n += p.soft_n
        if p.hard_n:
            hard_n += p.hard_n
            hard_names.update(p.hard_names)
            where.update(p.where)
    return _throttle_finding(ctx, total, busy, hard_n, soft_n, hard_names, where, base)


def _throttle_finding(
    ctx: Context,
    total: int,
    busy: int,
    hard_n: int,
    soft_n: int,
    hard_names: set[str],
    where: set[int],
    base: str,
) -> list[Finding]:
    t = ctx.t
    if total == 0 or busy < total / 2:
        return []
    out: list[Finding] = []
    if hard_n >= t.throttle_fraction * busy:
        out.append(
            finding(
                _THROTTLE_HARD,
                f"{', '.join(sorted(hard_names))} in {hard_n} of {busy} busy samples on "
                f"{_gpus_text(sorted(where))}; {base}",
                "Clocks are cut by heat or a hardware slowdown: check cooling, fans, airflow",
            )
        )
    elif hard_n + soft_n >= t.throttle_fraction * busy:
        out.append(
            finding(
                _THROTTLE_SOFT,
                f"power cap in {hard_n + soft_n} of {busy} busy samples; {base}",
                "Running at its power limit: normal at full load; raise the limit only if "
                "cooling allows",
            )
        )
    return out


def _link(ctx: Context, parts: Sequence[GpuTick], base: str) -> list[Finding]:
    """``_link`` from each window tick's :class:`GpuTick`: counts, the last degraded."""
    busy = degraded = total = 0
    worst: GpuSample | None = None
    for p in parts:
        total += p.n
        busy += p.link_busy
        degraded += p.degraded
        if p.worst is not None:
            worst = p.worst
    return _link_finding(ctx, total, busy, degraded, worst, base)


def _link_finding(
    ctx: Context, total: int, busy: int, degraded: int, worst: GpuSample | None, base: str
) -> list[Finding]:
    t = ctx.t
    if total == 0 or busy < total / 2 or worst is None:
        return []
    if degraded < t.link_degraded_fraction * busy:
        return []
    p = worst.pcie
    return [
        finding(
            _LINK,
            f"GPU {worst.index} link gen{p.gen} x{p.width}, max gen{p.max_gen} x{p.max_width}, "
            f"in {degraded} of {busy} busy samples; {base}",
            "Reseat the card or riser, check BIOS PCIe settings and the slot",
        )
    ]


def _pcie(ctx: Context, parts: Sequence[GpuTick], base: str, severity: str) -> list[Finding]:
    """``_pcie`` from each window tick's :class:`GpuTick`: the same ratios (``value /
    cap``, computed once per sample) and rates, added in the same order."""
    sums: dict[int, list[list[float]]] = {}
    for p in parts:
        for index, rx, tx in p.pcie:
            acc = sums.get(index)
            if acc is None:
                acc = sums[index] = [[0.0, 0.0, 0], [0.0, 0.0, 0]]
            for value, slot in ((rx, acc[0]), (tx, acc[1])):
                if value is not None:
                    slot[0] += value[0]
                    slot[1] += value[1]
                    slot[2] += 1
    return _pcie_finding(ctx, sums, base, severity)


def _pcie_finding(
    ctx: Context, sums: dict[int, list[list[float]]], base: str, severity: str
) -> list[Finding]:
    t = ctx.t
    best: tuple[float, str, int, float] | None = None  # (ratio, direction, gpu, rate)
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
        finding(
            _PCIE,
            f"{base}; PCIe {words} {rate(mean_rate)} = {100 * ratio:.0f} % of the link"
            f" on GPU {index}",
            "Copies saturate PCIe: pin memory with non_blocking copies, send smaller dtypes "
            "(uint8 images, decode on GPU), keep data on the GPU",
            severity=severity,
        )
    ]


def _signals(ctx: Context, job_id: str) -> JobSignals | None:
    if job_id in ctx.signals:
        return ctx.signals[job_id]
    track = ctx.track(job_id)
    out: JobSignals | None
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
                for _, m in per_pid_means(
                    [f.worker_pids for f in feats], [f.worker_cpu for f in feats]
                )
            ]
            main_means = per_pid_means([f.main_pids for f in feats], [f.main_cpu for f in feats])
            out = make_signals(
                feats[-1].job,
                worker_means,
                main_means,
                sum(1 for f in feats if f.disk_sleep),
                len(feats),
                mean([f.read for f in feats]),
            )
    ctx.signals[job_id] = out
    return out


# What a job's window signals alone say, against the thresholds (``_cause_flags``).
_F_DSLEEP = 1  # a process in D state in DISK_SLEEP_FRACTION of its ticks
_F_READING = 2  # reads unknown, or at least DISK_MIN_READ
_F_READS = 4  # reads known and at least DISK_MIN_READ
_F_WORKERS = 8  # workers, near a full core each
_F_MAIN = 16  # a main process near a full core, workers idle or none


def _cause_flags(t: Thresholds, sig: JobSignals) -> int:
    read = sig.read
    flags = 0
    if sig.ticks and sig.dsleep_ticks >= t.disk_sleep_fraction * sig.ticks:
        flags |= _F_DSLEEP
    if read is None or read >= t.disk_min_read:
        flags |= _F_READING
    if read is not None and read >= t.disk_min_read:
        flags |= _F_READS
    if sig.workers > 0 and sig.worker_cpu is not None and sig.worker_cpu >= t.worker_busy_cpu:
        flags |= _F_WORKERS
    if (
        sig.main_cpu is not None
        and sig.main_cpu >= t.main_busy_cpu
        and (
            sig.workers == 0 or (sig.worker_cpu is not None and sig.worker_cpu <= t.worker_idle_cpu)
        )
    ):
        flags |= _F_MAIN
    return flags


def _causes_of(ctx: Context, job_id: str) -> tuple[JobSignals, int] | None:
    """The job's signals and their ``_cause_flags`` (memoized for the call, and in the
    job's track while its signals are the same object)."""
    track = ctx.track(job_id)
    sig = _signals(ctx, job_id) if track is None else track.signals()
    out: tuple[JobSignals, int] | None = None
    if sig is not None:
        kept = None if track is None else track.cause
        if kept is not None and kept[0] is sig:
            out = kept
        else:
            out = (sig, _cause_flags(ctx.t, sig))
            if track is not None:
                track.cause = out
    ctx.causes[job_id] = out
    return out


def _who(scope: _Scope, sig: JobSignals) -> str:
    """Which job a GPU verdict's cause is about (a job's own verdict: itself)."""
    return "" if scope.job is not None else f"job {sig.job.root_pid}: "


def _read_text(read: float | None) -> str:
    return "reads n/a" if read is None else f"reads {rate(read)}"


def _input_causes(
    ctx: Context, scope: _Scope, base: str, starved: bool, severity: str
) -> list[Finding]:
    """The host-side causes on the scope's jobs, in job order. A finding of a rank that an
    earlier job already gave is left out (not even worded): the verdict's sort is stable,
    so it could never come first, and it adds no kind to ``also``; the verdict is the one
    with every job's findings (a GPU's verdict names its first job with that cause)."""
    t = ctx.t
    host = ctx.host
    host_cpu, host_suffix, disk_now = host.cpu, host.suffix, host.disk_now

    out: list[Finding] = []
    found: set[int] = set()  # ranks given
    causes = ctx.causes
    for job_id in scope.job_ids:
        got = causes[job_id] if job_id in causes else _causes_of(ctx, job_id)
        if got is None:
            continue
        sig, flags = got
        read = sig.read

        # disk, strong: processes in D state, or high iowait while the job reads
        if _DISK_STRONG.rank not in found:
            if flags & _F_DSLEEP:
                found.add(_DISK_STRONG.rank)
                out.append(
                    finding(
                        _DISK_STRONG,
                        f"{base}; {_who(scope, sig)}a process in disk wait (D state) in "
                        f"{sig.dsleep_ticks} of {sig.ticks} samples, {_read_text(read)}"
                        f"{host_suffix}",
                        "Storage is too slow: copy the data set to local NVMe or RAM, use a "
                        "sharded/streaming format, or raise prefetch_factor",
                        severity=severity,
                    )
                )
            elif host.iowait_high and flags & _F_READING:
                found.add(_DISK_STRONG.rank)
                out.append(
                    finding(
                        _DISK_STRONG,
                        f"{base}; {_who(scope, sig)}{_read_text(read)}{host_suffix}",
                        "Storage is too slow: copy the data set to local NVMe or RAM, use a "
                        "sharded/streaming format, or raise prefetch_factor",
                        severity=severity,
                    )
                )

        # workers near a full core each
        if flags & _F_WORKERS and _WORKERS.rank not in found:
            assert sig.worker_cpu is not None
            found.add(_WORKERS.rank)
            out.append(
                finding(
                    _WORKERS,
                    f"{base}; {_who(scope, sig)}{sig.workers} workers at "
                    f"{_pct(sig.worker_cpu)} of a core each{host_suffix}",
                    "DataLoader workers are maxed out: raise num_workers (if cores are free) or "
                    "make preprocessing cheaper (decode/augment on GPU, e.g. DALI)",
                    severity=severity,
                )
            )

        # main process near a full core, workers idle or none (only when starved)
        if starved and flags & _F_MAIN and _MAIN.rank not in found:
            assert sig.main_cpu is not None
            workers_text = (
                "no workers"
                if sig.workers == 0
                else f"{sig.workers} workers at {_pct(sig.worker_cpu or 0.0)} of a core each"
            )
            found.add(_MAIN.rank)
            out.append(
                finding(
                    _MAIN,
                    f"{base}; {_who(scope, sig)}main process {sig.main_pid} at "
                    f"{_pct(sig.main_cpu)} of a core, {workers_text}{host_suffix}",
                    "The Python loop is the bottleneck: move preprocessing into DataLoader "
                    "workers, avoid .item()/.cpu() host syncs each step, use larger batches",
                )
            )

        # host CPU saturated
        if host.saturated and _HOST_CPU.rank not in found:
            assert host_cpu is not None
            found.add(_HOST_CPU.rank)
            out.append(
                finding(
                    _HOST_CPU,
                    f"{base}; host CPU saturated ({_pct(host_cpu)}); {_who(scope, sig)}"
                    f"{sig.workers} workers, tree at {_pct(sig.job.cpu_percent or 0.0)} of a core",
                    "The host has no CPU left: cheaper preprocessing, fewer competing "
                    "processes, or preprocess the data set offline",
                    severity=severity,
                )
            )

        # disk, weak: host disk reads near the highest rate seen, while the job reads
        if (
            flags & _F_READS
            and _DISK_WEAK.rank not in found
            and read is not None
            and disk_now is not None
            and (disk_peak := ctx.disk_peak) is not None
            and disk_peak > 0
            and disk_now >= t.disk_near_peak * disk_peak
        ):
            found.add(_DISK_WEAK.rank)
            out.append(
                finding(
                    _DISK_WEAK,
                    f"{base}; {_who(scope, sig)}{_read_text(read)}; disk reads {rate(disk_now)}, "
                    f"{100 * disk_now / disk_peak:.0f} % of the peak {rate(disk_peak)} seen"
                    f"{host_suffix}",
                    "Reads run at the disk's limit: cache the data set in RAM or local NVMe, "
                    "or use a compressed/sharded format",
                    severity=severity,
                )
            )
    return out


def gpu_verdicts_of(ctx: Context) -> dict[int, Verdict]:
    by_gpu = ctx.ticks[-1].job_ids_by_gpu()
    out: dict[int, Verdict] = {}
    for gpu in ctx.latest.gpus:
        out[gpu.index] = _judge(ctx, _Scope((gpu.index,), by_gpu.get(gpu.index, ()), None))
    return out


def jobs_to_judge(ctx: Context, jobs: Sequence[Job] | Mapping[str, Job] | None) -> dict[str, Job]:
    if jobs is None:
        todo = list(ctx.latest_jobs.values())
    elif isinstance(jobs, Mapping):
        todo = list(jobs.values())
    else:
        todo = list(jobs)
    return {job.id: job for job in todo}


def job_verdict(ctx: Context, job: Job) -> Verdict:
    return _judge(ctx, _Scope(job.gpus, (job.id,), job))


def job_verdicts_of(
    ctx: Context, jobs: Sequence[Job] | Mapping[str, Job] | None
) -> dict[str, Verdict]:
    return {job_id: job_verdict(ctx, job) for job_id, job in jobs_to_judge(ctx, jobs).items()}
