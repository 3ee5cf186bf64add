"""The main screen's partial update draws the widgets under a changed region only
(gputop/ui/main_area.py), and writes what Textual's own update would: counted and
compared, never timed."""

from __future__ import annotations

import re
from dataclasses import replace
from functools import partial
from typing import Any

import pytest
from textual._compositor import Compositor
from textual.widget import Widget

from gputop.ui import main_area
from gputop.ui.app import GpuTopApp
from tests import builders as fx
from tests.helpers.pilot import Frames, composed_footer

#: A cursor move followed by no cell: another move, a line's end or the update's end.
IDLE_MOVE = re.compile(r"\x1b\[\d+;\d+H(?=\x1b\[\d+;\d+H|\n|$)")


def written(update: str) -> str:
    """What an update writes on the terminal: its bytes without the moves that write nothing."""
    return IDLE_MOVE.sub("", update)


def _settled(n: int) -> list[Any]:
    """Past 200 columns of history, within one minute of TIME; every GPU's sample the very
    object of the tick before (nothing on the GPUs changes), the host's CPU moving each
    tick: each tick changes the header's clock and a host line, as a settled dashboard."""
    first = fx.multi_gpu_snapshot(8)
    return [
        replace(first, time=first.time + s, host=replace(first.host, cpu_percent=float(s % 2)))
        for s in range(n + 1)
    ]


async def _settled_ticks(
    pilot: Any, app: GpuTopApp, snaps: list[Any], start: int, monkeypatch: pytest.MonkeyPatch
) -> list[Widget]:
    """The widgets drawn over ``snaps[start:]``, each tick applied once the frame of the
    one before was written (never two ticks in one frame)."""
    frames = Frames(app)
    # What the start left to draw (the footer's keys...) is drawn before the count begins.
    await frames.after(pilot, app.screen.refresh, "a whole repaint")
    drawn: list[Widget] = []
    plain = Widget.render_lines

    def counting(widget: Widget, crop: Any) -> Any:
        drawn.append(widget)
        return plain(widget, crop)

    monkeypatch.setattr(Widget, "render_lines", counting)
    for i in range(start, len(snaps)):
        await frames.after(pilot, partial(app.apply_snapshot, snaps[i], snaps[: i + 1]), "tick")
    return drawn


async def test_a_settled_tick_draws_no_widget_away_from_the_changed_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Textual's partial update rendered every widget of the screen for the header's clock
    (the footer, the GPU lines, the process table: once a second each, settled)."""
    snaps = _settled(206)
    start = len(snaps) - 6
    app = GpuTopApp(snapshots=snaps[:start])
    async with app.run_test(size=(200, 50)) as pilot:
        footer = await composed_footer(pilot)
        drawn = await _settled_ticks(pilot, app, snaps, start, monkeypatch)
        assert drawn.count(app.header) >= len(snaps) - start  # a frame each tick
        assert app.host_panel in drawn
        for still in (footer, app.table, app.gpu_panel, *app.gpu_panel.children):
            assert still not in drawn, still


async def test_a_settled_tick_draws_no_container_wholly_behind_the_changed_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The header's row and the host line are each wholly the header's and the host
    panel's: the screen and the main area behind them draw none of their cells."""
    snaps = _settled(206)
    start = len(snaps) - 4
    app = GpuTopApp(snapshots=snaps[:start])
    async with app.run_test(size=(200, 50)) as pilot:
        await composed_footer(pilot)
        drawn = await _settled_ticks(pilot, app, snaps, start, monkeypatch)
        assert app.header in drawn and app.host_panel in drawn
        assert app.screen not in drawn
        assert app.query_one(main_area.MainArea) not in drawn


async def test_each_partial_update_writes_what_textuals_own_would(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every partial update of a run (demo ticks whose GPUs, host and processes change,
    settled ticks, a toast, a sort) against Textual's update of the same changed regions
    over every widget: the same bytes for the terminal, but for a cursor move that writes
    nothing (a widget left out whose cut of a line is empty: Textual moves there and
    writes no cell)."""
    plain = Compositor.render_partial_update
    narrowed = main_area.ChangedOnlyCompositor.render_partial_update
    compared: list[bool] = []

    def both(comp: Any) -> Any:
        dirty = set(comp._dirty_regions)
        widgets = len(comp.visible_widgets)
        want = plain(comp)
        comp._dirty_regions.update(dirty)
        rendered: list[Widget] = []
        render_lines = Widget.render_lines

        def counting(widget: Widget, crop: Any) -> Any:
            rendered.append(widget)
            return render_lines(widget, crop)

        with monkeypatch.context() as m:
            m.setattr(Widget, "render_lines", counting)
            got = narrowed(comp)
        assert comp.visible_widgets is not None and len(comp.visible_widgets) == widgets
        if want is None:
            assert got is None
        else:
            console = app.console
            assert got is not None
            assert written(got.render_segments(console)) == written(want.render_segments(console))
            compared.append(len(rendered) < widgets)
        return got

    monkeypatch.setattr(main_area.ChangedOnlyCompositor, "render_partial_update", both)
    demo = fx.demo_snapshots(12)
    app = GpuTopApp(snapshots=demo[:1])
    async with app.run_test(size=(200, 50), notifications=True) as pilot:  # toasts drawn
        await composed_footer(pilot)
        frames = Frames(app)
        for i in range(1, len(demo)):
            await frames.after(pilot, partial(app.apply_snapshot, demo[i], demo[: i + 1]), "tick")
        settled = _settled(4)
        for i in range(len(settled)):
            await frames.after(
                pilot, partial(app.apply_snapshot, settled[i], settled[: i + 1]), "settled tick"
            )
        await frames.after(pilot, lambda: app.notify("a toast over the table"), "a toast")
        await frames.after(pilot, app.action_sort, "another sort (the table's rows move)")
    assert any(compared)  # some updates left widgets out ...
    assert len(compared) >= 10  # ... of many compared


def test_the_main_screen_draws_through_the_narrowed_compositor() -> None:
    screen = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(2)]).get_default_screen()
    assert isinstance(screen._compositor, main_area.ChangedOnlyCompositor)
