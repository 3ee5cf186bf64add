"""The TUI never reads what a user types or a host reports as markup (issue 29, class 3):
``[/]`` typed into a prompt is text, not a closing tag that crashes the app, and
``[@click=app.quit]`` is text, not a link. Driven with Pilot through the real prompts."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.widgets import Input
from textual.widgets._toast import Toast

from gputop.model import ProcessInfo, Snapshot
from gputop.present import to_json_dict
from gputop.record.player import Player
from gputop.record.store import Recording
from gputop.sources.remote import parse_line, to_snapshot
from gputop.ui.app import GpuTopApp
from gputop.ui.fleet import FleetApp
from gputop.ui.replay import ReplayApp
from tests import builders as fx
from tests.helpers.fleet import demo_fleet
from tests.helpers.screen import terminal_words
from tests.record.test_record import demo, record

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

#: What a user types (or a host names itself): a closing tag with nothing open, a link
#: to an action, a style.
MARKUP = ("[/]", "[@click=app.quit]x[/]", "[bold red]loud")


def toasts(app: App[object]) -> list[str]:
    """The text of each notification on screen."""
    return [str(t.render()) for t in app.screen.query(Toast)]


async def type_into(pilot: object, text: str) -> None:
    await pilot.press(*text)  # type: ignore[attr-defined]


def marked(snap: Snapshot) -> Snapshot:
    """``snap`` with markup in its host name and in each process's command and user."""

    def walk(obj: Any) -> Any:
        if isinstance(obj, ProcessInfo) and obj.command is not None:
            return dataclasses.replace(obj, command=f"{MARKUP[1]} {obj.command}", user=MARKUP[0])
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            changes = {f.name: walk(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
            return dataclasses.replace(obj, **changes)
        if isinstance(obj, tuple):
            return tuple(walk(v) for v in obj)
        return obj

    out: Snapshot = walk(snap)
    return dataclasses.replace(out, hostname=f"{MARKUP[2]}{snap.hostname}")


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("markup")
    record(d, [marked(s) for s in demo(20)])
    return d


@pytest.mark.parametrize("typed", MARKUP)
async def test_the_go_to_prompt_takes_markup_as_text(recording: Path, typed: str) -> None:
    player = Player(Recording(recording), 10)
    player.tick_now()
    app = ReplayApp(player)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.pause()
        await pilot.press("g")
        await pilot.pause()
        assert app.screen.query_one("#goto-input", Input).has_focus
        await type_into(pilot, typed)
        await pilot.press("enter")
        await pilot.pause(0.1)
        said = toasts(app)
        assert any(typed in t for t in said), said  # the words as typed, not read as tags
        assert app.is_running
        # The recorded host and commands are shown as they are, markup and all.
        words = terminal_words(app)
        assert MARKUP[1] in words and "[bold red]loud" in words
    player.stop()


@pytest.mark.parametrize("typed", MARKUP)
async def test_the_filter_takes_markup_as_text(typed: str) -> None:
    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(2)])
    async with app.run_test(size=(160, 40), notifications=True) as pilot:
        await pilot.pause()
        await pilot.press("slash")
        await type_into(pilot, typed)
        await pilot.pause()
        assert app.text_filter == typed
        await pilot.press("enter")
        await pilot.pause()
        assert app.is_running


@pytest.mark.parametrize("typed", MARKUP)
async def test_the_fleet_filter_takes_markup_as_text(typed: str) -> None:
    fleet, _ = demo_fleet(["h1", "h2"], ticks=5)
    app = FleetApp(fleet)  # type: ignore[arg-type]
    async with app.run_test(size=(160, 40), notifications=True) as pilot:
        await pilot.pause()
        await pilot.press("slash")
        await type_into(pilot, typed)
        await pilot.press("enter")
        await pilot.pause()
        assert app.fleet_screen.text_filter == typed
        assert typed in terminal_words(app)  # "no host matches '...'"
        assert app.is_running


async def test_a_notification_of_untrusted_text_is_never_markup() -> None:
    """Every notification (a kill outcome names a process; an error quotes what was
    typed) is plain text, whoever calls notify."""
    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(1)])
    async with app.run_test(size=(160, 40), notifications=True) as pilot:
        await pilot.pause()
        for text in MARKUP:
            app.notify(f"pid 42 {text}: no such process", title=text)
            app.screen.notify(f"screen says {text}")
        await pilot.pause(0.1)
        said = " ".join(toasts(app))
        for text in MARKUP:
            assert f"pid 42 {text}: no such process" in said and f"screen says {text}" in said
        assert app.is_running


async def test_a_remote_hosts_names_reach_the_fleet_and_its_dashboard_as_plain_text() -> None:
    """A host whose line names everything with markup and escape sequences: the fleet row
    and the host's dashboard show the words, never a style, a link or a raw escape."""
    from tests.builders import demo_host_lines
    from tests.cli.test_clean_output import HOSTILE, UNSAFE, poison_strings
    from tests.helpers.fleet import FakeFleet

    text = f" {MARKUP[0]} {MARKUP[1]}{HOSTILE}"
    lines = [
        to_json_dict(poison_strings(to_snapshot(parse_line(json.dumps(d))), text))
        for d in demo_host_lines(0, 12)
    ]
    fleet = FakeFleet(["h1"])
    for data in lines:
        fleet.feed("h1", data)
    app = FleetApp(fleet)  # type: ignore[arg-type]
    async with app.run_test(size=(200, 50), notifications=True) as pilot:
        await pilot.pause()
        assert not UNSAFE.search(terminal_words(app))
        await pilot.press("enter")  # the host's own dashboard
        await pilot.pause(0.2)
        shown = terminal_words(app)
        assert "[@click=app.quit]x[/]" in shown and "PWNED" not in shown, shown
        assert not UNSAFE.search(shown)
        assert app.is_running
