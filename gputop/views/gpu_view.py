"""The GPU panel's view, and the verdict marks every screen shows. No Textual here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from gputop import fmt
from gputop.analysis import kinds
from gputop.cells import cell_width, fit
from gputop.model import (
    CLOCK_EVENT_WORDS,
    GPU_METRIC,
    LABELLED_METRICS,
    Activity,
    GpuSample,
    MigDevice,
    Snapshot,
    Verdict,
)
from gputop.views.parts import Part, Parts, bar, memory_bar, pct4, pct5, safe, used_total

#: "Memory full, utilization low": memory used at least this share of the total...
MEM_IDLE_MEMORY_PERCENT = 80.0
#: ...while the GPU ran kernels less than this share of the time.
MEM_IDLE_UTIL_PERCENT = 10.0
#: A GPU counts as busy (a slow PCIe link then matters) from this utilization...
PCIE_BUSY_UTIL_PERCENT = 10.0
#: ...or from this much PCIe traffic, in % of the link's maximum, either direction.
PCIE_BUSY_TRAFFIC_PERCENT = 5.0
#: Marker shown in the verdict slot when memory is full and the GPU idles.
MEM_IDLE_MARKER = kinds.VERDICT_WORDS[kinds.IDLE_HOLDER]
#: GPM's figures next to UTIL, label -> metric (docs/dashboard.md says what they mean):
#: SM active first (what utilization.gpu is not), then the tensor cores. Where GPM is not
#: there, neither shows and the line is as it was.
INSIDE: dict[str, str] = {"SM": "activity.sm", "TC": "activity.tensor"}
#: Every GPM figure where there is room for them all (--once, the detail screen).
ACTIVITY: dict[str, str] = {
    **INSIDE,
    "DRAM": "activity.dram",
    "occupancy": "activity.sm_occupancy",
    "FP64": "activity.fp64",
    "FP32": "activity.fp32",
    "FP16": "activity.fp16",
}
#: The compact line's bars shrink to this where SM and TC join it, so that it keeps
#: 80 columns with the temperature, power and verdict (the history beside it narrows).
COMPACT_INSIDE_BAR_WIDTH = 5
#: Width of the verdict slot in a GPU line (the diagnosis verdict word goes here).
VERDICT_WIDTH = 8
#: The wide layout widens the slot up to this for the verdict's full label...
LONG_VERDICT_WIDTH = 25
#: The wide layout's history rows are labelled ("util "/"mem  ", this wide) and set off
#: from the text by a rule, so that a verdict never reads into the label ("low util util").
HISTORY_LABEL_WIDTH = 5
HISTORY_RULE = " │"
#: The compact layout's history has no label: one space sets it off.
COMPACT_HISTORY_GAP = " "
#: Lines after a GPU's first are indented this much.
INDENT = "   "
#: ...as long as the history next to it keeps at least this many columns.
MIN_WIDE_HISTORY = 30


def short_name(name: str | None) -> str:
    text = safe(name, 128)
    for prefix in ("NVIDIA ", "Tesla "):
        if text.startswith(prefix) and len(text) > len(prefix):
            text = text[len(prefix) :]
    return text


def memory_percent(gpu: GpuSample) -> float | None:
    return fmt.ratio_percent(gpu.memory.used, gpu.memory.total)


def is_mem_idle(gpu: GpuSample) -> bool:
    mem = memory_percent(gpu)
    util = gpu.utilization.gpu
    if gpu.lost or mem is None or util is None:
        return False
    return mem >= MEM_IDLE_MEMORY_PERCENT and util < MEM_IDLE_UTIL_PERCENT


def pcie_percent(gpu: GpuSample) -> tuple[float | None, float | None]:
    p = gpu.pcie
    return (
        fmt.ratio_percent(p.tx_bytes_per_s, p.link_max_bytes_per_s),
        fmt.ratio_percent(p.rx_bytes_per_s, p.link_max_bytes_per_s),
    )


def pcie_downgrade(gpu: GpuSample) -> str | None:
    """'LINK gen3x8<gen4x16' when the link runs below its maximum while the GPU is busy."""
    p = gpu.pcie
    if p.gen is None or p.width is None or p.max_gen is None or p.max_width is None:
        return None
    if p.gen >= p.max_gen and p.width >= p.max_width:
        return None
    util = gpu.utilization.gpu
    tx, rx = pcie_percent(gpu)
    busy = (util is not None and util >= PCIE_BUSY_UTIL_PERCENT) or any(
        v is not None and v >= PCIE_BUSY_TRAFFIC_PERCENT for v in (tx, rx)
    )
    if not busy:
        return None  # idle GPUs lower their link generation to save power: normal
    return f"LINK gen{p.gen}x{p.width}<gen{p.max_gen}x{p.max_width}"


def throttle_words(reasons: tuple[str, ...] | None) -> str | None:
    """Active clock event reasons in words, without "idle" (not a throttle); None when
    unknown, '' when none."""
    if reasons is None:
        return None
    names = (safe(r, 64) for r in reasons)
    words = [CLOCK_EVENT_WORDS.get(n, n.replace("_", " ")) for n in names if n != "idle"]
    return ", ".join(dict.fromkeys(words))  # each once, in order


def has_inside(gpu: GpuSample | MigDevice) -> bool:
    """Whether the GPU (or MIG device) reports GPM's SM or tensor activity (Hopper and
    later): only then does its line carry SM and TC, so one without GPM looks as before."""
    if isinstance(gpu, GpuSample) and gpu.lost:
        return False
    return any(GPU_METRIC[f].get(gpu) is not None for f in INSIDE.values())


def has_nvlink(gpu: GpuSample) -> bool:
    """Whether the GPU has active NVLink links (its NVL line is then shown)."""
    n = gpu.nvlink
    return not gpu.lost and n.links is not None and n.links > 0


def nvlink_percent(gpu: GpuSample) -> tuple[float | None, float | None]:
    """(rx, tx) NVLink traffic in % of what the links carry a direction."""
    n = gpu.nvlink
    return (
        fmt.ratio_percent(n.rx_bytes_per_s, n.max_bytes_per_s),
        fmt.ratio_percent(n.tx_bytes_per_s, n.max_bytes_per_s),
    )


def inside_parts(gpu: GpuSample | MigDevice) -> Parts:
    """'SM 45% TC 30% ': GPM's figures next to UTIL (what the SMs and tensor cores did)."""
    out: list[Part] = []
    for label, field in INSIDE.items():
        out += [(label, "label"), (pct4(GPU_METRIC[field].get(gpu)) + " ", "")]
    return tuple(out)


