"""Issue 32 §3: the GPU detail screen at 80x24 draws one readable chart at a time (paged
with the arrow keys) with ticks on round figures, and a live dashboard's charts speak of
"seconds ago", never of a replay's cursor."""

from __future__ import annotations

import sys

import pytest

from gputop.ui.app import GpuTopApp
from gputop.ui.screens.detail import (
    MAX_TICKS,
    DetailScreen,
    HistoryPlot,
    Series,
    nice_ticks,
    tick_label,
)
from tests import builders as fx

#: A chart shorter than this many rows cannot show a line against its ticks.
MIN_CHART_ROWS = 10


@pytest.fixture(autouse=True)
def _no_animations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")


async def test_detail_at_80x24_one_tall_chart_at_a_time_live_says_seconds_ago() -> None:
    app = GpuTopApp(snapshots=fx.demo_snapshots(60))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DetailScreen)
        charts = screen.charts()
        seen = []
        for _ in charts:
            shown = [p for p in screen.query(HistoryPlot) if p.display]
            assert len(shown) == 1, [p.id for p in shown]
            plot = shown[0]
            seen.append(plot.id)
            assert plot.size.height >= MIN_CHART_ROWS, plot.size
            assert plot.xlabel == "seconds ago"  # live: no cursor
            drawn = plot.render().plain
            assert "seconds ago" in drawn and "cursor" not in drawn
            assert len(plot.ticks) >= 3  # more than one tick: the scale can be read
            await pilot.press("right")
            await pilot.pause()
        assert seen == [f"plot-{c}" for c in charts]
        assert [p.id for p in screen.query(HistoryPlot) if p.display] == [seen[0]]  # wraps
        await pilot.press("left")
        await pilot.pause()
        assert [p.id for p in screen.query(HistoryPlot) if p.display] == [seen[-1]]
        # wide again: every chart of the grid
        await pilot.resize_terminal(200, 50)
        await pilot.pause()
        assert len([p for p in screen.query(HistoryPlot) if p.display]) == len(charts)


@pytest.mark.parametrize(
    ("ymax", "most", "ticks"),
    [
        (100.0, 5, ["0", "25", "50", "75", "100"]),
        (100.0, 3, ["0", "50", "100"]),
        (63.0, 5, ["0", "20", "40", "60"]),
        (1.0, 5, ["0", "0.25", "0.5", "0.75", "1"]),
        (700.0, 4, ["0", "250", "500"]),
    ],
)
def test_nice_ticks_fall_on_round_figures(ymax: float, most: int, ticks: list[str]) -> None:
    got = nice_ticks(ymax, most)
    assert [tick_label(t) for t in got] == ticks
    assert len(got) <= most and got[-1] <= ymax


#: The smallest floats: subnormal ones (the last hypothesis draws now and then, as a
#: recording's or a remote host's figure) and the smallest normal one.
TINY = [5e-324, 1e-323, 2.5e-323, 1e-320, sys.float_info.min]


@pytest.mark.parametrize("ymax", TINY)
def test_a_tiny_chart_top_gives_ticks_never_an_exception(ymax: float) -> None:
    """A subnormal top, divided into ticks, underflowed to 0 (log10 of 0, or a step of 0):
    the detail screen raised on a hostile figure (a sweep of hypothesis seeds found it)."""
    for most in range(2, MAX_TICKS + 1):
        got = nice_ticks(ymax, most)
        assert got[0] == 0 and len(got) <= most
        assert all(0 <= t <= (ymax if ymax >= sys.float_info.min else 1.0) for t in got)
    for span in (10.0, ymax):
        plot = HistoryPlot()
        points = ((-1.0, ymax), (0.0, 97.0))
        plot.draw("t", [Series("s", 10, points)], span=span, ymax=ymax, ylabel="%")
        plot.plt.plotsize(60, 15)
        assert plot.plt.build()
