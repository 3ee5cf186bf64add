"""One GPU in detail: longer history charts (plotext) and a line of current values.

An unavailable value is a gap, not a zero; in a replay the verdict is judged on the
history up to the cursor only.
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid
from textual.screen import Screen
from textual.widgets import Static
from textual_plotext import PlotextPlot

from gputop import fmt
from gputop.analysis.kinds import LABELS
from gputop.model import GPU_METRIC, LABELLED_METRICS, GpuSample, Snapshot, Verdict
from gputop.ui.keybar import KeyBar
from gputop.ui.roles import rich_styles
from gputop.ui.screens.jobs import to_text
from gputop.views.gpu_view import (
    activity_text,
    has_inside,
    has_nvlink,
    metric_text,
    nvlink_parts,
    verdict_parts,
)
from gputop.views.parts import COMPACT_HEIGHT, COMPACT_WIDTH, Parts, plain

Point = tuple[float, float | None]  # (seconds relative to the newest sample, value)

#: The charts in grid order. "activity" (GPM) and "nvlink" show only where the GPU has
#: them; without either the grid is today's 2 x 2 of the other four.
CHARTS = ("util", "activity", "mem", "pcie", "nvlink", "power")
OPTIONAL_CHARTS = ("activity", "nvlink")
#: GPM's series of the activity chart: (label, metric field, 256-colour index).
ACTIVITY_SERIES = (
    ("SM active", "activity.sm", 10),
    ("tensor", "activity.tensor", 13),
    ("DRAM", "activity.dram", 12),
)

#: Chart titles' first words, for the compact screen's "chart 2/4: memory" line.
CHART_NAMES = {
    "util": "utilization",
    "activity": "SM activity",
    "mem": "memory",
    "pcie": "PCIe",
    "nvlink": "NVLink",
    "power": "power",
}
#: Steps of a chart's ticks, times a power of ten: ticks fall on round figures.
TICK_STEPS = (1.0, 2.0, 2.5, 5.0)
#: At most this many ticks on a value axis.
MAX_TICKS = 5

_RATE_UNITS = (("B/s", 1.0), ("KiB/s", 1024.0), ("MiB/s", 1024.0**2), ("GiB/s", 1024.0**3))


@dataclass(frozen=True)
class Series:
    """One line of a detail chart: its label, colour and points."""

    label: str
    color: int  # 256-colour palette index (plotext ignores some colour names)
    points: tuple[Point, ...]


def gpu_timeline(
    history: Sequence[Snapshot], index: int, after: Sequence[Snapshot] = ()
) -> list[tuple[float, GpuSample | None]]:
    """(seconds relative to the newest snapshot of ``history``, the GPU then, None if
    absent or lost); ``after``'s snapshots follow with positive seconds."""
    if not history:
        return []
    newest = fmt.finite(history[-1].time)
    out: list[tuple[float, GpuSample | None]] = []
    for snap in (*history, *after):
        gpu = snap.gpu(index)
        when = fmt.finite(snap.time)  # NaN: off every chart
        x = math.nan if when is None or newest is None else when - newest
        out.append((x, None if gpu is None or gpu.lost else gpu))
    return out


def _series(
    timeline: Sequence[tuple[float, GpuSample | None]], value: Callable[[GpuSample], float | None]
) -> tuple[Point, ...]:
    return tuple((x, None if g is None else value(g)) for x, g in timeline)


def downsample(
    points: Sequence[Point], span: float, columns: int, *, right: float = 0.0
) -> Sequence[Point]:
    """At most ``columns`` points: each time bucket's mean of known values, or a gap."""
    if columns < 1 or len(points) <= columns or span <= 0:
        return points
    sums = [0.0] * columns
    counts = [0] * columns
    seen = [False] * columns
    left = right - span
    for x, y in points:
        # Right-closed buckets, so the newest sample (x = right) ends the last one.
        b = min(columns - 1, max(0, math.ceil((x - left) / span * columns) - 1))
        seen[b] = True
        if y is not None:
            sums[b] += y
            counts[b] += 1
    width = span / columns
    return [
        (left + (b + 0.5) * width, sums[b] / counts[b] if counts[b] else None)
        for b in range(columns)
        if seen[b]
    ]


def _sane(value: float | None, default: float) -> float:
    """A chart's extent: a normal float above 0 and within what plotext can draw, else
    ``default`` (a subnormal one, divided into ticks, is lost to 0)."""
    return value if value is not None and sys.float_info.min <= value <= 1e300 else default


