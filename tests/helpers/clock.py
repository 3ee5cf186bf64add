"""A monotonic clock a test moves by hand (a reader's ``monotonic=``)."""

from __future__ import annotations


class Clock:
    """The reader's monotonic clock, moved by the test (``clock.now += 1``)."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
