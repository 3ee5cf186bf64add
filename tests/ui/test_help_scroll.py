"""Issue 32 §3: `?` at 120x40 and 80x24 fits the screen, scrolls with Down, PgDn, Home and
End at once (no Tab first: its body has the focus), and its scrollbar can be seen."""

from __future__ import annotations

import pytest
from textual.color import Color
from textual.containers import VerticalScroll
from textual.widgets import Static

from gputop.ui.app import GpuTopApp
from gputop.ui.screens.help import HelpScreen
from tests import builders as fx


@pytest.fixture(autouse=True)
def _no_animations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_help_fits_scrolls_at_once_and_shows_its_scrollbar(size: tuple[int, int]) -> None:
    app = GpuTopApp(snapshots=fx.demo_snapshots(5))
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, HelpScreen)
        body = screen.query_one("#help-body", VerticalScroll)
        assert app.focused is body
        # the dialog and its close line are on the screen, whole
        dialog = screen.query_one("#help-dialog").region
        close = screen.query_one("#help-close", Static).region
        assert screen.region.contains_region(dialog)
        assert dialog.contains_region(close) and close.height == 1
        assert body.max_scroll_y > 0  # more help than room: it scrolls
        assert body.show_vertical_scrollbar
        # the thumb stands out from its track
        styles = body.styles
        assert styles.scrollbar_color.a > 0
        assert styles.scrollbar_color != styles.scrollbar_background
        contrast = abs(styles.scrollbar_color.brightness - Color.parse("black").brightness) + abs(
            styles.scrollbar_color.brightness - styles.scrollbar_background.brightness
        )
        assert contrast > 0.3
        await pilot.press("down")
        await pilot.pause()
        assert body.scroll_y == 1
        await pilot.press("end")
        await pilot.pause()
        assert body.scroll_y == body.max_scroll_y
        await pilot.press("home")
        await pilot.pause()
        assert body.scroll_y == 0
        await pilot.press("pagedown")
        await pilot.pause()
        assert body.scroll_y > 1
