"""The kill dialog: pick a signal for one or more processes, see what happened in words.

No single-letter shortcuts: a stray key press must not become a signal.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from gputop import fmt
from gputop.actions import SIGNALS, KillOutcome, KillTarget, send_signals, summary
from gputop.ui.keybar import KeyBar


def _target_text(value: str | None, limit: int = 300) -> Text:
    """A command line (300 characters; the table crops further) or another field, cleaned."""
    return Text(fmt.clean_text(value, limit) or fmt.NA)


def targets_table(targets: Sequence[KillTarget]) -> Table:
    table = Table(box=None, expand=True, pad_edge=False, show_edge=False, header_style="bold")
    table.add_column("PID", justify="right", no_wrap=True)
    table.add_column("USER", no_wrap=True, max_width=16, overflow="ellipsis")
    table.add_column("GPU", justify="right", no_wrap=True)
    table.add_column("GPU MEM", justify="right", no_wrap=True)
    table.add_column("COMMAND", ratio=1, no_wrap=True, overflow="ellipsis")
    for t in targets:
        if t.create_time is None:
            command = Text("not visible here: identity unknown, will be refused", style="italic")
        else:
            command = _target_text(t.command)
        table.add_row(
            Text(str(t.pid)),
            _target_text(t.user, 64),
            Text(fmt.NA if t.gpu is None else str(t.gpu)),
            Text(fmt.memory(t.gpu_memory)),
            command,
        )
    return table


#: Owners named at most; the rest are counted.
MAX_OWNERS = 4


def owners_text(owners: Sequence[tuple[str | None, str | None]]) -> Text:
    """Who owns the processes, and what to run instead (a pod's controller restarts them)."""
    text = Text()
    for owner, stop in owners[:MAX_OWNERS]:
        text.append("owned by ", "bold").append(fmt.clean_text(owner, 256) or fmt.NA)
        if stop:
            # Whole, never cut: a shortened command is another command. It is made only
            # of names valid for their kind, each quoted (gputop.sources.owners).
            text.append(" · rather: ", "bold").append(fmt.clean_text(stop, None) or "")
        text.append("\n")
    if len(owners) > MAX_OWNERS:
        text.append(f"+{len(owners) - MAX_OWNERS} more owners\n", "dim")
    text.rstrip()
    return text


def outcomes_table(outcomes: Sequence[KillOutcome]) -> Table:
    table = Table(box=None, show_header=False, pad_edge=False, expand=True)
    table.add_column("status", no_wrap=True)
    table.add_column("message", ratio=1)
    for outcome in outcomes:
        status = Text("ok", style="bold green") if outcome.ok else Text("refused", "bold red")
        table.add_row(status, Text(outcome.message))
    return table


class KillScreen(ModalScreen[str | None]):
    """Dismisses with a summary of what was sent, or None."""

    DEFAULT_CSS = """
    KillScreen { align: center middle; }
    KillScreen #kill-dialog {
        width: 90%; max-width: 120; height: auto; max-height: 90%;
        border: thick $error; background: $surface; padding: 0 1;
    }
    KillScreen #kill-title { text-style: bold; height: auto; }
    KillScreen #kill-note { color: $text-muted; height: auto; }
    KillScreen #kill-owners, KillScreen #kill-targets, KillScreen .kill-buttons,
    KillScreen #kill-result { height: auto; margin: 1 0 0 0; }
    KillScreen #kill-targets { max-height: 8; }
    KillScreen #kill-result { max-height: 10; }
    KillScreen #kill-result, KillScreen #kill-after { display: none; }
    KillScreen #kill-targets Static, KillScreen #kill-outcomes { height: auto; }
    KillScreen .kill-buttons { align-horizontal: center; }
    KillScreen .kill-buttons Button { margin: 0 1; min-width: 10; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("left", "app.focus_previous", "Previous", show=False),
        Binding("right", "app.focus_next", "Next", show=False),
    ]

    AUTO_FOCUS = "#sigterm"

    def __init__(
        self,
        targets: Sequence[KillTarget],
        readonly: bool = False,
        no_signals: str | None = None,
        owners: Sequence[tuple[str | None, str | None]] = (),
    ) -> None:
        super().__init__()
        self.targets = tuple(targets)
        # Each target's (owner, the command that stops the owner), as the table shows them.
        self.owners = tuple(dict.fromkeys(o for o in owners if o[0] is not None))
        # Why this source offers no signal at all (demo, replay): as read-only mode.
        self.no_signals = no_signals
        self.readonly = readonly or no_signals is not None
        self.outcomes: tuple[KillOutcome, ...] | None = None
        self.summary: str | None = None

    def _title(self) -> str:
        n = len({t.pid for t in self.targets})
        if self.no_signals is not None:
            return "No signals from this source"
        if self.readonly:
            return "Signals are disabled (read-only mode)"
        if n == 0:
            return "No process selected"
        if n == 1:
            return f"Send a signal to pid {self.targets[0].pid}?"
        return f"Send a signal to these {n} processes?"

    def _note(self) -> RenderableType:
        if self.no_signals is not None:
            why = self.no_signals
            return Text(f"{why[:1].upper()}{why[1:]}. Nothing will be signalled.")
        if self.readonly:
            return Text("gputop was started read-only: nothing will be signalled.")
        return Group(
            Text(
                "Right before the signal each pid is checked to still be the same process "
                "(same start time); a reused or vanished pid is not signalled."
            ),
            Text("SIGTERM asks to exit, SIGINT is Ctrl-C, SIGKILL cannot be caught."),
        )

    def compose(self) -> ComposeResult:
        disabled = self.readonly or not self.targets
        with Vertical(id="kill-dialog"):
            yield Static(Text(self._title()), id="kill-title")
            yield Static(self._note(), id="kill-note")
            if self.owners:
                yield Static(owners_text(self.owners), id="kill-owners")
            with VerticalScroll(id="kill-targets"):
                yield Static(targets_table(self.targets))
            with Horizontal(classes="kill-buttons", id="kill-choices"):
                # Read-only (demo, replay, --readonly): no signal is drawn under "Nothing
                # will be signalled", only the way out.
                for sig in () if self.readonly else SIGNALS:
                    yield Button(
                        sig.name,
                        id=sig.name.lower(),
                        variant="error" if sig == signal.SIGKILL else "warning",
                        disabled=disabled,
                    )
                yield Button("Cancel", id="cancel", variant="default")
            with VerticalScroll(id="kill-result"):
                yield Static("", id="kill-outcomes")
            with Horizontal(classes="kill-buttons", id="kill-after"):
                yield Button("Close", id="close", variant="primary")
        # This dialog's own keys: the dashboard's footer below would offer keys (q Quit)
        # that do nothing here.
        yield KeyBar()

    def on_mount(self) -> None:
        if self.readonly or not self.targets:
            self.query_one("#cancel", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        button = event.button.id
        if button == "cancel":
            self.dismiss(None)
        elif button == "close":
            self.dismiss(self.summary)
        elif self.outcomes is None:
            self.send(next(sig for sig in SIGNALS if sig.name.lower() == button))

    def send(self, sig: signal.Signals) -> None:
        self.outcomes = outcomes = send_signals(self.targets, sig, readonly=self.readonly)
        self.summary = summary(outcomes, sig)
        self.query_one("#kill-outcomes", Static).update(
            Group(outcomes_table(outcomes), Text("Press any key to close.", style="dim"))
        )
        self.query_one("#kill-title", Static).update(Text(f"{sig.name}: what happened"))
        # Room for the outcomes (each names its pid); #kill-owners may be absent.
        self.query("#kill-note, #kill-owners, #kill-targets, #kill-choices").set(display=False)
        self.query("#kill-result, #kill-after").set(display=True)
        self.query_one("#close", Button).focus()

    def on_key(self, event: events.Key) -> None:
        if self.outcomes is not None:
            event.stop()
            event.prevent_default()
            self.dismiss(self.summary)

    def action_cancel(self) -> None:
        self.dismiss(self.summary if self.outcomes is not None else None)
