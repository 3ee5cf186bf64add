"""The process table draws its own vertical scrollbar in its rows' last column (issue 32
§5): what Textual's ScrollBar widget drew, cell for cell and style for style, without the
widget. Beside that widget the compositor cut every line of each layer under it in two and
kept the pieces with the line: memory for each line the table shows.

Textual's ScrollBar is the oracle: the same app runs once with a table that leaves the
scrollbar to Textual and once with gputop's, at the top, in the middle and at the end of
the rows, in several themes, and the whole screens are compared.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from rich.segment import Segment
from textual.scrollbar import ScrollBar

import gputop.ui.app as app_module
from gputop.ui.app import GpuTopApp
from gputop.ui.process_table import ProcessTable
from tests import builders as fx
from tests.helpers.pilot import until
from tests.helpers.screen import terminal_cells

THEMES = ("textual-dark", "textual-light", "nord", "ansi-dark")
SIZE = (120, 30)

Cells = list[list[tuple[str, str]]]


class TextualBar(ProcessTable):
    """The table as it was: Textual's ScrollBar widget draws the scrollbar."""

    DEFAULT_CSS = """
    TextualBar { height: 1fr; width: 1fr; scrollbar-size-vertical: 1; }
    """

    def _bar(self) -> list[Segment] | None:
        return None


@pytest.fixture(autouse=True)
def _no_animations(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    monkeypatch.delenv("NO_COLOR", raising=False)
    yield


def _snapshot() -> Any:
    """8 GPUs with 6 processes each: more rows than the table shows at 120x30."""
    snap = fx.multi_gpu_snapshot(8)
    gpus = tuple(
        replace(
            g,
            processes=tuple(
                fx.full_gpu_process(2000 + 10 * g.index + k, user=f"u{k}") for k in range(6)
            ),
        )
        for g in snap.gpus
    )
    return replace(snap, gpus=gpus)


async def _screens(monkeypatch: pytest.MonkeyPatch, table: type[ProcessTable]) -> dict:
    monkeypatch.setattr(app_module, "ProcessTable", table)
    app = GpuTopApp(snapshots=[_snapshot()])
    out: dict[tuple[str, str], Cells] = {}
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.table.row_count == 48, "48 rows")
        assert app.table.virtual_size.height > app.table.size.height
        assert app.table.allow_vertical_scroll  # the mouse wheel scrolls it
        for where in ("top", "middle", "end"):
            row = {"top": 0, "middle": 24, "end": 47}[where]
            app.table.move_cursor(row=row, animate=False)
            await pilot.pause()
            for theme in THEMES:
                app.theme = theme
                await pilot.pause()
                out[where, theme] = terminal_cells(app)
        bars = [w for w in app.screen._compositor.visible_widgets if isinstance(w, ScrollBar)]
        out["widgets", ""] = [[(type(w).__name__, "")] for w in bars]
    return out


async def test_the_table_draws_the_scrollbar_textual_drew(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    textual = await _screens(monkeypatch, TextualBar)
    ours = await _screens(monkeypatch, ProcessTable)
    assert textual.pop(("widgets", "")), "the oracle drew no ScrollBar widget"
    assert not ours.pop(("widgets", "")), "a ScrollBar widget beside the table"
    for case, screen in textual.items():
        assert ours[case] == screen, case
    # the thumb moved: the three places are three looks
    assert len({str(ours[w, "textual-dark"]) for w in ("top", "middle", "end")}) == 3


async def test_no_scrollbar_while_every_row_fits() -> None:
    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(2)])
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.table.row_count == 4, "4 rows")
        table = app.table
        assert table.virtual_size.height <= table.size.height
        assert table._bar() is None
        inside = table.content_region
        right = {line[-1] for line in terminal_cells(app)[inside.y : inside.bottom]}
        assert {c for c, _ in right} == {" "}
