"""The one-line header: host, driver, CUDA, interval, mode, markers, tick cost."""

from __future__ import annotations

from gputop.ui.lines import PartsLines
from gputop.ui.views import Parts


class HeaderLine(PartsLines):
    """Host, driver, CUDA, interval, mode, PAUSED / STALE markers, tick cost."""

    DEFAULT_CSS = """
    HeaderLine {
        height: 1;
        width: 1fr;
        background: $panel;
    }
    """

    def show(self, parts: Parts) -> bool:
        """Repaint when the parts changed; returns whether it did."""
        return self.set_lines((parts,))
