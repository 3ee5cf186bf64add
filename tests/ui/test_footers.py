"""Issue 32 §4: a footer offers only keys that work on its screen: the kill dialog and
help show their own keys (not the dashboard's `q Quit`), the kill key is left out where
nothing can be signalled (a fleet host, host-only mode with no process) and, pressed,
says why; the demo's kill dialog draws no signal under "Nothing will be signalled"."""

from __future__ import annotations

from typing import Any

import pytest
from textual.app import App
from textual.pilot import Pilot
from textual.widgets import Button

from gputop.model import DriverInfo, Snapshot
from gputop.ui.app import GpuTopApp
from gputop.ui.fleet import FleetApp
from gputop.ui.screens.help import HelpScreen
from gputop.ui.screens.kill import KillScreen
from tests import builders as fx
from tests.helpers.fleet import demo_fleet
from tests.helpers.pilot import composed_footer, listed_keys


@pytest.fixture(autouse=True)
def _no_animations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")


async def footer_keys(pilot: Pilot[Any]) -> list[str]:
    """The descriptions the footer on top draws, on its bottom line, once it has its keys."""
    footer = await composed_footer(pilot)
    assert footer.display and footer.region.bottom == pilot.app.size.height
    return listed_keys(footer)


def said(app: App[object]) -> list[str]:
    return [str(n.message) for n in app._notifications]


async def test_the_demo_kill_dialog_and_help_show_their_own_keys() -> None:
    app = GpuTopApp(snapshots=fx.demo_snapshots(5))  # as the demo: no pid is real
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert "Kill" in await footer_keys(pilot)  # the demo's dashboard offers it: it explains
        await pilot.press("k")
        await pilot.pause()
        assert isinstance(app.screen, KillScreen)
        assert await footer_keys(pilot) == ["Cancel"]
        assert [b.id for b in app.screen.query(Button)] == ["cancel", "close"]
        await pilot.press("escape", "question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert "Quit" not in await footer_keys(pilot) and "Close" in await footer_keys(pilot)


async def test_host_only_without_a_process_leaves_kill_out_and_says_why() -> None:
    snap = Snapshot(time=fx.T0, hostname="n", driver=DriverInfo(available=False, error="no driver"))
    app = GpuTopApp(snapshots=[snap])
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert "Kill" not in await footer_keys(pilot)
        await pilot.press("k")
        await pilot.pause()
        assert any("no process to signal" in s for s in said(app)), said(app)


async def test_a_fleet_host_leaves_kill_out_and_says_why() -> None:
    fleet, _ = demo_fleet(["h1", "h2"], ticks=10)
    app = FleetApp(fleet)  # type: ignore[arg-type]
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert app.host == "h1"
        assert "Kill" not in await footer_keys(pilot)
        await pilot.press("k")
        await pilot.pause()
        assert any("read-only" in s for s in said(app)), said(app)


async def test_htop_keys_work() -> None:
    app = GpuTopApp(snapshots=fx.demo_snapshots(5))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        for key in ("f1", "h"):
            await pilot.press(key)
            await pilot.pause()
            assert isinstance(app.screen, HelpScreen), key
            await pilot.press("escape")
            await pilot.pause()
        await pilot.press("f9")
        await pilot.pause()
        assert isinstance(app.screen, KillScreen)
        await pilot.press("escape")
        await pilot.pause()
        user = app.table.cursor_proc.user if app.table.cursor_proc else None
        assert user
        await pilot.press("u")
        await pilot.pause()
        assert app.text_filter == user and app.filter_input.value == user
        assert all(user in (r.user or "") + r.command for r in app.table.rows_by_key.values())
        await pilot.press("escape")
        await pilot.pause()
        assert app.text_filter == ""
        await pilot.press("f10")
        await pilot.pause()
    assert app.return_code == 0
