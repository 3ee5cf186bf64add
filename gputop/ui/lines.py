"""A widget of styled lines drawn one by one: a line repaints only when its parts change.
(Textual repaints every widget inside the bounding box of the changed regions.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.visual import Visual
from textual.widget import Widget

from gputop.ui.roles import to_content
from gputop.ui.strips import let_go_of_lines
from gputop.views.parts import Part, Parts, fit_parts, plain


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
