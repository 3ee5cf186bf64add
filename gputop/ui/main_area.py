"""The main screen's area (header, panels, process table) and the layout key's cycle of
what it shows above the table. The area keeps which layout is shown: the app only asks
it for the next one and draws what it says."""

from __future__ import annotations

from dataclasses import dataclass

from textual.containers import Vertical
from textual.widget import Widget


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
