"""Issue 32 §5: the first frame is drawn before the footer and the filter box are built;
both come one refresh later, and nothing is lost when the filter is asked for first."""

from __future__ import annotations

from typing import Any

import pytest
from textual.widgets import Footer, Input

from gputop.pipeline import Frame
from gputop.ui.app import GpuTopApp
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


async def test_the_footer_and_the_filter_box_come_after_the_first_frame() -> None:
    app = FirstFrameProbe(snapshots=fx.demo_snapshots(5))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.at_first_frame == {"footer": None, "filter": None, "gpu lines": True}
        footer = await composed_footer(pilot)  # keys listed (one refresh after its mount)
        assert footer.id == "footer"
        assert footer.region.bottom == app.size.height  # docked below the table
        box = app.screen.query_one("#filter", Input)
        assert not box.display  # hidden until asked for


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
        assert len(list(app.screen.query(Footer))) == 1


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