def _on_chart(y: float | None, scale: float, ymax: float) -> float | None:
    y = fmt.finite(y)
    return None if y is None else min(max(y / scale, 0.0), ymax)


def runs(points: Sequence[Point]) -> list[tuple[list[float], list[float]]]:
    """Split a series at unknown values so each run is drawn as its own line (gaps stay gaps)."""
    out: list[tuple[list[float], list[float]]] = []
    for known, group in groupby(points, key=lambda p: p[1] is not None):
        if known:
            run = list(group)
            out.append(([x for x, _ in run], [y for _, y in run if y is not None]))
    return out


def rate_unit(peak: float) -> tuple[str, float]:
    """The unit that shows ``peak`` bytes/s as a number below 1024."""
    return next((u for u in _RATE_UNITS if peak < 1024 * u[1]), _RATE_UNITS[-1])


def nice_ticks(ymax: float, most: int = MAX_TICKS) -> list[float]:
    """Ticks from 0 on round steps (1, 2, 2.5 or 5 times a power of ten), at most ``most``
    of them, none above ``ymax``: a chart never labels a line with a figure it is not."""
    ymax = _sane(ymax, 1.0)
    raw = ymax / max(1, most - 1)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next((m * power for m in TICK_STEPS if m * power >= raw), 10.0 * power)
    count = int(ymax / step + 1e-9)
    return [step * i for i in range(count + 1)]


def tick_label(value: float) -> str:
    """'0', '2.5', '0.25', '40': as many digits as the tick needs (a multiple of a
    round step, less the float's noise)."""
    return f"{value:.6g}"


def _peak(*series: Sequence[Point]) -> float | None:
    known = [y for points in series for _, y in points if y is not None]
    return max(known) if known else None


def verdict_history(log: Sequence[tuple[float, str]], top: int = 4) -> str | None:
    """'verdict history, last 5:00 (300 samples): GPU-bound 80 %, input-bound: disk 20 %'."""
    if len(log) < 2:
        return None
    span = log[-1][0] - log[0][0]
    counts = Counter(kind for _, kind in log)
    n = len(log)
    parts = [f"{LABELS.get(k, k)} {100 * c / n:.0f} %" for k, c in counts.most_common(top)]
    if len(counts) > top:
        parts.append(f"{len(counts) - top} more")
    return f"verdict history, last {fmt.duration(span)} ({n} samples): " + ", ".join(parts)


def verdict_lines(
    verdict: Verdict | None,
    log: Sequence[tuple[float, str]],
    gpu_index: int,
    judging: str | None = None,
) -> tuple[Parts, ...]:
    """The GPU's verdict, evidence, advice and history as lines (or ``judging``: why none)."""
    if judging is not None or verdict is None:
        why = judging if judging is not None else f"{fmt.NA} for GPU {gpu_index}"
        return ((("verdict: ", "label"), (why, "dim")),)
    lines: list[Parts] = list(verdict_parts(verdict))
    history = verdict_history(log)
    if history is not None:
        lines.append(((history, "dim"),))
    return tuple(lines)