def activity_text(gpu: GpuSample) -> str:
    """'SM 45%  TC 30%  DRAM 40%  occupancy 20%  FP64 1%  FP32 10%  FP16 2%'."""
    return "  ".join(f"{k} {fmt.percent(GPU_METRIC[f].get(gpu))}" for k, f in ACTIVITY.items())


def rate_share(rate: float | None, percent: float | None) -> str:
    """'2.9GiB/s 5%': a rate with its share of the link. One 'n/a' for an unknown rate
    (not 'n/a n/a', two unknowns without a unit); a known rate whose link maximum is
    unknown shows without a share."""
    if fmt.finite(rate) is None:
        return fmt.NA
    shown = fmt.rate(rate)
    return shown if fmt.finite(percent) is None else f"{shown} {fmt.percent(percent)}"


def nvlink_parts(gpu: GpuSample) -> Parts:
    """'NVL rx 46.6GiB/s 11% tx 55.9GiB/s 13% of 419.1GiB/s 18 links': like the PCIe
    figures, traffic against what the links carry a direction."""
    n = gpu.nvlink
    rx_pct, tx_pct = nvlink_percent(gpu)
    links = f"{n.links} links" + (f" v{safe(n.version, 8)}" if n.version else "")
    return (
        ("NVL rx ", "label"),
        (rate_share(n.rx_bytes_per_s, rx_pct), ""),
        (" tx ", "label"),
        (rate_share(n.tx_bytes_per_s, tx_pct), ""),
        (" of ", "label"),
        (fmt.rate(n.max_bytes_per_s), ""),
        (f" {links}", "dim"),
    )


def metric_text(gpu: GpuSample, field: str) -> str:
    """One metric of ``gpu`` as the metric table formats it."""
    m = GPU_METRIC[field]
    return fmt.shown(m.get(gpu), m.text)


#: Verdict kind -> the word of at most VERDICT_WIDTH characters the compact GPU line shows.
VERDICT_WORDS: dict[str, str] = kinds.VERDICT_WORDS
#: A throttle that is only the power cap (severity "info") gets its own words.
POWER_CAP_WORD = kinds.RULES["throttle_soft"].word
POWER_CAP_LABEL = "throttled: power cap"
#: Verdict severity -> role (theme colour). The word always says it too.
SEVERITY_ROLES: dict[str, str] = {"ok": "ok", "info": "dim", "warn": "warn", "bad": "error"}


