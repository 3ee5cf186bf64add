"""The job detail of a job with a measured data wait, as a user sees it on the demo server
whose jobs run the probe (``--demo --demo-node h200-probe``, what
scripts/probe_screenshots.py shoots), at the sizes of those screenshots: the probe's
figures are never cut from their unit by the line's wrap, the data-wait chart's value
ticks stay apart on a short chart, and the step-time chart's legend never covers its
line."""

from __future__ import annotations

from typing import Any

import pytest

from gputop.analysis.jobs import Job
from gputop.model import Snapshot
from gputop.views.probe_view import job_probe_parts
from scripts.screenshots import demo_history

NODE = "h200-probe"
VIT_RANK = 70111  # kim's ViT: input-bound (measured), 2 ranks
#: The job detail's text is the terminal's width less its padding.
PADDING = 2


@pytest.fixture(scope="module")
def history() -> tuple[Snapshot, ...]:
    return demo_history(60, node=NODE)


def probed_jobs(history: tuple[Snapshot, ...]) -> list[Job]:
    from gputop.diagnosis import Diagnoser

    jobs = Diagnoser().push(*history).jobs
    found = [j for j in jobs if j.probe is not None]
    assert len(found) == 3, jobs  # the ViT, the U-Net, the fine-tune
    return found


@pytest.mark.parametrize("width", [80, 120])
def test_the_probe_lines_fit_the_screenshots_width(
    history: tuple[Snapshot, ...], width: int
) -> None:
    """Each probe line fits: a line longer than the width wraps where it falls, e.g.
    '3.4' at one line's end and 'batches/s' at the next's start."""
    for job in probed_jobs(history):
        for line in job_probe_parts(job.probe):
            text = "".join(chunk for chunk, _ in line)
            assert len(text) <= width - PADDING, (job.root_pid, text)


async def open_job_detail(app: Any, pilot: Any, history: tuple[Snapshot, ...]) -> Any:
    from gputop.ui.screens.job_detail import JobDetailScreen
    from gputop.ui.screens.jobs import JobsScreen

    app.apply_snapshot(history[-1], history)
    await pilot.pause()
    await pilot.press("j")
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, JobsScreen)
    diagnosis = app.diagnosis()
    job = next(j for j in diagnosis.jobs if VIT_RANK in j.pids)
    screen.job_tree.select_key(f"job:{job.id}")
    await pilot.pause()
    await pilot.press("enter")
    await pilot.pause()
    assert isinstance(app.screen, JobDetailScreen)
    return app.screen


@pytest.mark.parametrize(("size", "ticks"), [((80, 24), 3), ((120, 40), 5)])
async def test_the_charts_stay_readable_at_the_screenshots_sizes(
    history: tuple[Snapshot, ...], size: tuple[int, int], ticks: int
) -> None:
    from gputop.ui.app import GpuTopApp
    from gputop.ui.screens.detail import HistoryPlot
    from gputop.ui.screens.job_detail import CHART_FRAME_ROWS

    app = GpuTopApp(sampler=None)
    async with app.run_test(size=size) as pilot:
        screen = await open_job_detail(app, pilot, history)
        wait = screen.query_one("#plot-wait", HistoryPlot)
        # a tick every other row at most (0-25-50-75-100 on a short chart sat on
        # neighbouring rows, far from the values they named)
        assert len(wait.ticks) == ticks, wait.ticks
        assert wait.ticks[0] == "0" and wait.ticks[-1] == "100", wait.ticks
        step = screen.query_one("#plot-step", HistoryPlot)
        assert step._last_draw is not None
        _, series, options = step._last_draw
        peak = max(y for s in series for _, y in s.points if y is not None) / options["scale"]
        rows = step.size.height - CHART_FRAME_ROWS
        legend = len(series)
        assert legend == 2
        # the line's top is below the legend's rows (top left) and one row more
        assert peak / options["ymax"] <= (rows - legend - 1) / rows, (peak, options, rows)
