"""One job in detail (Enter in the jobs view): its facts and verdict, what its probe
measured (the data-wait share and the step time charted over the sampler's history, the
CUDA caching allocator per process), or how to start a probe when none runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid
from textual.widgets import Static

from gputop import fmt
from gputop.analysis.jobs import Job
from gputop.diagnosis import Diagnosis
from gputop.model import Snapshot
from gputop.ui.keybar import KeyBar
from gputop.ui.roles import rich_styles
from gputop.ui.screens.detail import HistoryPlot, HistoryScreen, Series
from gputop.ui.screens.jobs import MIN_COMMAND, job_detail_parts, to_text
from gputop.views.parts import Parts
from gputop.views.probe_view import (
    MS_BELOW,
    NO_PROBE,
    job_infos,
    job_probe_history,
    memory_parts,
    wait_percent,
)

#: The charts, in grid order.
CHARTS = ("wait", "step")
#: Rows of a chart that are not its plot: title, frame, value ticks, axis label.
CHART_FRAME_ROWS = 5


class JobDetailScreen(HistoryScreen):
    """Esc or q returns to the jobs view."""

    DEFAULT_CSS = """
    JobDetailScreen #job-detail-title { height: 1; text-style: bold; padding: 0 1; }
    JobDetailScreen #job-detail-facts { height: auto; max-height: 50%; padding: 0 1; }
    JobDetailScreen #job-detail-none { height: auto; padding: 1 1; }
    JobDetailScreen #job-detail-charts { grid-size: 2 1; height: 1fr; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back", key_display="Esc"),
        Binding("q", "close", "Back", show=False),
    ]

    def __init__(
        self,
        job_id: str,
        diagnose: Callable[[], Diagnosis | None],
        history: Sequence[Snapshot],
    ) -> None:
        super().__init__()
        self.job_id = job_id
        self._diagnose = diagnose
        self.history: tuple[Snapshot, ...] = tuple(history)
        self.job: Job | None = None  # the newest the diagnosis had (kept once it ends)
        self.ended = False

    def compose(self) -> ComposeResult:
        yield Static(id="job-detail-title")
        yield Static(id="job-detail-facts")
        yield Static(id="job-detail-none")
        with Grid(id="job-detail-charts"):
            for name in CHARTS:
                yield HistoryPlot(id=f"plot-{name}")
        yield KeyBar()

    def on_resize(self) -> None:
        if self.is_mounted:
            self.show_history()  # the command line is cut to the width

    def show_history(self) -> None:
        diagnosis = self._diagnose()
        job = None if diagnosis is None else diagnosis.job(self.job_id)
        self.ended = job is None and self.job is not None
        if job is not None:
            self.job = job
        job = self.job
        styles = rich_styles(self.app.theme_variables)
        n = len(self.history)
        title = Text(f"Job {self.job_id.split(':', 1)[0]}")
        if self.ended:
            title.append("  · ended", style="bold")
        title.append(f"  · last {self.history_span():.0f} s, {n} sample{'s' if n != 1 else ''}")
        self.query_one("#job-detail-title", Static).update(title.append("  · Esc back", "dim"))
        facts = self.query_one("#job-detail-facts", Static)
        none = self.query_one("#job-detail-none", Static)
        grid = self.query_one("#job-detail-charts", Grid)
        if job is None:
            facts.update(Text("the job is not in the latest diagnosis", style="italic"))
            none.display = grid.display = False
            return
        verdict = None if diagnosis is None else diagnosis.job_verdicts.get(job.id)
        width = max(MIN_COMMAND, self.size.width - 2)
        lines: list[Parts] = list(job_detail_parts(job, verdict, width))
        if self.history:
            lines += memory_parts(job_infos(self.history[-1], job.pids))
        facts.update(to_text(lines, styles))
        timeline = job_probe_history(self.history, job)
        measured = any(p is not None for _, p in timeline)
        none.display = not measured
        grid.display = measured
        if not measured:
            none.update(to_text(((("", ""), (NO_PROBE, "warn")),), styles))
            return
        self._charts(timeline)

    def _charts(self, timeline: Sequence[tuple[float, Any]]) -> None:
        def series(value: Callable[[Any], float | None]) -> tuple[tuple[float, float | None], ...]:
            return tuple((x, None if p is None else value(p)) for x, p in timeline)

        span = self.history_span()
        # One rank: its worst is its mean, a second line would only hide the first.
        ranks = any(p is not None and p.ranks > 1 for _, p in timeline)
        wait = [Series("mean", 11, series(lambda p: wait_percent(p.data_wait_ratio)))]
        if ranks:
            worst = series(lambda p: wait_percent(p.worst_data_wait_ratio))
            wait.append(Series("worst rank", 9, worst))
        self.query_one("#plot-wait", HistoryPlot).draw(
            "waiting for data, % of each step",
            wait,
            span=span,
            ymax=100,
            ylabel="%",
            # (no fixed ticks: the chart puts as many as its height holds apart, where
            # 0-25-50-75-100 bunched on neighbouring rows of a short chart)
        )
        mean = series(lambda p: fmt.finite(p.step_seconds))
        slowest = series(lambda p: fmt.finite(p.worst_step_seconds))
        peak = max((y for _, y in (*mean, *slowest) if y is not None), default=MS_BELOW)
        # Milliseconds while every step is shorter than a second, else seconds.
        unit, scale = ("ms", 1e-3) if peak < MS_BELOW else ("s", 1.0)
        steps = [Series("mean", 14, mean)]
        if ranks:
            steps.append(Series("slowest rank", 13, slowest))
        plot = self.query_one("#plot-step", HistoryPlot)
        plot.draw(
            f"step time ({unit})", steps, span=span, ylabel=unit, scale=scale,
            ymax=peak / scale * headroom(plot.size.height, len(steps)),
        )  # fmt: skip


def headroom(height: int, legend: int) -> float:
    """How far above the step time's peak the chart's top is: room for its legend (one
    row per series, top left) and a row, so the legend never covers the line on a short
    chart; at least a tenth."""
    rows = height - CHART_FRAME_ROWS
    free = rows - legend - 1
    return 1.1 if rows <= 0 or legend < 2 else max(1.1, rows / max(1, free))
