"""Reading what a Textual app shows, for Pilot tests.

Two different views of the screen:

- ``terminal_*``: the composited screen, one row per terminal line, as a terminal would show
  it (widgets on top hide those below, everything clipped to the terminal);
- ``widget*_*``: each widget's own drawing (border and padding included), whether or not
  another widget covers it, for reading one panel's text without the rest of the screen.

The ``*_words`` forms collapse whitespace, so a phrase is found even when it wraps.
"""

from __future__ import annotations

from typing import Any

from textual.app import App
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget


def terminal_strips(app: App[Any]) -> list[Strip]:
    """The composited screen, one strip (styled segments) per terminal row."""
    return list(app.screen._compositor.render_strips())


def terminal_cells(app: App[Any]) -> list[list[tuple[str, str]]]:
    """The composited screen cell by cell, one list per terminal row: (character, its
    style as Rich spells it), for comparing two drawings of the same screen."""
    return [
        [(c, str(style)) for text, style, _ in strip for c in text]
        for strip in terminal_strips(app)
    ]


def terminal_rows(app: App[Any]) -> list[str]:
    """The composited screen, one string per terminal row (what a terminal would show)."""
    return [strip.text for strip in terminal_strips(app)]


def terminal_words(app: App[Any]) -> str:
    """The composited screen as one string, words re-joined across wrapped lines."""
    return " ".join(" ".join(terminal_rows(app)).split())


def widget_text(widget: Widget) -> str:
    """What one widget draws right now (border and padding included), lines joined by newlines."""
    size = widget.outer_size
    region = Region(0, 0, size.width, size.height)
    return "\n".join(strip.text for strip in widget.render_lines(region))


def widgets_text(app: App[Any], selector: str = "Static, PartsLines") -> str:
    """Every displayed text widget of the active screen (``widget_text``), one after another."""
    return "\n".join(widget_text(w) for w in app.screen.query(selector) if w.display)


def widgets_words(app: App[Any], selector: str = "Static, PartsLines") -> str:
    """``widgets_text`` with whitespace (and so line wrapping) collapsed."""
    return " ".join(widgets_text(app, selector).split())
