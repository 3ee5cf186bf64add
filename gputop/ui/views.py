"""Pure views: a snapshot in, rows and styled text parts out. No Textual here.

Widgets turn the ``Parts`` below into styled text. A part is ``(text, role)``; the role
is a word ("warn", "error", "dim", ...) that ``gputop.ui`` maps to theme colours, so the
meaning always travels as words on screen too (never as colour alone).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from gputop import fmt
from gputop.analysis import verdict as vd
from gputop.analysis.jobs import process_index
from gputop.cells import cell_width, fit
from gputop.model import CLOCK_EVENT_WORDS, GpuSample, HostSample, ProcessInfo, Snapshot

# --- thresholds -------------------------------------------------------------------------

#: "Memory full, utilization low": memory used at least this share of the total...
MEM_IDLE_MEMORY_PERCENT = 80.0
#: ...while the GPU ran kernels less than this share of the time.
MEM_IDLE_UTIL_PERCENT = 10.0
#: A GPU counts as busy (a slow PCIe link then matters) from this utilization...
PCIE_BUSY_UTIL_PERCENT = 10.0
#: ...or from this much PCIe traffic, in % of the link's maximum, either direction.
PCIE_BUSY_TRAFFIC_PERCENT = 5.0
#: Marker shown in the verdict slot when memory is full and the GPU idles.
MEM_IDLE_MARKER = "MEM IDLE"
#: Width of the verdict slot in a GPU line (the diagnosis verdict word goes here).
VERDICT_WIDTH = 8
#: The wide layout widens the slot up to this for the verdict's full label...
LONG_VERDICT_WIDTH = 25
#: ...as long as the history next to it keeps at least this many columns.
MIN_WIDE_HISTORY = 30

#: iowait from which the host panel marks it.
IOWAIT_WARN_PERCENT = 20.0

#: Refresh interval steps for + / -, seconds.
INTERVAL_STEPS = (0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0)

#: Layout breakpoints: below either, compact one-line rows; below tiny, a message only.
COMPACT_WIDTH = 100
COMPACT_HEIGHT = 30
MIN_WIDTH = 50
MIN_HEIGHT = 14

Part = tuple[str, str]  # (text, role); role "" = plain
Parts = tuple[Part, ...]

LEVELS = " ▁▂▃▄▅▆▇█"
BAR_USED = "█"
BAR_RESERVED = "▓"
BAR_FREE = "░"
NO_VALUE = "·"


def plain(parts: Iterable[Part]) -> str:
    """The text of some parts, without roles (what NO_COLOR shows)."""
    return "".join(text for text, _ in parts)


@lru_cache(maxsize=4096)
def safe(text: str | None, limit: int | None = 512) -> str:
    """Untrusted text made safe to show: escape sequences and control characters dropped.

    Sources clean text already; this is the UI's own line of defence (rich keeps ESC).
    """
    cleaned = fmt.clean_text(text, limit)
    return fmt.NA if cleaned is None else cleaned


def fit_parts(parts: Parts, width: int) -> Parts:
    """Parts padded or cut to exactly ``width`` cells, as ``fit`` does one text: what is
    cut ends with an ellipsis, and the roles of what is kept stay."""
    if width <= 0:
        return ()
    sizes = [cell_width(text) for text, _ in parts]
    total = sum(sizes)
    if total <= width:
        return parts if total == width else (*parts, (" " * (width - total), ""))
    out: list[Part] = []
    room = width - 1  # the ellipsis takes the last cell
    for (text, role), cells in zip(parts, sizes, strict=True):
        if cells < room:
            out.append((text, role))
            room -= cells
            continue
        # The cut falls in this part (or just after it): end it with the ellipsis.
        out.append((fit(text + "…", room + 1) if cells > room else text + "…", role))
        break
    return tuple(out)


def level(value: float | None) -> str:
    """One cell of a fixed 0-100 % scale: 0 is blank, anything above 0 at least ▁."""
    if value is None:
        return NO_VALUE
    v = min(max(value, 0.0), 100.0)
    return LEVELS[min(8, math.ceil(v / 100.0 * 8))]


def spark(values: Sequence[float | None], width: int) -> str:
    """The last ``width`` values on a fixed 0-100 % scale, newest at the right.

    Never rescales; left-padded with blanks when the history is shorter than the width.
    """
    if width <= 0:
        return ""
    tail = values[-width:]
    return " " * (width - len(tail)) + "".join(level(v) for v in tail)


def bar_cells(percent: float | None, width: int) -> int:
    if percent is None:
        return 0
    return round(min(max(percent, 0.0), 100.0) / 100.0 * width)


def bar(percent: float | None, width: int) -> Parts:
    """A fixed-scale bar: filled cells, then free cells. Unknown: all dots."""
    if percent is None:
        return ((NO_VALUE * width, "dim"),)
    n = bar_cells(percent, width)
    return ((BAR_USED * n, "bar"), (BAR_FREE * (width - n), "bar-free"))


def memory_bar(used_pct: float | None, reserved_pct: float | None, width: int) -> Parts:
    """Used (█), driver-reserved (▓), free (░): readable without colour."""
    if used_pct is None:
        return ((NO_VALUE * width, "dim"),)
    used = bar_cells(used_pct, width)
    reserved = bar_cells(used_pct + (reserved_pct or 0.0), width) - used
    return (
        (BAR_USED * used, "bar-mem"),
        (BAR_RESERVED * reserved, "bar-reserved"),
        (BAR_FREE * (width - used - reserved), "bar-free"),
    )


# --- GPUs -------------------------------------------------------------------------------


def short_name(name: str | None) -> str:
    text = safe(name, 128)
    for prefix in ("NVIDIA ", "Tesla "):
        if text.startswith(prefix) and len(text) > len(prefix):
            text = text[len(prefix) :]
    return text


def memory_percent(gpu: GpuSample) -> float | None:
    return fmt.ratio_percent(gpu.memory.used, gpu.memory.total)


def is_mem_idle(gpu: GpuSample) -> bool:
    """Memory nearly full while the GPU hardly runs kernels: someone holds it idle."""
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
    if None in (p.gen, p.width, p.max_gen, p.max_width):
        return None
    assert p.gen is not None and p.width is not None
    assert p.max_gen is not None and p.max_width is not None
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
    """Active clock event reasons in words, without "idle" (clocks lowered because there is
    no work are not a throttle); None when unknown, '' when none (or only idle)."""
    if reasons is None:
        return None
    words: list[str] = []
    for r in reasons:
        name = safe(r, 64)
        if name == "idle":
            continue  # idle clocks are not throttling: an idle GPU is not at fault
        word = CLOCK_EVENT_WORDS.get(name, name.replace("_", " "))
        if word not in words:
            words.append(word)
    return ", ".join(words)


def _temp(v: float | None) -> str:
    return fmt.NA if v is None else f"{v:.0f}°C"


def _watts(v: float | None) -> str:
    return fmt.NA if v is None else f"{v:.0f}W"


# --- verdicts -----------------------------------------------------------------------------

#: Verdict kind -> the word of at most VERDICT_WIDTH characters the compact GPU line shows.
VERDICT_WORDS: dict[str, str] = {
    vd.LOST: "LOST",
    vd.IDLE_HOLDER: MEM_IDLE_MARKER,
    vd.IDLE: "idle",
    vd.WARMING_UP: "warming",
    vd.THROTTLED: "throttle",
    vd.TRANSFER_PCIE: "PCIe-bnd",
    vd.INPUT_DISK: "disk-bnd",
    vd.INPUT_CPU: "CPU-bnd",
    vd.INPUT_MAIN: "main-bnd",
    vd.UNDERUSED: "low util",
    vd.LINK_DEGRADED: "link deg",
    vd.GPU_BOUND: "GPU-bnd",
    vd.MODERATE: "moderate",
    vd.MEMORY_FULL: "mem full",
    vd.UNKNOWN: "unknown",
}
#: A throttle that is only the power cap (severity "info") gets its own words.
POWER_CAP_WORD = "pwr cap"
POWER_CAP_LABEL = "throttled: power cap"

#: Verdict severity -> role (theme colour). The word always says it too.
SEVERITY_ROLES: dict[str, str] = {"ok": "ok", "info": "dim", "warn": "warn", "bad": "error"}


@dataclass(frozen=True, slots=True)
class VerdictMark:
    """How a verdict shows in a GPU line: a short word, a longer label, a role."""

    kind: str
    word: str  # at most VERDICT_WIDTH characters
    label: str  # the full label (wide layout, when it fits)
    role: str

    def text(self, width: int) -> str:
        """The label when it fits ``width``, else the short word."""
        return self.label if len(self.label) <= width else self.word


def verdict_mark(verdict: vd.Verdict) -> VerdictMark:
    word = VERDICT_WORDS.get(verdict.kind, verdict.kind[:VERDICT_WIDTH])
    label = verdict.label
    if verdict.kind == vd.THROTTLED and verdict.severity == "info":
        word, label = POWER_CAP_WORD, POWER_CAP_LABEL
    return VerdictMark(verdict.kind, word, label, SEVERITY_ROLES.get(verdict.severity, ""))


def verdict_parts(verdict: vd.Verdict) -> tuple[Parts, Parts, Parts]:
    """A verdict in full, as three lines: "verdict: label (severity)  also: ...",
    "evidence: ...", "advice: ..." (the jobs panel and the detail screen)."""
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


def verdict_legend() -> tuple[tuple[str, str], ...]:
    """(word, meaning) of every verdict word, for the help screen."""
    meanings = {
        vd.IDLE_HOLDER: "idle memory holder: the GPU holds memory but has run (almost) no "
        "kernel for minutes",
        vd.IDLE: "no process, no memory held, no load",
        vd.WARMING_UP: "too few samples yet for a verdict (a few seconds)",
        vd.THROTTLED: "clocks cut by heat or a hardware slowdown while busy",
        vd.TRANSFER_PCIE: "transfer-bound: the GPU waits while PCIe copies run near the link's "
        "capacity",
        vd.INPUT_DISK: "input-bound: the job waits on storage (D state, iowait, reads at the "
        "disk's peak)",
        vd.INPUT_CPU: "input-bound: the DataLoader workers (or the whole host CPU) are maxed out",
        vd.INPUT_MAIN: "input-bound: the main Python process is at a full core, workers idle",
        vd.UNDERUSED: "GPU underused: utilization low or oscillating, no host cause seen",
        vd.LINK_DEGRADED: "PCIe link below its max generation or width while busy",
        vd.GPU_BOUND: "GPU-bound: the GPU is busy, the input keeps up",
        vd.MODERATE: "steady partial use, no cause seen",
        vd.MEMORY_FULL: "GPU memory nearly full",
        vd.UNKNOWN: "cannot tell: the GPU reports no utilization (MIG, vGPU)",
    }
    out = [(VERDICT_WORDS[k], meanings[k]) for k in vd.KINDS if k in meanings]
    at = next(i for i, (w, _) in enumerate(out) if w == VERDICT_WORDS[vd.THROTTLED]) + 1
    out.insert(at, (POWER_CAP_WORD, "at the power limit while busy (normal at full load)"))
    return tuple(out)


def gpu_marker(
    gpu: GpuSample, verdict: str | VerdictMark | None = None, width: int = VERDICT_WIDTH
) -> Part:
    """What fills the verdict slot: the verdict when given, else the MEM IDLE marker."""
    if isinstance(verdict, VerdictMark):
        return fit(verdict.text(width), width), verdict.role
    if verdict:
        return fit(safe(verdict, 32), width), "verdict"
    if is_mem_idle(gpu):
        return fit(MEM_IDLE_MARKER, width), "warn"
    return " " * width, ""


def _holds_idle(gpu: GpuSample, verdict: str | VerdictMark | None) -> bool:
    if isinstance(verdict, VerdictMark):
        return verdict.kind == vd.IDLE_HOLDER
    return not verdict and is_mem_idle(gpu)


def _pct4(v: float | None) -> str:
    return fit(fmt.percent(v), 4, ">")


@dataclass(frozen=True, slots=True)
class GpuView:
    """What one GPU block shows: one line (compact) or two (wide)."""

    index: int
    lines: tuple[Parts, ...]
    lost: bool


COMPACT_NAME_WIDTH = 14
WIDE_NAME_WIDTH = 22


def wide_text_width(bar_width: int) -> int:
    return (
        3
        + WIDE_NAME_WIDTH
        + 1
        + 5
        + bar_width
        + 1
        + 17
        + 5
        + 7
        + bar_width
        + 5
        + 2
        + (VERDICT_WIDTH)
    )


def compact_text_width(bar_width: int) -> int:
    return 3 + COMPACT_NAME_WIDTH + 2 * (2 + bar_width + 5) + 6 + 5 + 1 + VERDICT_WIDTH


def gpu_view(
    gpu: GpuSample,
    *,
    compact: bool,
    bar_width: int,
    verdict: str | VerdictMark | None = None,
    verdict_width: int = VERDICT_WIDTH,
) -> GpuView:
    idx = fit(str(gpu.index), 2, ">") + " "
    if gpu.lost:
        reason = safe(gpu.lost_reason, 200) if gpu.lost_reason else "fell off the bus"
        name_w = COMPACT_NAME_WIDTH if compact else WIDE_NAME_WIDTH
        line: Parts = (
            (idx, "index"),
            (fit(short_name(gpu.name), name_w) + " ", "name"),
            ("LOST", "error"),
            (f": {reason}", "error"),
        )
        if compact:
            return GpuView(gpu.index, (line,), lost=True)
        return GpuView(gpu.index, (line, (("   no data from this GPU", "dim"),)), lost=True)

    mem = gpu.memory
    mem_pct = memory_percent(gpu)
    reserved_pct = fmt.ratio_percent(mem.reserved, mem.total)
    util = gpu.utilization.gpu
    marker = gpu_marker(gpu, verdict, VERDICT_WIDTH if compact else verdict_width)
    pct_role = "warn" if _holds_idle(gpu, verdict) else ""
    if compact:
        line = (
            (idx, "index"),
            (fit(short_name(gpu.name), COMPACT_NAME_WIDTH) + " ", "name"),
            ("M", "label"),
            *memory_bar(mem_pct, reserved_pct, bar_width),
            (_pct4(mem_pct) + " ", pct_role),
            ("U", "label"),
            *bar(util, bar_width),
            (_pct4(util) + " ", pct_role),
            (fit(_temp(gpu.temperature_c), 5, ">") + " ", ""),
            (fit(_watts(gpu.power_w), 4, ">") + " ", ""),
            marker,
        )
        if gpu.mig_mode:
            return GpuView(gpu.index, (line, mig_summary(gpu)), lost=False)
        return GpuView(gpu.index, (line,), lost=False)

    used_total = f"{fmt.bytes_(mem.used)}/{fmt.bytes_(mem.total)}"
    line1: Parts = (
        (idx, "index"),
        (fit(short_name(gpu.name), WIDE_NAME_WIDTH) + " ", "name"),
        ("MEM ", "label"),
        *memory_bar(mem_pct, reserved_pct, bar_width),
        (" " + fit(used_total, 17, ">"), ""),
        (_pct4(mem_pct) + " ", pct_role),
        (" UTIL ", "label"),
        *bar(util, bar_width),
        (_pct4(util) + " ", pct_role),
        (" ", ""),
        marker,
    )
    parts: list[Part] = [
        ("   ", ""),
        (_temp(gpu.temperature_c), ""),
        (" ", ""),
        (f"{_watts(gpu.power_w)}/{_watts(gpu.power_limit_w)}", ""),
        (" fan ", "label"),
        (fmt.percent(gpu.fan_percent), ""),
    ]
    tx_pct, rx_pct = pcie_percent(gpu)
    p = gpu.pcie
    parts += [
        ("  PCIe TX ", "label"),
        (f"{fmt.rate(p.tx_bytes_per_s)} {fmt.percent(tx_pct)}", ""),
        (" RX ", "label"),
        (f"{fmt.rate(p.rx_bytes_per_s)} {fmt.percent(rx_pct)}", ""),
    ]
    downgrade = pcie_downgrade(gpu)
    if downgrade:
        parts.append((f" ! {downgrade}", "warn"))
    elif p.gen is not None and p.width is not None:
        parts.append((f" gen{p.gen}x{p.width}", "dim"))
    throttle = throttle_words(gpu.clock_event_reasons)
    if throttle:
        parts += [("  throttle: ", "label"), (throttle, "warn")]
    elif throttle is None:
        parts += [("  throttle: ", "label"), (fmt.NA, "dim")]
    if gpu.mig_mode:
        parts += [("  MIG ", "label"), (f"on, {len(gpu.mig_devices)} devices", "")]
    return GpuView(gpu.index, (line1, tuple(parts), *mig_lines(gpu, bar_width)), lost=False)


def mig_lines(gpu: GpuSample, bar_width: int) -> tuple[Parts, ...]:
    """One line per MIG device (wide layout): profile, GI/CI ids, memory, processes."""
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
                (" " + fit(f"{fmt.bytes_(mem.used)}/{fmt.bytes_(mem.total)}", 17, ">"), ""),
                (_pct4(pct) + " ", ""),
                (" procs ", "label"),
                (f"{len(procs)}" + (f": {pids}" if pids else ""), "" if procs else "dim"),
            )
        )
    return tuple(out)


def mig_summary(gpu: GpuSample) -> Parts:
    """The compact layout's one line for a GPU's MIG devices."""
    items = []
    for m in gpu.mig_devices:
        n = len(gpu.processes_of(m))
        items.append(
            f"{safe(m.profile or '?', 16)} {fmt.bytes_(m.memory.used)}/"
            f"{fmt.bytes_(m.memory.total)} {n}p"
        )
    return (("   MIG ", "label"), (", ".join(items) or "on, no MIG device", ""))


def bar_width_for(width: int, compact: bool) -> int:
    """Bar width for a GPU panel ``width`` cells wide, leaving room for the history."""
    if compact:
        return 8 if width >= 78 else 5
    spare = width - wide_text_width(0) - 40
    return max(6, min(20, spare // 2))


def verdict_width_for(width: int, compact: bool, bar_width: int) -> int:
    """The verdict slot: VERDICT_WIDTH, or wider in the wide layout when there is room."""
    if compact:
        return VERDICT_WIDTH
    # The wide line 1 without its slot; the history takes a 5-cell label and 2 gaps.
    line = 65 + 2 * bar_width
    room = width - line - 7 - MIN_WIDE_HISTORY
    return max(VERDICT_WIDTH, min(LONG_VERDICT_WIDTH, room))


# --- header -----------------------------------------------------------------------------


def mode_text(snapshot: Snapshot) -> Part:
    if not snapshot.driver.available:
        why = safe(snapshot.driver.error, 200) if snapshot.driver.error else "no NVIDIA driver"
        return f"HOST-ONLY ({why})", "warn"
    if snapshot.source == "demo":
        return "DEMO", "accent"
    if snapshot.source == "replay":
        return "REPLAY", "accent"
    return "live", "ok"


def header_parts(
    snapshot: Snapshot | None,
    *,
    interval: float,
    paused: bool,
    stale: bool,
    gpu_filter: frozenset[int] | None = None,
    text_filter: str = "",
    compact: bool = False,
    error: str | None = None,
) -> Parts:
    """The header line; ``compact`` drops the program name and shortens the labels.
    ``error``: why the last sample failed (the screen then shows older data)."""
    gap = " " if compact else "  "
    parts: list[Part] = [] if compact else [("gputop ", "title")]
    if snapshot is None:
        parts.append(("waiting for the first sample…", "dim"))
    elif not snapshot.driver.available:
        parts.append((safe(snapshot.hostname, 64), "title"))
    else:
        d = snapshot.driver
        parts += [
            (safe(snapshot.hostname, 64), "title"),
            (f"{gap}{'drv' if compact else 'driver'} ", "label"),
            (d.driver_version or fmt.NA, ""),
            (f"{gap}CUDA ", "label"),
            (d.cuda_version or fmt.NA, ""),
        ]
    parts += [(f"{gap}every ", "label"), (f"{interval:g}s", "")]
    if snapshot is not None:
        parts += [(gap, ""), mode_text(snapshot)]
    if paused:
        parts += [(gap, ""), ("PAUSED", "warn-strong")]
    if stale:
        parts += [(gap, ""), ("STALE", "error-strong")]
    if error:
        parts += [(gap, ""), (f"! sampling failed: {safe(error, 80)}", "error-strong")]
    if gpu_filter is not None:
        shown = ",".join(str(i) for i in sorted(gpu_filter)) or "none"
        parts += [(f"{gap}GPU ", "label"), (shown, "accent")]
    if text_filter:
        parts += [(f"{gap}filter ", "label"), (safe(text_filter, 64), "accent")]
    if snapshot is not None and snapshot.tick_seconds is not None:
        tick = f"{snapshot.tick_seconds * 1000:.0f}ms"
        if snapshot.tick_cpu_seconds is not None and not compact:
            tick += f" (cpu {snapshot.tick_cpu_seconds * 1000:.0f}ms)"
        parts += [(f"{gap}tick ", "label"), (tick, "")]
    return tuple(parts)


# --- host -------------------------------------------------------------------------------


def _used_total(used: int | None, total: int | None) -> str:
    return f"{fmt.bytes_(used)}/{fmt.bytes_(total)}"


def host_lines(host: HostSample | None, width: int, *, compact: bool) -> tuple[Parts, ...]:
    """Host panel lines: totals, I/O, then per-core cells wrapped to ``width``."""
    if host is None:
        return ((("host: n/a (no host sample)", "dim"),),)
    digits = 1 if compact else 2
    load = (
        " ".join(f"{v:.{digits}f}" for v in host.load_average)
        if host.load_average is not None
        else fmt.NA
    )
    mem = host.memory
    mem_pct = fmt.ratio_percent(mem.used, mem.total)
    swap_pct = fmt.ratio_percent(host.swap.used, host.swap.total)
    iowait = host.iowait_percent
    io_role = "warn" if iowait is not None and iowait >= IOWAIT_WARN_PERCENT else ""
    cpu: Parts = (
        ("CPU ", "label"),
        (_pct4(host.cpu_percent) + " ", ""),
        *bar(host.cpu_percent, 8 if compact else 10),
        ("  iowait ", "label"),
        (fmt.percent(iowait), io_role),
        ("  load ", "label"),
        (load, ""),
    )
    ram: Parts = (
        ("  RAM ", "label"),
        (f"{_used_total(mem.used, mem.total)} {fmt.percent(mem_pct)}", ""),
    )
    swap_used = (
        fmt.bytes_(host.swap.used) if compact else _used_total(host.swap.used, host.swap.total)
    )
    swap: Parts = (("swap ", "label"), (f"{swap_used} {fmt.percent(swap_pct)}", ""))
    io: Parts = (
        ("disk ", "label"),
        ("R ", "label"),
        (fmt.rate(host.disk.read_bytes_per_s), ""),
        (" W ", "label"),
        (fmt.rate(host.disk.write_bytes_per_s), ""),
        ("  net ", "label"),
        ("rx ", "label"),
        (fmt.rate(host.net.rx_bytes_per_s), ""),
        (" tx ", "label"),
        (fmt.rate(host.net.tx_bytes_per_s), ""),
    )
    cores = host.cpu_count if host.cpu_count is not None else len(host.cpu_per_core)
    freq = f" @ {host.cpu_freq_mhz:.0f}MHz" if host.cpu_freq_mhz is not None else ""
    if compact:
        line1: Parts = (*cpu, *ram)
        line2: Parts = (*swap, ("  ", ""), *io)
    else:
        line1 = (*cpu, *ram, ("  ", ""), *swap)
        line2 = (*io, (f"  {cores} cores{freq}", "dim"))
    lines: list[Parts] = [line1, line2]
    lines += core_lines(host.cpu_per_core, width, max_rows=2 if compact else 4)
    return tuple(lines)


def core_lines(per_core: Sequence[float], width: int, *, max_rows: int) -> list[Parts]:
    """One cell per core (▁..█, fixed 0-100 %), wrapped; '+N' when cores do not fit."""
    if not per_core:
        return []
    label = "cores "
    room = max(8, width - len(label))
    cells = "".join(level(v) for v in per_core)
    rows = [cells[i : i + room] for i in range(0, len(cells), room)]
    if len(rows) > max_rows:
        rows = rows[:max_rows]
        more = ""
        for _ in range(3):  # the marker's own width decides how many cells it hides
            hidden = len(cells) - (room * max_rows - len(more))
            more = f" +{hidden}"
        rows[-1] = rows[-1][: room - len(more)] + more
    out: list[Parts] = []
    for i, row in enumerate(rows):
        out.append(((label if i == 0 else " " * len(label), "label"), (row, "cores")))
    return out


# --- processes --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    label: str
    wide: int  # width in the wide layout; 0 = hidden
    compact: int  # width in the compact layout; 0 = hidden
    right: bool = False  # numbers align right


COLUMNS: tuple[Column, ...] = (
    Column("tag", " ", 1, 1),
    Column("gpu", "GPU", 3, 3, right=True),
    Column("pid", "PID", 8, 7, right=True),
    Column("user", "USER", 10, 8),
    Column("type", "TYPE", 4, 0),
    Column("mem", "GPU-MEM", 9, 8, right=True),
    Column("sm", "SM%", 4, 4, right=True),
    Column("cpu", "CPU%", 6, 5, right=True),
    Column("rss", "RSS", 9, 0, right=True),
    Column("read", "READ/s", 10, 0, right=True),
    Column("time", "TIME", 10, 8, right=True),
    Column("command", "COMMAND", 0, 0),  # takes the rest of the width
)
SORT_KEYS = ("gpu", "pid", "user", "mem", "sm", "cpu", "rss", "read", "time", "command")
COLUMN_BY_KEY = {c.key: c for c in COLUMNS}
MIN_COMMAND_WIDTH = 12


def visible_columns(compact: bool) -> tuple[Column, ...]:
    return tuple(c for c in COLUMNS if c.key == "command" or (c.compact if compact else c.wide))


def column_widths(total_width: int, compact: bool) -> dict[str, int]:
    """Fixed widths: every column has its own; COMMAND takes what is left.

    Each cell carries its own one-cell gap (the table runs with ``cell_padding`` 0).
    """
    cols = visible_columns(compact)
    widths = {c.key: (c.compact if compact else c.wide) for c in cols if c.key != "command"}
    gaps = len(cols) - 1  # one gap before every column but the first
    used = sum(widths.values()) + gaps
    widths["command"] = max(MIN_COMMAND_WIDTH, total_width - used)
    return widths


@dataclass(frozen=True, slots=True)
class ProcRow:
    key: str  # "gpu:pid" ("?:pid" for a holder on an unknown GPU)
    gpu: int | None
    pid: int
    kind: str  # "gpu" | "holder"
    visible: bool | None  # None: the host side is unknown
    user: str | None
    command: str  # as shown (safe)
    type: str
    gpu_memory: int | None
    sm_percent: float | None
    cpu_percent: float | None
    rss: int | None
    read_bytes_per_s: float | None
    elapsed: float | None
    create_time: float | None

    def cell_text(self, key: str, *, compact: bool) -> str:
        if key == "gpu":
            return "?" if self.gpu is None else str(self.gpu)
        if key == "pid":
            return str(self.pid)
        if key == "user":
            return safe(self.user, 64)
        if key == "type":
            return self.type
        if key == "mem":
            return fmt.bytes_(self.gpu_memory) if compact else fmt.mib(self.gpu_memory)
        if key == "sm":
            return fmt.percent(self.sm_percent)
        if key == "cpu":
            return fmt.number(self.cpu_percent, digits=1)
        if key == "rss":
            return fmt.bytes_(self.rss)
        if key == "read":
            return fmt.rate(self.read_bytes_per_s)
        if key == "time":
            return fmt.duration(self.elapsed)
        if key == "command":
            return self.command
        raise KeyError(key)

    def sort_value(self, key: str) -> float | str | None:
        values: dict[str, float | str | None] = {
            "gpu": -1 if self.gpu is None else self.gpu,
            "pid": self.pid,
            "user": self.user.lower() if self.user else None,
            "mem": self.gpu_memory,
            "sm": self.sm_percent,
            "cpu": self.cpu_percent,
            "rss": self.rss,
            "read": self.read_bytes_per_s,
            "time": self.elapsed,
            "command": self.command.lower() if self.visible is not False else None,
        }
        return values[key]


INVISIBLE = "pid not visible (other PID namespace)"


def _command_text(info: ProcessInfo | None) -> str:
    """The COMMAND cell of a visible process: says when it has exited or is a zombie."""
    if info is None:
        return fmt.NA
    text = safe(info.command or info.name, 2048) if (info.command or info.name) else ""
    if info.status == "dead":
        return f"exited {text}".rstrip()
    if info.status == "zombie":
        return f"[zombie] {text}".rstrip()
    return text or fmt.NA


def row_key(gpu: int | None, pid: int) -> str:
    return f"{'?' if gpu is None else gpu}:{pid}"


def _elapsed(now: float, info: ProcessInfo | None) -> float | None:
    if info is None or info.create_time is None:
        return None
    return max(0.0, now - info.create_time)


def process_rows(snapshot: Snapshot, gpus: frozenset[int] | None = None) -> list[ProcRow]:
    """Every GPU process and every unlisted /dev/nvidia* holder, unsorted, unfiltered by text."""
    rows: list[ProcRow] = []
    seen: set[str] = set()
    now = snapshot.time
    index = process_index(snapshot)  # one pass, not a scan of every process per row
    for g in snapshot.gpus:
        if gpus is not None and g.index not in gpus:
            continue
        for p in g.processes:
            info = p.host if p.host is not None else index.get(p.pid)
            key = row_key(g.index, p.pid)
            if key in seen:
                continue
            seen.add(key)
            visible = None if info is None else info.visible
            if visible is False:
                info = None
            command = INVISIBLE if visible is False else _command_text(info)
            rows.append(
                ProcRow(
                    key=key,
                    gpu=g.index,
                    pid=p.pid,
                    kind="gpu",
                    visible=visible,
                    user=info.user if info else None,
                    command=command,
                    type=safe(p.type, 8),
                    gpu_memory=p.gpu_memory,
                    sm_percent=p.sm_percent,
                    cpu_percent=info.cpu_percent if info else None,
                    rss=info.rss if info else None,
                    read_bytes_per_s=info.read_bytes_per_s if info else None,
                    elapsed=_elapsed(now, info),
                    create_time=info.create_time if info else None,
                )
            )
    for h in snapshot.unlisted_holders:
        if gpus is not None and h.gpu not in gpus:
            continue
        key = row_key(h.gpu, h.pid)
        if key in seen:
            continue
        seen.add(key)
        info = index.get(h.pid)
        if info is not None and not info.visible:
            info = None
        dev = f"/dev/nvidia{h.minor_number}" if h.minor_number is not None else "/dev/nvidia?"
        what = safe(h.command or h.name or (info.command if info else None), 2048)
        rows.append(
            ProcRow(
                key=key,
                gpu=h.gpu,
                pid=h.pid,
                kind="holder",
                visible=True,
                user=h.user if h.user is not None else (info.user if info else None),
                command=f"[holds {dev}, not listed by NVML] {what}",
                type="-",
                gpu_memory=None,
                sm_percent=None,
                cpu_percent=info.cpu_percent if info else None,
                rss=info.rss if info else None,
                read_bytes_per_s=info.read_bytes_per_s if info else None,
                elapsed=_elapsed(now, info),
                create_time=info.create_time if info else None,
            )
        )
    return rows


def matches(row: ProcRow, text: str) -> bool:
    """Case-insensitive substring match on command, user and pid."""
    needle = text.strip().lower()
    if not needle:
        return True
    return (
        needle in row.command.lower()
        or (row.user is not None and needle in row.user.lower())
        or needle in str(row.pid)
    )


def sort_rows(rows: Sequence[ProcRow], key: str, reverse: bool = False) -> list[ProcRow]:
    """Sort by ``key``; unknown values (None) always last; ties by (gpu, pid)."""
    known = [r for r in rows if r.sort_value(key) is not None]
    unknown = [r for r in rows if r.sort_value(key) is None]
    known.sort(key=lambda r: (r.gpu if r.gpu is not None else -1, r.pid))
    known.sort(key=lambda r: r.sort_value(key), reverse=reverse)  # type: ignore[arg-type,return-value]
    unknown.sort(key=lambda r: (r.gpu if r.gpu is not None else -1, r.pid))
    return known + unknown


def table_rows(
    rows: Iterable[ProcRow],
    *,
    gpus: Collection[int] | None = None,
    text: str = "",
    sort_key: str = "gpu",
    reverse: bool = False,
) -> list[ProcRow]:
    """What the process table shows: the rows on ``gpus`` (None: every GPU) that match
    ``text``, sorted by ``sort_key``."""
    shown = [r for r in rows if (gpus is None or r.gpu in gpus) and matches(r, text)]
    return sort_rows(shown, sort_key, reverse)


def host_only_message(snapshot: Snapshot) -> Parts:
    why = safe(snapshot.driver.error, 300) if snapshot.driver.error else "unknown reason"
    return (
        ("No GPU data: ", "warn"),
        (why.rstrip("."), ""),
        (". Host metrics and /dev/nvidia* holders are still shown.", "dim"),
    )


def verdict_for(
    verdicts: Mapping[int, str | VerdictMark] | Mapping[int, str] | None, index: int
) -> str | VerdictMark | None:
    return None if verdicts is None else verdicts.get(index)


# --- sampling errors the table must explain -----------------------------------------------

#: SampleError metrics about the process list or per-process values: without a word on
#: screen, an empty table would read as "no processes".
PROCESS_METRICS = frozenset(
    {
        "compute_processes",
        "graphics_processes",
        "processes",
        "process_utilization",
        "unlisted_holders",
    }
)
#: Notes shown at most; the rest are counted.
MAX_NOTES = 3


def _process_note(metric: str | None, message: str) -> str:
    denied = "permission" in message.lower()
    if denied and metric in ("compute_processes", "graphics_processes"):
        return "process info not permitted (NVML NoPermission): processes missing from the table"
    if denied and metric == "process_utilization":
        return "per-process GPU utilization not permitted (SM% n/a)"
    return message


def process_notes(snapshot: Snapshot | None) -> tuple[Parts, ...]:
    """What the process table cannot show and why, one line per problem; () when none.

    Identical problems on several GPUs share a line ("GPU 0,1: ...").
    """
    if snapshot is None:
        return ()
    gpus_by_note: dict[str, list[int]] = {}
    # A process list NVML does not support raises no error: say it, or the empty table
    # would read as "no processes" (a refused one is said below, from its error).
    said = {e.gpu for e in snapshot.errors if e.metric in PROCESS_METRICS}
    for g in snapshot.gpus:
        if g.processes_unavailable and not g.lost and g.index not in said:
            why = safe(g.processes_unavailable, 200)
            gpus_by_note.setdefault(f"process list unavailable ({why})", []).append(g.index)
    for e in snapshot.errors:
        if e.metric not in PROCESS_METRICS:
            continue
        message = safe(e.message, 300)
        if e.gpu is not None:
            message = message.removeprefix(f"GPU {e.gpu}: ")
        note = _process_note(e.metric, message)
        found = gpus_by_note.setdefault(note, [])
        if e.gpu is not None and e.gpu not in found:
            found.append(e.gpu)
    lines: list[Parts] = []
    for note, gpus in list(gpus_by_note.items())[:MAX_NOTES]:
        where = f"GPU {','.join(str(g) for g in sorted(gpus))}: " if gpus else ""
        lines.append((("! ", "warn"), (where, "label"), (note, "warn")))
    hidden = len(gpus_by_note) - MAX_NOTES
    if hidden > 0:
        lines.append(((f"  +{hidden} more process problems", "dim"),))
    return tuple(lines)
