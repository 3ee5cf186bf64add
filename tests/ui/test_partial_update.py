"""The main screen's partial update draws the widgets under a changed region only
(gputop/ui/main_area.py), and writes what Textual's own update would: counted and
compared, never timed."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from textual._compositor import Compositor
from textual.widget import Widget

from gputop.ui import main_area
from gputop.ui.app import GpuTopApp
from tests import builders as fx
from tests.helpers.pilot import composed_footer


def _settled(n: int) -> list[Any]:
    """Past 200 columns of history, within one minute of TIME; every GPU's sample the very
    object of the tick before (nothing on the GPUs changes), the host's CPU moving each
    tick: each tick changes the header's clock and a host line, as a settled dashboard."""
    first = fx.multi_gpu_snapshot(8)
    return [
        replace(first, time=first.time + s, host=replace(first.host, cpu_percent=float(s % 2)))
        for s in range(n + 1)
    ]


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
        await pilot.pause()
        drawn: list[Widget] = []
        plain = Widget.render_lines

        def counting(widget: Widget, crop: Any) -> Any:
            drawn.append(widget)
            return plain(widget, crop)

        monkeypatch.setattr(Widget, "render_lines", counting)
        headers = []
        for i in range(start, len(snaps)):
            assert app.apply_snapshot(snaps[i], snaps[: i + 1])
            await pilot.pause()
            headers.append(app.header.text)
        assert len(set(headers)) == len(headers)  # the clock moved: a frame each tick
        assert drawn.count(app.header) >= len(headers)
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
        await pilot.pause()
        drawn: list[Widget] = []
        plain = Widget.render_lines

        def counting(widget: Widget, crop: Any) -> Any:
            drawn.append(widget)
            return plain(widget, crop)

        monkeypatch.setattr(Widget, "render_lines", counting)
        for i in range(start, len(snaps)):
            assert app.apply_snapshot(snaps[i], snaps[: i + 1])
            await pilot.pause()
        assert app.header in drawn and app.host_panel in drawn
        assert app.screen not in drawn
        assert app.query_one(main_area.MainArea) not in drawn


async def test_each_partial_update_writes_what_textuals_own_would(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every partial update of a run (demo ticks whose GPUs, host and processes change,
    settled ticks, a toast) against Textual's update of the same changed regions over
    every widget: the same bytes for the terminal."""
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
            assert got.render_segments(console) == want.render_segments(console)
            compared.append(len(rendered) < widgets)
        return got

    monkeypatch.setattr(main_area.ChangedOnlyCompositor, "render_partial_update", both)
    demo = fx.demo_snapshots(12)
    app = GpuTopApp(snapshots=demo[:1])
    async with app.run_test(size=(200, 50)) as pilot:
        await composed_footer(pilot)
        for i in range(1, len(demo)):
            app.apply_snapshot(demo[i], demo[: i + 1])
            await pilot.pause()
        settled = _settled(4)
        for i in range(len(settled)):
            app.apply_snapshot(settled[i], settled[: i + 1])
            await pilot.pause()
        app.notify("a toast over the table")
        await pilot.pause()
        await pilot.press("s")  # another sort: the table's rows move
        await pilot.pause()
    assert any(compared)  # some updates left widgets out ...
    assert len(compared) >= 10  # ... of many compared


def test_the_main_screen_draws_through_the_narrowed_compositor() -> None:
    screen = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(2)]).get_default_screen()
    assert isinstance(screen._compositor, main_area.ChangedOnlyCompositor)
