"""Room for processes (issue 32 §3): the layout key gives the process table the lines
the GPU and host panels took."""

from __future__ import annotations

from gputop.ui.app import GpuTopApp
from gputop.ui.main_area import LAYOUTS, MainArea
from tests import builders as fx


def rows_on_screen(app: GpuTopApp) -> int:
    """Process rows the table shows without scrolling."""
    table = app.table
    room = table.scrollable_content_region.height - table.header_height
    return max(0, min(table.row_count, room))


async def test_the_layout_key_shows_more_process_rows_at_100x30_with_8_gpus() -> None:
    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(8)])
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert app.table.row_count == 16
        seen = [rows_on_screen(app)]
        for _ in LAYOUTS[1:]:
            await pilot.press("c")
            await pilot.pause()
            seen.append(rows_on_screen(app))
        # 5 of 16 rows in the full layout (the count); one line per GPU already
        # gives room, and each later layout at least as much (here: all 16 rows).
        assert seen == sorted(seen) and seen[1] > seen[0] and seen[-1] == 16, seen
        await pilot.press("c")  # back to the full layout
        await pilot.pause()
        main = app.query_one("#main", MainArea)  # the area keeps its layout; the app none
        assert main.shown is LAYOUTS[0] and rows_on_screen(app) == seen[0]
        assert "layout" not in vars(app)
        await pilot.press("c")
        await pilot.pause()
        assert main.shown.gpu_lines
        assert [len(b.view.lines) for b in app.gpu_panel.blocks.values()] == [1] * 8
        await pilot.press("c", "c")
        await pilot.pause()
        assert not app.gpu_panel.display and not app.host_panel.display


async def test_at_80x24_the_key_skips_what_the_compact_layout_already_draws() -> None:
    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(8)])
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        before = rows_on_screen(app)
        await pilot.press("c")
        await pilot.pause()
        assert not app.host_panel.display  # the first press already changes the screen
        assert rows_on_screen(app) > before
