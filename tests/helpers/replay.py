"""Short recordings of the seeded demo, and the replay dashboard on one, for tests."""

from __future__ import annotations

from pathlib import Path

from gputop.record.player import Player
from gputop.record.store import Recorder, Recording
from gputop.sampler import Sampler
from gputop.sources.demo import DEMO_EPOCH, DemoSource
from gputop.ui.replay import ReplayApp


def small_recording(directory: Path, n: int = 5) -> Recording:
    """``n`` seconds of the demo (seed 0, one sample a second) recorded in ``directory``."""
    sampler = Sampler(DemoSource(0, start_time=DEMO_EPOCH, step=1.0), interval=1.0)
    rec = Recorder(directory, interval=1.0, retain=None, max_size=None)
    for _ in range(n):
        rec.add(sampler.tick_now())
    rec.close()
    sampler.stop()
    return Recording(directory)


def demo_replay(directory: Path, seconds: int, position: int) -> ReplayApp:
    """The replay dashboard on a :func:`small_recording` of ``seconds``, at sample
    ``position``, its player ticked once. Stop the player (``app.player.stop()``) when
    done."""
    player = Player(small_recording(directory, seconds), position)
    player.tick_now()
    return ReplayApp(player)
