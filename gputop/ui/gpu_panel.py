"""One block per GPU: text (bars, temperature, power, PCIe, throttling) + a fixed-scale history."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from textual.containers import VerticalScroll
from textual.widgets import Static

from gputop.model import Snapshot
from gputop.ui.lines import PartsLines
from gputop.ui.roles import to_content
from gputop.views.gpu_view import (
    COMPACT_HISTORY_GAP,
    HISTORY_LABEL_WIDTH,
    HISTORY_RULE,
    GpuView,
    VerdictMark,
    bar_width_for,
    gpu_view,
    has_inside,
    host_only_message,
    line_width,
    memory_percent,
    parts_width,
    verdict_width_for,
)
from gputop.views.parts import Parts, fit_parts, level, plain

# (label, cells oldest first): one ``level`` cell per snapshot, on the fixed 0-100 % scale.
Series = tuple[str, str]
Point = tuple[str, str]  # (utilization cell, memory cell) of one GPU in one snapshot
_NO_POINT: Point = (level(None), level(None))  # the GPU is missing or lost in that snapshot


def _snapshot_points(snap: Snapshot) -> dict[int, Point]:
    """One snapshot's history cells per GPU, computed once: a tick only joins drawn cells."""
    return {  # reversed: as Snapshot.gpu(), the first GPU with an index wins
        g.index: _NO_POINT if g.lost else (level(g.utilization.gpu), level(memory_percent(g)))
        for g in reversed(snap.gpus)
    }


class GpuBlock:
    """One GPU's text lines and history series (drawn by the panel's one ``GpuLines``)."""

    def __init__(self, view: GpuView, series: Sequence[Series]) -> None:
        self.view = view
        self.series = tuple(series)

    @property
    def text(self) -> str:
        """What the text part says, without styles (for tests and NO_COLOR reasoning)."""
        return "\n".join(plain(line) for line in self.view.lines)

    @property
    def label_width(self) -> int:
        """Cells of the history labels: "util "/"mem  " in the wide layout, none compact."""
        return HISTORY_LABEL_WIDTH if len(self.series) > 1 else 0

    @property
    def gap(self) -> Parts:
        """What sets the history off from the text: a rule where the rows are labelled."""
        return ((HISTORY_RULE, "dim"),) if self.label_width else ((COMPACT_HISTORY_GAP, ""),)


def history_parts(series: Series, cells: int, label_width: int) -> Parts:
    """One history row: its label (``label_width`` cells, may be 0) and its cells."""
    label, history = series
    role = "hist-mem" if label.strip() == "mem" else "hist-util"
    parts: Parts = ((label[:label_width].ljust(label_width), "hist-label"),) if label_width else ()
    tail = history[-cells:] if cells > 0 else ""
    return (*parts, (tail.rjust(cells), role))


class GpuLines(PartsLines):
    """Every shown GPU line by line: text, a space, history; only changed lines repaint."""

    LINES_FIT_WIDTH = True  # composed for the widget's width (again on each resize)

    def __init__(self) -> None:
        super().__init__(classes="gpu-lines")
        self.blocks: dict[int, GpuBlock] = {}
        self._text_width = 0

    def set_blocks(self, blocks: dict[int, GpuBlock], text_width: int) -> None:
        self.blocks = blocks
        self._text_width = text_width
        self.set_lines(self._compose_lines(self.size.width))

    def history_width(self, block: GpuBlock, width: int | None = None) -> int:
        """The cells of ``block``'s history rows in a widget ``width`` wide (now: its own)."""
        width = self.size.width if width is None else width
        return width - self._text_width - parts_width(block.gap) - block.label_width

    def _compose_lines(self, width: int) -> list[Parts]:
        lines: list[Parts] = []
        for block in self.blocks.values():
            label_width = block.label_width
            gap = block.gap
            cells = self.history_width(block, width)
            for row, text in enumerate(block.view.lines):
                line = fit_parts(text, self._text_width)
                # No room for history (a GPM line at 100 columns): none, not a cut label.
                if width > 0 and row < len(block.series) and cells > 0:
                    line = (*line, *gap, *history_parts(block.series[row], cells, label_width))
                lines.append(line)
        return lines

    def on_resize(self) -> None:
        self.set_lines(self._compose_lines(self.size.width))


