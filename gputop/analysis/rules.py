"""The rules: the verdict of one scope (a GPU, or a job across its GPUs) from the
context of one call (:mod:`gputop.analysis.window`). Every condition that applies
becomes a finding; the kinds and their ranks are in :mod:`gputop.analysis.kinds`, what
each means in :mod:`gputop.analysis.verdict`.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gputop.analysis.jobs import Job
from gputop.analysis.kinds import (
    _R_DISK_STRONG,
    _R_DISK_WEAK,
    _R_GPU_BOUND,
    _R_HOLDER,
    _R_HOST_CPU,
    _R_IDLE,
    _R_LINK,
    _R_LOST,
    _R_MAIN,
    _R_MEMORY,
    _R_MODERATE,
    _R_PCIE,
    _R_THROTTLE_HARD,
    _R_THROTTLE_SOFT,
    _R_UNDERUSED,
    _R_UNKNOWN,
    _R_WARMING,
    _R_WORKERS,
    GPU_BOUND,
    IDLE,
    IDLE_HOLDER,
    INPUT_CPU,
    INPUT_DISK,
    INPUT_MAIN,
    LINK_DEGRADED,
    LOST,
    MEMORY_FULL,
    MODERATE,
    THROTTLED,
    TRANSFER_PCIE,
    UNDERUSED,
    UNKNOWN,
    WARMING_UP,
    Verdict,
    _Finding,
    _verdict,
)
from gputop.analysis.thresholds import Thresholds
from gputop.analysis.window import (
    _Context,
    _GpuTick,
    _Group,
    _held,
    _JobSignals,
    _link_capacity,
    _make_signals,
    _mean,
    _per_pid_means,
    _throttle_class,
    _util_of,
)
from gputop.fmt import bytes_, duration, rate
from gputop.model import GpuSample


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


def _judge(ctx: _Context, scope: _Scope) -> Verdict:
    # 1. lost
    lost = [g for g in ctx.lost if g.index in scope.gpus] if ctx.lost else None
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
        if ctx.analyzer is not None:  # the analyzer's path: from each tick's parts
            idle = _idle_of_parts(ctx, ctx.gpu_parts(scope.gpus))
        else:
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


def _warming(n: int, span: float, t: Thresholds) -> _Finding:
    """Too few samples, or too short a span, for a verdict yet."""
    return _Finding(
        _R_WARMING,
        WARMING_UP,
        "info",
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


def _group(ctx: _Context, gpus: tuple[int, ...], present: tuple[bool, ...] | None) -> _Group:
    """The GPU side of the verdict on ``gpus`` over the window ticks where ``present``
    (None: a GPU scope, judged on the ticks where its GPUs have samples)."""
    if ctx.analyzer is not None:  # the analyzer's path: from each tick's parts
        if present is None:
            # A GPU scope is judged on the ticks its GPUs have samples in: the group of a
            # scope present in exactly those (a job there all along) is the same group.
            present = tuple(p.n > 0 for p in ctx.gpu_parts(gpus))
        done = ctx.groups.get((gpus, present))
        if done is None:
            done = ctx.groups[gpus, present] = _group_of_parts(ctx, gpus, present)
        return done
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
        early = _warming(len(ticks), span, t)
    else:
        util = _stats([_util_of(samples) for samples in window_samples])
        if util is None:
            early = _unknown_util(gpus, window_samples)
    if early is None and util is not None:
        base, busy, starved, severity = _util_reading(util, span, gpus, t)
        throttle_link = _throttle(ctx, window_samples, base) + _link(ctx, window_samples, base)
        if not busy:
            pcie = _pcie(ctx, window_samples, base, severity)
    out = _Group(early, base, busy, starved, severity, throttle_link, pcie)
    ctx.groups[key] = out
    return out


def _group_of_parts(ctx: _Context, gpus: tuple[int, ...], present: tuple[bool, ...]) -> _Group:
    """``_group`` from each window tick's :class:`_GpuTick` of ``gpus`` (made once per
    snapshot) instead of the window's samples: the same values, the same order, the
    same group (tests compare the two)."""
    parts = [p if here else None for p, here in zip(ctx.gpu_parts(gpus), present, strict=True)]
    ticks = [tk.time for tk, here in zip(ctx.ticks, present, strict=True) if here]
    span = ticks[-1] - ticks[0] if ticks else 0.0
    # The group is a function of the parts, the number of ticks and the span: the last
    # call's group is this one when they are the same (a GPU whose samples did not change
    # shares one part between snapshots, see ``_Tick.gpu``).
    a = ctx.analyzer
    key = (gpus, present)
    kept = None if a is None else a._groups_before.get(key)
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
    if a is not None:
        a._groups_now[key] = (parts, span, len(ticks), group)
    return group


def _group_of(
    ctx: _Context,
    gpus: tuple[int, ...],
    parts: list[_GpuTick | None],
    ticks: list[float],
    span: float,
) -> _Group:
    t = ctx.t

    def window_samples() -> list[list[GpuSample]]:  # for the rare early findings only
        return [
            [] if p is None else tk.samples(gpus) for tk, p in zip(ctx.ticks, parts, strict=True)
        ]

    early: _Finding | None = None
    base = ""
    busy = starved = False
    severity = "info"
    throttle_link: list[_Finding] = []
    pcie: list[_Finding] = []
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
        throttle_link = _throttle_of_parts(ctx, here, base) + _link_of_parts(ctx, here, base)
        if not busy:
            pcie = _pcie_of_parts(ctx, here, base, severity)
    return _Group(early, base, busy, starved, severity, throttle_link, pcie)


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
    return _idle_finding(ctx, _stats(_util_of(samples) for _, samples in present))


def _idle_of_parts(ctx: _Context, parts: Sequence[_GpuTick]) -> _Finding | None:
    """``_idle`` from each window tick's :class:`_GpuTick`."""
    present = [p for p in parts if p.n]
    if not present or not all(p.quiet for p in present):
        return None
    return _idle_finding(ctx, _stats(p.util for p in present))


