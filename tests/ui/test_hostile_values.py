"""Renderers are safe on their own (issue 21): NaN, +-inf, 1e308, ints past a float and
negative numbers, put in any number of a snapshot (no check by value in between), go
through every formatter, every pure view, ``--once`` text and JSON and the detail chart
without an exception. Hypothesis prints the failing example and its seed."""

from __future__ import annotations

import math
import random
from typing import Any

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from gputop import fmt
from gputop.model import LABELLED_METRICS, Snapshot
from gputop.present import render_json
from gputop.sources.demo import DemoSource
from gputop.textout import render_text
from gputop.ui.screens.detail import HistoryPlot, Series, downsample, gpu_timeline, runs
from gputop.views import gpu_view as gv
from gputop.views import parts
from gputop.views.header_view import header_parts
from gputop.views.host_view import core_lines, host_lines
from gputop.views.process_view import (
    SORT_KEYS,
    process_notes,
    process_rows,
    sort_rows,
    visible_columns,
)
from tests.helpers.fuzz import SEED
from tests.helpers.hostile import HOSTILE, poison_snapshot

numbers = st.one_of(
    st.sampled_from(HOSTILE),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
)
SETTINGS = settings(
    max_examples=60,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)

FORMATTERS = [
    fmt.bytes_,
    fmt.memory,
    fmt.rate,
    fmt.percent,
    fmt.number,
    lambda v: fmt.number(v, "ms", 2),
    lambda v: fmt.shown(v, "{:.0f}W"),
    fmt.duration,
    fmt.clock,
    fmt.finite,
    lambda v: fmt.ratio_percent(v, 100.0),
    lambda v: fmt.ratio_percent(1.0, v),
    parts.level,
    lambda v: parts.bar_cells(v, 10),
    lambda v: parts.bar(v, 10),
    lambda v: parts.memory_bar(v, v, 10),
    lambda v: parts.memory_bar(50.0, v, 10),
    lambda v: parts.used_total(v, v),
    parts.pct4,
]


@seed(SEED)
@SETTINGS
@given(value=numbers)
def test_no_formatter_raises(value: Any) -> None:
    """Seeded: GPUTOP_FUZZ_SEED replays it."""
    for f in FORMATTERS:
        out = f(value)
        assert out is None or isinstance(out, str | int | float | tuple)
    # n/a, never a number, for what is not a finite number
    if isinstance(value, float) and not math.isfinite(value):
        assert fmt.number(value) == fmt.rate(value) == fmt.duration(value) == fmt.NA


_BASE = [DemoSource(seed=4, start_time=1.8e9, step=1.0).snapshot() for _ in range(3)]


def every_view(snap: Snapshot) -> None:
    render_text(snap)
    render_json(snap)
    for compact in (False, True):
        header_parts(snap, interval=1.0, paused=False, stale=False, compact=compact)
        host_lines(snap.host, 120, compact=compact)
        if snap.host is not None:
            core_lines(snap.host.cpu_per_core, 80, max_rows=4)
        for g in snap.gpus:
            gv.gpu_view(g, compact=compact, bar_width=20)
            gv.mig_lines(g, 20)
            gv.pcie_downgrade(g)
            for m in LABELLED_METRICS:
                gv.metric_text(g, m.field)
        rows = process_rows(snap)
        for key in SORT_KEYS:
            sort_rows(rows, key)
        for row in rows:
            for column in visible_columns(compact):
                if column.key != "tag":  # the table's own mark
                    row.cell_text(column.key, compact=compact)
    process_notes(snap)


@seed(SEED)
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), values=st.lists(numbers, min_size=1, max_size=6))
def test_no_view_raises_on_hostile_numbers(seed: int, values: list[Any]) -> None:
    """Seeded: GPUTOP_FUZZ_SEED replays it."""
    rng = random.Random(seed)
    every_view(poison_snapshot(_BASE[0], rng, values))


@seed(SEED)
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), values=st.lists(numbers, min_size=1, max_size=6))
def test_the_detail_chart_never_raises(seed: int, values: list[Any]) -> None:
    """The detail screen's series and its plotext chart, built to text.
    Seeded: GPUTOP_FUZZ_SEED replays it."""
    rng = random.Random(seed)
    history = [poison_snapshot(s, rng, values) for s in _BASE]
    timeline = gpu_timeline(history, 0)
    points = tuple((x, None if g is None else g.utilization.gpu) for x, g in timeline)
    runs(downsample(points, 60.0, 4))
    plot = HistoryPlot()
    peak = rng.choice(values)
    for ymax in (100.0, peak):
        plot.draw(
            "t", [Series("s", 10, points)], span=rng.choice([10.0, peak]), ymax=ymax, ylabel="%"
        )
        plot.plt.plotsize(60, 15)
        assert plot.plt.build()