@dataclass(frozen=True, slots=True)
class VerdictMark:
    """A GPU's verdict as its line shows it: the word, the full label, the theme role."""

    kind: str
    word: str  # at most VERDICT_WIDTH characters
    label: str  # the full label (wide layout, when it fits)
    role: str

    def text(self, width: int) -> str:
        return self.label if len(self.label) <= width else self.word


def judging_mark(why: str) -> VerdictMark:
    """The verdict slot of a frame not judged yet; its wide label says ``why``."""
    return VerdictMark("judging", "judging", why, "dim")


def verdict_mark(verdict: Verdict) -> VerdictMark:
    word = VERDICT_WORDS.get(verdict.kind, verdict.kind[:VERDICT_WIDTH])
    label = verdict.label
    if verdict.kind == kinds.THROTTLED and verdict.severity == "info":
        word, label = POWER_CAP_WORD, POWER_CAP_LABEL
    return VerdictMark(verdict.kind, word, label, SEVERITY_ROLES.get(verdict.severity, ""))


def verdict_parts(verdict: Verdict) -> tuple[Parts, Parts, Parts]:
    """A verdict in full: the verdict, evidence and advice lines."""
    mark = verdict_mark(verdict)
    head: list[Part] = [
        ("verdict: ", "label"),
        (mark.label, mark.role),
        (f" ({verdict.severity})", "dim"),
    ]
    if verdict.also:
        head += [("  also: ", "label"), (", ".join(verdict.also), "")]
    return (
        tuple(head),
        (("evidence: ", "label"), (safe(verdict.evidence, 1024), "")),
        (("advice: ", "label"), (safe(verdict.advice, 1024), "")),
    )


verdict_legend = kinds.legend


def gpu_marker(
    gpu: GpuSample, verdict: VerdictMark | None = None, width: int = VERDICT_WIDTH
) -> Part:
    """What fills the verdict slot: the verdict when given, else the MEM IDLE marker."""
    if verdict is not None:
        return fit(verdict.text(width), width), verdict.role
    if is_mem_idle(gpu):
        return fit(MEM_IDLE_MARKER, width), "warn"
    return " " * width, ""


@dataclass(frozen=True, slots=True)
class GpuView:
    """One GPU's lines, ready to draw."""

    index: int
    lines: tuple[Parts, ...]
    lost: bool


COMPACT_NAME_WIDTH = 14
WIDE_NAME_WIDTH = 22
#: The wide line gives SM and TC the room of the name's padding where GPM is there, so
#: that at 100 columns it still has history beside it (GPU names with GPM are short).
WIDE_INSIDE_NAME_WIDTH = COMPACT_NAME_WIDTH


#: The wide layout's history: its rule and its label.
HISTORY_FRAME = len(HISTORY_RULE) + HISTORY_LABEL_WIDTH
#: The wide layout's bars grow (from 6 to 20 cells) while the history keeps this many
#: columns beside a line with the narrow verdict slot.
BAR_HISTORY = 36


#: A GPU with GPM, for measuring the wide line that carries SM and TC.
_INSIDE_PROBE = GpuSample(index=0, activity=Activity(sm=0.0, tensor=0.0))


@lru_cache(maxsize=64)
def line_width(
    bar_width: int, verdict_width: int, inside: bool = False, compact: bool = False
) -> int:
    """Cells of a GPU's first line, measured on it (every GPU's is as wide in a layout;
    ``inside``: one with GPM's SM and TC)."""
    probe = _INSIDE_PROBE if inside else GpuSample(index=0)
    view = gpu_view(probe, compact=compact, bar_width=bar_width, verdict_width=verdict_width)
    return parts_width(view.lines[0])


def wide_line_width(bar_width: int, verdict_width: int, inside: bool = False) -> int:
    """Cells of the wide layout's first line."""
    return line_width(bar_width, verdict_width, inside)


def flow(first: Parts, chunks: Sequence[Parts], width: int | None) -> tuple[Parts, ...]:
    """``first`` followed by ``chunks``, each chunk kept whole: one that would not fit in
    ``width`` cells (None: no limit) starts a new, indented line."""
    lines: list[Parts] = []
    line, used = first, parts_width(first)
    for chunk in chunks:
        cells = parts_width(chunk)
        if width is not None and used + cells > width and used > len(INDENT):
            lines.append(line)
            chunk = ((INDENT, ""), *strip_lead(chunk))
            cells = parts_width(chunk)
            line, used = (), 0
        line, used = (*line, *chunk), used + cells
    if line:
        lines.append(line)
    return tuple(lines)


