"""A dashboard that notes what its first drawn frame showed (the start's tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gputop.ui.app
from gputop.pipeline import Frame
from gputop.ui.app import GpuTopApp

#: The app's style sheet (a relative CSS_PATH is read beside the subclass's module).
CSS = str(Path(gputop.ui.app.__file__).with_name(GpuTopApp.CSS_PATH))  # type: ignore[arg-type]


class FirstFrameProbe(GpuTopApp):
    """Keeps :meth:`noted` of the first frame drawn in ``at_first_frame``."""

    CSS_PATH = CSS

    at_first_frame: dict[str, Any] | None = None

    def noted(self, frame: Frame) -> dict[str, Any]:
        """What a test wants to know of the first drawn frame."""
        raise NotImplementedError

    def apply_frame(self, frame: Frame) -> bool:
        drawn = super().apply_frame(frame)
        if drawn and self.at_first_frame is None:
            self.at_first_frame = self.noted(frame)
        return drawn
