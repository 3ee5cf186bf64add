"""Work the dashboard does per tick, counted (calls), never timed: what each frame
resolves once stays once, however many lines or rows changed."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from textual.dom import DOMNode

from gputop.ui import process_table
from gputop.ui.app import GpuTopApp
from tests import builders as fx


def _later(snap: Any, seconds: float) -> Any:
    """The same node ``seconds`` later, every GPU busier: each GPU line and the clock change."""
    gpus = tuple(
        replace(g, utilization=replace(g.utilization, gpu=((g.utilization.gpu or 0) + 17) % 100))
        for g in snap.gpus
    )
    return replace(snap, time=snap.time + seconds, gpus=gpus)


async def test_changed_lines_look_up_each_panels_style_again_only_after_a_style_update(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``rich_style`` walks the DOM: frames of changed lines (every GPU line, the header)
    draw them without looking it up again; a theme looks it up once, and the lines'
    padding then has the new theme's style."""
    first = fx.multi_gpu_snapshot(8)
    app = GpuTopApp(snapshots=[first])
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        panel = app.gpu_panel.query_one("GpuLines")
        header = app.header
        resolved: list[object] = []
        style = DOMNode.rich_style

        def counting(node: DOMNode) -> Any:
            resolved.append(node)
            return style.fget(node)  # type: ignore[attr-defined]

        monkeypatch.setattr(DOMNode, "rich_style", property(counting))
        snap = first
        for _ in range(3):
            later = _later(snap, 1.0)
            app.apply_snapshot(later, (snap, later))
            snap = later
            await pilot.pause()
            for widget in (panel, header):
                widget._cache.clear()  # every line drawn again, as after a full change
                lines = widget.render_lines(widget.region.reset_offset)
                assert len(lines) == len(widget.lines) > 0
        assert len(panel.lines) >= 8  # many lines drawn, three times ...
        assert resolved.count(panel) == resolved.count(header) == 0  # ... no look-up
        dark = header.rich_style
        resolved.clear()
        app.theme = "textual-light"
        await pilot.pause()  # the screen drawn again: each widget looks its style up ...
        for widget in (panel, header):
            widget._cache.clear()
            widget.render_lines(widget.region.reset_offset)
            assert resolved.count(widget) == 1  # ... once
        assert header.rich_style != dark
        padding = list(header.render_line(0))[-1]  # the header is narrower than the screen
        light = header.rich_style
        assert padding.text.isspace() and padding.style is not None
        assert (padding.style.color, padding.style.bgcolor) == (light.color, light.bgcolor)


async def test_an_update_of_many_rows_resolves_the_columns_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = fx.multi_gpu_snapshot(8)
    app = GpuTopApp(snapshots=[first])
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        calls: list[tuple[object, ...]] = []
        columns = process_table.visible_columns

        def counting(*args: Any) -> Any:
            calls.append(args)
            return columns(*args)

        monkeypatch.setattr(process_table, "visible_columns", counting)
        rows = app.table.row_count
        second = _later(first, 61.0)  # every row's TIME moves
        app.apply_snapshot(second, (first, second))
        assert rows >= 8 and app.table.last_update == "cells"
        # once for the cells, once to update them in place: not once per row
        assert len(calls) == 2


