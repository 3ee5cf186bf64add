"""One block per GPU: text (bars, temperature, power, PCIe, throttling) + a fixed-scale history.

Wide layout: two lines per GPU, utilization and memory history on the right.
Compact layout: one line per GPU, utilization history only.
Blocks are rebuilt only when the set of GPUs shown or the layout changes; otherwise each
block repaints in place without a relayout.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

from gputop.model import Snapshot
from gputop.ui.header import to_content
from gputop.ui.history import History, Series
from gputop.ui.views import (
    GpuView,
    Parts,
    VerdictMark,
    bar_width_for,
    cell_width,
    gpu_view,
    host_only_message,
    memory_percent,
    plain,
    verdict_for,
    verdict_width_for,
)

Point = tuple[float | None, float | None]  # (utilization %, memory %) of one GPU
_NO_POINT: Point = (None, None)  # the GPU is missing or lost in that snapshot


def _snapshot_points(snap: Snapshot) -> dict[int, Point]:
    """What ``history_series`` takes from one snapshot, for every GPU in it."""
    points: dict[int, Point] = {}
    for g in snap.gpus:
        if g.index not in points:  # as Snapshot.gpu(): the first GPU with that index
            points[g.index] = _NO_POINT if g.lost else (g.utilization.gpu, memory_percent(g))
    return points


@lru_cache(maxsize=2048)
def _part_cells(text: str) -> int:
    return cell_width(text)


def _line_cells(parts: Parts) -> int:
    """Terminal cells of a line of parts; bars and labels repeat, so per part is cached."""
    return sum(_part_cells(text) for text, _ in parts)


class GpuBlock(Widget):
    """The text of one GPU and its history, side by side."""

    DEFAULT_CSS = """
    GpuBlock {
        layout: horizontal;
        height: auto;
        width: 1fr;
    }
    GpuBlock > .gpu-text {
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    GpuBlock.-lost > .gpu-text { text-style: bold; }
    GpuBlock > History { margin-left: 1; }
    """

    def __init__(self, view: GpuView, series: Sequence[Series], text_width: int) -> None:
        super().__init__(classes=f"gpu-block gpu-{view.index}")
        self.view = view
        self._series = tuple(series)
        self._text_width = text_width
        self._text: Static | None = None
        self._history: History | None = None

    @property
    def text(self) -> str:
        """What the text part says, without styles (for tests and NO_COLOR reasoning)."""
        return "\n".join(plain(line) for line in self.view.lines)

    def compose(self) -> ComposeResult:
        self._text = Static(to_content(self.view.lines), classes="gpu-text")
        self._text.styles.width = self._text_width
        self._text.styles.height = len(self.view.lines)
        self._history = History(label_width=5 if len(self._series) > 1 else 0)
        self._history.set_series(self._series)
        self.set_class(self.view.lost, "-lost")
        yield self._text
        yield self._history

    def show(self, view: GpuView, series: Sequence[Series]) -> None:
        if view != self.view:
            self.view = view
            self.set_class(view.lost, "-lost")
            if self._text is not None:
                self._text.update(to_content(view.lines), layout=False)
        self._series = tuple(series)
        if self._history is not None:
            self._history.set_series(self._series)


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
        self._layout_key: tuple[object, ...] | None = None
        self._message: Parts | None = None
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
        verdicts: Mapping[int, str | VerdictMark] | Mapping[int, str] | None = None,
    ) -> None:
        if not snapshot.driver.available:
            self._show_message(host_only_message(snapshot))
            return
        gpus = [g for g in snapshot.gpus if shown is None or g.index in shown]
        if not gpus:
            why = "no GPU found" if not snapshot.gpus else "no GPU matches the GPU filter"
            self._show_message(((why, "warn"), (" (press a for all GPUs)", "dim")))
            return
        bar_width = bar_width_for(width, compact)
        verdict_width = verdict_width_for(width, compact, bar_width)
        views = [
            gpu_view(
                g,
                compact=compact,
                bar_width=bar_width,
                verdict=verdict_for(verdicts, g.index),
                verdict_width=verdict_width,
            )
            for g in gpus
        ]
        text_width = (
            max(_line_cells(v.lines[0]) for v in views if not v.lost)
            if any(not v.lost for v in views)
            else 40
        )
        hist_width = max(1, width - text_width - (0 if compact else 5) - 2)
        series: list[tuple[Series, ...]] = []
        points = self._points(history[-hist_width:])
        for g in gpus:
            util = tuple(p.get(g.index, _NO_POINT)[0] for p in points)
            mem = tuple(p.get(g.index, _NO_POINT)[1] for p in points)
            series.append((("", util),) if compact else (("util ", util), ("mem  ", mem)))

        key = (tuple(g.index for g in gpus), compact, text_width)
        if key != self._layout_key:
            self._layout_key = key
            self._message = None
            self.remove_children()
            self.blocks = {
                v.index: GpuBlock(v, s, text_width) for v, s in zip(views, series, strict=True)
            }
            self.mount_all(self.blocks.values())
            return
        for v, s in zip(views, series, strict=True):
            self.blocks[v.index].show(v, s)

    def _points(self, history: Sequence[Snapshot]) -> list[dict[int, Point]]:
        """{GPU index: (util %, memory %)} of each snapshot, as ``history_series`` reads
        them; computed once per snapshot (each tick adds one) instead of once per GPU
        per snapshot per tick."""
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
        self._layout_key = None
        self.blocks = {}
        self.remove_children()
        self.mount(Static(to_content((parts,)), classes="gpu-message"))

    @property
    def message(self) -> str | None:
        return None if self._message is None else plain(self._message)
