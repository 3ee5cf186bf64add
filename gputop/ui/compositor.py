"""The dashboard's screen: Textual's compositor, drawing in a partial update only the
widgets that lie under a changed region.

Textual's partial update renders every visible widget whose container overlaps the
bounding box of the changed regions, and renders each in full (from its cache): once
settled, a tick changes the header's row and a host line or two, and the footer, the GPU
lines, the process table and the containers behind them were rendered each second all
the same. A partial update writes only the changed regions' spans, and of each place the
front-most widget's cells: a widget under none of them, or there wholly behind a widget
in front of it, has no part in what is written, and leaving it out changes no byte sent
to the terminal. A full
update (a resize, a new screen, a theme) renders every widget as before.

This is a layer around Textual's own update (the same code paths run, over fewer
widgets); it rests on Textual 8's compositor keeping its visible widgets and its dirty
regions in ``_visible_widgets`` and ``_dirty_regions``. Where those are not as expected,
the update is Textual's own, unchanged.
"""

from __future__ import annotations

from typing import Any

from textual._compositor import ChopsUpdate, Compositor
from textual.geometry import Region
from textual.screen import Screen


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
