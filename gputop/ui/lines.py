"""A widget of styled lines drawn one by one: a line repaints only when its parts change.
(Textual repaints every widget inside the bounding box of the changed regions.)

Lines that go as soon as a widget drops them (issue 32 §5, ``LettingGoCache``).
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

from collections.abc import Sequence
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual._styles_cache import StylesCache
from textual.cache import FIFOCache
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.visual import Visual
from textual.widget import Widget

from gputop.ui.roles import to_content
from gputop.views.parts import Part, Parts, fit_parts, plain

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


class PartsLines(Widget):
    """Lines of view parts, styled as ``to_content`` does; ``fit_parts`` cuts them."""

    DEFAULT_CSS = """
    PartsLines {
        height: auto;
        width: 1fr;
    }
    """

    #: Set by a subclass whose lines the view already made exactly as wide as the widget.
    LINES_FIT_WIDTH: ClassVar[bool] = False

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        let_go_of_lines(self)
        self._lines: tuple[Parts, ...] = ()
        self._cache: dict[int, Strip] = {}
        self._cache_width = -1
        self._styles: dict[str, Style] = {}
        self._segments: dict[Part, Segment] = {}
        # This widget's Rich style, kept as the role styles are: until a style update.
        self._base: Style | None = None

    @property
    def lines(self) -> tuple[Parts, ...]:
        return self._lines

    @property
    def text(self) -> str:
        return "\n".join(plain(line) for line in self._lines)

    def set_lines(self, lines: Sequence[Parts]) -> bool:
        """New lines; repaints only those that changed. Returns whether any did."""
        new = tuple(lines)
        old = self._lines
        if new == old:
            return False
        self._lines = new
        if len(new) != len(old):
            self._cache.clear()
            self.refresh(layout=True)  # the height follows the number of lines
            return True
        width = max(1, self.size.width)
        changed = [y for y, (a, b) in enumerate(zip(old, new, strict=True)) if a != b]
        for y in changed:
            self._cache.pop(y, None)
        # One refresh for every changed line: each refresh also clears the widget's
        # caches and may post a message.
        if changed:
            self.refresh(*(Region(0, y, width, 1) for y in changed))
        return True

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._lines)

    def get_content_width(self, container: Size, viewport: Size) -> int:
        return max((sum(len(t) for t, _ in line) for line in self._lines), default=0)

    def _base_style(self) -> Style:
        """This widget's Rich style (``rich_style`` walks the DOM), looked up again only
        after a style update: the stylesheet tells every node it applies to (a theme, a
        class of an ancestor), as the role styles below rely on too. Settled, a line or two
        change a second and each looked it up anew: half of what drawing them cost."""
        style = self._base
        if style is None:
            style = self._base = self.rich_style
        return style

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if width != self._cache_width:
            self._cache.clear()
            self._cache_width = width
        strip = self._cache.get(y)
        if strip is None:
            parts = self._lines[y] if y < len(self._lines) else ()
            if not self.LINES_FIT_WIDTH:
                parts = fit_parts(parts, width)
            segment = self._segment
            segments = [segment(part) for part in parts if part[0]]
            strip = Strip(segments).adjust_cell_length(width, self._base_style())
            self._cache[y] = strip
        return strip

    def _segment(self, part: Part) -> Segment:
        """The styled segment of a part, kept until the styles change (parts repeat)."""
        segment = self._segments.get(part)
        if segment is None:
            if len(self._segments) > 4096:
                self._segments.clear()
            segment = self._segments[part] = Segment(part[0], self._role_style(part[1]))
        return segment

    def _role_style(self, role: str) -> Style:
        """The Rich style of a role exactly as Textual renders ``to_content`` in a
        Static (theme, NO_COLOR, background), once per role."""
        style = self._styles.get(role)
        if style is None:
            content = to_content((((" ", role),),))
            strips = Visual.to_strips(self, content, 1, 1, self.visual_style)
            segments = list(strips[0]) if strips else []
            style = segments[0].style if segments and segments[0].style else self.rich_style
            self._styles[role] = style
        return style

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()
        self._base = None
        self._styles.clear()
        self._segments.clear()


class HeaderLine(PartsLines):
    """The one-line header: host, driver, CUDA, interval, mode, markers, tick cost."""

    DEFAULT_CSS = """
    HeaderLine {
        height: 1;
        width: 1fr;
        background: $panel;
    }
    """
