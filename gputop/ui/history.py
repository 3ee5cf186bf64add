"""A fixed-scale 0-100 % history, one row per series, drawn line by line.

Cheap on purpose (see TEXTUAL_NOTES): one ``Strip`` per row, cached until the data or the
size changes; the scale never follows the data, so a flat 3 % stays near the floor.
Newest sample at the right edge; one cell per sampler tick.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from gputop.ui.views import spark

Series = tuple[str, tuple[float | None, ...]]  # (label, values oldest first)


class History(Widget):
    """Rows of ▁▂▃▄▅▆▇█ cells on a fixed 0-100 % scale."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"history--label", "history--util", "history--mem"}

    DEFAULT_CSS = """
    History {
        height: 1;
        width: 1fr;
    }
    History > .history--label { color: $text-muted; }
    History > .history--util { color: $success; }
    History > .history--mem { color: $secondary; }
    """

    def __init__(self, *, label_width: int = 5, id: str | None = None) -> None:
        super().__init__(id=id)
        self.label_width = label_width
        self._series: tuple[Series, ...] = ()
        self._cache: dict[int, Strip] = {}
        self._cache_width = -1
        # (background, label, util, mem) styles: looking them up walks the DOM (costly
        # on every line of every tick), so they are kept until the styles change.
        self._rich_styles: tuple[Style, Style, Style, Style] | None = None

    @property
    def series(self) -> tuple[Series, ...]:
        return self._series

    def set_series(self, series: Sequence[Series]) -> None:
        """New data; repaints only the rows whose visible cells changed (a flat series
        shifted by one sample looks the same: memory held steady redraws nothing)."""
        new = tuple(series)
        if new == self._series:
            return
        width = self.size.width
        if len(new) != len(self._series) or width <= 0:
            self._series = new
            self._cache.clear()
            self.styles.height = max(1, len(new))
            self.refresh()
            return
        before = [self._row_text(y, width) for y in range(len(new))]
        self._series = new
        for y, shown in enumerate(before):
            if self._row_text(y, width) != shown:
                self._cache.pop(y, None)
                self.refresh(Region(0, y, width, 1))

    def _row_text(self, row: int, width: int) -> tuple[str, str]:
        return self._series[row][0], self.cells(row, width)

    def cells(self, row: int, width: int) -> str:
        """The cells of one row, without the label (what tests read)."""
        if row >= len(self._series):
            return ""
        return spark(self._series[row][1], max(0, width - self.label_width))

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if width != self._cache_width:
            self._cache.clear()
            self._cache_width = width
        strip = self._cache.get(y)
        if strip is not None:
            return strip
        styles = self._rich_styles
        if styles is None:
            styles = self._rich_styles = (
                self.rich_style,
                self.get_component_rich_style("history--label"),
                self.get_component_rich_style("history--util"),
                self.get_component_rich_style("history--mem"),
            )
        base, label_style, util_style, mem_style = styles
        if y >= len(self._series):
            strip = Strip.blank(width, base)
        else:
            label, _ = self._series[y]
            cells_style = mem_style if label.strip().startswith("mem") else util_style
            text = label[: self.label_width].ljust(self.label_width)
            segments = [Segment(text, label_style), Segment(self.cells(y, width), cells_style)]
            strip = Strip(segments).adjust_cell_length(width, base)
        self._cache[y] = strip
        return strip

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()
        self._rich_styles = None
