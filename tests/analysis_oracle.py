"""The oracle of the GPU rules: the plain versions, which loop over the window's samples.

Production (:mod:`gputop.analysis.gpu_rules`) judges the GPU side from each window tick's
:class:`~gputop.analysis.gpu_rules.GpuTick` (made once per snapshot); these functions read
the samples themselves, as the rules did before that cache. :func:`all_verdicts` judges
a history with them and checks, scope by scope, that they give what production gives.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gputop.analysis import gpu_rules as rules
from gputop.analysis.gpu_rules import Group, held, link_capacity, throttle_class, util_of
from gputop.analysis.jobs import Job
from gputop.analysis.kinds import Finding
from gputop.analysis.thresholds import DEFAULT, Thresholds
from gputop.analysis.verdict import Analyzer, gpu_verdicts_of, job_verdict
from gputop.analysis.window import Context
from gputop.model import GpuSample, Snapshot, Verdict
from tests.builders import jobs_to_judge


def mig_without_util(window: Sequence[Sequence[GpuSample]]) -> bool:
    """The latest samples are all of GPUs in MIG mode without a utilization."""
    latest = next((samples for samples in reversed(window) if samples), ())
    return bool(latest) and all(g.mig_mode and g.utilization.gpu is None for g in latest)


def group(ctx: Context, gpus: tuple[int, ...], present: tuple[bool, ...] | None) -> Group:
    """The GPU side of the verdict on ``gpus`` over the window ticks where ``present``
    (None: a GPU scope, judged on the ticks where its GPUs have samples)."""
    t = ctx.t
    window_samples = [tk.samples(gpus) for tk in ctx.ticks]
    if present is None:
        ticks = [
            tk.snap.time for tk, samples in zip(ctx.ticks, window_samples, strict=True) if samples
        ]
    else:
        window_samples = [
            samples if here else [] for samples, here in zip(window_samples, present, strict=True)
        ]
        ticks = [tk.snap.time for tk, here in zip(ctx.ticks, present, strict=True) if here]
    span = ticks[-1] - ticks[0] if ticks else 0.0
    early: Finding | None = None
    base = ""
    busy = starved = False
    severity = "info"
    throttle_link: list[Finding] = []
    pcie_found: list[Finding] = []
    util = None
    if mig_without_util(window_samples):
        early = rules.unknown_util(gpus, window_samples)
    elif len(ticks) < t.min_samples or span < t.min_seconds:
        early = rules.warming(len(ticks), f"{span:.1f} s", t)
    else:
        util = rules.stats([util_of(samples) for samples in window_samples])
        if util is None:
            early = rules.unknown_util(gpus, window_samples)
    if early is None and util is not None:
        base, busy, starved, severity = rules.util_reading(util, rules.seconds(span), gpus, t)
        sm, tensor, dram = (
            rules.mean(
                rules.mean(getattr(g.activity, name) for g in samples)
                for samples in window_samples
                if samples
            )
            for name in ("sm", "tensor", "dram")
        )
        if sm is not None:
            base += f", SM active {rules.pct(sm)}"
        hollow = busy and sm is not None and sm < t.sm_active_low
        full = busy and (sm is None or sm >= t.sm_active_high)
        if hollow:
            severity = "warn"
        throttle_link = throttle(ctx, window_samples, base) + link(ctx, window_samples, base)
        if not busy:
            pcie_found = pcie(ctx, window_samples, base, severity)
        nvlink_found = nvlink(window_samples, t, base, severity) if hollow or not busy else []
        activity = rules.activity_findings(t, base, busy, sm, tensor, dram)
        return Group(
            None,
            base,
            busy,
            starved,
            severity,
            throttle_link,
            pcie_found,
            hollow,
            full,
            tuple(activity),
            tuple(nvlink_found),
        )
    return Group(early, base, busy, starved, severity, throttle_link, pcie_found)


def nvlink(
    window_samples: list[list[GpuSample]], t: Thresholds, base: str, severity: str
) -> list[Finding]:
    sums: dict[int, list[list[float]]] = {}
    for samples in window_samples:
        for g in samples:
            cap = g.nvlink.max_bytes_per_s
            if cap is None or cap <= 0:
                continue
            acc = sums.setdefault(g.index, [[0.0, 0.0, 0], [0.0, 0.0, 0]])
            for value, slot in (
                (g.nvlink.rx_bytes_per_s, acc[0]),
                (g.nvlink.tx_bytes_per_s, acc[1]),
            ):
                if value is not None:
                    slot[0] += value / cap
                    slot[1] += value
                    slot[2] += 1
    return rules.nvlink_finding(t, sums, base, severity)


def idle(ctx: Context, window_samples: list[list[GpuSample]]) -> Finding | None:
    t = ctx.t
    present = [
        (tk.snap, samples) for tk, samples in zip(ctx.ticks, window_samples, strict=True) if samples
    ]
    if not present:
        return None
    for snap, samples in present:
        for g in samples:
            if held(snap, g, t):
                return None
            if g.utilization.gpu is not None and g.utilization.gpu > t.idle_util:
                return None
    return rules.idle_finding(rules.stats(util_of(samples) for _, samples in present), ctx.span)


def throttle(ctx: Context, window_samples: list[list[GpuSample]], base: str) -> list[Finding]:
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
            hard, soft = throttle_class(g.clock_event_reasons)
            if hard:
                hard_n += 1
                hard_names.update(hard)
                where.add(g.index)
            elif soft:
                soft_n += 1
    total = sum(len(s) for s in window_samples)
    return rules.throttle_finding(t, total, busy, hard_n, soft_n, hard_names, where, base)


def link(ctx: Context, window_samples: list[list[GpuSample]], base: str) -> list[Finding]:
    t = ctx.t
    busy = degraded = 0
    worst: GpuSample | None = None
    total = sum(len(s) for s in window_samples)
    for samples in window_samples:
        for g in samples:
            if g.utilization.gpu is None or g.utilization.gpu < t.util_low:
                continue
            p = g.pcie
            if p.gen is None or p.max_gen is None or p.width is None or p.max_width is None:
                continue
            busy += 1
            if p.gen < p.max_gen or p.width < p.max_width:
                degraded += 1
                worst = g
    return rules.link_finding(t, total, busy, degraded, worst, base)


def pcie(
    ctx: Context, window_samples: list[list[GpuSample]], base: str, severity: str
) -> list[Finding]:
    # index -> [(sum of ratios, sum of rates, count)] for rx, tx
    sums: dict[int, list[list[float]]] = {}
    for samples in window_samples:
        for g in samples:
            rx, tx = g.pcie.rx_bytes_per_s, g.pcie.tx_bytes_per_s
            if rx is None and tx is None:
                continue
            cap = link_capacity(g)
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
    return rules.pcie_finding(ctx.t, sums, base, severity)


def all_verdicts(
    history: Sequence[Snapshot],
    jobs: Sequence[Job] | Mapping[str, Job] | None = None,
    thresholds: Thresholds = DEFAULT,
) -> tuple[dict[int, Verdict], dict[str, Verdict]]:
    """``(gpu_verdicts, job_verdicts)`` with the GPU side of every scope judged by the
    plain rules above (nothing carried between calls). Each scope's plain group and idle
    finding must equal production's (an AssertionError names the scope)."""
    ctx = Analyzer(thresholds).context(history, track=False)
    if ctx is None:
        return {}, {}
    scopes: list[tuple[tuple[int, ...], tuple[bool, ...] | None]] = [
        ((g.index,), None) for g in ctx.latest.gpus
    ]
    listed = jobs_to_judge(ctx, jobs)
    scopes += [(job.gpus, ctx.present(job.id)) for job in listed]
    for gpus, present in scopes:
        window_samples = [tk.samples(gpus) for tk in ctx.ticks]
        if present is None:
            assert idle(ctx, window_samples) == rules.idle(ctx.gpu_parts(gpus), ctx.span), gpus
        plain = group(ctx, gpus, present)
        key = (gpus, tuple(bool(s) for s in window_samples) if present is None else present)
        assert plain == ctx.group_of_parts(*key), key
        # production's judge then reads the plain group (its memo of the call)
        ctx.groups[key] = plain
    return gpu_verdicts_of(ctx), {job.id: job_verdict(ctx, job) for job in listed}
