"""Lines that go as soon as a widget drops them (issue 32 §5).

Textual's ``Strip`` keeps what is made from it (divided, cropped, filtered...), and the
compositor divides every line a widget draws, so each line's strip holds a list of
itself: a cycle. A line the widget drops (a GPU line, the clock, a process row that
changed) then waits for the cyclic collector, which a settled dashboard runs seldom
(gcpolicy's thresholds), and only a full collection frees the lines that lived long
enough to grow old. They piled up a tick after a tick: most of what the dashboard's
resident memory grew by after its start.

:class:`LettingGoCache` is Textual's per-widget line cache, unchanged but for one thing:
each line it drops (a dirty line drawn again, or every line when it is cleared) first
has its memos emptied, with those of the strips made from it, so that reference counting
frees it at once. A memo only saves work: emptied, it is made again if asked.
"""

from __future__ import annotations

from textual._styles_cache import StylesCache
from textual.cache import FIFOCache
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

#: The memo caches of a strip (``_divide_cache``, ``_crop_cache``...).
MEMOS: tuple[str, ...] = tuple(
    name for name in Strip.__slots__ if name.endswith("_cache") and name != "_render_cache"
)


def let_go(strip: Strip) -> None:
    """Empty ``strip``'s memos and those of every strip they hold, so that none of them
    is kept alive by a cycle through its own memo."""
    todo, seen = [strip], set()
    while todo:
        s = todo.pop()
        if id(s) in seen:
            continue
        seen.add(id(s))
        for name in MEMOS:
            memo = getattr(s, name)
            if not isinstance(memo, FIFOCache):
                continue
            for key in tuple(memo.keys()):  # a FIFOCache has no iterator
                held = memo.get(key)
                for made in held if isinstance(held, list) else (held,):
                    if isinstance(made, Strip):
                        todo.append(made)
            memo.clear()


class LettingGoCache(StylesCache):
    """A widget's line cache whose dropped lines go at once (see the module)."""

    def clear(self) -> None:
        for strip in self._cache.values():
            let_go(strip)
        super().clear()

    def render_widget(self, widget: Widget, crop: Region) -> list[Strip]:
        cache, dirty = self._cache, self._dirty_lines
        if dirty:
            for y in crop.line_range:
                if y in dirty and (strip := cache.get(y)) is not None:
                    let_go(strip)
        return super().render_widget(widget, crop)


def let_go_of_lines(widget: Widget) -> None:
    """Give ``widget`` a :class:`LettingGoCache` (call it from its ``__init__``)."""
    widget._styles_cache = LettingGoCache()
