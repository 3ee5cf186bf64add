"""gputop's footer (KeyBar, issue 32 §5): one widget that draws what Textual's Footer
drew, cell for cell and style for style, and acts as it did on a click.

Textual's ``Footer`` is the oracle: the same app is run once with it and once with
KeyBar, and their bottom lines are compared at several widths and themes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from gputop.ui.app import GpuTopApp
from gputop.ui.keybar import KeyBar
from gputop.ui.screens.help import HelpScreen
from tests import builders as fx
from tests.helpers.pilot import composed_footer, until
from tests.helpers.screen import terminal_cells

ARROWS = Binding.Group("Move")
PAGES = Binding.Group("Page", compact=True)
ALONE = Binding.Group("Alone")

#: Every case Footer.compose has: a disabled key, one left out, two keys for one action,
#: a key with no description, a group, a compact group, a group of one, a hidden key.
BINDINGS = [
    Binding("q", "quit_", "Quit"),
    Binding("f", "find", "Find things", tooltip="look for it"),
    Binding("x", "off", "Off"),
    Binding("y", "gone", "Gone"),
    Binding("question_mark,f1", "help", "Help"),
    Binding("n", "bare", ""),
    Binding("left", "prev", "Previous", group=ARROWS),
    Binding("right", "next", "Next", group=ARROWS, tooltip="the next one"),
    Binding("pageup", "page_up", "Up", group=PAGES),
    Binding("pagedown", "page_down", "Down", group=PAGES),
    Binding("s", "solo", "Solo", group=ALONE),
    Binding("z", "hidden", "Hidden", show=False),
    Binding("ctrl+e", "edit", "Edit"),
]

WIDTHS = (24, 60, 131)
THEMES = ("textual-dark", "textual-light", "ansi-dark", "ansi-light", "solarized-light", "nord")

Cells = list[tuple[str, str]]


@pytest.fixture(autouse=True)
def _no_animations(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    monkeypatch.delenv("NO_COLOR", raising=False)
    yield


class Keys(App[None]):
    BINDINGS = BINDINGS

    def __init__(self, bar: Widget) -> None:
        super().__init__()
        self.bar = bar
        self.ran: list[str] = []
        self.bells = 0
        self.gone = False  # "gone" is left out until this is True

    def compose(self) -> ComposeResult:
        yield self.bar

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "off":
            return None  # shown, dimmed
        if action == "gone":
            return self.gone
        return True

    def bell(self) -> None:
        self.bells += 1

    def action_find(self) -> None:
        self.ran.append("find")

    def action_off(self) -> None:
        self.ran.append("off")


def bottom(app: App[Any]) -> Cells:
    """The screen's last line, cell by cell: (character, style)."""
    return terminal_cells(app)[-1]


def quit_drawn(app: App[Any]) -> Callable[[], bool]:
    return lambda: "Quit" in "".join(c for c, _ in bottom(app))


async def lines(bar: Widget, *, hover_x: int | None = None) -> dict[tuple[int, str], Cells]:
    """The bottom line at each width and theme, once the keys are drawn."""
    app = Keys(bar)
    out: dict[tuple[int, str], Cells] = {}
    async with app.run_test(size=(WIDTHS[0], 5)) as pilot:
        await until(pilot, quit_drawn(app), "keys drawn")
        for width in WIDTHS:
            await pilot.resize_terminal(width, 5)
            await pilot.pause()
            if hover_x is not None:
                await pilot.hover(Footer if isinstance(bar, Footer) else KeyBar, (hover_x, 0))
                await pilot.pause()
            for theme in THEMES:
                app.theme = theme
                await pilot.pause()
                out[width, theme] = bottom(app)
    return out


@pytest.mark.parametrize("compact", [False, True], ids=["wide", "compact"])
@pytest.mark.parametrize("palette", [True, False], ids=["palette", "no-palette"])
async def test_the_bar_draws_what_textuals_footer_draws(compact: bool, palette: bool) -> None:
    kw = {"compact": compact, "show_command_palette": palette}
    footer, bar = await lines(Footer(**kw)), await lines(KeyBar(**kw))
    for case, cells in footer.items():
        if compact and palette:
            # Footer's compact palette key keeps a margin at the right, through which
            # Footer shows whatever key ran past the palette; the bar leaves it blank.
            assert bar[case][-1][0] == " ", case
            cells, bar[case] = cells[:-1], bar[case][:-1]
        assert bar[case] == cells, case


