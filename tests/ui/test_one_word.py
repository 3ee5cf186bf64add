"""Issue 32 §4: one word and one unit per fact across the screens."""

from __future__ import annotations

import pytest

from gputop.ui.app import GpuTopApp
from gputop.ui.parts import EXITED
from gputop.ui.screens.jobs import JobsScreen
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
