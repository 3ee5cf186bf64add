"""A monotonic clock a test moves by hand, and NVML readers that run on one."""

from __future__ import annotations

from gputop.sources.nvml import NvmlReader
from tests.fakenvml import FakeNvml, Scenario


class Clock:
    """The reader's monotonic clock, moved by the test (``clock.now += 1``)."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def clocked_reader(
    fake_nvml: FakeNvml, made: list[NvmlReader], scenario: Scenario
) -> tuple[NvmlReader, Clock]:
    """A reader of ``scenario`` whose clock the test moves (GPM spacing and counter rates
    follow it), kept in ``made`` to be closed (tests/sources/conftest.py's ``made``)."""
    fake_nvml.write(scenario)
    reader = NvmlReader()
    clock = Clock()
    reader._clock = clock
    made.append(reader)
    return reader, clock
