"""Screenshots of the main screen (pytest-textual-snapshot), fully deterministic.

Seeded demo fleet on its virtual clock, snapshots fed before the first frame, no sampler
thread and no timers. Regenerate with ``pytest tests/ui/test_ui_snapshots.py --snapshot-update``
and look at the SVGs in tests/ui/__snapshots__/ before accepting them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from textual.pilot import Pilot

from gputop.model import DriverInfo, UnlistedHolder
from gputop.ui.app import GpuTopApp
from tests import builders as fx
from tests.ui.test_header_markers import utc

SnapCompare = Callable[..., bool]


@pytest.fixture(autouse=True)
def _no_animations(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TEXTUAL_THEME", raising=False)
    with utc():  # the header's clock reads the same on every machine
        yield


def demo_app(**kw: Any) -> GpuTopApp:
    # 150 ticks: enough to fill the history at 200 columns.
    return GpuTopApp(snapshots=fx.demo_snapshots(150), **kw)


async def _steady(pilot: Pilot[Any]) -> None:
    app = pilot.app
    assert isinstance(app, GpuTopApp)
    app.filter_input.cursor_blink = False  # the box is mounted after the first frame
    await pilot.pause()


def test_demo_80x24(snap_compare: SnapCompare) -> None:
    assert snap_compare(demo_app(), terminal_size=(80, 24), run_before=_steady)


def test_demo_200x50(snap_compare: SnapCompare) -> None:
    assert snap_compare(demo_app(), terminal_size=(200, 50), run_before=_steady)


def test_demo_light_theme_filter_tag_sort_80x24(snap_compare: SnapCompare) -> None:
    async def before(pilot: Pilot[Any]) -> None:
        pilot.app.theme = "textual-light"
        await _steady(pilot)
        await pilot.press("space", "space", "r")
        await pilot.press("slash", "p", "y", "t", "h", "enter")
        await pilot.pause()

    assert snap_compare(demo_app(), terminal_size=(80, 24), run_before=before)


def test_host_only_100x30(snap_compare: SnapCompare) -> None:
    driver = DriverInfo(available=False, error="NVML library not found (libnvidia-ml.so.1)")
    holder = UnlistedHolder(pid=4321, gpu=None, minor_number=0, user="bob", command="python x.py")
    snap = fx.full_snapshot(
        driver=driver,
        source="host-only",
        holders=[holder],
        processes=[fx.full_process_info(4321, user="bob", command="python x.py")],
    )
    app = GpuTopApp(snapshots=[snap])
    assert snap_compare(app, terminal_size=(100, 30), run_before=_steady)