@pytest.mark.parametrize("x", [1, 14], ids=["on-quit", "on-find"])
async def test_the_key_under_the_mouse_is_lit_as_footer_lights_it(x: int) -> None:
    footer, bar = await lines(Footer(), hover_x=x), await lines(KeyBar(), hover_x=x)
    for case, cells in footer.items():
        assert bar[case] == cells, case


async def test_the_keys_and_their_tooltips_are_footers() -> None:
    def said(app: Keys) -> list[tuple[str, str, str, bool, str]]:
        if isinstance(app.bar, KeyBar):
            return [(k.key, k.display, k.description, k.enabled, k.tooltip) for k in app.bar.shown]
        return [
            (k.key, k.key_display, k.description, not k.has_class("-disabled"), k.tooltip or "")
            for k in app.bar.query(FooterKey)
        ]

    seen = []
    for bar in (Footer(), KeyBar()):
        app = Keys(bar)
        async with app.run_test(size=(200, 5)) as pilot:
            await until(pilot, quit_drawn(app), "keys drawn")
            seen.append(said(app))
    assert seen[0] == seen[1]
    assert ("x", "x", "Off", False, "") in seen[1]  # dimmed, not left out
    assert not any(k[0] == "y" for k in seen[1])  # left out


async def test_a_click_presses_the_key_and_a_disabled_one_rings() -> None:
    bar = KeyBar(show_command_palette=False)
    app = Keys(bar)
    async with app.run_test(size=(200, 5)) as pilot:
        await until(pilot, lambda: bool(bar.shown), "keys")
        at = {p.key.action: p for p in bar.placed}
        await pilot.click(KeyBar, (at["find"].x + at["find"].width - 1, 0))  # its last cell
        await until(pilot, lambda: app.ran == ["find"], "find ran")
        await pilot.click(KeyBar, (at["off"].x, 0))
        await pilot.pause()
        assert app.ran == ["find"] and app.bells == 1
        await pilot.click(KeyBar, (199, 0))  # past the keys: nothing
        await pilot.pause()
        assert app.ran == ["find"] and app.bells == 1


async def test_a_click_on_the_dashboards_footer_runs_its_key() -> None:
    app = GpuTopApp(snapshots=fx.demo_snapshots(5))
    async with app.run_test(size=(80, 24)) as pilot:
        bar = await composed_footer(pilot)
        (help_key,) = [p for p in bar.placed if p.key.action.endswith("help")]
        await pilot.click(KeyBar, (help_key.x, 0))
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help screen")


async def test_keys_that_do_not_fit_are_cut_at_the_right() -> None:
    app = GpuTopApp(snapshots=fx.demo_snapshots(5))
    async with app.run_test(size=(80, 24)) as pilot:
        bar = await composed_footer(pilot)
        full = bar.render_line(0).text
        assert [p.whole for p in bar.placed] == [True] * len(bar.shown)
        await pilot.resize_terminal(60, 24)
        await until(pilot, lambda: bar.size.width == 60, "the bar at 60 columns")
        assert bar.render_line(0).text == full[:60]  # the same keys, the last ones cut
        placed = bar.placed
        assert placed[-1].x + placed[-1].width == 60 and not placed[-1].whole
        assert all(p.whole for p in placed[:-1])
        assert len(placed) < len(bar.shown)  # the keys after it are not drawn at all


async def test_the_dashboards_footer_is_one_widget() -> None:
    app = GpuTopApp(snapshots=fx.demo_snapshots(5))
    async with app.run_test(size=(200, 50)) as pilot:
        bar = await composed_footer(pilot)
        assert list(app.screen.query("#footer")) == [bar]
        assert not list(bar.query("*"))  # Footer: a widget per key (and a group each)
        assert {"Quit", "Help", "Filter", "Kill", "palette"} <= {k.description for k in bar.shown}


async def test_the_bar_follows_the_bindings_without_the_apps_focus() -> None:
    bar = KeyBar()
    app = Keys(bar)
    async with app.run_test(size=(200, 5)) as pilot:
        await until(pilot, lambda: bool(bar.shown), "keys")
        app.app_focus = False
        await pilot.pause()
        assert "Gone" not in [k.description for k in bar.shown]
        app.gone = True
        app.refresh_bindings()
        await until(pilot, lambda: "Gone" in [k.description for k in bar.shown], "Gone shown")
        await until(pilot, lambda: "y Gone" in bar.render_line(0).text, "Gone drawn")
