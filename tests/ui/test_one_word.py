"""Issue 32 §4: one word and one unit per fact across the screens."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from gputop import fmt
from gputop.model import replace
from gputop.textout import render_text
from gputop.ui.app import GpuTopApp
from gputop.ui.screens.jobs import JobsScreen
from gputop.views.gpu_view import gpu_view, rate_share
from gputop.views.parts import EXITED, plain
from gputop.views.process_view import COLUMNS, process_facts, process_rows
from tests import builders as fx

WIDE = (200, 50)


@pytest.fixture(autouse=True)
def _no_animations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")


def _tree_text(screen: JobsScreen) -> str:
    out: list[str] = []

    def walk(node: object) -> None:
        for child in node.children:  # type: ignore[attr-defined]
            out.append(child.label.plain)
            walk(child)

    walk(screen.job_tree.root)
    return "\n".join(out)


async def test_an_ended_process_is_exited_in_the_table_and_the_jobs_view() -> None:
    gone = fx.process_info(4242, name="python", command="python train.py", status="dead")
    snap = fx.snapshot(
        fx.T0, [fx.gpu_sample(0, 50.0, [fx.gpu_process(4242)], used=4 * fx.GiB)], [gone]
    )
    app = GpuTopApp(snapshots=[snap])
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        row = app.table.rows_by_key[next(iter(app.table.rows_by_key))]
        assert row.command.startswith(EXITED)
        await pilot.press("j")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, JobsScreen)
        text = _tree_text(screen)
        assert EXITED in text and "dead" not in text, text


#: The compact table's GPU memory column: every figure fits it whole.
MEM_COLUMN = next(c for c in COLUMNS if c.key == "mem")


@seed(32)  # fixed: a failure reproduces (hypothesis prints the example)
@settings(max_examples=300, deadline=None, database=None)
@given(st.integers(min_value=0, max_value=999 * 2**50))  # past any GPU
def test_gpu_memory_has_one_style_that_fits_every_width(value: int) -> None:
    text = fmt.memory(value)
    assert len(text) <= min(MEM_COLUMN.compact, MEM_COLUMN.wide)
    number = text.rstrip("BKMGTPi")
    assert len(number.split(".")[0]) <= 3  # never '19456MiB'


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 50)])
async def test_gpu_memory_reads_the_same_at_every_width(size: tuple[int, int]) -> None:
    proc = fx.process_info(7, command="python train.py")
    used = 19456 * 2**20
    snap = fx.snapshot(fx.T0, [fx.gpu_sample(0, 50.0, [fx.gpu_process(7, mem=used)])], [proc])
    app = GpuTopApp(snapshots=[snap])
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        row = next(iter(app.table.rows_by_key.values()))
        assert row.cell_text("mem", compact=app.compact) == "19.0GiB"


def test_an_unknown_link_rate_is_one_na_and_a_known_one_has_its_unit() -> None:
    g = fx.full_gpu_sample(0)
    unknown = replace(g, pcie=replace(g.pcie, tx_bytes_per_s=None, link_max_bytes_per_s=None))
    second = plain(gpu_view(unknown, compact=False, bar_width=8).lines[1])
    assert "PCIe TX n/a RX " in second and "n/a n/a" not in second
    assert re.search(r"RX \d+(\.\d)?[KMG]?i?B/s( |$)", second), second  # a rate says its unit
    assert rate_share(None, None) == "n/a" and rate_share(2**30, None) == "1.0GiB/s"
    assert rate_share(2**30, 5.0) == "1.0GiB/s 5%"


#: A process's age -> its TIME in the tables (the dashboard's and --once's) and its exact
#: running time on the process screen.
AGES = {
    42: ("42s", "42s"),
    12 * 60 + 3: ("12m", "12:03"),
    3 * 3600 + 4 * 60 + 5: ("3h04m", "3:04:05"),
    2 * 86400 + 3 * 3600: ("2d03h", "2d03h"),
}


async def test_a_running_time_reads_the_same_in_the_dashboard_and_in_once() -> None:
    """One fact, one spelling: --once's TIME is the dashboard's (minutes after a process's
    first minute), not the seconds of the process screen, which keeps them."""
    procs = [
        fx.process_info(pid, command=f"python job{pid}.py", create_time=fx.T0 - age)
        for pid, age in enumerate(AGES, start=10)
    ]
    gpu = fx.gpu_sample(0, 50.0, [fx.gpu_process(p.pid) for p in procs], used=40 * fx.GiB)
    snap = fx.snapshot(fx.T0, [gpu], procs)
    once = {
        int(line.split()[1]): line.split()[6]
        for line in render_text(snap).splitlines()
        if re.match(r"\s+0\s+1\d\s", line)
    }
    app = GpuTopApp(snapshots=[snap])
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        table = app.table
        column = [c.key.value for c in table.ordered_columns].index("time")
        drawn = {
            row.pid: table.get_row(row.key)[column].plain.strip()
            for row in table.rows_by_key.values()
        }
    for pid, (age, (shown, exact)) in enumerate(AGES.items(), start=10):
        assert once[pid] == drawn[pid] == shown, (age, once, drawn)
        row = next(r for r in process_rows(snap) if r.pid == pid)
        facts = "".join(plain(p) for p in process_facts(row))
        assert f"running for {exact}" in facts, facts
