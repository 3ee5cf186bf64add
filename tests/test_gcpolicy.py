"""Issue 32 §5: the ``gputop`` command holds the cyclic collector from its first line until
its start is over (a dashboard: after its first frame, with one collection of what the
start left, then a freeze; any other mode: once its arguments are read)."""

from __future__ import annotations

import gc
import subprocess
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gputop import cli, gcpolicy
from gputop.pipeline import Frame
from tests import builders as fx
from tests.ui.test_ui_app import FakeSampler

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _collector_as_it_was() -> Iterator[None]:
    """Each test leaves the collector enabled, unfrozen, with its thresholds."""
    before = gc.get_threshold()
    try:
        yield
    finally:
        gcpolicy.release()
        gc.enable()
        gc.unfreeze()
        gc.set_threshold(*before)


class Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector frees it


def _garbage_cycle() -> weakref.ref[Node]:
    return weakref.ref(Node())


def test_hold_then_release_with_settle_collects_the_start_and_freezes_the_rest() -> None:
    gcpolicy.hold()
    assert gcpolicy.holding() and not gc.isenabled()
    gone = _garbage_cycle()  # garbage while held: only the settle frees it
    kept = Node()
    with gcpolicy.tuned():
        assert gc.get_freeze_count() == 0  # tune's freeze waits for the settle
        assert gc.get_threshold() == gcpolicy.GC_THRESHOLDS
        gcpolicy.release(settle=True)
        assert gc.isenabled() and not gcpolicy.holding()
        assert gone() is None  # the start's garbage was collected, not frozen
        assert gc.get_freeze_count() > 0 and gc.is_tracked(kept)
    assert gc.get_freeze_count() == 0


def test_release_without_a_hold_changes_nothing() -> None:
    gc.disable()  # off by someone else, not by hold()
    gcpolicy.release(settle=True)
    assert not gc.isenabled() and gc.get_freeze_count() == 0
    gc.enable()
    gcpolicy.hold()
    gcpolicy.hold()  # again: still one hold, one release
    gcpolicy.release()
    assert gc.isenabled() and not gcpolicy.holding()


def test_tuned_releases_a_start_that_ended_before_its_first_frame() -> None:
    gcpolicy.hold()
    with gcpolicy.tuned():
        assert not gc.isenabled()
    assert gc.isenabled() and not gcpolicy.holding()


@pytest.mark.parametrize(
    "argv",
    [["--demo", "--once"], ["--demo", "--json"], ["--demo", "--stream", "--count", "1"]],
)
def test_modes_other_than_the_dashboard_release_the_collector(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    gcpolicy.hold()
    assert cli.main(argv) == 0
    assert gc.isenabled() and not gcpolicy.holding()
    assert capsys.readouterr().out


def test_a_subcommand_releases_the_collector(tmp_path: Path) -> None:
    gcpolicy.hold()
    assert cli.main(["replay", str(tmp_path / "nothing-here")]) == 2
    assert gc.isenabled() and not gcpolicy.holding()


def test_the_command_holds_the_collector_before_gputop_cli_is_imported() -> None:
    code = (
        "import gc, sys\n"
        "seen = []\n"
        "class Note:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'gputop.cli':\n"
        "            seen.append(gc.isenabled())\n"
        "sys.meta_path.insert(0, Note())\n"
        "sys.argv = ['gputop', '--demo', '--once']\n"
        "from gputop.launch import entry\n"
        "status = entry()\n"
        "print('noted', seen, gc.isenabled(), status, file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "noted [False] True 0" in done.stderr
    assert "GPU" in done.stdout or "gpu" in done.stdout.lower()


async def test_the_dashboard_releases_the_collector_after_its_first_frame() -> None:
    from tests.helpers.first_frame import FirstFrameProbe
    from tests.helpers.pilot import composed_footer

    class Probe(FirstFrameProbe):
        def noted(self, frame: Frame) -> dict[str, Any]:
            return {"collecting": gc.isenabled(), "held": gcpolicy.holding()}

    gcpolicy.hold()
    gone = _garbage_cycle()
    app = Probe(FakeSampler(fx.demo_snapshots(1)))  # type: ignore[arg-type]
    async with app.run_test(size=(120, 40)) as pilot:
        await composed_footer(pilot)  # the start is over...
        assert app.at_first_frame == {"collecting": False, "held": True}
        assert gc.isenabled() and not gcpolicy.holding()  # ...and so is the hold
        assert gone() is None  # what the start left was collected, not frozen
        assert gc.get_freeze_count() > 0
