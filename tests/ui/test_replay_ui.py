"""The replay dashboard: in Pilot (keys, header, verdicts as live, no signals) and for
real in tmux (``gputop replay DIR`` with the replay keys)."""

from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputop.pipeline import Feed
from gputop.record.player import Player
from gputop.record.store import Recorder, Recording
from gputop.sampler import Sampler
from gputop.sources.demo import DEMO_EPOCH, DemoSource
from gputop.ui.replay import REPLAY_KEYS, ReplayApp, replay_help
from tests.ui.test_tmux_e2e import ROOT, Pane, assert_terminal_restored


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[float, str]]]:
    """400 s of the demo, recorded; and GPU 2's live verdict at each moment."""
    d = tmp_path_factory.mktemp("rec")
    sampler = Sampler(DemoSource(0, start_time=DEMO_EPOCH, step=1.0), interval=1.0)
    diagnoser = Feed()
    rec = Recorder(d, interval=1.0, retain=None, max_size=None)
    live: dict[float, str] = {}
    for _ in range(400):
        snap = sampler.tick_now()
        rec.add(snap)
        live[snap.time] = diagnoser.frame(sampler.history()).diagnosis.gpus[2].kind
    rec.close()
    sampler.stop()
    yield d, live


def stamp(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


async def test_replay_keys_move_the_cursor_and_verdicts_are_as_live(
    recording: tuple[Path, dict[float, str]],
) -> None:
    directory, live = recording
    player = Player(Recording(directory), 200)
    player.tick_now()
    app = ReplayApp(player)
    async with app.run_test(size=(120, 40)) as pilot:

        async def at(offset: float) -> None:
            for _ in range(100):
                await pilot.pause(0.02)
                snap = app.snapshot
                # There, and its look-back read (the verdicts judged, not "judging").
                if snap is not None and snap.time == DEMO_EPOCH + offset and app.judging is None:
                    return
            raise AssertionError(f"not at +{offset}: {app.snapshot and app.snapshot.time}")

        await at(200)
        header = "".join(text for text, _ in app.header_parts_now())
        assert f"REPLAY {stamp(DEMO_EPOCH + 200)} 1x PAUSED" in header
        # The recording's range and where the cursor is in it (issue 32 §3): 200 of 0-399 s.
        first, last = clock(DEMO_EPOCH), clock(DEMO_EPOCH + 399)
        assert f"PAUSED  50% of {first}-{last}" in header, header
        assert "live" not in header and "DEMO" not in header
        await pilot.press("right_square_bracket")
        await at(201)
        await pilot.press("left_square_bracket", "left_square_bracket")
        await at(199)
        await pilot.press("left_curly_bracket")
        await at(139)
        await pilot.press("right_curly_bracket")
        await at(199)
        await pilot.press("G")
        await at(399)
        assert "100% of" in "".join(text for text, _ in app.header_parts_now())
        diagnosis = app.diagnosis()
        assert diagnosis is not None
        assert diagnosis.gpus[2].kind == live[DEMO_EPOCH + 399]
        await pilot.press("greater_than_sign", "greater_than_sign")
        assert player.speed == 5
        await pilot.press("less_than_sign")
        assert player.speed == 2
        # g: a prompt; a time in it goes there.
        await pilot.press("g")
        await pilot.pause(0.1)
        box = app.screen.query_one("#goto-input")
        box.value = stamp(DEMO_EPOCH + 42)  # type: ignore[attr-defined]
        await pilot.press("enter")
        await at(42)
        assert app.diagnosis().gpus[2].kind == live[DEMO_EPOCH + 42]  # type: ignore[union-attr]
        # Space plays (at 600x the cursor runs to the end), and stops there.
        for _ in range(8):
            await pilot.press("greater_than_sign")
        await pilot.press("space")
        await at(399)
        assert not player.playing
        # No signal: there is no kill key, and the action says why.
        assert all(k.action != "kill" for k in REPLAY_KEYS)
        actions = {b.binding.action for b in app.active_bindings.values()}
        assert "kill" not in actions and "pause" not in actions and "tag" not in actions
        assert {"play", "step(-1)", "jump(60)", "speed(1)", "goto", "newest"} <= actions
        said: list[str] = []
        app.notify = lambda message, **_: said.append(str(message))  # type: ignore[method-assign,assignment]
        assert not app.check_action("kill", ())  # off: out of the footer (issue 32)
        await app.run_action("kill_refused")  # what a kill key answers there
        assert said and "processes of the past" in said[0]
        # The detail screen and the jobs view open on the recorded history.
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert type(app.screen).__name__ == "DetailScreen"
        assert len(app.screen.history) > 100  # type: ignore[attr-defined]
        await pilot.press("escape")
        await pilot.press("j")
        await pilot.pause(0.2)
        assert type(app.screen).__name__ == "JobsScreen"
        await pilot.press("escape")
    player.stop()


def test_help_lists_every_replay_key() -> None:
    keys = " ".join(k for k, _ in replay_help())
    for shown in ("Space", "[ ]", "{ }", "< >", "g", "G"):
        assert shown in keys


@pytest.mark.requires_tool("tmux")
def test_replay_in_tmux(recording: tuple[Path, dict[float, str]], tmp_path: Path) -> None:
    directory, _ = recording
    pane = Pane(tmp_path)
    try:
        pane.wait_for(lambda s: "PROMPT$" in s, what="the shell prompt")
        pid, py = shlex.quote(str(pane.pid_file)), shlex.quote(sys.executable)
        at = shlex.quote(stamp(DEMO_EPOCH + 100))
        where = shlex.quote(str(directory))
        inner = f"echo $$ > {pid}; exec {py} -m gputop replay {where} --at {at}"
        line = (
            f"cd {shlex.quote(str(ROOT))} && sh -c {shlex.quote(inner)}; "
            f"echo EXIT=$? | tee {shlex.quote(str(pane.status_file))}"
        )
        pane.send_line(line)
        t0 = DEMO_EPOCH + 100
        pane.wait_text(f"REPLAY {stamp(t0)}", "PAUSED", "H100", "Space", "Go to", timeout=20)

        def step(key: str, offset: float) -> None:
            time.sleep(0.2)  # a pause between keys, as a person leaves
            pane.keys(key)
            pane.wait_text(f"REPLAY {stamp(t0 + offset)}")

        step("]", 1)
        step("[", 0)
        step("}", 60)
        step("{", 0)
        step("G", 299)
        time.sleep(0.2)
        pane.keys(">")
        pane.wait_text("2x")
        time.sleep(0.2)
        pane.keys("g")
        pane.wait_text("Go to (e.g.")
        time.sleep(0.2)
        pane.tmux("send-keys", "-t", "t", "-l", stamp(DEMO_EPOCH + 10))
        pane.keys("Enter")
        pane.wait_text(f"REPLAY {stamp(DEMO_EPOCH + 10)}")
        time.sleep(0.2)
        pane.keys("?")
        pane.wait_text("play / pause the replay", "go to a time")
        time.sleep(0.2)
        pane.keys("Escape")
        time.sleep(0.2)
        pane.keys("Space")
        pane.wait_text("PLAYING")
        time.sleep(0.2)
        pane.keys("q")
        assert pane.wait_exit(timeout=15) == "EXIT=0"
        assert_terminal_restored(pane, "EXIT=0")
    finally:
        pane.close()
