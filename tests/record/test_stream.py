"""The dashboard's feed is a ``gputop.pipeline.Stream``: the live Sampler and the replay's
Player are both one, checked by mypy (not cast) and by what the app does with them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gputop.pipeline import Stream
from gputop.record.player import Player
from gputop.sampler import Sampler
from gputop.sources.base import no_signal_reason
from gputop.sources.demo import DEMO_EPOCH, DemoSource
from gputop.ui.replay import ReplayApp
from tests.helpers.replay import small_recording

ROOT = Path(__file__).resolve().parents[2]


def test_the_sampler_and_the_player_are_streams(tmp_path: Path) -> None:
    sampler = Sampler(DemoSource(0, start_time=DEMO_EPOCH, step=1.0), interval=1.0)
    try:
        assert isinstance(sampler, Stream)
    finally:
        sampler.stop()
    assert isinstance(Player(small_recording(tmp_path)), Stream)


def test_the_player_answers_as_a_stream(tmp_path: Path) -> None:
    player = Player(small_recording(tmp_path), 0)
    assert player.latest() is None  # nothing at the cursor yet
    snap = player.tick_now()
    assert player.latest() is snap
    assert player.source is None  # no live source: nothing of a replay can be signalled
    assert player.paused and not player.playing
    player.paused = False  # the stream's pause is the player's play/pause
    assert player.playing and not player.paused
    player.paused = True
    assert not player.playing and player.paused


def test_the_replay_app_drives_the_player_itself(tmp_path: Path) -> None:
    player = Player(small_recording(tmp_path))
    app = ReplayApp(player)
    assert app.sampler is player and app.player is player
    assert app.no_signal_reason == no_signal_reason(None)


SNIPPET = """
from gputop.pipeline import Stream
from gputop.record.player import Player
from gputop.sampler import Sampler


def streams(player: Player, sampler: Sampler) -> tuple[Stream, Stream]:
    return player, sampler


class NotOne:
    interval = 1.0


def wrong(x: NotOne) -> Stream:
    return x  # line 16: the only error
"""


def test_mypy_proves_the_sampler_and_the_player_are_streams(tmp_path: Path) -> None:
    """No cast: mypy --strict accepts both as a Stream, and refuses what is not one (so
    the check is real)."""
    snippet = tmp_path / "snippet.py"
    snippet.write_text(SNIPPET)
    env = dict(os.environ, MYPYPATH=str(ROOT), PYTHONPATH=str(ROOT))
    mypy = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--config-file="]
    r = subprocess.run(
        [*mypy, "--cache-dir", str(tmp_path / "cache"), str(snippet)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    errors = [line for line in r.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1, r.stdout + r.stderr
    assert "snippet.py:16:" in errors[0] and '"NotOne"' in errors[0], errors
