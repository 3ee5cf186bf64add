"""The main screen's area (header, panels, process table), the layout key's cycle of what
it shows above the table, and the lines around the table that say why it shows less than
it might. Each widget keeps what it shows: the app asks and draws, and keeps no copy.

The main screen itself (DashboardScreen) draws through a compositor that, in a partial
update, renders only the widgets that draw a cell of a changed region (ChangedOnlyCompositor).
Textual's partial update renders every visible widget whose container overlaps the
bounding box of the changed regions, and renders each in full (from its cache): once
settled, a tick changes the header's row and a host line or two, and the footer, the GPU
lines, the process table and the containers behind them were rendered each second all
the same. A partial update writes only the changed regions' spans, and of each place the
front-most widget's cells: a widget under none of them, or there wholly behind a widget
in front of it, has no part in what is written, and leaving it out changes no byte sent
to the terminal. A full update (a resize, a new screen, a theme) renders every widget as
before. This is a layer around Textual's own update (the same code paths run, over fewer
widgets); it rests on Textual 8's compositor keeping its visible widgets and its dirty
regions in ``_visible_widgets`` and ``_dirty_regions``. Where those are not as expected,
the update is Textual's own, unchanged."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from textual._compositor import ChopsUpdate, Compositor
from textual.containers import Vertical
from textual.content import Content
from textual.geometry import Region
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Static

from gputop.model import Snapshot
from gputop.ui.roles import to_content
from gputop.views import process_view
from gputop.views.parts import Parts, gpu_ranges, safe


@dataclass(frozen=True)
class Layout:
    """What the main screen shows above the process table (the layout key cycles them)."""

    name: str  # as the key's note says it
    gpu_lines: bool  # one line per GPU (the compact GPU lines) at any width
    gpus: bool = True  # the GPU panel shown at all
    host: bool = True  # the host panel shown


#: The layout key's cycle, most to least above the table.
LAYOUTS: tuple[Layout, ...] = (
    Layout("full", gpu_lines=False),
    Layout("one line per GPU", gpu_lines=True),
    Layout("one line per GPU, no host panel", gpu_lines=True, host=False),
    Layout("process table only", gpu_lines=True, gpus=False, host=False),
)


class MainArea(Vertical):
    """The header, the GPU and host panels, the notes, the filter and the process table;
    ``shown`` is which of LAYOUTS it shows (``layout`` is Textual's own word)."""

    def __init__(self, *children: Widget, id: str | None = None) -> None:
        super().__init__(*children, id=id)
        self.shown: Layout = LAYOUTS[0]

    def next_layout(self, *, compact: bool) -> Layout:
        """The next of LAYOUTS that draws something else (the compact screen already draws
        one line per GPU: a layout that only asks for that would change nothing)."""

        def drawn(layout: Layout) -> tuple[bool, bool, bool]:
            return (layout.gpu_lines or compact, layout.gpus, layout.host)

        at = LAYOUTS.index(self.shown)
        self.shown = next(
            (
                LAYOUTS[(at + n) % len(LAYOUTS)]
                for n in range(1, len(LAYOUTS))
                if drawn(LAYOUTS[(at + n) % len(LAYOUTS)]) != drawn(self.shown)
            ),
            self.shown,
        )
        return self.shown


#: The line in the table area when a filter or GPU choice leaves no process row.
NO_MATCH = "no process matches"


class ProcessNotes(Static):
    """Process-list problems (e.g. NoPermission) in words above the table; hidden when
    there are none. Repaints only when the words change."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.notes: tuple[Parts, ...] = ()

    def show(self, snapshot: Snapshot) -> None:
        notes = process_view.process_notes(snapshot)
        if notes == self.notes:
            return
        self.notes = notes
        self.update(to_content(notes))
        self.display = bool(notes)


class NoMatch(Static):
    """Says it when what the keys chose hides every process (the empty table alone would
    read as "no processes"), and how to undo it."""

    def show(self, empty: bool, *, text: str, gpus: Collection[int] | None) -> None:
        self.display = empty
        if not empty:
            return
        why: list[str] = []
        if text:
            why.append(f'filter "{safe(text, 64)}"')
        if gpus is not None:
            why.append(f"GPU {gpu_ranges(gpus, empty='none')}")
        undo = "Esc clears the filter" if text else "a shows all GPUs"
        self.update(Content(f"{NO_MATCH}: {', '.join(why)} ({undo})"))


class ChangedOnlyCompositor(Compositor):
    """Renders in a partial update only the widgets that draw a cell of a changed region."""

    def render_partial_update(self) -> ChopsUpdate | None:
        dirty = getattr(self, "_dirty_regions", None)
        if not isinstance(dirty, set) or not dirty:
            return super().render_partial_update()
        widgets = self.visible_widgets
        under = {}
        in_front: list[Region] = []  # the kept widgets' parts shown, front to back
        for widget, place in widgets.items():  # front to back: the first drawn wins
            shown = Region.intersection(*place)
            if _drawn_under(shown, dirty, in_front):
                under[widget] = place
                in_front.append(shown)
        if len(under) == len(widgets):
            return super().render_partial_update()
        # Read by the update's renders only; put back at once (the update reads the
        # widgets' lines, it does not lay them out again).
        self._visible_widgets = under
        try:
            return super().render_partial_update()
        finally:
            if self._visible_widgets is under:
                self._visible_widgets = widgets


def _drawn_under(shown: Region, dirty: set[Region], in_front: list[Region]) -> bool:
    """Whether a widget shown at ``shown`` draws a cell of a changed region: under one,
    and not there wholly behind one widget in front of it (a partial update writes what
    the front-most widget drew at each place)."""
    for region in dirty:
        part = shown.intersection(region)
        if part.area and not any(front.contains_region(part) for front in in_front):
            return True
    return False


class DashboardScreen(Screen[Any]):
    """The main screen, with the compositor above."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._compositor = ChangedOnlyCompositor()
