"""The lines around the process table that say why it shows less than it might: the
process list's problems above it, and the filter or GPU choice that hides every row.
Each keeps what it shows, so the app keeps no copy."""

from __future__ import annotations

from collections.abc import Collection

from textual.content import Content
from textual.widgets import Static

from gputop.model import Snapshot
from gputop.ui.roles import to_content
from gputop.views import process_view
from gputop.views.parts import Parts, gpu_ranges, safe

#: The line in the table area when a filter or GPU choice leaves no process row.
NO_MATCH = "no process matches"


class ProcessNotes(Static):
    """Process-list problems (e.g. NoPermission) in words above the table; hidden when
    there are none. Repaints only when the words change."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.notes: tuple[Parts, ...] = ()

    def show(self, snapshot: Snapshot) -> None:
        notes = process_view.process_notes(snapshot)
        if notes == self.notes:
            return
        self.notes = notes
        self.update(to_content(notes))
        self.display = bool(notes)


class NoMatch(Static):
    """Says it when what the keys chose hides every process (the empty table alone would
    read as "no processes"), and how to undo it."""

    def show(self, empty: bool, *, text: str, gpus: Collection[int] | None) -> None:
        self.display = empty
        if not empty:
            return
        why: list[str] = []
        if text:
            why.append(f'filter "{safe(text, 64)}"')
        if gpus is not None:
            why.append(f"GPU {gpu_ranges(gpus, empty='none')}")
        undo = "Esc clears the filter" if text else "a shows all GPUs"
        self.update(Content(f"{NO_MATCH}: {', '.join(why)} ({undo})"))
