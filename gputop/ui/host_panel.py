"""Host panel: total CPU, iowait, load, RAM, swap, disk and network rates, per-core cells."""

from __future__ import annotations

from textual.widgets import Static

from gputop.model import HostSample
from gputop.ui.header import to_content
from gputop.ui.views import Parts, host_lines, plain


class HostPanel(Static):
    DEFAULT_CSS = """
    HostPanel {
        height: auto;
        width: 1fr;
        text-wrap: nowrap;
        text-overflow: ellipsis;
        border-top: hkey $primary-muted;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id)
        self._lines: tuple[Parts, ...] = ()

    @property
    def text(self) -> str:
        return "\n".join(plain(line) for line in self._lines)

    def show(self, host: HostSample | None, *, width: int, compact: bool) -> bool:
        lines = host_lines(host, width, compact=compact)
        if lines == self._lines:
            return False
        relayout = len(lines) != len(self._lines)
        self._lines = lines
        self.update(to_content(lines), layout=relayout)
        return True
