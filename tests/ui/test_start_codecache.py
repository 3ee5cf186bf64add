"""The dashboard's start ends one refresh after its first frame: the dataclasses' code
cache (gputop.codecache) is in place until then, and ``dataclasses`` uses the builtin
``exec`` after (tests/cli/test_codecache.py tests the cache itself)."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gputop import codecache
from gputop.pipeline import Frame
from tests import builders as fx
from tests.helpers.first_frame import FirstFrameProbe as NotingProbe
from tests.helpers.pilot import composed_footer


class FirstFrameProbe(NotingProbe):
    """Notes whether the cache's layer was in place when the first frame was drawn."""

    def noted(self, frame: Frame) -> dict[str, Any]:
        return {"layer": "exec" in vars(dataclasses), "running": codecache.running()}


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    codecache.stop()  # a layer this process may have from importing the CLI
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    monkeypatch.setenv(codecache.ENV_DIR, str(tmp_path))
    monkeypatch.delenv(codecache.ENV_OFF, raising=False)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    assert codecache.start()
    yield
    codecache.stop()


async def test_the_layer_is_taken_out_after_the_first_frame(started: None) -> None:
    app = FirstFrameProbe(snapshots=fx.demo_snapshots(5))
    async with app.run_test(size=(120, 40)) as pilot:
        await composed_footer(pilot)  # the refresh after the first frame is over
        assert app.at_first_frame == {"layer": True, "running": True}
        assert not codecache.running()
        assert "exec" not in vars(dataclasses)
