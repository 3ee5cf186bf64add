"""View roles -> Textual styles, and parts -> styled Content (what every panel draws with)."""

from __future__ import annotations

from collections.abc import Iterable

from textual.content import Content

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
    "selected": "bold reverse",
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
