"""A line the dashboard's widgets drop goes at once (gputop/ui/lines.py, issue 32 §5).

The compositor divides every line it draws, and Textual's Strip keeps the pieces, itself
among them: a cycle. Without LettingGoCache each line dropped at a tick waited for the
cyclic collector, which a settled dashboard runs seldom. These run ticks with the
collector off, then ask it what it would have had to free.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from rich.segment import Segment
from textual.strip import Strip

from gputop.sources.demo import DemoSource
from gputop.ui.app import GpuTopApp
from gputop.ui.lines import let_go


@contextmanager
def collector_off() -> Iterator[list[object]]:
    """The block runs with no cyclic collection; the list gets what a collection at its
    end found to be cyclic garbage (objects that reference counting did not free)."""
    gc.collect()
    gc.disable()
    found: list[object] = []
    try:
        yield found
    finally:
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            gc.collect()
            found.extend(gc.garbage)
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()


def test_a_divided_strip_let_go_is_freed_without_the_collector() -> None:
    def divided() -> None:
        strip = Strip([Segment("GPU 0  util 37%")])
        strip.divide([strip.cell_length])  # the compositor's cut: the piece is itself
        strip.crop(0, 3).divide([1, 3])

    with collector_off() as kept:
        divided()
    assert any(isinstance(o, Strip) for o in kept)  # Textual's own: a cycle
    kept.clear()

    def divided_let_go() -> None:
        strip = Strip([Segment("GPU 0  util 37%")])
        strip.divide([strip.cell_length])
        strip.crop(0, 3).divide([1, 3])
        let_go(strip)

    with collector_off() as kept:
        divided_let_go()
    assert not [o for o in kept if isinstance(o, Strip)]


async def test_ticks_leave_no_line_to_the_cyclic_collector() -> None:
    source = DemoSource(seed=7, start_time=1.8e9, step=1.0)
    history = [source.snapshot() for _ in range(3)]
    app = GpuTopApp(snapshots=history)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause()
        for _ in range(3):  # settle: the first ticks make the lines that stay
            history.append(source.snapshot())
            app.apply_snapshot(history[-1], history)
            await pilot.pause()
            app.export_screenshot()
        with collector_off() as kept:
            for _ in range(6):  # the demo's figures move: GPU lines, host, rows change
                history.append(source.snapshot())
                assert app.apply_snapshot(history[-1], history)
                await pilot.pause()
                app.export_screenshot()  # drawn as the terminal's screen is (headless draws none)
        strips = [o for o in kept if isinstance(o, Strip)]
        assert not strips, [s.text[:40] for s in strips[:10]]