def strip_lead(chunk: Parts) -> Parts:
    """A chunk without its leading spaces (it starts a line)."""
    if not chunk:
        return chunk
    text, role = chunk[0]
    return ((text.lstrip(" "), role), *chunk[1:])


def parts_width(parts: Parts) -> int:
    return sum(cell_width(text) for text, _ in parts)


def alert_chunks(gpu: GpuSample, *, compact: bool) -> list[Parts]:
    """What must be read whole: the link running below its maximum, and each throttle
    reason (the wide line also says an unknown reason, the compact one only a throttle)."""
    chunks: list[Parts] = []
    downgrade = pcie_downgrade(gpu)
    if downgrade:
        chunks.append(((f"  ! {downgrade}", "warn"),))
    throttle = throttle_words(gpu.clock_event_reasons)
    if throttle is None and not compact:
        chunks.append((("  throttle: ", "label"), (fmt.NA, "dim")))
    elif throttle:
        reasons = throttle.split(", ")
        chunks.append((("  throttle: ", "label"), (reasons[0], "warn")))
        chunks += [((", ", "warn"), (r, "warn")) for r in reasons[1:]]
    return chunks


def gpu_view(
    gpu: GpuSample,
    *,
    compact: bool,
    bar_width: int,
    verdict: VerdictMark | None = None,
    verdict_width: int = VERDICT_WIDTH,
    text_width: int | None = None,
) -> GpuView:
    """One GPU's lines. ``text_width``: the cells the panel gives the text; the throttle
    reasons and the link warning then move to a line of their own rather than be cut."""
    inside = inside_parts(gpu) if has_inside(gpu) else ()
    name_width = (
        COMPACT_NAME_WIDTH if compact else WIDE_INSIDE_NAME_WIDTH if inside else WIDE_NAME_WIDTH
    )
    head: Parts = (
        (fit(str(gpu.index), 2, ">") + " ", "index"),
        (fit(short_name(gpu.name), name_width) + " ", "name"),
    )
    if gpu.lost:
        reason = safe(gpu.lost_reason, 200) if gpu.lost_reason else "fell off the bus"
        line: Parts = (*head, ("LOST", "error"), (f": {reason}", "error"))
        more: tuple[Parts, ...] = () if compact else (((INDENT + "no data from this GPU", "dim"),),)
        return GpuView(gpu.index, (line, *more), lost=True)

    mem = gpu.memory
    mem_pct = memory_percent(gpu)
    reserved_pct = fmt.ratio_percent(mem.reserved, mem.total)
    util = gpu.utilization.gpu
    marker = gpu_marker(gpu, verdict, VERDICT_WIDTH if compact else verdict_width)
    holds_idle = is_mem_idle(gpu) if verdict is None else verdict.kind == kinds.IDLE_HOLDER
    pct_role = "warn" if holds_idle else ""
    if compact:
        if inside:
            bar_width = min(bar_width, COMPACT_INSIDE_BAR_WIDTH)
        line = (
            *head,
            ("M", "label"),
            *memory_bar(mem_pct, reserved_pct, bar_width),
            (pct5(mem_pct) + " ", pct_role),
            ("U", "label"),
            *bar(util, bar_width),
            (pct5(util) + " ", pct_role),
            *inside,
            (fit(metric_text(gpu, "temperature_c"), 5, ">") + " ", ""),
            (fit(metric_text(gpu, "power_w"), 4, ">") + " ", ""),
            marker,
        )
        alerts = alert_chunks(gpu, compact=True)
        if alerts:  # on a line of their own: the compact line has no room for them
            alerts[0] = strip_lead(alerts[0])
        more = flow(((INDENT, ""),), alerts, text_width) if alerts else ()
        mig = (mig_summary(gpu),) if gpu.mig_mode else ()
        return GpuView(gpu.index, (line, *more, *mig), lost=False)

    line1: Parts = (
        *head,
        ("MEM ", "label"),
        *memory_bar(mem_pct, reserved_pct, bar_width),
        (" " + fit(used_total(mem.used, mem.total), 17, ">"), ""),
        (pct5(mem_pct) + " ", pct_role),
        (" UTIL ", "label"),
        *bar(util, bar_width),
        (pct5(util) + " ", pct_role),
        *inside,
        (" ", ""),
        marker,
    )
    parts: list[Part] = [
        (INDENT, ""),
        (metric_text(gpu, "temperature_c"), ""),
        (" ", ""),
        (f"{metric_text(gpu, 'power_w')}/{metric_text(gpu, 'power_limit_w')}", ""),
    ]
    for m in LABELLED_METRICS:
        parts += [(f" {m.label} ", "label"), (fmt.shown(m.get(gpu), m.text), "")]
    tx_pct, rx_pct = pcie_percent(gpu)
    p = gpu.pcie
    parts += [
        ("  PCIe TX ", "label"),
        (rate_share(p.tx_bytes_per_s, tx_pct), ""),
        (" RX ", "label"),
        (rate_share(p.rx_bytes_per_s, rx_pct), ""),
    ]
    chunks = alert_chunks(gpu, compact=False)
    if not pcie_downgrade(gpu) and p.gen is not None and p.width is not None:
        parts.append((f" gen{p.gen}x{p.width}", "dim"))
    if gpu.mig_mode:
        chunks.append((("  MIG ", "label"), (f"on, {len(gpu.mig_devices)} devices", "")))
    lines = flow(tuple(parts), chunks, text_width)
    nvl: tuple[Parts, ...] = (((INDENT, ""), *nvlink_parts(gpu)),) if has_nvlink(gpu) else ()
    return GpuView(gpu.index, (line1, *lines, *nvl, *mig_lines(gpu, bar_width)), lost=False)