class HistoryPlot(PlotextPlot):
    """A plotext chart whose data only changes when ``draw`` is called."""

    DEFAULT_CSS = "HistoryPlot { height: 1fr; width: 1fr; }"

    _last_draw: tuple[str, tuple[Series, ...], dict[str, Any]] | None = None
    _drawn_size = (0, 0)
    #: What the axes say now (tests read them): the x axis' label, the value ticks.
    xlabel = ""
    ticks: tuple[str, ...] = ()

    def _columns(self) -> int:
        # The "hd" marker draws 2 points per cell: more samples than that only cost time.
        return 2 * max(10, self.size.width - 8) if self.size.width else 400

    def on_resize(self) -> None:
        # The height sets how many value ticks there are, the width how many samples.
        if self._last_draw is not None and (self._columns(), self.size.height) != self._drawn_size:
            title, series, options = self._last_draw
            self.draw(title, series, **options)

    def draw(
        self,
        title: str,
        series: Sequence[Series],
        *,
        span: float,
        ymax: float,
        ylabel: str,
        scale: float = 1.0,
        yticks: Sequence[float] | None = None,
        after: float | None = None,
    ) -> None:
        """``span`` seconds up to the newest sample (x = 0); ``after`` (a replay): also
        that many seconds after it, with x = 0 (the cursor) marked by a vertical line."""
        options = dict(span=span, ymax=ymax, ylabel=ylabel, scale=scale, yticks=yticks, after=after)
        self._last_draw = (title, tuple(series), options)
        # plotext draws every cell between two points: a value off the chart (or NaN, or
        # inf) would exhaust memory or raise, so each is clipped to the chart, or dropped.
        span, ymax, scale = _sane(span, 10.0), _sane(ymax, 100.0), _sane(scale, 1.0)
        right = _sane(after, 0.0) if after is not None else 0.0
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(title)
        columns = self._columns()
        self._drawn_size = (columns, self.size.height)
        if after is not None:
            plt.vline(0, "gray")
        for s in series:
            points = [(x, _on_chart(y, scale, ymax)) for x, y in s.points if -span <= x <= right]
            shown = downsample(points, span + right, columns, right=right)
            for n, (xs, ys) in enumerate(runs(shown)):
                label = s.label if n == 0 and len(series) > 1 else None  # once per series
                plt.plot(xs, ys, color=s.color, marker="hd", label=label)
        plt.xlim(-span, right)
        plt.ylim(0, ymax)
        # No more ticks than every other row holds: plotext puts a tick on the nearest
        # row, and on a short chart that row is far from the tick's value.
        most = max(2, min(MAX_TICKS, self.size.height // 3)) if self.size.height else MAX_TICKS
        yt = list(yticks) if yticks is not None else nice_ticks(ymax, most)
        self.ticks = tuple(tick_label(v) for v in yt)
        plt.yticks(yt, list(self.ticks))
        if after is None:
            ticks = [-span * i / 4 for i in range(4, -1, -1)]
            plt.xticks(ticks, [f"{-t:.0f}" for t in ticks])
            self.xlabel = "seconds ago"
        else:
            ticks = [-span, -span / 2, 0.0] + ([right / 2, right] if right > 0 else [])
            plt.xticks(ticks, [f"{t:+.0f}" if t else "cursor" for t in ticks])
            self.xlabel = "seconds from the cursor (the vertical line)"
        plt.xlabel(self.xlabel)
        plt.ylabel(ylabel)
        self.refresh()


class HistoryScreen(Screen[None]):
    """A screen of charts over the history the app keeps: the app hands it the history
    with each new snapshot while it is on top; it redraws once mounted."""

    history: tuple[Snapshot, ...] = ()

    def update_history(self, history: Sequence[Snapshot]) -> None:
        """Called by the app with each new snapshot while this screen is on top."""
        self.history = tuple(history)
        if self.is_mounted:  # on_mount ran: the charts exist
            self.show_history()

    def show_history(self) -> None:
        """Draw ``history``."""
        raise NotImplementedError

    def on_mount(self) -> None:
        self.show_history()

    def action_close(self) -> None:
        self.dismiss(None)

    def history_span(self) -> float:
        """Seconds the history covers (at least 10: a chart's x axis)."""
        h = self.history
        return max(10.0, h[-1].time - h[0].time) if len(h) >= 2 else 10.0


class DetailScreen(HistoryScreen):
    """History charts of one GPU. Esc or q returns to the dashboard. On a small terminal
    (the dashboard's compact size) one chart at a time, paged with the arrow keys: a
    grid there would draw each chart a row or two tall."""

    DEFAULT_CSS = """
    DetailScreen #detail-title { height: 1; text-style: bold; padding: 0 1; }
    DetailScreen #detail-now { height: auto; padding: 0 1; }
    DetailScreen #detail-verdict { height: auto; max-height: 8; padding: 0 1; }
    DetailScreen.-compact #detail-verdict { max-height: 4; }
    DetailScreen #detail-charts { grid-size: 2 2; height: 1fr; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back"),
        Binding("q", "close", "Back", show=False),
        Binding("right", "page(1)", "Next chart"),
        Binding("left", "page(-1)", "Previous chart"),
    ]

    def __init__(
        self,
        gpu_index: int,
        history: tuple[Snapshot, ...],
        *,
        verdict: Callable[[], tuple[Verdict | None, Sequence[tuple[float, str]]]] | None = None,
        after: Callable[[], Sequence[Snapshot]] | None = None,
        judging: Callable[[], str | None] | None = None,
    ) -> None:
        """The app hands over callables: the GPU's verdict now and its (time, kind) history;
        a replay's snapshots after the cursor; why there is no verdict yet (None: there is)."""
        super().__init__()
        self.gpu_index = gpu_index
        self.history: tuple[Snapshot, ...] = tuple(history)
        self._verdict = verdict
        # A replay: the charts also show what was recorded after the cursor.
        self._after_source = after
        self._judging = judging
        self.after: tuple[Snapshot, ...] = tuple(after()) if after is not None else ()
        self.page = 0  # the chart shown on a small terminal

    @property
    def compact(self) -> bool:
        """One chart at a time: the terminal is smaller than the dashboard's wide layout."""
        width, height = self.app.size
        return width < COMPACT_WIDTH or height < COMPACT_HEIGHT

    def charts(self) -> list[str]:
        """The charts this GPU has, in grid order."""
        gpus = [g for _, g in gpu_timeline(self.history, self.gpu_index, self.after) if g]
        shown = {
            "activity": any(has_inside(g) for g in gpus),
            "nvlink": any(has_nvlink(g) for g in gpus),
        }
        return [c for c in CHARTS if shown.get(c, True)]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.compact if action == "page" else True

    def action_page(self, step: int) -> None:
        self.page = (self.page + step) % len(self.charts())
        self.show_history()

    def on_resize(self) -> None:
        if self.is_mounted:
            self.show_history()
            self.refresh_bindings()

    def compose(self) -> ComposeResult:
        yield Static(id="detail-title")
        yield Static(id="detail-now")
        yield Static(id="detail-verdict")
        with Grid(id="detail-charts"):
            for name in CHARTS:
                yield HistoryPlot(id=f"plot-{name}")
        yield KeyBar()

    def update_history(self, history: Sequence[Snapshot]) -> None:
        if self._after_source is not None:
            self.after = tuple(self._after_source())
        super().update_history(history)

    def _after_span(self) -> float | None:
        """Seconds shown after the cursor (a replay), None live."""
        if self._after_source is None:
            return None
        if not self.after or not self.history:
            return 0.0
        return self.after[-1].time - self.history[-1].time

    def _title(self) -> Text:
        text = Text(f"GPU {self.gpu_index}")
        if self.compact:  # first: the line is cut at its end on a small terminal
            charts = self.charts()
            page = self.page % len(charts)
            text.append(f"  chart {page + 1}/{len(charts)}: {CHART_NAMES[charts[page]]}")
            text.append(" (←/→ more)", style="dim")
        # The newest name the GPU had (a lost GPU reports none).
        gpus = (snap.gpu(self.gpu_index) for snap in reversed(self.history))
        name = next((gpu.name for gpu in gpus if gpu is not None and gpu.name), None)
        if name:
            text.append("  " + (fmt.clean_text(name, 80) or fmt.NA))
        n = len(self.history)
        after = self._after_span()
        if after is None:
            shown = f"last {self.history_span():.0f} s"
        else:
            n += len(self.after)
            shown = f"{self.history_span():.0f} s before the cursor and {after:.0f} s after"
        text.append(f"  · {shown}, {n} sample{'s' if n != 1 else ''}")
        return text if self.compact else text.append("  · Esc back", style="dim")

    def _now(self) -> Text:
        if not self.history:
            return Text("no samples yet", style="italic")
        gpu = self.history[-1].gpu(self.gpu_index)
        if gpu is None:
            return Text(
                f"GPU {self.gpu_index} is not in the latest snapshot; history below is older",
                style="bold red",
            )
        if gpu.lost:
            reason = fmt.clean_text(gpu.lost_reason, 200) or "no reason given"
            return Text(
                f"GPU {self.gpu_index} is LOST ({reason}); its values are unknown", style="bold red"
            )
        mem = gpu.memory
        mem_pct = fmt.ratio_percent(mem.used, mem.total)
        parts = [
            f"util {metric_text(gpu, 'utilization.gpu')}",
            f"mem {fmt.bytes_(mem.used)} / {fmt.bytes_(mem.total)} ({fmt.percent(mem_pct)})",
            f"PCIe tx {fmt.rate(gpu.pcie.tx_bytes_per_s)} rx {fmt.rate(gpu.pcie.rx_bytes_per_s)}",
            f"power {metric_text(gpu, 'power_w')} / {metric_text(gpu, 'power_limit_w')}",
            f"temp {metric_text(gpu, 'temperature_c')}",
            f"SM clock {fmt.number(gpu.clocks.sm_mhz, ' MHz')}",  # not SM active (GPM)
            *(f"{m.label} {fmt.shown(m.get(gpu), m.text)}" for m in LABELLED_METRICS),
        ]
        if has_inside(gpu):
            parts.append(activity_text(gpu))
        if has_nvlink(gpu):
            parts.append(plain(nvlink_parts(gpu)))
        return Text("  ".join(parts))

    def show_history(self) -> None:
        self.query_one("#detail-title", Static).update(self._title())
        self.query_one("#detail-now", Static).update(self._now())
        box = self.query_one("#detail-verdict", Static)
        box.display = self._verdict is not None
        if self._verdict is not None:
            verdict, log = self._verdict()
            judging = self._judging() if self._judging is not None else None
            styles = rich_styles(self.app.theme_variables)
            box.update(to_text(verdict_lines(verdict, log, self.gpu_index, judging), styles))

        def chart(name: str, title: str, series: list[Series], **options: Any) -> None:
            self.query_one(f"#plot-{name}", HistoryPlot).draw(
                title, series, span=self.history_span(), after=self._after_span(), **options
            )

        timeline = gpu_timeline(self.history, self.gpu_index, self.after)
        charts = self.charts()
        compact = self.compact
        self.set_class(compact, "-compact")
        on_page = charts[self.page % len(charts)]
        for name in CHARTS:
            plot = self.query_one(f"#plot-{name}", HistoryPlot)
            plot.display = name == on_page if compact else name in charts
        shown = {name: name in charts for name in OPTIONAL_CHARTS}
        grid = self.query_one("#detail-charts", Grid)
        grid.styles.grid_size_columns = 1 if compact else 3 if len(charts) > 4 else 2
        grid.styles.grid_size_rows = 1 if compact else 2
        util = _series(timeline, lambda g: g.utilization.gpu)
        mem = _series(timeline, lambda g: fmt.ratio_percent(g.memory.used, g.memory.total))
        percent: dict[str, Any] = dict(ymax=100, ylabel="%")
        chart("util", "GPU utilization %", [Series("gpu", 10, util)], **percent)
        chart("mem", "memory used %", [Series("mem", 14, mem)], **percent)

        if shown["activity"]:
            activity = [
                Series(label, color, _series(timeline, GPU_METRIC[field].get))
                for label, field, color in ACTIVITY_SERIES
            ]
            chart("activity", "SM active, tensor, DRAM %", activity, **percent)
        if shown["nvlink"]:
            nrx = _series(timeline, lambda g: g.nvlink.rx_bytes_per_s)
            ntx = _series(timeline, lambda g: g.nvlink.tx_bytes_per_s)
            cap = _peak(_series(timeline, lambda g: g.nvlink.max_bytes_per_s))
            top = max(_peak(nrx, ntx) or 0.0, cap or 0.0) or 1024.0**3
            unit, scale = rate_unit(top)
            title = "NVLink" + (f", of {fmt.rate(cap)}" if cap else "")  # short: 3 charts wide
            nvl = [Series("rx", 12, nrx), Series("tx", 13, ntx)]
            chart("nvlink", title, nvl, ymax=top / scale, ylabel=unit, scale=scale)

        tx = _series(timeline, lambda g: g.pcie.tx_bytes_per_s)
        rx = _series(timeline, lambda g: g.pcie.rx_bytes_per_s)
        link = _peak(_series(timeline, lambda g: g.pcie.link_max_bytes_per_s))
        peak = max(_peak(tx, rx) or 0.0, link or 0.0) or 1024.0**3
        unit, scale = rate_unit(peak)
        pcie = [Series("TX to host", 13, tx), Series("RX to GPU", 12, rx)]
        chart("pcie", "PCIe throughput", pcie, ymax=peak / scale, ylabel=unit, scale=scale)

        power = _series(timeline, lambda g: g.power_w)
        limit = _peak(_series(timeline, lambda g: g.power_limit_w))
        top = max(limit or 0.0, _peak(power) or 0.0) or 100.0
        title = "power (W)" + (f", limit {limit:.0f} W" if limit else "")
        chart("power", title, [Series("power", 11, power)], ymax=top, ylabel="W")
