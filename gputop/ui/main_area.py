"""The main screen's area (header, panels, process table), the layout key's cycle of what
it shows above the table, and the lines around the table that say why it shows less than
it might. Each widget keeps what it shows: the app asks and draws, and keeps no copy."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from textual.containers import Vertical
from textual.content import Content
from textual.widget import Widget
from textual.widgets import Static

from gputop.model import Snapshot
from gputop.ui.lines import let_go_of_lines
from gputop.ui.roles import to_content
from gputop.views import process_view
from gputop.views.parts import Parts, gpu_ranges, safe


@dataclass(frozen=True)
class Layout:
    """What the main screen shows above the process table (the layout key cycles them)."""

    name: str  # as the key's note says it
    gpu_lines: bool  # one line per GPU (the compact GPU lines) at any width
    gpus: bool = True  # the GPU panel shown at all
    host: bool = True  # the host panel shown


#: The layout key's cycle, most to least above the table.
LAYOUTS: tuple[Layout, ...] = (
    Layout("full", gpu_lines=False),
    Layout("one line per GPU", gpu_lines=True),
    Layout("one line per GPU, no host panel", gpu_lines=True, host=False),
    Layout("process table only", gpu_lines=True, gpus=False, host=False),
)


class MainArea(Vertical):
    """The header, the GPU and host panels, the notes, the filter and the process table;
    ``shown`` is which of LAYOUTS it shows (``layout`` is Textual's own word)."""

    def __init__(self, *children: Widget, id: str | None = None) -> None:
        super().__init__(*children, id=id)
        let_go_of_lines(self)
        self.shown: Layout = LAYOUTS[0]

    def next_layout(self, *, compact: bool) -> Layout:
        """The next of LAYOUTS that draws something else (the compact screen already draws
        one line per GPU: a layout that only asks for that would change nothing)."""

        def drawn(layout: Layout) -> tuple[bool, bool, bool]:
            return (layout.gpu_lines or compact, layout.gpus, layout.host)

        at = LAYOUTS.index(self.shown)
        self.shown = next(
            (
                LAYOUTS[(at + n) % len(LAYOUTS)]
                for n in range(1, len(LAYOUTS))
                if drawn(LAYOUTS[(at + n) % len(LAYOUTS)]) != drawn(self.shown)
            ),
            self.shown,
        )
        return self.shown


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