async def test_a_tick_reads_each_rows_time_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tick's row alike but for its age keeps its cells while its TIME reads the same:
    what the last row showed was kept with it, so each row's TIME is spelled once a tick
    (twice before: the last row's again)."""
    snaps = _idle_ticks(fx.multi_gpu_snapshot(8), 2)
    app = GpuTopApp(snapshots=snaps[:2])
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        spelled: list[object] = []
        plain = process_table.time_text

        def counting(elapsed: Any) -> str:
            spelled.append(elapsed)
            return plain(elapsed)

        monkeypatch.setattr(process_table, "time_text", counting)
        app.apply_snapshot(snaps[2], snaps)
        assert app.table.last_update == "skip"
        assert len(spelled) == app.table.row_count == 16


async def test_a_key_on_the_same_snapshot_makes_no_row_or_cell_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Sort, reverse and filter order the rows of the snapshot shown: its rows are made
    once, and each row's cells once, however often the keys re-render it."""
    from gputop.views import process_view

    first = fx.multi_gpu_snapshot(8)
    app = GpuTopApp(snapshots=[first])
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        made_rows: list[object] = []
        made_cells: list[object] = []
        rows_of, cells_of = process_view.process_rows, process_table.ProcessTable._row_cells

        def counting_rows(snapshot: Any) -> Any:
            made_rows.append(snapshot)
            return rows_of(snapshot)

        def counting_cells(self: Any, row: Any, *args: Any) -> Any:
            made_cells.append(row)
            return cells_of(self, row, *args)

        monkeypatch.setattr(process_view, "process_rows", counting_rows)
        monkeypatch.setattr(process_table.ProcessTable, "_row_cells", counting_cells)
        before = [str(r.key.value) for r in app.table.ordered_rows]
        for key in ("s", "s", "r"):
            await pilot.press(key)
            await pilot.pause()
        assert [str(r.key.value) for r in app.table.ordered_rows] != before  # re-sorted
        assert (made_rows, made_cells) == ([], [])
        await pilot.press("space")  # tag the cursor's row: that row's cells only, once
        await pilot.pause()
        assert len(made_cells) == 1 and len(app.tagged) == 1
        made_cells.clear()
        second = _later(first, 61.0)  # a new snapshot: its rows and cells are made
        app.apply_snapshot(second, (first, second))
        assert made_rows == [second] and len(made_cells) == app.table.row_count >= 8


async def test_ticks_that_change_no_shown_text_repaint_no_process_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Idle: the same processes, one second later each tick. TIME shows minutes after a
    process's first minute, so no row's text changes and no row is drawn again, until
    the minute turns (issue 32 §5: not every row every second)."""
    first = fx.multi_gpu_snapshot(8)  # every process has run 10 minutes
    app = GpuTopApp(snapshots=[first])
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        drawn: list[int] = []
        render_line = process_table.ProcessTable.render_line

        def counting(self: Any, y: int) -> Any:
            drawn.append(y)
            return render_line(self, y)

        monkeypatch.setattr(process_table.ProcessTable, "render_line", counting)
        made: list[object] = []
        row_cells = process_table.ProcessTable._row_cells

        def counting_cells(self: Any, row: Any, *args: Any) -> Any:
            made.append(row)
            return row_cells(self, row, *args)

        monkeypatch.setattr(process_table.ProcessTable, "_row_cells", counting_cells)
        history = [first]
        updates = []
        for second in range(1, 6):
            snap = replace(first, time=first.time + second)
            history.append(snap)
            assert app.apply_snapshot(snap, tuple(history))
            await pilot.pause()
            updates.append(app.table.last_update)
        assert app.table.row_count >= 16
        assert updates == ["skip"] * 5
        assert drawn == []
        assert made == []  # nor any row's cells made again
        later = replace(first, time=first.time + 60)  # the minute turns: each row once
        history.append(later)
        app.apply_snapshot(later, tuple(history))
        await pilot.pause()
        assert app.table.last_update == "cells"
        assert drawn  # the count sees a repaint of the rows when there is one
        times = {app.table.get_cell(r.key, "time").plain for r in app.table.ordered_rows}
        assert {t.strip() for t in times} == {"11m"}


async def test_cells_kept_for_a_row_alike_but_for_its_age_are_the_cells_made_anew(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fast path (a new tick's row keeps its cells) against the plain one (cells made
    from the row), over a demo whose processes, figures and ages change every tick."""
    snaps = fx.demo_snapshots(90)
    plain = process_table.ProcessTable._row_cells
    made: list[object] = []

    def counting(self: Any, row: Any, *args: Any) -> Any:
        made.append(row)
        return plain(self, row, *args)

    monkeypatch.setattr(process_table.ProcessTable, "_row_cells", counting)
    app = GpuTopApp(snapshots=snaps[:1])
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        table = app.table
        seen = 0
        made.clear()
        for i in range(1, len(snaps)):
            app.apply_snapshot(snaps[i], snaps[: i + 1])
            cols = process_table.visible_columns(table._compact, table._owners, table._probes)
            for key, row in table.rows_by_key.items():
                assert table._cells[key] == plain(table, row, key in app.tagged, cols), (i, key)
            seen += len(table.rows_by_key)
        assert 0 < len(made) < seen  # both paths were taken


def _idle_ticks(first: Any, n: int) -> list[Any]:
    """``first`` and ``n`` ticks after it, one second apart, every GPU's sample the very
    object of the tick before (the NVML source shares a sample that did not change)."""
    return [replace(first, time=first.time + s) for s in range(n + 1)]


async def test_gpus_whose_samples_did_not_change_make_no_view_or_line_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Idle GPUs once the charts are full (issue 32 §5): a tick whose GPU samples are the
    last tick's objects makes no GPU view, measures no layout, cuts no GPU line and draws
    no history row again; the history still moves on (its cells are the last ones moved
    by one)."""
    from gputop.ui import gpu_panel

    snaps = _idle_ticks(fx.multi_gpu_snapshot(8), 240)  # more than 200 columns of history
    start = len(snaps) - 6
    app = GpuTopApp(snapshots=snaps[:start])
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        made: list[object] = []
        for name in ("gpu_view", "has_inside", "fit_parts", "history_parts"):
            plain = getattr(gpu_panel, name)

            def counting(*args: Any, _plain: Any = plain, _name: str = name, **kw: Any) -> Any:
                made.append(_name)
                return _plain(*args, **kw)

            monkeypatch.setattr(gpu_panel, name, counting)
        lines = app.gpu_panel.query_one(gpu_panel.GpuLines)
        before = lines.lines
        series = lines.blocks[0].series
        for i in range(start, len(snaps)):
            assert app.apply_snapshot(snaps[i], snaps[: i + 1])
            await pilot.pause()
        assert made == []
        assert lines.lines == before  # the same GPUs: the same lines
        assert lines.blocks[0].series == series  # full, and the same values moved on
        busier = _later(snaps[-1], 1.0)  # every GPU's utilization moves: each made again
        app.apply_snapshot(busier, (*snaps, busier))
        await pilot.pause()
        assert made.count("gpu_view") == 8
        assert "has_inside" in made
        assert lines.lines != before


def _plain_series(history: Any, index: int, cells: int) -> tuple[str, str]:
    """A GPU's (util, mem) history cells joined from the snapshots, as the panel drew them
    before it moved them on from tick to tick (the plain path)."""
    from gputop.ui.gpu_panel import _NO_POINT, _snapshot_points

    points = [_snapshot_points(s) for s in history[-cells:]]
    return (
        "".join(p.get(index, _NO_POINT)[0] for p in points),
        "".join(p.get(index, _NO_POINT)[1] for p in points),
    )


async def test_views_series_and_lines_kept_from_tick_to_tick_are_those_made_anew() -> None:
    """The fast path (views kept for samples that did not change, series moved on, a
    block's lines kept) against the plain one, over demo ticks whose GPUs change, idle
    ticks that share every sample, a GPU lost, a GPU choice, and two widths."""
    from gputop.ui import gpu_panel
    from gputop.ui.main_area import MainArea
    from gputop.views.gpu_view import (
        bar_width_for,
        gpu_view,
        has_inside,
        line_width,
        verdict_width_for,
    )

    demo = fx.demo_snapshots(70)
    snaps: list[Any] = []
    for i, snap in enumerate(demo):
        if i % 3 == 2:  # an idle tick: the last tick's samples, one second later
            snap = replace(snaps[-1], time=snaps[-1].time + 1.0)
        else:
            snap = replace(snap, time=(snaps[-1].time + 1.0) if snaps else snap.time)
        if 40 <= i < 46:  # GPU 1 lost for a while
            gpus = tuple(replace(g, lost=True) if g.index == 1 else g for g in snap.gpus)
            snap = replace(snap, gpus=gpus)
        snaps.append(snap)
    app = GpuTopApp(snapshots=snaps[:1])
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        panel = app.gpu_panel
        lines = panel.query_one(gpu_panel.GpuLines)
        kept_views = 0
        for i in range(1, len(snaps)):
            if i == 30:
                await pilot.resize_terminal(120, 40)
            if i == 50:
                await pilot.press("1")  # one GPU, then all again
            if i == 55:
                await pilot.press("a")
            if i == 60:
                await pilot.resize_terminal(200, 50)
            made = panel.made
            app.apply_snapshot(snaps[i], snaps[: i + 1])
            await pilot.pause()
            kept_views += len(panel.blocks) - (panel.made - made)
            history = app.history
            # The layout measured from the GPUs shown and the width (the plain path).
            shown = [
                g
                for g in app.snapshot.gpus  # type: ignore[union-attr]
                if app.shown_gpus is None or g.index in app.shown_gpus
            ]
            compact = app.compact or app.query_one(MainArea).shown.gpu_lines
            inside = any(has_inside(g) for g in shown)
            bar_width = bar_width_for(app.size.width, compact, inside)
            verdict_width = verdict_width_for(app.size.width, compact, bar_width, inside)
            text_width = max(
                (
                    line_width(bar_width, verdict_width, has_inside(g), compact)
                    for g in shown
                    if not g.lost
                ),
                default=40,
            )
            marks = app._verdict_marks() or {}
            for index, block in panel.blocks.items():
                assert panel._views[index][1][2] == marks.get(index), (i, index)
                assert panel._views[index][1][:2] == (compact, bar_width), (i, index)
                assert panel._views[index][1][3:] == (verdict_width, text_width), (i, index)
                gpu = app.snapshot.gpu(index)  # type: ignore[union-attr]
                compact, bar_width, verdict, verdict_width, text_width = panel._views[index][1]
                assert block.view == gpu_view(
                    gpu,  # type: ignore[arg-type]
                    compact=compact,
                    bar_width=bar_width,
                    verdict=verdict,
                    verdict_width=verdict_width,
                    text_width=text_width,
                ), (i, index)
                cells = len(block.series[0][1])
                util, mem = _plain_series(history, index, cells)
                assert block.series[0][1] == util, (i, index)
                if len(block.series) > 1:
                    assert block.series[1][1] == mem, (i, index)
            plain = [
                line
                for b in lines.blocks.values()
                for line in lines._block_lines(b, lines.size.width)
            ]
            assert list(lines.lines) == plain, i
        assert kept_views > 0  # both paths were taken
        assert panel.made > 0


async def test_a_frame_that_draws_none_of_a_widgets_lines_resolves_no_style(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Textual renders every widget beside a changed one (from its cache): the GPU lines
    and the process table look their style up (a walk of the DOM) only in a frame that
    draws one of their lines, not in each tick's frame for the header's clock; the header
    and the host lines, which draw a line each tick, not again once looked up."""
    from gputop.ui import gpu_panel

    # Past 200 columns of history, within one minute of TIME (13m20s to 13m24s); the
    # host's CPU moves each tick, so that each frame spans the header to the host panel.
    snaps = [
        replace(s, host=replace(s.host, cpu_percent=float(i % 2)))
        for i, s in enumerate(_idle_ticks(fx.multi_gpu_snapshot(8), 204))
    ]
    start = len(snaps) - 4
    app = GpuTopApp(snapshots=snaps[:start])
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        lines = app.gpu_panel.query_one(gpu_panel.GpuLines)
        watched = (lines, app.table, app.header, app.host_panel)
        resolved: list[object] = []
        style = DOMNode.rich_style

        def counting(node: DOMNode) -> Any:
            if node in watched:
                resolved.append(node)
            return style.fget(node)  # type: ignore[attr-defined]

        drawn: list[object] = []
        monkeypatch.setattr(DOMNode, "rich_style", property(counting))
        for i in range(start, len(snaps)):
            app.apply_snapshot(snaps[i], snaps[: i + 1])
            await pilot.pause()
            drawn.append(app.header.text)
        assert len(set(drawn)) == len(drawn)  # the clock moved: a frame each tick
        # Their changed lines (the clock, the CPU line) drawn with the style looked up
        # before: it changes only with a style update.
        assert app.header not in resolved
        assert app.host_panel not in resolved
        assert lines not in resolved
        assert app.table not in resolved


async def test_a_tick_queries_the_dom_for_no_widget(monkeypatch: pytest.MonkeyPatch) -> None:
    """The app's widgets (header, panels, table, filter, notes) are looked up once, not by
    a query of the DOM at each access, several times a tick."""
    snaps = _idle_ticks(fx.multi_gpu_snapshot(8), 4)
    app = GpuTopApp(snapshots=snaps[:1])
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        app.apply_snapshot(snaps[1], snaps[:2])  # every widget a tick reads, read once
        await pilot.pause()
        queries: list[object] = []
        for name in ("query_one", "query_one_optional"):
            plain = getattr(DOMNode, name)

            def counting(node: DOMNode, *args: Any, _plain: Any = plain, **kw: Any) -> Any:
                if not isinstance(node, GpuTopApp) and node is not app.screen:
                    return _plain(node, *args, **kw)  # Textual's own, inside widgets
                queries.append(args[0] if args else kw)
                return _plain(node, *args, **kw)

            monkeypatch.setattr(DOMNode, name, counting)
        for i in range(2, len(snaps)):
            app.apply_snapshot(snaps[i], snaps[: i + 1])
            await pilot.pause()
        assert app.frames >= 3
        assert queries == []
        assert app.table is app.query_one("#procs")  # the widget a query finds


async def test_lines_that_change_together_are_one_refresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """The host panel's CPU, memory and rate lines change each tick together: one refresh
    of their regions (each refresh clears the widget's caches and may post a message),
    and only those lines are drawn again."""
    from textual.widget import Widget

    from gputop.ui.lines import PartsLines

    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(2)])
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        host = app.host_panel
        lines = list(host.lines)
        assert len(lines) >= 3
        refreshed: list[tuple[object, ...]] = []
        plain = Widget.refresh

        def counting(widget: Widget, *regions: Any, **kw: Any) -> Any:
            if widget is host:
                refreshed.append(regions)
            return plain(widget, *regions, **kw)

        monkeypatch.setattr(Widget, "refresh", counting)
        drawn: list[int] = []
        render_line = PartsLines.render_line

        def drawing(widget: PartsLines, y: int) -> Any:
            if widget is host:
                drawn.append(y)
            return render_line(widget, y)

        monkeypatch.setattr(PartsLines, "render_line", drawing)
        changed = [0, 2]
        for y in changed:
            lines[y] = ((f"changed {y}", ""),)
        assert host.set_lines(lines)
        await pilot.pause()
        assert len(refreshed) == 1 and len(refreshed[0]) == len(changed)
        assert sorted(set(drawn)) == changed
        assert not host.set_lines(lines)  # the same lines: no refresh at all
        assert len(refreshed) == 1