def _idle_finding(ctx: _Context, util: _Stats | None) -> _Finding:
    util_text = "util n/a" if util is None else f"util max {util.high:.0f} %"
    return _Finding(
        _R_IDLE, IDLE, "ok", f"no processes, {util_text} over {_seconds(ctx.span)}", "Free for work"
    )


def _idle_holder(ctx: _Context, scope: _Scope) -> _Finding | None:
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
    return _throttle_finding(ctx, total, busy, hard_n, soft_n, hard_names, where, base)


def _throttle_of_parts(ctx: _Context, parts: Sequence[_GpuTick], base: str) -> list[_Finding]:
    """``_throttle`` from each window tick's :class:`_GpuTick` (integer counts, sets)."""
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
    ctx: _Context,
    total: int,
    busy: int,
    hard_n: int,
    soft_n: int,
    hard_names: set[str],
    where: set[int],
    base: str,
) -> list[_Finding]:
    t = ctx.t
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
    return _link_finding(ctx, total, busy, degraded, worst, base)


def _link_of_parts(ctx: _Context, parts: Sequence[_GpuTick], base: str) -> list[_Finding]:
    """``_link`` from each window tick's :class:`_GpuTick`: counts, the last degraded."""
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
    ctx: _Context, total: int, busy: int, degraded: int, worst: GpuSample | None, base: str
) -> list[_Finding]:
    t = ctx.t
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
    return _pcie_finding(ctx, sums, base, severity)


