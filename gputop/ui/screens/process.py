"""One process in detail (``e`` on a process row): its whole command line, who runs it
and who owns it, and its GPU memory and SM % over the history the dashboard keeps.
Enter opens its GPU's detail screen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, VerticalScroll
from textual.widgets import Static

from gputop.model import Snapshot
from gputop.ui.keybar import KeyBar
from gputop.ui.roles import rich_styles
from gputop.ui.screens.detail import HistoryPlot, HistoryScreen, Series, rate_unit
from gputop.ui.screens.jobs import to_text
from gputop.views.process_view import (
    ProcRow,
    find_row,
    process_facts,
    process_rows,
    process_timeline,
)

PERCENT_TICKS = (0, 25, 50, 75, 100)


class ProcessScreen(HistoryScreen):
    """Esc or q returns; Enter opens the process's GPU in detail."""

    DEFAULT_CSS = """
    ProcessScreen #process-title { height: 1; text-style: bold; padding: 0 1; }
    ProcessScreen #process-facts-box { height: auto; max-height: 50%; }
    ProcessScreen #process-facts { height: auto; padding: 0 1; }
    ProcessScreen #process-charts { grid-size: 2 1; height: 1fr; min-height: 8; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back", key_display="Esc"),
        Binding("q", "close", "Back", show=False),
        Binding("enter", "gpu", "GPU detail", key_display="Enter"),
    ]

    def __init__(
        self,
        row: ProcRow,
        history: Sequence[Snapshot],
        *,
        open_gpu: Callable[[int], None] | None = None,
    ) -> None:
        """``row``: the process as the table showed it; ``open_gpu``: opens a GPU's
        detail screen (the app's)."""
        super().__init__()
        self.row = row
        self.key = row.key
        self.create_time = row.create_time
        self.history: tuple[Snapshot, ...] = tuple(history)
        self.ended = False
        self._open_gpu = open_gpu
        self._rows_of: Snapshot | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="process-title")
        with VerticalScroll(id="process-facts-box"):
            yield Static(id="process-facts")
        with Grid(id="process-charts"):
            yield HistoryPlot(id="plot-proc-mem")
            yield HistoryPlot(id="plot-proc-sm")
        yield KeyBar()

    def action_gpu(self) -> None:
        if self.row.gpu is None:
            self.notify("this process's GPU is not known", severity="warning", timeout=3)
            return
        if self._open_gpu is not None:
            self._open_gpu(self.row.gpu)

    def _refresh_row(self) -> None:
        """The newest row of this process; once it is gone, the last one, marked ended."""
        if not self.history or self._rows_of is self.history[-1]:
            return
        self._rows_of = self.history[-1]
        row = find_row(process_rows(self.history[-1]), self.key, self.create_time)
        self.ended = row is None
        if row is not None:
            self.row = row

    def show_history(self) -> None:
        self._refresh_row()
        row = self.row
        n = len(self.history)
        title = Text(f"Process {row.pid}")
        title.append(f"  · last {self.history_span():.0f} s, {n} sample{'s' if n != 1 else ''}")
        title.append("  · Enter its GPU  · Esc back", style="dim")
        self.query_one("#process-title", Static).update(title)
        styles = rich_styles(self.app.theme_variables)
        self.query_one("#process-facts", Static).update(
            to_text(process_facts(row, ended=self.ended), styles)
        )
        self._charts()

    def _charts(self) -> None:
        timeline = process_timeline(self.history, self.row.gpu, self.row.pid, self.create_time)
        span = self.history_span()
        mem = tuple((x, m) for x, m, _ in timeline)
        sm = tuple((x, s) for x, _, s in timeline)
        peak = max((y for _, y in mem if y is not None), default=0.0)
        # Scaled to its own peak, as the job detail's step time: a few GiB of an 80 GiB
        # GPU would be a flat line at the bottom of a chart scaled to the GPU.
        top = max(peak * 1.1, 1.0)
        unit, scale = rate_unit(top)
        unit = unit.removesuffix("/s")
        self.query_one("#plot-proc-mem", HistoryPlot).draw(
            f"GPU memory ({unit})",
            [Series("GPU memory", 12, mem)],
            span=span,
            ymax=max(top / scale, 1.0),
            ylabel=unit,
            scale=scale,
        )
        self.query_one("#plot-proc-sm", HistoryPlot).draw(
            "SM % (of this GPU, this process)",
            [Series("SM", 10, sm)],
            span=span,
            ymax=100,
            ylabel="%",
            yticks=PERCENT_TICKS,
        )
