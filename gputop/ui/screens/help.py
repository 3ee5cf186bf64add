"""The help screen: every key the app offers, and what the markers on screen mean."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gputop.ui.keybar import KeyBar

#: (key or marker, what it means) lines of the help.
Rows = Sequence[tuple[str, str]]

#: The markers besides the verdict words (``help_legend`` puts those first).
LEGEND: tuple[tuple[str, str], ...] = (
    ("LOST", "the GPU fell off the bus or stopped answering the driver; its values are unknown"),
    (
        "not visible",
        "the pid is outside this PID namespace (a container without --pid=host): its user and "
        "command are unknown and it cannot be signalled",
    ),
    (
        "! LINK gen3x8<gen5x16",
        "the PCIe link runs below its maximum generation or width; idle GPUs lower it to save "
        "power, so it matters only under load",
    ),
    ("n/a", "the driver does not report this value here; it is never shown as 0"),
)


def help_table(bindings: Rows, legend: Rows) -> Table:
    """Keys, then markers, in one table so both columns line up."""
    table = Table(box=None, show_header=False, pad_edge=False, expand=True)
    table.add_column("key", style="bold", no_wrap=True)
    table.add_column("what", ratio=1)
    table.add_row(Text("Keys", style="bold underline"), Text(""))
    for key, what in bindings:
        table.add_row(Text(key), Text(what))
    table.add_row(Text(""), Text(""))
    table.add_row(Text("What the markers mean", style="bold underline"), Text(""))
    for key, what in legend:
        table.add_row(Text(key), Text(what))
    return table


class HelpScreen(ModalScreen[None]):
    """Keys and markers. Esc, ? or q closes it."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen #help-dialog {
        width: 90%; max-width: 100; height: auto; max-height: 90%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    /* The body scrolls inside the dialog (it has the focus, so the arrow keys, PgUp/PgDn,
       Home and End scroll it at once); the close line below stays visible. The body is
       never wider than the dialog: only the vertical scrollbar, and one that shows. */
    HelpScreen #help-body {
        height: 1fr; overflow-x: hidden; overflow-y: auto;
        scrollbar-size-vertical: 1;
        scrollbar-color: $accent; scrollbar-color-hover: $accent-lighten-1;
        scrollbar-color-active: $accent-lighten-2; scrollbar-background: $panel;
        scrollbar-background-hover: $panel; scrollbar-background-active: $panel;
    }
    HelpScreen #help-body Static { height: auto; width: 1fr; }
    HelpScreen #help-close { color: $text-muted; height: 1; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close"),
        Binding("question_mark,q", "close", "Close", show=False),
    ]

    AUTO_FOCUS = "#help-body"

    def __init__(self, bindings: Rows, legend: Rows) -> None:
        super().__init__()
        self.key_bindings = tuple(bindings)
        self.legend = tuple(legend)

    def compose(self) -> ComposeResult:
        with Vertical(id="help-dialog"):
            with VerticalScroll(id="help-body"):
                yield Static(help_table(self.key_bindings, self.legend), id="help-text")
            yield Static(
                "↑/↓, PgUp/PgDn, Home/End scroll · Esc, ? or q closes this help.", id="help-close"
            )
        yield KeyBar()  # this screen's keys, not the dashboard's

    def action_close(self) -> None:
        self.dismiss(None)
