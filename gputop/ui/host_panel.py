"""Host panel: total CPU, iowait, load, RAM, swap, disk and network rates, per-core cells."""

from __future__ import annotations

from gputop.model import HostSample
from gputop.ui.lines import PartsLines
from gputop.ui.views import host_lines


class HostPanel(PartsLines):
    """Drawn line by line: a tick that moves only the per-core cells repaints that line."""

    DEFAULT_CSS = """
    HostPanel {
        border-top: hkey $primary-muted;
    }
    """

    def show(self, host: HostSample | None, *, width: int, compact: bool) -> bool:
        return self.set_lines(host_lines(host, width, compact=compact))
