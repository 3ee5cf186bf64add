"""The process table's fast row rendering draws exactly what DataTable itself draws.

``ProcessTable._render_line_in_row`` overrides a private DataTable method (see
gputop/ui/process_table.py): these tests render the same table both ways, in the states
that change a row's look (cursor, hover, focus, tags, holders, theme), and compare every
cell's character and visual style. Only the click metadata may differ (column 0).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from functools import partial
from typing import Any

import pytest
from rich.segment import Segment
from textual.pilot import Pilot
from textual.strip import Strip
from textual.widgets import DataTable

from gputop.model import UnlistedHolder
from gputop.ui.app import GpuTopApp
from gputop.ui.process_table import ProcessTable
from tests import builders as fx
from tests.helpers.pilot import Frames

Cell = tuple[str, tuple[object, ...] | None]


def _cells(strips: list[Strip]) -> list[list[Cell]]:
    out: list[list[Cell]] = []
    for strip in strips:
        row: list[Cell] = []
        seg: Segment
        for seg in strip:
            st = seg.style
            look = (
                None
                if st is None
                else (st.color, st.bgcolor, st.bold, st.dim, st.italic, st.underline, st.reverse)
            )
            row += [(ch, look) for ch in seg.text]
        out.append(row)
    return out


def _snapshot() -> Any:
    snap = fx.multi_gpu_snapshot(3)
    holder = UnlistedHolder(pid=777, gpu=1, minor_number=1, user="bob", command="python x.py")
    hidden = fx.full_gpu_process(4242, visible=False)
    g0 = replace(snap.gpus[0], processes=(*snap.gpus[0].processes, hidden))
    return replace(
        snap,
        gpus=(g0, *snap.gpus[1:]),
        unlisted_holders=(holder,),
        processes=(fx.full_process_info(777, user="bob", command="python x.py"),),
    )


async def _render(fast: bool, size: tuple[int, int], steps: Any) -> list[list[Cell]]:
    # The fast path: ProcessTable's own row rendering and line assembly.
    names = ("_render_line_in_row", "_render_line", "render_line", "render_lines")
    originals = {name: ProcessTable.__dict__[name] for name in names}
    if not fast:
        for name in names:
            setattr(ProcessTable, name, getattr(DataTable, name))
    try:
        app = GpuTopApp(snapshots=[_snapshot()])
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await steps(pilot)
            await pilot.pause()
            table = app.table
            drawn = _cells(table.render_lines(table.region.reset_offset))
            if fast:  # the body rows did take the fast path, to the finished strips
                assert sum(k[0] != "header" for k in table._fast_rows) >= table.row_count
                assert len(table._row_strips) >= table.row_count
            return drawn
    finally:
        for name, method in originals.items():
            setattr(ProcessTable, name, method)


async def _nothing(pilot: Pilot[Any]) -> None:
    return None


async def _cursor_and_tags(pilot: Pilot[Any]) -> None:
    await pilot.press("space", "space", "down")


async def _hover(pilot: Pilot[Any]) -> None:
    await pilot.hover("#procs", offset=(12, 4))


async def _light_theme_unfocused(pilot: Pilot[Any]) -> None:
    pilot.app.theme = "textual-light"
    await pilot.press("space", "r")
    pilot.app.set_focus(None)


async def _compact(pilot: Pilot[Any]) -> None:
    await pilot.press("down", "down")


@pytest.mark.parametrize(
    ("size", "steps"),
    [
        ((200, 50), _nothing),
        ((120, 40), _cursor_and_tags),
        ((120, 40), _hover),
        ((120, 40), _light_theme_unfocused),
        ((80, 24), _compact),
    ],
)
async def test_fast_rows_look_exactly_like_datatable_rows(
    size: tuple[int, int], steps: Any
) -> None:
    fast = await _render(True, size, steps)
    slow = await _render(False, size, steps)
    assert len(fast) == len(slow)
    assert any(any(ch != " " for ch, _ in row) for row in fast[1:])  # rows were drawn
    for y, (a, b) in enumerate(zip(fast, slow, strict=True)):
        assert a == b, f"line {y} differs"


async def test_only_changed_rows_are_repainted_and_a_click_still_selects() -> None:
    first = fx.multi_gpu_snapshot(3)
    app = GpuTopApp(snapshots=[first])
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.table
        g1 = first.gpus[1]
        p = replace(g1.processes[0], sm_percent=1.0)
        second = replace(
            first, gpus=(first.gpus[0], replace(g1, processes=(p, g1.processes[1])), first.gpus[2])
        )
        repainted: list[Any] = []
        refresh = table.refresh

        def spy(*regions: Any, **kw: Any) -> Any:
            repainted.append(regions)
            return refresh(*regions, **kw)

        table.refresh = spy  # type: ignore[method-assign]
        app.apply_snapshot(second, (first, second))
        table.refresh = refresh  # type: ignore[method-assign]
        assert table.last_update == "cells"
        # One region, one line high: the row of 1:1010 (third row, below the header).
        assert [len(r) for r in repainted] == [1]
        region = repainted[0][0]
        assert region.height == 1 and region.y == table.header_height + 2
        await pilot.pause()
        assert [c.plain for c in table.get_row("1:1010")][6].strip() == "1%"
        top = table.content_region.y - table.region.y  # the border above the header
        await pilot.click("#procs", offset=(60, top + table.header_height + 4))
        assert table.cursor_key == "2:1020"  # the fifth row


def _tick(snap: Any, n: int) -> Any:
    """``snap`` with every process's SM at a value of tick ``n``: each row's cells change."""
    gpus = tuple(
        replace(g, processes=tuple(replace(p, sm_percent=float(n % 90)) for p in g.processes))
        for g in snap.gpus
    )
    return replace(snap, gpus=gpus, time=snap.time + n)


async def _drawn_ticks(
    pilot: Any, app: GpuTopApp, first: Any, ticks: range, history: list[Any] | None = None
) -> AsyncIterator[int]:
    """Each of ``ticks`` applied (0: ``first`` as the app started with it) and drawn: the
    frame after it written before the caller looks. ``history``: the snapshots so far."""
    frames = Frames(app)
    seen = [first] if history is None else history
    await frames.after(pilot, app.screen.refresh, "the first frame")
    for n in ticks:
        if n:
            seen.append(_tick(first, n))
            await frames.after(pilot, partial(app.apply_snapshot, seen[-1], tuple(seen)), "tick")
        yield n


async def test_rows_no_longer_shown_are_not_kept_rendered() -> None:
    # Issue 32 §5: the row caches held old generations of each row (its cells, segments
    # and strips) until their room check, which grows with the rows, cleared them.
    first = fx.multi_gpu_snapshot(3)
    app = GpuTopApp(snapshots=[first])
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.table
        async for n in _drawn_ticks(pilot, app, first, range(1, 9)):
            assert table.last_update == "cells"
            shown = set(table._cells.values())
            body = [k for k in table._fast_rows if k[0] != "header"]
            assert body and all(k[0] in shown for k in body), n
            rendered = {id(v[1]) for v in table._fast_rows.values()}
            assert table._row_strips and set(table._row_strips) <= rendered, n
        # What is held follows the rows shown, not the ticks seen.
        assert len(body) <= 2 * table.row_count


async def test_the_table_holds_each_cells_text_once() -> None:
    # Issue 32 §5: DataTable's data held a Rich Text per cell, with its own copy of the
    # cell's text, beside the cells the fast path draws from: a few hundred bytes a
    # process. It holds the cell itself now, made a Text only when DataTable draws it.
    first = fx.multi_gpu_snapshot(3)
    app = GpuTopApp(snapshots=[first])
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        table = app.table
        for n in (0, 1):  # as built, then as updated in place
            if n:
                app.apply_snapshot(_tick(first, n), (first, _tick(first, n)))
                await pilot.pause()
                assert table.last_update == "cells"
            assert table._cells
            for key, cells in table._cells.items():
                held = table.get_row(key)
                assert len(held) == len(cells)
                assert all(h.plain is text for h, (text, _) in zip(held, cells, strict=True))


async def test_equal_cells_are_held_once_across_rows_and_ticks() -> None:
    # Issue 32 §5: every row made its own tuple, string and ShownCell for a cell that many
    # rows show (the GPU, the user, the type, n/a) and that the row's last cells held.
    first = fx.multi_gpu_snapshot(4)
    app = GpuTopApp(snapshots=[first])
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.table
        history = [first]
        async for n in _drawn_ticks(pilot, app, first, range(9), history):
            assert n == 0 or table.last_update == "cells"
            cells = [c for row in table._cells.values() for c in row]
            assert len({id(c) for c in cells}) == len(set(cells)) < len(cells), n
            held = [v for row in table._data.values() for v in row.values()]
            assert len({id(v) for v in held}) == len(set(cells)), n
            # What is shared follows the cells shown, not the ticks seen.
            assert len(table._shared) <= 2 * len(cells) + 64, n
        # Cells no row shows any more are let go once they outnumber the shown ones.
        for i in range(4 * len(cells)):
            table._share((f"gone {i}", ""))
        snap = _tick(first, 9)
        app.apply_snapshot(snap, (*history, snap))
        await pilot.pause()
        cells = [c for row in table._cells.values() for c in row]
        assert set(cells) <= set(table._shared)
        assert len(table._shared) <= 2 * len(cells) + 64
