"""View roles -> styles: the one table (``ROLE_STYLES``), as Textual Content (what every
panel draws with) and as Rich styles resolved from a theme (the trees and tables)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping

from rich.style import Style
from textual.content import Content

from gputop.views.parts import Parts

#: Theme variables only, so dark and light themes both work.
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
    "tag": "bold $accent",  # a tagged process row
    "holder": "$warning",  # a /dev/nvidia* holder NVML does not list
}


def rich_styles(theme_variables: Mapping[str, str]) -> dict[str, Style]:
    """Every role as a Rich style from the theme's variables; a colour the theme lacks
    or that is not plain (alpha) is left out: the words stay."""
    out: dict[str, Style] = {}
    for role, spec in ROLE_STYLES.items():
        style = Style()
        for token in spec.split():
            if token.startswith("$"):
                colour = theme_variables.get(token[1:])
                if colour:
                    with contextlib.suppress(Exception):
                        style += Style.parse(colour)
            else:
                style += Style.parse(token)
        out[role] = style
    return out


def to_content(lines: Iterable[Parts]) -> Content:
    """Styled lines from view parts, never parsed as markup."""
    return Content("\n").join(
        Content.assemble(*((text, ROLE_STYLES.get(role, "")) for text, role in parts))
        for parts in lines
    )
