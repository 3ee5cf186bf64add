"""Issue 32, section 1: docs/fleet.md's "try it here" (``fleet --local`` with a remote
command starting with ``gputop``) works from a virtual environment that is not activated:
the real command in tmux, with a PATH that holds no gputop."""

from __future__ import annotations

import shlex
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputop.fleet import this_gputop
from tests.fleet.test_values_e2e import Pane

ROOT = Path(__file__).resolve().parents[2]
#: docs/fleet.md's line, as a reader copies it.
TRY_IT_HERE = "gputop --demo --seed {n}"


@pytest.fixture
def pane(tmp_path: Path) -> Iterator[Pane]:
    p = Pane(tmp_path)
    try:
        yield p
    finally:
        p.close()


def test_the_docs_line_is_the_one_tested() -> None:
    assert f"--remote-command '{TRY_IT_HERE}'" in (ROOT / "docs" / "fleet.md").read_text()


def test_only_a_leading_gputop_word_is_replaced() -> None:
    here = shlex.join([sys.executable, "-m", "gputop"])
    assert this_gputop("gputop --demo --seed 3") == f"{here} --demo --seed 3"
    assert this_gputop("  gputop") == here
    assert this_gputop("gputopx --demo") == "gputopx --demo"
    assert this_gputop("/opt/bin/gputop --demo") == "/opt/bin/gputop --demo"
    assert this_gputop("nice gputop") == "nice gputop"
    assert this_gputop("") == ""


@pytest.mark.requires_tool("tmux")
def test_fleet_local_finds_this_gputop_without_it_on_path(pane: Pane) -> None:
    assert shutil.which("gputop", path="/usr/bin:/bin") is None  # the pane's PATH
    pane.run("fleet", "--local", "--remote-command", TRY_IT_HERE, "--interval", "1", "a", "b")
    shown = pane.wait_text("a", "b", "live", timeout=60)
    pane.wait_for(lambda screen: screen.count("live") >= 2, "both hosts live", timeout=60)
    shown = pane.screen()
    assert "no gputop" not in shown, shown
    pane.keys("q")
    assert pane.exit_status() == "EXIT=0"
    assert "Traceback" not in pane.scrollback()
