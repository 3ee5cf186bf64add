"""The process screen on hostile figures (NaN, inf, huge, negative) and on every kind of
row (GPU process, /dev/nvidia holder, a pid of another namespace): no exception, the
formatters say n/a. Hypothesis prints the failing example; the Pilot test's seed is printed
(GPUTOP_FUZZ_SEED=N runs that one again)."""

from __future__ import annotations

import math
import random
from typing import Any

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from gputop.sources.demo import DemoSource
from gputop.ui.app import GpuTopApp
from gputop.ui.screens.process import ProcessScreen
from gputop.views.parts import plain
from gputop.views.process_view import process_facts, process_rows, process_timeline
from tests.helpers.fuzz import SEED
from tests.helpers.hostile import HOSTILE, poison_snapshot

numbers = st.one_of(
    st.sampled_from(HOSTILE),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
)
_BASE = [DemoSource(seed=4, start_time=1.8e9, step=1.0).snapshot() for _ in range(3)]


@seed(SEED)
@settings(max_examples=60, deadline=None, database=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(seed=st.integers(0, 2**32 - 1), values=st.lists(numbers, min_size=1, max_size=6))
def test_the_process_views_never_raise(seed: int, values: list[Any]) -> None:
    """Seeded: GPUTOP_FUZZ_SEED replays it."""
    rng = random.Random(seed)
    history = [poison_snapshot(s, rng, values) for s in _BASE]
    for row in process_rows(history[-1]):
        for line in process_facts(row, ended=rng.random() < 0.5):
            plain(line)
        for _, mem, sm in process_timeline(history, row.gpu, row.pid, row.create_time):
            for v in (mem, sm):  # a finite number for the chart, or a gap
                assert v is None or (isinstance(v, int | float) and math.isfinite(v))


async def test_every_row_opens_on_a_poisoned_history(fuzz_seed: int) -> None:
    """Seeded: GPUTOP_FUZZ_SEED replays it."""
    rng = random.Random(fuzz_seed)
    every_kind = {("gpu", True), ("holder", True), ("gpu", False)}
    for _ in range(100):
        # A poisoned pid can make two rows one (two pid 0s on a GPU are one key), or a
        # GPU's index n/a: draw again from the same seed until every kind of row is left.
        history = [poison_snapshot(s, rng, list(HOSTILE)) for s in _BASE]
        expected = {(r.kind, r.visible) for r in process_rows(history[-1])}
        if every_kind <= expected:
            break
    assert every_kind <= expected
    app = GpuTopApp(snapshots=history)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        kinds = set()
        for n in range(app.table.row_count):
            app.table.move_cursor(row=n)
            row = app.table.cursor_proc
            assert row is not None
            kinds.add((row.kind, row.visible))
            await pilot.press("e")
            await pilot.pause()
            assert isinstance(app.screen, ProcessScreen), n
            await pilot.press("escape")
            await pilot.pause()
        assert kinds == expected
