"""A filter with no match says so in the table area, and toasts do not linger over
charts (issue 32 §3)."""

from __future__ import annotations

from textual.widgets import Static

from gputop.ui.app import TOAST_SECONDS, GpuTopApp
from gputop.ui.main_area import NO_MATCH
from gputop.ui.screens.detail import DetailScreen
from tests import builders as fx


def no_match(app: GpuTopApp) -> str | None:
    box = app.query_one("#no-match", Static)
    return str(box.render()) if box.display else None


async def test_a_filter_with_no_match_says_so_and_esc_clears_it() -> None:
    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(2)])
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert no_match(app) is None
        await pilot.press("slash", *"u1", "enter")  # matches user u1
        await pilot.pause()
        assert app.table.row_count == 1 and no_match(app) is None
        await pilot.press("slash", *"zzz")  # / selects the old text: typing replaces it
        await pilot.pause()
        assert app.table.row_count == 0
        said = no_match(app)
        assert said is not None and NO_MATCH in said and '"zzz"' in said, said
        assert "Esc" in said
        # The line sits in the table's area: right above it, inside the screen.
        box = app.query_one("#no-match", Static)
        assert box.region.bottom == app.table.region.y and box.region.height == 1
        await pilot.press("escape")
        await pilot.pause()
        assert app.table.row_count == 4 and no_match(app) is None


async def test_a_gpu_without_processes_says_so_too() -> None:
    snap = fx.full_snapshot([fx.full_gpu_sample(0, processes=[fx.full_gpu_process(5)]),
                             fx.full_gpu_sample(1)])  # fmt: skip
    app = GpuTopApp(snapshots=[snap])
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("1")
        await pilot.pause()
        said = no_match(app)
        assert said is not None and "GPU 1" in said and "a shows all GPUs" in said
        await pilot.press("a")
        await pilot.pause()
        assert no_match(app) is None


async def test_toasts_are_short_and_never_linger_over_a_chart_screen() -> None:
    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(2)])
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        app.notify("plain")
        app.notify("long on the main screen", timeout=8)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)
        app.notify("over the charts", timeout=8)
        await pilot.pause()
        timeouts = {n.message: n.timeout for n in app._notifications}
        assert timeouts["plain"] == TOAST_SECONDS <= 3
        assert timeouts["long on the main screen"] == 8  # the table, not a chart, is under it
        assert timeouts["over the charts"] == TOAST_SECONDS
