"""The main screen's keys at 80x24: every binding reachable, and ``[keys]`` moving them.

``python -m tests.ui.test_ui_keys --write`` rewrites the generated block of
docs/dashboard.md from the key table.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from gputop.keys import KEYS
from gputop.ui.app import GpuTopApp
from gputop.ui.screens.help import HelpScreen
from tests import builders as fx
from tests.helpers.pilot import composed_footer

DOC = Path(__file__).resolve().parents[2] / "docs" / "dashboard.md"
BEGIN = "<!-- BEGIN generated: keys -->\n"
END = "<!-- END generated: keys -->"
BLOCK = re.compile(re.escape(BEGIN) + r"(.*?)" + re.escape(END), re.S)
SMALL = (80, 24)
MOVED = {"sort": "o", "help": "h", "kill": "s", "slower": "]", "filter": "ctrl+f", "detail": "d"}


async def footer(pilot: Pilot[Any]) -> dict[str, str]:
    """Description -> key as the footer shows it, each one inside the 80 columns."""
    bar = await composed_footer(pilot)
    placed = bar.placed
    assert [p.key for p in placed] == list(bar.shown)  # none cut off
    for p in placed:
        assert p.whole and p.x + p.width <= SMALL[0], p
    return {p.key.description: p.key.display for p in placed}


@pytest.mark.parametrize("moved", [{}, MOVED], ids=["defaults", "moved"])
async def test_every_key_is_bound_and_the_footer_fits_at_80x24(moved: dict[str, str]) -> None:
    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(2)], keys=moved)
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause()
        active = app.active_bindings
        for k in KEYS:
            bound = [b for b in active.values() if b.binding.id == f"gputop.{k.id}"]
            assert bound, k.id
            for b in bound:
                assert b.binding.action.removeprefix("app.") == k.action and b.enabled, k.id
                assert app.get_key_display(b.binding) == moved.get(k.id, k.display), k.id
        shown = await footer(pilot)
        assert {k.description for k in KEYS if k.show} <= set(shown)


async def test_moved_keys_act_and_show_as_moved() -> None:
    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(2)], keys=MOVED)
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause()
        shown = await footer(pilot)
        assert shown["Sort"] == "o" and shown["Help"] == "h" and shown["Kill"] == "s"
        assert shown["Filter"] == "ctrl+f" and shown["Detail"] == "d"
        assert app.sort_key == "gpu"
        await pilot.press("o")
        assert app.sort_key != "gpu"
        await pilot.press("r")  # not moved: still reverses
        assert app.sort_reverse
        await pilot.press("h")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        listed = dict(app.screen.key_bindings)
        assert listed["o"] == "Sort" and listed["h"] == "Help" and listed["]"] == "Slower refresh"
        assert "?" not in listed and listed["j"] == "Jobs"
        await pilot.press("escape")
        await pilot.pause()
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Sort (o)" in titles and "Help (h)" in titles
        interval = app.interval
        await pilot.press("]")
        assert app.interval > interval
        await pilot.press("ctrl+f")
        assert app.focused is app.filter_input


async def test_an_old_key_no_longer_does_what_was_moved() -> None:
    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(2)], keys={"help": "h", "sort": "o"})
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause()
        await pilot.press("question_mark", "s")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)
        assert app.sort_key == "gpu"


def keys_markdown() -> str:
    head = ["| `[keys]` name | default key | what it does |", "|---|---|---|"]
    rows = [f"| `{k.id}` | `{k.display}` | {k.description} |" for k in KEYS]
    return "\n".join([*head, *rows]) + "\n"


def test_the_docs_table_is_the_generated_one() -> None:
    found = BLOCK.search(DOC.read_text(encoding="utf-8"))
    assert found, f"{DOC} has no generated keys block"
    assert found.group(1) == keys_markdown(), (
        "docs/dashboard.md is out of date: python -m tests.ui.test_ui_keys --write"
    )


async def test_the_too_small_note_names_the_moved_quit_key() -> None:
    from textual.widgets import Static

    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(2)], keys={"quit": "x"})
    async with app.run_test(size=(30, 8)) as pilot:
        await pilot.pause()
        note = str(app.query_one("#too-small", Static).render())
        assert "(x quits)" in note, note
        await pilot.press("x")
    assert app.return_code == 0


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    DOC.write_text(BLOCK.sub(lambda _: BEGIN + keys_markdown() + END, DOC.read_text()))
