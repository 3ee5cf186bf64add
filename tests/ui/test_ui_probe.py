"""The probe's figures on screen (issue 31, section 3): the PROBE column of the process
table, the job lines, the job detail's charts and CUDA memory, the hint when no probe runs,
and formatters that never raise. Headless (Textual pilot), snapshots built with
``tests.ui.probes`` (the demo has no probes of its own here)."""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from gputop.analysis.jobs import JobProbe
from gputop.model import CudaMemory, Snapshot
from gputop.ui.app import GpuTopApp
from gputop.ui.screens.jobs import JOB_COLUMNS, JobsScreen
from gputop.views import process_view
from gputop.views.process_view import COLUMNS
from tests import builders as fx
from tests.helpers.fuzz import SEED
from tests.helpers.hostile import HOSTILE
from tests.helpers.screen import terminal_rows, widgets_words
from tests.ui.probes import RANKS, RESNET, cuda, probe, with_probes

WIDE = (200, 50)
MID = (120, 40)
SMALL = (80, 24)


def measured(t: float) -> dict[int, Any]:
    """Rank 0 waits 13 %, rank 1 71 % (mean 42 %); ResNet's probe measured nothing yet."""
    return {
        RANKS[0]: probe(t, 0.13, 0.31, memory=[cuda(0, 31.2, 74.5, 38.0)]),
        RANKS[1]: probe(t, 0.71, 0.33),
        RESNET: probe(t, None, None),
    }


@cache
def probed(n: int = 8) -> tuple[Snapshot, ...]:
    return tuple(with_probes(s, measured(s.time)) for s in fx.demo_snapshots(n))


@cache
def plain(n: int = 8) -> tuple[Snapshot, ...]:
    return tuple(fx.demo_snapshots(n))


def screen_text(app: Any) -> str:
    return "\n".join(terminal_rows(app))


# --- the process table ------------------------------------------------------------------


def test_rows_carry_their_probe_and_its_cell_text() -> None:
    rows = {r.pid: r for r in process_view.process_rows(probed()[-1])}
    assert rows[RANKS[0]].cell_text("probe", compact=False) == "wait 13% step 310 ms"
    assert rows[RANKS[0]].cell_text("probe", compact=True) == "wait 13%"
    # a probe that measured nothing yet: n/a, never 0
    assert rows[RESNET].cell_text("probe", compact=False) == "wait n/a step n/a"
    assert rows[30115].probe is None and rows[30115].cell_text("probe", compact=False) == ""


def test_the_probe_column_is_declared_once() -> None:
    assert [c.key for c in COLUMNS].count("probe") == 1
    assert [c.key for c in JOB_COLUMNS].count("probe") == 1
    assert "probe" not in {c.key for c in process_view.visible_columns(False)}  # only when asked
    assert "probe" in {c.key for c in process_view.visible_columns(False, probes=True)}


async def test_the_table_shows_the_probe_only_when_a_process_has_one() -> None:
    for size in (WIDE, MID):
        app = GpuTopApp(snapshots=probed())
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            text = screen_text(app)
            assert "PROBE" in text
            assert "wait 13% step 310 ms" in text and "wait 71% step 330 ms" in text
            assert "wait n/a step n/a" in text
    app = GpuTopApp(snapshots=probed())
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause()
        text = screen_text(app)
        assert "PROBE" in text and "wait 13%" in text and "wait 71%" in text
    app = GpuTopApp(snapshots=plain())
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        text = screen_text(app)
        assert "PROBE" not in text and "step n/a" not in text and " wait 13%" not in text


async def test_the_probe_column_comes_and_goes_with_the_probes() -> None:
    app = GpuTopApp(sampler=None)
    async with app.run_test(size=WIDE) as pilot:
        app.apply_snapshot(plain()[-1], plain())
        await pilot.pause()
        assert "PROBE" not in screen_text(app)
        app.apply_snapshot(probed()[-1], probed())
        await pilot.pause()
        assert "PROBE" in screen_text(app) and "wait 13%" in screen_text(app)
        app.apply_snapshot(plain()[-1], plain())
        await pilot.pause()
        assert "PROBE" not in screen_text(app)


# --- the job lines ----------------------------------------------------------------------


async def open_jobs(app: Any, pilot: Any, pid: int) -> JobsScreen:
    await pilot.press("j")
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, JobsScreen)
    diagnosis = app.diagnosis()
    job = next(j for j in diagnosis.jobs if pid in j.pids)
    assert screen.job_tree.select_key(f"job:{job.id}")
    await pilot.pause()
    return screen


