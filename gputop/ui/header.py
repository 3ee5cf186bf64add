"""The one-line header, and the parts -> styled Content helper the panels share."""

from __future__ import annotations

from collections.abc import Iterable

from textual.content import Content
from textual.widgets import Static

from gputop.ui.views import Parts

#: Roles used by ``gputop.ui.views`` -> Textual styles. Theme variables only, so dark and
#: light themes both work; NO_COLOR drops the colours and the words remain.
ROLE_STYLES: dict[str, str] = {
    "": "",
    "title": "bold",
    "index": "bold",
    "name": "",
    "label": "dim",
    "dim": "dim",
    "ok": "$success",
    "accent": "bold $accent",
    "verdict": "bold $accent",
    "warn": "bold $warning",
    "warn-strong": "bold reverse $warning",
    "error": "bold $error",
    "error-strong": "bold reverse $error",
    "bar": "$success",
    "bar-mem": "$secondary",
    "bar-reserved": "$primary",
    "bar-free": "dim",
    "cores": "$success",
    "hist-label": "$text-muted",
    "hist-util": "$success",
    "hist-mem": "$secondary",
}


def to_content(lines: Iterable[Parts]) -> Content:
    """Styled lines from view parts. Text is never parsed as markup."""
    out: list[Content] = []
    for parts in lines:
        out.append(Content.assemble(*((text, ROLE_STYLES.get(role, "")) for text, role in parts)))
    return Content("\n").join(out)


class HeaderLine(Static):
    """Host, driver, CUDA, interval, mode, PAUSED / STALE markers, tick cost."""

    DEFAULT_CSS = """
    HeaderLine {
        height: 1;
        width: 1fr;
        text-wrap: nowrap;
        text-overflow: ellipsis;
        background: $panel;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id)
        self._parts: Parts = ()

    @property
    def text(self) -> str:
        return "".join(t for t, _ in self._parts)

    def show(self, parts: Parts) -> bool:
        """Repaint when the parts changed; returns whether it did."""
        if parts == self._parts:
            return False
        self._parts = parts
        self.update(to_content((parts,)), layout=False)
        return True
