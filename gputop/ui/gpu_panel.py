"""One block per GPU: text (bars, temperature, power, PCIe, throttling) + a fixed-scale history."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import is_

from textual.containers import VerticalScroll
from textual.widgets import Static

from gputop.model import GpuSample, Snapshot, same_objects
from gputop.ui.lines import PartsLines, let_go_of_lines
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


#: What a GPU's view is made from besides its sample: (compact, bar width, verdict mark,
#: verdict width, text width).
ViewKey = tuple[bool, int, VerdictMark | None, int, int]


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
        # GPU index -> (view, series, text width, width, its lines): a block whose view is
        # the very object of the last tick and whose series read the same keeps its lines.
        self._composed: dict[int, tuple[GpuView, tuple[Series, ...], int, int, list[Parts]]] = {}

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
        composed: dict[int, tuple[GpuView, tuple[Series, ...], int, int, list[Parts]]] = {}
        for index, block in self.blocks.items():
            hit = self._composed.get(index)
            if (
                hit is not None
                and hit[0] is block.view
                and hit[1] == block.series
                and hit[2:4] == (self._text_width, width)
            ):
                mine = hit[4]
            else:
                mine = self._block_lines(block, width)
            composed[index] = (block.view, block.series, self._text_width, width, mine)
            lines += mine
        self._composed = composed  # only the blocks shown now
        return lines

    def _block_lines(self, block: GpuBlock, width: int) -> list[Parts]:
        """One block's lines: its text cut to the text's width, then its history."""
        lines: list[Parts] = []
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
        let_go_of_lines(self)
        self._message: Parts | None = None
        self._lines: GpuLines | None = None
        self.blocks: dict[int, GpuBlock] = {}
        # GPU index -> (sample, what else it was made from, view): a GPU whose sample is
        # the very object of the last tick (the source shares a sample that did not
        # change) keeps its view.
        self._views: dict[int, tuple[GpuSample, ViewKey, GpuView]] = {}
        # What _text last made its views and text width from, and them.
        self._last_text: (
            tuple[
                tuple[GpuSample, ...],
                bool,
                int,
                Mapping[int, VerdictMark] | None,
                list[GpuView],
                int,
            ]
            | None
        ) = None
        # The history window the series were made for, and per GPU its (util, mem) cells:
        # the next tick's window is this one moved on, so the cells move on too.
        self._window: tuple[Snapshot, ...] = ()
        self._cells: dict[int, Point] = {}
        self.made = 0  # GPU views made, not kept (tests count them)

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
        views, text_width = self._text(gpus, verdicts, compact=compact, width=width)
        frame = len(COMPACT_HISTORY_GAP) if compact else len(HISTORY_RULE) + HISTORY_LABEL_WIDTH
        hist_width = max(1, width - text_width - frame)
        series: list[tuple[Series, ...]] = []
        cells = self._history_cells(tuple(history[-hist_width:]), [g.index for g in gpus])
        for g in gpus:
            util, mem = cells[g.index]
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

    def _text(
        self,
        gpus: Sequence[GpuSample],
        verdicts: Mapping[int, VerdictMark] | None,
        *,
        compact: bool,
        width: int,
    ) -> tuple[list[GpuView], int]:
        """The GPUs' views and the width of their text. The last tick's when its GPUs
        were these very samples, with the same marks, layout and width (idle GPUs: the
        NVML source shares a sample that did not change): each is a function of them."""
        last = self._last_text
        if (
            last is not None
            and same_objects(gpus, last[0])
            and last[1:3] == (compact, width)
            and (verdicts is last[3] or verdicts == last[3])
        ):
            return last[4], last[5]
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
        views = self._gpu_views(
            gpus,
            verdicts,
            compact=compact,
            bar_width=bar_width,
            verdict_width=verdict_width,
            text_width=text_width,
        )
        self._last_text = (tuple(gpus), compact, width, verdicts, views, text_width)
        return views, text_width

    def _gpu_views(
        self,
        gpus: Sequence[GpuSample],
        verdicts: Mapping[int, VerdictMark] | None,
        *,
        compact: bool,
        bar_width: int,
        verdict_width: int,
        text_width: int,
    ) -> list[GpuView]:
        """Each GPU's view; a GPU whose sample and marks are those of the last tick keeps
        its view (``gpu_view`` is a function of them alone)."""
        kept = self._views
        fresh: dict[int, tuple[GpuSample, ViewKey, GpuView]] = {}
        out: list[GpuView] = []
        for g in gpus:
            verdict = None if verdicts is None else verdicts.get(g.index)
            key: ViewKey = (compact, bar_width, verdict, verdict_width, text_width)
            hit = kept.get(g.index)
            if hit is None or hit[0] is not g or hit[1] != key:
                self.made += 1
                view = gpu_view(
                    g,
                    compact=compact,
                    bar_width=bar_width,
                    verdict=verdict,
                    verdict_width=verdict_width,
                    text_width=text_width,
                )
                hit = (g, key, view)
            fresh[g.index] = hit
            out.append(hit[2])
        self._views = fresh  # only the GPUs shown now
        return out

    def _history_cells(self, window: tuple[Snapshot, ...], gpus: Sequence[int]) -> dict[int, Point]:
        """GPU index -> (util cells, memory cells) of ``window``, one cell per snapshot.
        When ``window`` is the last one moved on by the snapshots since (the same objects
        in the same order), each GPU's cells are the last ones moved on: only the new
        snapshots' cells are made."""
        before, cells = self._window, self._cells
        shift = 0  # the snapshots that left the window at its start
        if before and window and window[0] is not before[0]:
            shift = next((i for i, s in enumerate(before) if s is window[0]), -1)
        kept = len(before) - shift
        moved_on = (
            shift >= 0 and 0 < kept <= len(window) and all(map(is_, window[:kept], before[shift:]))
        )
        tail = [_snapshot_points(s) for s in window[kept:]] if moved_on else []
        every: list[dict[int, Point]] | None = None  # the whole window's, made if needed
        out: dict[int, Point] = {}
        for index in gpus:
            last = cells.get(index) if moved_on else None
            if last is None:
                if every is None:
                    every = [_snapshot_points(s) for s in window]
                util = "".join([p.get(index, _NO_POINT)[0] for p in every])
                mem = "".join([p.get(index, _NO_POINT)[1] for p in every])
            else:
                util = last[0][shift:] + "".join([p.get(index, _NO_POINT)[0] for p in tail])
                mem = last[1][shift:] + "".join([p.get(index, _NO_POINT)[1] for p in tail])
            out[index] = (util, mem)
        self._window, self._cells = window, out
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