async def test_job_lines_show_the_mean_wait_the_worst_rank_and_the_step() -> None:
    app = GpuTopApp(snapshots=probed())
    async with app.run_test(size=WIDE) as pilot:
        await open_jobs(app, pilot, RANKS[0])
        text = screen_text(app)
        assert "PROBE" in text
        assert "wait 42%/71% step 320 ms" in text  # the straggler named beside the mean
        assert "wait n/a step n/a" in text  # ResNet's probe: nothing measured yet
        # each rank's own figures on its GPU process line
        assert "% wait 71% step 330 ms CPU" in text and "% wait 13% step 310 ms CPU" in text
        words = widgets_words(app)
        assert "waiting for data 42% of each step (mean; worst rank 71%, pid 41202)" in words
    app = GpuTopApp(snapshots=probed())
    async with app.run_test(size=MID) as pilot:
        await open_jobs(app, pilot, RANKS[0])
        assert "wait 42% 320 ms" in screen_text(app)
    app = GpuTopApp(snapshots=plain())
    async with app.run_test(size=WIDE) as pilot:
        await open_jobs(app, pilot, RANKS[0])
        assert "PROBE" not in screen_text(app) and "probe:" not in widgets_words(app)


# --- the job detail ---------------------------------------------------------------------


async def test_enter_opens_the_job_detail_with_the_probe_charts_and_cuda_memory() -> None:
    from gputop.ui.screens.detail import HistoryPlot
    from gputop.ui.screens.job_detail import JobDetailScreen

    history = probed(12)
    app = GpuTopApp(snapshots=history)
    async with app.run_test(size=MID) as pilot:
        await open_jobs(app, pilot, RANKS[0])
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, JobDetailScreen)
        words = widgets_words(app)
        assert "waiting for data 42% of each step" in words
        assert "CUDA memory, pid 41201: cuda:0 allocated 31.2GiB reserved 74.5GiB" in words
        assert "no probe" not in words
        wait = screen.query_one("#plot-wait", HistoryPlot)
        step = screen.query_one("#plot-step", HistoryPlot)
        assert wait.display and step.display
        assert wait._last_draw is not None and step._last_draw is not None
        title, series, options = wait._last_draw
        assert options["ymax"] == 100  # a fixed 0-100 % scale
        assert [s.label for s in series] == ["mean", "worst rank"]
        assert len(series[0].points) == len(history)
        assert {round(y or 0, 6) for _, y in series[0].points} == {42.0}
        assert {round(y or 0, 6) for _, y in series[1].points} == {71.0}
        title, series, options = step._last_draw
        assert title == "step time (ms)" and options["scale"] == 1e-3
        # the app feeds it new snapshots while it is on top
        app.apply_snapshot(history[-1], history)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, JobsScreen)


async def test_the_job_detail_without_a_probe_says_how_to_start_one() -> None:
    from gputop.ui.screens.job_detail import JobDetailScreen

    app = GpuTopApp(snapshots=plain())
    async with app.run_test(size=MID) as pilot:
        await open_jobs(app, pilot, RANKS[0])
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, JobDetailScreen)
        assert not screen.query_one("#job-detail-charts").display
        text = screen_text(app)
        assert "no probe: start the job with `gputop run -- …` (docs/probe.md)" in text


# --- formatters never raise -------------------------------------------------------------

numbers = st.one_of(
    st.none(),
    st.sampled_from(HOSTILE),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
)


@seed(SEED)
@settings(
    max_examples=80,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(values=st.lists(numbers, min_size=8, max_size=8))
def test_probe_formatters_never_raise_nor_show_nan(values: list[Any]) -> None:
    """Hypothesis prints the failing example and its seed (print_blob).
    Seeded: GPUTOP_FUZZ_SEED replays it."""
    from gputop.views import probe_view as pv

    wait, step, worst, worst_step, rate, a, r, p = values
    texts = [
        pv.wait_text(wait),
        pv.step_text(step),
        pv.probe_cell(wait, step, compact=False),
        pv.probe_cell(wait, step, compact=True),
        pv.memory_text(CudaMemory(0, a, r, p)),
    ]
    job = JobProbe(2, wait, worst, 41201, step, worst_step, rate)
    for compact in (False, True):
        texts.append(pv.job_probe_cell(job, compact=compact))
    texts += [text for line in pv.job_probe_parts(job) for text, _ in line]
    for text in texts:
        lowered = text.lower()
        assert "nan" not in lowered and "inf" not in lowered, text


async def test_hostile_probe_values_draw_nothing_wrong_anywhere() -> None:
    """NaN, inf and huge figures (past the model's check, as a renderer may meet them):
    the table, the job line and the job detail draw n/a or clip, and raise nothing."""
    from gputop.ui.screens.job_detail import JobDetailScreen

    def hostile(t: float) -> dict[int, Any]:
        huge = [CudaMemory(0, 10**400, -1, 2**64)]
        return {
            RANKS[0]: probe(t, math.nan, math.inf, memory=huge),
            RANKS[1]: probe(t, 1e308, -1.0),
            RESNET: probe(t, -math.inf, 1e308),
        }

    history = tuple(with_probes(s, hostile(s.time)) for s in fx.demo_snapshots(6))
    for size in (WIDE, SMALL):
        app = GpuTopApp(snapshots=history)
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            text = screen_text(app)
            assert "wait n/a" in text and "nan" not in text and "inf" not in text.lower()
            await open_jobs(app, pilot, RANKS[0])
            await pilot.press("enter")
            await pilot.pause()
            assert isinstance(app.screen, JobDetailScreen)
            text = screen_text(app)
            assert "waiting for data n/a" in text and "nan" not in text
