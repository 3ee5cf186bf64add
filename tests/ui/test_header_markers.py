"""Issue 32 §3: the header says what a shared screen needs: REC while --record writes,
READONLY where nothing is signalled from here (demo, --readonly, a fleet; a replay says REPLAY), and
the sample's time of day."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from gputop.model import DriverInfo, Snapshot
from gputop.ui.app import GpuTopApp
from gputop.views.header_view import header_parts
from gputop.views.parts import plain
from tests import builders as fx


@pytest.fixture(autouse=True)
def _utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    with utc():
        yield


@contextmanager
def utc() -> Iterator[None]:
    """The header's clock in UTC, whatever the machine's zone; the zone back after."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    try:
        yield
    finally:
        if old is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = old
        time.tzset()


async def test_demo_says_readonly_and_the_time() -> None:
    snaps = fx.demo_snapshots(3)
    app = GpuTopApp(snapshots=snaps)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        header = app.header.text
        assert "READONLY" in header and "REC" not in header
        assert time.strftime("%H:%M:%S", time.gmtime(snaps[-1].time)) in header


async def test_rec_while_recording_and_not_once_it_stopped() -> None:
    app = GpuTopApp(snapshots=fx.demo_snapshots(3))
    why: list[str | None] = [None]
    app.record_status = lambda: why[0]
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        app.refresh_view()
        await pilot.pause()
        assert "REC" in app.header.text.split()
        why[0] = "disk full"
        app.record_error = "disk full"
        app.refresh_view()
        await pilot.pause()
        header = app.header.text
        assert "REC" not in header.split() and "! not recording: disk full" in header


@pytest.mark.parametrize("when", [float("nan"), float("inf"), -1.0, 1e300])
def test_a_bad_time_shows_no_clock_and_never_raises(when: float) -> None:
    snap = Snapshot(time=when, hostname="n", driver=DriverInfo(available=True))
    text = plain(header_parts(snap, interval=1.0, paused=False, stale=False, clock=True))
    assert ":" not in text.split("every")[-1]