def _pcie_of_parts(
    ctx: _Context, parts: Sequence[_GpuTick], base: str, severity: str
) -> list[_Finding]:
    """``_pcie`` from each window tick's :class:`_GpuTick`: the same ratios (``value /
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
    ctx: _Context, sums: dict[int, list[list[float]]], base: str, severity: str
) -> list[_Finding]:
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


@dataclass(frozen=True, slots=True)
class _HostView:
    """The host side of the window, the same for every scope of one call (memoized)."""

    cpu: float | None  # host CPU %, window mean
    iowait: float | None  # host iowait %, window mean
    suffix: str  # "; host CPU 93 %, iowait 4 %" (or "")
    disk_now: float | None  # host disk reads, window mean
    iowait_high: bool
    saturated: bool  # host CPU


def _host_view(ctx: _Context) -> _HostView:
    done = ctx._host
    if done is not None:
        return done
    t = ctx.t
    cpu = _mean(s.host.cpu_percent for s in ctx.window if s.host is not None)
    iowait = _mean(s.host.iowait_percent for s in ctx.window if s.host is not None)
    parts = []
    if cpu is not None:
        parts.append(f"host CPU {_pct(cpu)}")
    if iowait is not None:
        parts.append(f"iowait {_pct(iowait)}")
    text = ", ".join(parts)
    out = ctx._host = _HostView(
        cpu,
        iowait,
        f"; {text}" if text else "",
        _mean(s.host.disk.read_bytes_per_s for s in ctx.window if s.host is not None),
        iowait is not None and iowait >= t.iowait_high,
        cpu is not None and cpu >= t.host_cpu_saturated,
    )
    return out


# What a job's window signals alone say, against the thresholds (``_cause_flags``).
_F_DSLEEP = 1  # a process in D state in DISK_SLEEP_FRACTION of its ticks
_F_READING = 2  # reads unknown, or at least DISK_MIN_READ
_F_READS = 4  # reads known and at least DISK_MIN_READ
_F_WORKERS = 8  # workers, near a full core each
_F_MAIN = 16  # a main process near a full core, workers idle or none


def _cause_flags(t: Thresholds, sig: _JobSignals) -> int:
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


def _causes_of(ctx: _Context, job_id: str) -> tuple[_JobSignals, int] | None:
    """The job's signals and their ``_cause_flags`` (memoized for the call, and in the
    job's track while its signals are the same object)."""
    track = ctx.track(job_id)
    sig = _signals(ctx, job_id) if track is None else track.signals()
    out: tuple[_JobSignals, int] | None = None
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


def _who(scope: _Scope, sig: _JobSignals) -> str:
    """Which job a GPU verdict's cause is about (a job's own verdict: itself)."""
    return "" if scope.job is not None else f"job {sig.job.root_pid}: "


def _read_text(read: float | None) -> str:
    return "reads n/a" if read is None else f"reads {rate(read)}"