def mig_lines(gpu: GpuSample, bar_width: int) -> tuple[Parts, ...]:
    out: list[Parts] = []
    for m in gpu.mig_devices:
        procs = gpu.processes_of(m)
        mem = m.memory
        pct = fmt.ratio_percent(mem.used, mem.total)
        gi = fmt.NA if m.gpu_instance_id is None else str(m.gpu_instance_id)
        ci = fmt.NA if m.compute_instance_id is None else str(m.compute_instance_id)
        pids = " ".join(str(p.pid) for p in procs[:4]) + (" …" if len(procs) > 4 else "")
        out.append(
            (
                ("   MIG ", "label"),
                (fit(safe(m.profile or m.name or "?", 16), 9) + " ", "name"),
                ("GI ", "label"),
                (fit(gi, 2, ">") + " ", ""),
                ("CI ", "label"),
                (fit(ci, 2, ">") + " ", ""),
                ("MEM ", "label"),
                *memory_bar(pct, None, max(4, bar_width // 2)),
                (" " + fit(used_total(mem.used, mem.total), 17, ">"), ""),
                (pct5(pct) + " ", ""),
                *(((" ", ""), *inside_parts(m)) if has_inside(m) else ()),
                (" procs ", "label"),
                (f"{len(procs)}" + (f": {pids}" if pids else ""), "" if procs else "dim"),
            )
        )
    return tuple(out)


def mig_summary(gpu: GpuSample) -> Parts:
    items = [
        f"{safe(m.profile or '?', 16)} {fmt.bytes_(m.memory.used)}/"
        f"{fmt.bytes_(m.memory.total)} {len(gpu.processes_of(m))}p"
        for m in gpu.mig_devices
    ]
    return (("   MIG ", "label"), (", ".join(items) or "on, no MIG device", ""))


def bar_width_for(width: int, compact: bool, inside: bool = False) -> int:
    """The bars' width; ``inside``: some GPU's line also carries SM and TC."""
    if compact:
        return 8 if width >= 78 else 5
    spare = width - wide_line_width(0, VERDICT_WIDTH, inside) - HISTORY_FRAME - BAR_HISTORY
    return max(6, min(20, spare // 2))


def verdict_width_for(width: int, compact: bool, bar_width: int, inside: bool = False) -> int:
    """The verdict slot: VERDICT_WIDTH, or wider in the wide layout when there is room."""
    if compact:
        return VERDICT_WIDTH
    room = width - wide_line_width(bar_width, 0, inside) - HISTORY_FRAME - MIN_WIDE_HISTORY
    return max(VERDICT_WIDTH, min(LONG_VERDICT_WIDTH, room))


def host_only_message(snapshot: Snapshot) -> Parts:
    why = safe(snapshot.driver.error, 300) if snapshot.driver.error else "unknown reason"
    return (
        ("No GPU data: ", "warn"),
        (why.rstrip("."), ""),
        (". Host metrics and /dev/nvidia* holders are still shown.", "dim"),
    )
