"""The GPU rules: lost, memory nearly full, idle, and the GPU group (utilization, throttle,
link, PCIe); each snapshot's share is a :class:`GpuTick` (oracle: tests/analysis_oracle.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gputop.analysis.kinds import RULES, Finding, finding
from gputop.analysis.thresholds import Thresholds
from gputop.fmt import bytes_, rate
from gputop.model import CLOCK_EVENT_EFFECTS, GpuSample, Snapshot
from gputop.pcie import lane_bytes_per_s

# --- per sample ------------------------------------------------------------------------


def scope_samples(snap: Snapshot, gpus: Sequence[int]) -> list[GpuSample]:
    return [g for g in snap.gpus if g.index in gpus and not g.lost]


def used_share(gpu: GpuSample) -> float | None:
    """Used over total GPU memory; None when either is unknown or the total is 0."""
    used, total = gpu.memory.used, gpu.memory.total
    if used is None or total is None or total <= 0:
        return None
    return used / total


def held(snap: Snapshot, gpu: GpuSample, t: Thresholds) -> bool:
    if gpu.processes or any(h.gpu == gpu.index for h in snap.unlisted_holders):
        return True
    share = used_share(gpu)
    return share is not None and share >= t.held_memory_fraction


def mean(values: Iterable[float | None]) -> float | None:
    known = [float(v) for v in values if v is not None]
    return sum(known) / len(known) if known else None


def util_of(samples: Sequence[GpuSample]) -> float | None:
    return mean(g.utilization.gpu for g in samples)


def throttle_class(reasons: tuple[str, ...] | None) -> tuple[list[str], list[str]]:
    """(hard, soft) reason names among the decoded clock event reasons."""
    effects = [(reason, CLOCK_EVENT_EFFECTS.get(reason)) for reason in reasons or ()]
    return [r for r, e in effects if e == "hard"], [r for r, e in effects if e == "soft"]


def link_capacity(gpu: GpuSample) -> float | None:
    """Current per-direction capacity: the max link scaled down to the current gen/width."""
    p = gpu.pcie
    cap = p.link_max_bytes_per_s
    lane = lane_bytes_per_s(p.gen)
    if cap is None or cap <= 0:
        return lane * p.width if lane is not None and p.width else None
    max_lane = lane_bytes_per_s(p.max_gen)
    if lane is not None and max_lane is not None and p.width and p.max_width:
        cap *= (lane * p.width) / (max_lane * p.max_width)
    return cap


# --- per tick --------------------------------------------------------------------------


class GpuTick:
    """One snapshot's share of the GPU rules' window loops, for one GPU set."""

    __slots__ = (
        "degraded",
        "dram",
        "hard_n",
        "hard_names",
        "link_busy",
        "mig_unknown",
        "n",
        "nvlink",
        "pcie",
        "quiet",
        "samples",
        "sm",
        "soft_n",
        "tensor",
        "throttle_busy",
        "util",
        "where",
        "worst",
    )

    def __init__(self, snap: Snapshot, samples: Sequence[GpuSample], t: Thresholds) -> None:
        self.samples = samples  # for ``unknown_util``
        self.n = len(samples)
        self.util = util_of(samples)
        self.mig_unknown = bool(samples) and all(
            g.mig_mode and g.utilization.gpu is None for g in samples
        )
        self.quiet = not any(
            held(snap, g, t) or (g.utilization.gpu is not None and g.utilization.gpu > t.idle_util)
            for g in samples
        )
        busy = hard_n = soft_n = 0
        hard_names: set[str] = set()
        where: set[int] = set()
        link_busy = degraded = 0
        worst: GpuSample | None = None
        # (index, 0 for RX or 1 for TX, rate / capacity, rate) per direction known
        pcie: list[tuple[int, int, float, float]] = []
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
            if rx is not None:
                pcie.append((g.index, 0, rx / cap, rx))
            if tx is not None:
                pcie.append((g.index, 1, tx / cap, tx))
        self.throttle_busy, self.hard_n, self.soft_n = busy, hard_n, soft_n
        self.hard_names, self.where = frozenset(hard_names), frozenset(where)
        self.link_busy, self.degraded, self.worst = link_busy, degraded, worst
        self.pcie = tuple(pcie)
        # GPM: None where no GPU of the set reports it (the rules then judge as without)
        self.sm = mean(g.activity.sm for g in samples)
        self.tensor = mean(g.activity.tensor for g in samples)
        self.dram = mean(g.activity.dram for g in samples)
        self.nvlink = nvlink_ratios(samples)


def nvlink_ratios(samples: Iterable[GpuSample]) -> tuple[tuple[int, int, float, float], ...]:
    """(index, 0 for RX or 1 for TX, rate / the links' capacity, rate) per direction known."""
    out: list[tuple[int, int, float, float]] = []
    for g in samples:
        nv = g.nvlink
        cap = nv.max_bytes_per_s
        if cap is None or cap <= 0:
            continue
        for direction, value in ((0, nv.rx_bytes_per_s), (1, nv.tx_bytes_per_s)):
            if value is not None:
                out.append((g.index, direction, value / cap, value))
    return tuple(out)


# --- wording ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Stats:
    """A metric's mean, range and spread over the window."""

    mean: float
    low: float
    high: float
    stdev: float


def stats(values: Iterable[float | None]) -> Stats | None:
    known = [float(v) for v in values if v is not None]
    if not known:
        return None
    mean = sum(known) / len(known)
    var = sum((v - mean) ** 2 for v in known) / len(known)
    return Stats(mean, min(known), max(known), math.sqrt(var))


def pct(value: float) -> str:
    return f"{value:.0f} %"


def seconds(value: float) -> str:
    """Below 10 s a fraction keeps its tenth ('0.5 s'); a span that is no number (a NaN
    time) is n/a."""
    if math.isnan(value):  # round() would raise
        return "n/a"
    if value >= 10 or round(value, 1) == round(value):
        return f"{value:.0f} s"
    return f"{value:.1f} s"


def gpus_text(gpus: Sequence[int]) -> str:
    if len(gpus) == 1:
        return f"GPU {gpus[0]}"
    return "GPUs " + ",".join(str(g) for g in gpus)


# --- the rules -------------------------------------------------------------------------


def lost_finding(g: GpuSample) -> Finding:
    return finding(
        RULES["lost"],
        f"GPU {g.index} is lost: {g.lost_reason or 'no reason given'}",
        "Check dmesg for Xid errors; a lost GPU usually needs a reset or reboot",
    )


def memory_full(samples: Sequence[GpuSample], t: Thresholds) -> Finding | None:
    for g in samples:
        share = used_share(g)
        if share is not None and share >= t.mem_nearly_full:
            used, total = g.memory.used, g.memory.total
            assert used is not None and total is not None  # a share needs both
            return finding(
                RULES["memory_full"],
                f"GPU {g.index} memory {bytes_(used)} of {bytes_(total)} "
                f"({100 * used / total:.0f} %)",
                "Close to out of memory: lower the batch size or enable activation "
                "checkpointing if it OOMs (caching allocators also fill memory on purpose)",
            )
    return None


def idle(parts: Sequence[GpuTick], span: float) -> Finding | None:
    present = [p for p in parts if p.n]
    if not present or not all(p.quiet for p in present):
        return None
    return idle_finding(stats(p.util for p in present), span)


def idle_finding(util: Stats | None, span: float) -> Finding:
    util_text = "util n/a" if util is None else f"util max {util.high:.0f} %"
    return finding(
        RULES["idle"], f"no processes, {util_text} over {seconds(span)}", "Free for work"
    )


@dataclass(frozen=True, slots=True)
class Group:
    """The GPU side of a verdict: depends only on the GPUs and the window ticks judged."""

    early: Finding | None  # "warming up" or "unknown": the verdict stops there
    base: str
    busy: bool
    starved: bool
    severity: str  # of the waiting findings
    throttle_link: list[Finding]
    pcie: list[Finding]  # empty when busy
    # Inside utilization (GPM); without it: hollow False, full == busy, no findings.
    hollow: bool = False  # busy, but SM active low: kernels run on few SMs
    full: bool = False  # busy, and SM active high where GPM is there: may be gpu-bound
    activity: tuple[Finding, ...] = ()  # memory-bandwidth-bound, tensor cores idle
    nvlink: tuple[Finding, ...] = ()  # while the GPUs wait (util or SM active low)


def group_of(
    t: Thresholds,
    gpus: tuple[int, ...],
    parts: Sequence[GpuTick | None],
    ticks: list[float],
    span: float,
) -> Group:
    def window() -> list[Sequence[GpuSample]]:
        return [() if p is None else p.samples for p in parts]

    def early(found: Finding) -> Group:
        return Group(found, "", False, False, "info", [], [])

    latest = next((p for p in reversed(parts) if p is not None and p.n), None)
    if latest is not None and latest.mig_unknown:
        return early(unknown_util(gpus, window()))
    warm, shown = span_read(len(ticks), span, t)
    if warm:
        return early(warming(len(ticks), shown, t))
    util = stats([None if p is None else p.util for p in parts])
    if util is None:
        return early(unknown_util(gpus, window()))
    base, busy, starved, severity = util_reading(util, shown, gpus, t)
    here = [p for p in parts if p is not None]
    sm = mean(p.sm for p in here)
    tensor = mean(p.tensor for p in here)
    dram = mean(p.dram for p in here)
    return group_with(t, base, busy, starved, severity, here, sm, tensor, dram)


def group_with(
    t: Thresholds,
    base: str,
    busy: bool,
    starved: bool,
    severity: str,
    here: Sequence[GpuTick],
    sm: float | None,
    tensor: float | None,
    dram: float | None,
) -> Group:
    """The group from the utilization's reading and the window means of GPM's activity."""
    if sm is not None:
        base += f", SM active {pct(sm)}"
    hollow = busy and sm is not None and sm < t.sm_active_low
    full = busy and (sm is None or sm >= t.sm_active_high)
    if hollow:
        severity = "warn"  # the GPU waits as a starved one does
    throttle_link = throttle(t, here, base) + link(t, here, base)
    pcie_found = [] if busy else pcie(t, here, base, severity)
    nvlink_found = nvlink(t, here, base, severity) if hollow or not busy else []
    activity = activity_findings(t, base, busy, sm, tensor, dram)
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


def unknown_util(gpus: tuple[int, ...], window: Sequence[Sequence[GpuSample]]) -> Finding:
    latest = next((samples for samples in reversed(window) if samples), ())
    mig = [g for g in latest if g.mig_mode]
    if mig:
        devices = sum(len(g.mig_devices) for g in mig)
        return finding(
            RULES["unknown"],
            f"{gpus_text(tuple(g.index for g in mig))} in MIG mode"
            + (f" ({devices} MIG devices)" if devices else "")
            + ": NVML gives no GPU utilization for a partitioned GPU, so busy or starved "
            "cannot be told from it",
            "See memory and processes per MIG device; per-instance activity needs DCGM "
            "profiling (GPM) metrics",
        )
    return finding(
        RULES["unknown"],
        f"{gpus_text(gpus)}: GPU utilization not reported (vGPU or an old driver?)",
        "Use per-process SM % or DCGM profiling metrics instead",
    )


def span_read(n: int, span: float, t: Thresholds) -> tuple[bool, str]:
    """All a group reads of the ``span`` of its ``n`` ticks: whether they are too few or
    too short (warming up), and the span as its texts say it. The group of the same parts
    and an equal read is the same group (``Context.group_of_parts`` keeps it on a live
    clock, whose span moves by milliseconds from tick to tick)."""
    if n < t.min_samples or span < t.min_seconds:
        return True, f"{span:.1f} s"
    return False, seconds(span)


def warming(n: int, shown: str, t: Thresholds) -> Finding:
    """``shown``: the span, as ``span_read`` says it."""
    return finding(
        RULES["warming_up"],
        f"{n} samples over {shown}; need {t.min_samples} samples and {t.min_seconds:g} s",
        "Wait a few seconds for a verdict",
    )


def util_reading(
    util: Stats, shown: str, gpus: tuple[int, ...], t: Thresholds
) -> tuple[str, bool, bool, str]:
    """(the text a group's findings start with, busy, starved, severity); ``shown``: the
    span, as ``span_read`` says it."""
    base = f"util mean {pct(util.mean)} (min {util.low:.0f}, max {util.high:.0f}) over {shown}"
    if len(gpus) > 1:
        base += f" on {gpus_text(gpus)}"
    busy = util.mean >= t.util_high
    oscillating = not busy and util.stdev >= t.util_oscillation
    starved = util.mean < t.util_low or oscillating
    if oscillating:
        base = base.replace(" over ", f", oscillating (sd {util.stdev:.0f}) over ", 1)
    return base, busy, starved, "warn" if starved else "info"


def throttle(t: Thresholds, parts: Sequence[GpuTick], base: str) -> list[Finding]:
    busy = hard_n = soft_n = total = 0
    hard_names: set[str] = set()
    where: set[int] = set()
    for p in parts:
        total += p.n
        busy += p.throttle_busy
        soft_n += p.soft_n
        hard_n += p.hard_n
        hard_names.update(p.hard_names)
        where.update(p.where)
    return throttle_finding(t, total, busy, hard_n, soft_n, hard_names, where, base)


def throttle_finding(
    t: Thresholds,
    total: int,
    busy: int,
    hard_n: int,
    soft_n: int,
    hard_names: set[str],
    where: set[int],
    base: str,
) -> list[Finding]:
    if total == 0 or busy < total / 2:
        return []
    if hard_n >= t.throttle_fraction * busy:
        return [
            finding(
                RULES["throttle_hard"],
                f"{', '.join(sorted(hard_names))} in {hard_n} of {busy} busy samples on "
                f"{gpus_text(sorted(where))}; {base}",
                "Clocks are cut by heat or a hardware slowdown: check cooling, fans, airflow",
            )
        ]
    if hard_n + soft_n >= t.throttle_fraction * busy:
        return [
            finding(
                RULES["throttle_soft"],
                f"power cap in {hard_n + soft_n} of {busy} busy samples; {base}",
                "Running at its power limit: normal at full load; raise the limit only if "
                "cooling allows",
            )
        ]
    return []


def link(t: Thresholds, parts: Sequence[GpuTick], base: str) -> list[Finding]:
    busy = degraded = total = 0
    worst: GpuSample | None = None
    for p in parts:
        total += p.n
        busy += p.link_busy
        degraded += p.degraded
        if p.worst is not None:
            worst = p.worst
    return link_finding(t, total, busy, degraded, worst, base)


def link_finding(
    t: Thresholds, total: int, busy: int, degraded: int, worst: GpuSample | None, base: str
) -> list[Finding]:
    if total == 0 or busy < total / 2 or worst is None:
        return []
    if degraded < t.link_degraded_fraction * busy:
        return []
    p = worst.pcie
    return [
        finding(
            RULES["link"],
            f"GPU {worst.index} link gen{p.gen} x{p.width}, max gen{p.max_gen} x{p.max_width}, "
            f"in {degraded} of {busy} busy samples; {base}",
            "Reseat the card or riser, check BIOS PCIe settings and the slot",
        )
    ]


def direction_sums(
    rows: Iterable[tuple[int, int, float, float]],
) -> dict[int, list[list[float]]]:
    """(GPU index, direction, ratio, rate) rows, a link's per tick -> GPU index -> [sum of
    ratios, sum of rates, count] for RX, then TX (PCIe and NVLink alike)."""
    sums: dict[int, list[list[float]]] = {}
    for index, direction, ratio, value in rows:
        acc = sums.get(index)
        if acc is None:
            acc = sums[index] = [[0.0, 0.0, 0], [0.0, 0.0, 0]]
        acc[direction][0] += ratio
        acc[direction][1] += value
        acc[direction][2] += 1
    return sums


def pcie(t: Thresholds, parts: Sequence[GpuTick], base: str, severity: str) -> list[Finding]:
    sums = direction_sums(row for p in parts for row in p.pcie)
    return pcie_finding(t, sums, base, severity)


def pcie_finding(
    t: Thresholds, sums: dict[int, list[list[float]]], base: str, severity: str
) -> list[Finding]:
    best: tuple[float, str, int, float] | None = None  # (ratio, direction, gpu, rate)
    for index in sorted(sums):
        for direction, (ratio_sum, rate_sum, n) in zip(("rx", "tx"), sums[index], strict=True):
            if n and (best is None or ratio_sum / n > best[0]):
                best = (ratio_sum / n, direction, index, rate_sum / n)
    if best is None or best[0] < t.pcie_near_max:
        return []
    ratio, direction, index, mean_rate = best
    words = "host->GPU (RX)" if direction == "rx" else "GPU->host (TX)"
    return [
        finding(
            RULES["pcie"],
            f"{base}; PCIe {words} {rate(mean_rate)} = {100 * ratio:.0f} % of the link"
            f" on GPU {index}",
            "Copies saturate PCIe: pin memory with non_blocking copies, send smaller dtypes "
            "(uint8 images, decode on GPU), keep data on the GPU",
            severity=severity,
        )
    ]


def activity_findings(
    t: Thresholds,
    base: str,
    busy: bool,
    sm: float | None,
    tensor: float | None,
    dram: float | None,
) -> list[Finding]:
    """What GPM's window means say while the GPU works: memory bandwidth at its top while
    the SMs are not, or busy SMs whose tensor cores idle (reported: the GPU has them)."""
    out: list[Finding] = []
    if sm is None:
        return out
    if dram is not None and dram >= t.dram_near_max and sm < t.sm_active_high:
        out.append(
            finding(
                RULES["memory_bandwidth"],
                f"{base}; DRAM bandwidth {pct(dram)} of its peak",
                "Memory bandwidth is the limit, not the SMs: fuse kernels (torch.compile), "
                "keep activations in bf16/fp16, reuse data on chip",
            )
        )
    if busy and sm >= t.sm_active_high and tensor is not None and tensor <= t.tensor_idle:
        out.append(
            finding(
                RULES["tensor_idle"],
                f"{base}; tensor cores active {tensor:.1f} %",
                "fp32 math: bf16/fp16 with AMP (torch.autocast) would use the tensor cores",
            )
        )
    return out


def nvlink(t: Thresholds, parts: Sequence[GpuTick], base: str, severity: str) -> list[Finding]:
    sums = direction_sums(row for p in parts for row in p.nvlink)
    return nvlink_finding(t, sums, base, severity)


def busiest(sums: dict[int, list[list[float]]]) -> tuple[float, str, int, float] | None:
    """(mean ratio, "rx" or "tx", GPU index, mean rate) of the busiest direction."""
    best: tuple[float, str, int, float] | None = None
    for index in sorted(sums):
        for direction, (ratio_sum, rate_sum, n) in zip(("rx", "tx"), sums[index], strict=True):
            if n and (best is None or ratio_sum / n > best[0]):
                best = (ratio_sum / n, direction, index, rate_sum / n)
    return best


def nvlink_finding(
    t: Thresholds, sums: dict[int, list[list[float]]], base: str, severity: str
) -> list[Finding]:
    best = busiest(sums)
    if best is None or best[0] < t.nvlink_near_max:
        return []
    ratio, direction, index, mean_rate = best
    return [
        finding(
            RULES["nvlink"],
            f"{base}; NVLink {direction.upper()} {rate(mean_rate)} = {100 * ratio:.0f} % of "
            f"the links on GPU {index}",
            "The GPUs wait on each other: overlap communication with compute (DDP buckets, "
            "gradient accumulation), send bf16 gradients, or shard less",
            severity=severity,
        )
    ]