class GpuPanel(VerticalScroll):
    """All GPU blocks, or a message when there is nothing to show (host-only mode)."""

    DEFAULT_CSS = """
    GpuPanel {
        height: auto;
        max-height: 60%;
        width: 1fr;
        scrollbar-size-vertical: 1;
    }
    GpuPanel > .gpu-message { width: 1fr; height: auto; }
    """

    can_focus = False

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._message: Parts | None = None
        self._lines: GpuLines | None = None
        self.blocks: dict[int, GpuBlock] = {}
        self._point_cache: dict[int, tuple[Snapshot, dict[int, Point]]] = {}

    def show(
        self,
        snapshot: Snapshot,
        history: Sequence[Snapshot],
        *,
        shown: frozenset[int] | None,
        compact: bool,
        width: int,
        verdicts: Mapping[int, VerdictMark] | None = None,
    ) -> None:
        if not snapshot.driver.available:
            self._show_message(host_only_message(snapshot))
            return
        gpus = [g for g in snapshot.gpus if shown is None or g.index in shown]
        if not gpus:
            why = "no GPU found" if not snapshot.gpus else "no GPU matches the GPU filter"
            self._show_message(((why, "warn"), (" (press a for all GPUs)", "dim")))
            return
        inside = any(has_inside(g) for g in gpus)
        bar_width = bar_width_for(width, compact, inside)
        verdict_width = verdict_width_for(width, compact, bar_width, inside)
        # Every first line of a layout is as wide: the text's width is known before the
        # views are made, so that their alerts can move to a line of their own.
        text_width = max(
            (
                line_width(bar_width, verdict_width, has_inside(g), compact)
                for g in gpus
                if not g.lost
            ),
            default=40,
        )
        views = [
            gpu_view(
                g,
                compact=compact,
                bar_width=bar_width,
                verdict=None if verdicts is None else verdicts.get(g.index),
                verdict_width=verdict_width,
                text_width=text_width,
            )
            for g in gpus
        ]
        frame = len(COMPACT_HISTORY_GAP) if compact else len(HISTORY_RULE) + HISTORY_LABEL_WIDTH
        hist_width = max(1, width - text_width - frame)
        series: list[tuple[Series, ...]] = []
        points = self._points(history[-hist_width:])
        for g in gpus:
            util = "".join([p.get(g.index, _NO_POINT)[0] for p in points])
            mem = "".join([p.get(g.index, _NO_POINT)[1] for p in points])
            series.append((("", util),) if compact else (("util ", util), ("mem  ", mem)))

        if self._message is not None:
            self._message = None
            self.remove_children()
        if self._lines is None or not self._lines.is_attached:
            self._lines = GpuLines()
            self.mount(self._lines)
        blocks = {v.index: GpuBlock(v, s) for v, s in zip(views, series, strict=True)}
        self.blocks = blocks
        self._lines.set_blocks(blocks, text_width)

    def _points(self, history: Sequence[Snapshot]) -> list[dict[int, Point]]:
        """{GPU index: (util cell, memory cell)} of each snapshot, computed once per snapshot."""
        cache = self._point_cache
        out: list[dict[int, Point]] = []
        fresh: dict[int, tuple[Snapshot, dict[int, Point]]] = {}
        for snap in history:
            hit = cache.get(id(snap))
            if hit is None or hit[0] is not snap:
                hit = (snap, _snapshot_points(snap))
            fresh[id(snap)] = hit
            out.append(hit[1])
        self._point_cache = fresh  # only what the history still holds
        return out

    def _show_message(self, parts: Parts) -> None:
        if self._message == parts:
            return
        self._message = parts
        self._lines = None
        self.blocks = {}
        self.remove_children()
        self.mount(Static(to_content((parts,)), classes="gpu-message"))

    @property
    def message(self) -> str | None:
        return None if self._message is None else plain(self._message)
