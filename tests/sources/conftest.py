"""Fixtures of the source tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gputop.sources.nvml import NvmlReader
from tests.fakenvml import FakeNvml


@pytest.fixture
def made(fake_nvml: FakeNvml) -> Iterator[list[NvmlReader]]:
    """The readers a test made (``tests.helpers.clock.clocked_reader``), closed after it."""
    readers: list[NvmlReader] = []
    yield readers
    for r in readers:
        r.close()