def _input_causes(
    ctx: _Context, scope: _Scope, base: str, starved: bool, severity: str
) -> list[_Finding]:
    """The host-side causes on the scope's jobs, in job order. A finding of a rank that an
    earlier job already gave is left out (not even worded): the verdict's sort is stable,
    so it could never come first, and it adds no kind to ``also``; the verdict is the one
    with every job's findings (a GPU's verdict names its first job with that cause)."""
    t = ctx.t
    host = _host_view(ctx)
    host_cpu, host_suffix, disk_now = host.cpu, host.suffix, host.disk_now

    out: list[_Finding] = []
    found: set[int] = set()  # ranks given
    causes = ctx.causes
    for job_id in scope.job_ids:
        got = causes[job_id] if job_id in causes else _causes_of(ctx, job_id)
        if got is None:
            continue
        sig, flags = got
        read = sig.read

        # disk, strong: processes in D state, or high iowait while the job reads
        if _R_DISK_STRONG not in found:
            if flags & _F_DSLEEP:
                found.add(_R_DISK_STRONG)
                out.append(
                    _Finding(
                        _R_DISK_STRONG,
                        INPUT_DISK,
                        severity,
                        f"{base}; {_who(scope, sig)}a process in disk wait (D state) in "
                        f"{sig.dsleep_ticks} of {sig.ticks} samples, {_read_text(read)}"
                        f"{host_suffix}",
                        "Storage is too slow: copy the data set to local NVMe or RAM, use a "
                        "sharded/streaming format, or raise prefetch_factor",
                    )
                )
            elif host.iowait_high and flags & _F_READING:
                found.add(_R_DISK_STRONG)
                out.append(
                    _Finding(
                        _R_DISK_STRONG,
                        INPUT_DISK,
                        severity,
                        f"{base}; {_who(scope, sig)}{_read_text(read)}{host_suffix}",
                        "Storage is too slow: copy the data set to local NVMe or RAM, use a "
                        "sharded/streaming format, or raise prefetch_factor",
                    )
                )

        # workers near a full core each
        if flags & _F_WORKERS and _R_WORKERS not in found:
            assert sig.worker_cpu is not None
            found.add(_R_WORKERS)
            out.append(
                _Finding(
                    _R_WORKERS,
                    INPUT_CPU,
                    severity,
                    f"{base}; {_who(scope, sig)}{sig.workers} workers at "
                    f"{_pct(sig.worker_cpu)} of a core each{host_suffix}",
                    "DataLoader workers are maxed out: raise num_workers (if cores are free) or "
                    "make preprocessing cheaper (decode/augment on GPU, e.g. DALI)",
                )
            )

        # main process near a full core, workers idle or none (only when starved)
        if starved and flags & _F_MAIN and _R_MAIN not in found:
            assert sig.main_cpu is not None
            workers_text = (
                "no workers"
                if sig.workers == 0
                else f"{sig.workers} workers at {_pct(sig.worker_cpu or 0.0)} of a core each"
            )
            found.add(_R_MAIN)
            out.append(
                _Finding(
                    _R_MAIN,
                    INPUT_MAIN,
                    severity,
                    f"{base}; {_who(scope, sig)}main process {sig.main_pid} at "
                    f"{_pct(sig.main_cpu)} of a core, {workers_text}{host_suffix}",
                    "The Python loop is the bottleneck: move preprocessing into DataLoader "
                    "workers, avoid .item()/.cpu() host syncs each step, use larger batches",
                )
            )

        # host CPU saturated
        if host.saturated and _R_HOST_CPU not in found:
            assert host_cpu is not None
            found.add(_R_HOST_CPU)
            out.append(
                _Finding(
                    _R_HOST_CPU,
                    INPUT_CPU,
                    severity,
                    f"{base}; host CPU saturated ({_pct(host_cpu)}); {_who(scope, sig)}"
                    f"{sig.workers} workers, tree at {_pct(sig.job.cpu_percent or 0.0)} of a core",
                    "The host has no CPU left: cheaper preprocessing, fewer competing "
                    "processes, or preprocess the data set offline",
                )
            )

        # disk, weak: host disk reads near the highest rate seen, while the job reads
        if (
            flags & _F_READS
            and _R_DISK_WEAK not in found
            and read is not None
            and disk_now is not None
            and (disk_peak := ctx.disk_peak) is not None
            and disk_peak > 0
            and disk_now >= t.disk_near_peak * disk_peak
        ):
            found.add(_R_DISK_WEAK)
            out.append(
                _Finding(
                    _R_DISK_WEAK,
                    INPUT_DISK,
                    severity,
                    f"{base}; {_who(scope, sig)}{_read_text(read)}; disk reads {rate(disk_now)}, "
                    f"{100 * disk_now / disk_peak:.0f} % of the peak {rate(disk_peak)} seen"
                    f"{host_suffix}",
                    "Reads run at the disk's limit: cache the data set in RAM or local NVMe, "
                    "or use a compressed/sharded format",
                )
            )
    return out


def _gpu_verdicts(ctx: _Context) -> dict[int, Verdict]:
    by_gpu = ctx.ticks[-1].job_ids_by_gpu()
    out: dict[int, Verdict] = {}
    for gpu in ctx.latest.gpus:
        out[gpu.index] = _judge(ctx, _Scope((gpu.index,), by_gpu.get(gpu.index, ()), None))
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
