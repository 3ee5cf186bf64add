"""Issue 32 §5: the first frame is drawn before the footer is built, which comes one
refresh later; the filter box comes when first asked for, and nothing is lost when that
is before the first frame."""

from __future__ import annotations

from typing import Any

import pytest
from textual.widgets import Input

from gputop.pipeline import Frame
from gputop.ui.app import GpuTopApp
from gputop.ui.keybar import KeyBar
from tests import builders as fx
from tests.helpers.first_frame import CSS
from tests.helpers.first_frame import FirstFrameProbe as NotingProbe
from tests.helpers.pilot import composed_footer, listed_keys


@pytest.fixture(autouse=True)
def _no_animations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")


class FirstFrameProbe(NotingProbe):
    """Notes what the main screen holds when the first frame is drawn."""

    def noted(self, frame: Frame) -> dict[str, Any]:
        main = self._main_screen
        return {
            "footer": main.query_one_optional("#footer"),
            "filter": main.query_one_optional("#filter"),
            "gpu lines": self.gpu_panel.display,
        }


async def test_the_footer_comes_after_the_first_frame_the_filter_box_when_asked_for() -> None:
    app = FirstFrameProbe(snapshots=fx.demo_snapshots(5))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.at_first_frame == {"footer": None, "filter": None, "gpu lines": True}
        footer = await composed_footer(pilot)  # keys listed (one refresh after its mount)
        assert footer.id == "footer"
        assert footer.region.bottom == app.size.height  # docked below the table
        assert app.screen.query_one_optional("#filter") is None  # a run that never filters
        await pilot.press("escape")  # clearing no filter makes no box
        await pilot.pause()
        assert app.screen.query_one_optional("#filter") is None and app.text_filter == ""
        await pilot.press("slash")
        await pilot.press("v", "1")
        box = app.screen.query_one("#filter", Input)
        assert box.display and app.focused is box and app.text_filter == "v1"


class FilterFirst(GpuTopApp):
    """Asks for the filter box before the first frame's paint, as `/` typed at once would."""

    CSS_PATH = CSS

    def on_mount(self) -> None:
        super().on_mount()
        self.action_filter()


async def test_the_filter_asked_for_before_its_mount_is_the_one_box() -> None:
    app = FilterFirst(snapshots=fx.demo_snapshots(5))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        boxes = list(app.screen.query("#filter"))
        assert len(boxes) == 1 and boxes[0] is app.filter_input
        assert app.focused is app.filter_input and app.filter_input.display
        await pilot.press("v", "1")
        assert app.text_filter == "v1"
        assert len(list(app.screen.query(KeyBar))) == 1


class LostFocus(GpuTopApp):
    """The terminal said FocusOut before the footer came: the user went to another pane
    right after starting gputop."""

    CSS_PATH = CSS

    def on_mount(self) -> None:
        super().on_mount()
        self.app_focus = False


async def test_a_start_that_lost_the_focus_still_lists_the_keys() -> None:
    # Textual's footer composes its keys one refresh after the bindings are said, and only
    # while the app has focus: this footer stayed empty, and stayed so after focus came back.
    app = LostFocus(snapshots=fx.demo_snapshots(5))
    async with app.run_test(size=(120, 40)) as pilot:
        footer = await composed_footer(pilot)
        assert not app.app_focus
        assert {"Quit", "Help", "Filter", "Kill"} <= set(listed_keys(footer))
