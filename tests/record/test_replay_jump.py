"""Jumps in a replay: the frame at the new cursor first (its block only), then the
verdicts judged on the whole look-back, then the charts' window after the cursor; a
newer jump supersedes an older one's work, and an older jump's result is never shown.

Deterministic: the decoding of a chosen block is held on an event (no sleeps that a
slow machine could outrun); the work is counted (blocks decoded), never timed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gputop import pipeline
from gputop.diagnosis import Diagnosis
from gputop.model import Snapshot
from gputop.pipeline import Feed
from gputop.record.player import Frame, Player
from gputop.record.store import BlockRef, Recorder, Recording
from gputop.sampler import Sampler
from gputop.sources.demo import DEMO_EPOCH, DemoSource
from gputop.ui.app import FrameArrived
from gputop.ui.replay import JUDGING, ReplayApp
from gputop.views.gpu_view import judging_mark
from tests.helpers.pilot import until as pilot_until

SECONDS = 900  # 15 blocks of 60 s: a 600 s look-back spans 10-11 of them


@pytest.fixture(scope="module")
def recording(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, dict[float, Diagnosis]]]:
    """15 minutes of the demo, recorded; and the live diagnosis at each moment."""
    d = tmp_path_factory.mktemp("rec")
    sampler = Sampler(DemoSource(0, start_time=DEMO_EPOCH, step=1.0), interval=1.0)
    diagnoser = Feed()
    rec = Recorder(d, interval=1.0, retain=None, max_size=None)
    live: dict[float, Diagnosis] = {}
    for _ in range(SECONDS):
        snap = sampler.tick_now()
        rec.add(snap)
        live[snap.time] = diagnoser.frame(sampler.history()).diagnosis
    rec.close()
    sampler.stop()
    yield d, live


def kinds(d: Diagnosis) -> tuple[dict[int, str], dict[str, str], list[str]]:
    """What a diagnosis says: each GPU's verdict, each job's, and the jobs."""
    return (
        {i: v.kind for i, v in d.gpus.items()},
        {j: v.kind for j, v in d.job_verdicts.items()},
        [j.id for j in d.jobs],
    )


class Counting:
    """Counts the blocks a Recording decodes; holds the decoding of one block until
    released."""

    def __init__(self, rec: Recording) -> None:
        self.rec = rec
        self.decoded: list[int] = []
        self.hold: int | None = None  # block index to hold
        self.holding = threading.Event()  # set while the hold is reached
        self.release = threading.Event()
        original = rec._decode

        def decode(b: BlockRef) -> list[Snapshot]:
            i = rec.blocks.index(b)
            self.decoded.append(i)
            if i == self.hold:
                self.hold = None
                self.holding.set()
                assert self.release.wait(30), "the test never released the held block"
            return original(b)

        rec._decode = decode  # type: ignore[method-assign]


def test_a_jump_shows_its_frame_first_then_the_verdicts_then_the_window_after(
    recording: tuple[Path, dict[float, Diagnosis]],
) -> None:
    directory, live = recording
    rec = Recording(directory)
    counting = Counting(rec)
    player = Player(rec, 0)
    frames: list[tuple[Frame, list[int]]] = []

    def seen(snap: Snapshot) -> None:
        frame = player.frame()
        assert frame is not None and frame.snapshot is snap
        frames.append((frame, list(counting.decoded)))

    player.on_snapshot = seen
    start = len(counting.decoded)
    player.goto(DEMO_EPOCH + 700)  # no thread: served at once, every stage in order
    # goto's position() decoded the cursor's block; the frame needed nothing more.
    first, decoded = frames[0]
    assert first.snapshot.time == DEMO_EPOCH + 700 and not first.complete
    cursor_block = max(i for i, b in enumerate(rec.blocks) if b.first <= DEMO_EPOCH + 700)
    assert decoded[start:] == [cursor_block]
    target = rec.position(DEMO_EPOCH + 700)
    assert first.history[-1] is first.snapshot and first.after == ()
    second = frames[1][0]
    assert second.complete and second.generation == first.generation
    assert second.history == rec.window(target, player.lookback)
    assert second.history[0].time == DEMO_EPOCH + 100  # the whole 600 s look-back
    third = frames[2][0]
    assert third.complete and third.history is second.history
    assert third.after[0].time == DEMO_EPOCH + 701 and third.after[-1].time == DEMO_EPOCH + 899
    assert len(frames) == 3 and player.superseded == 0
    # Judged on the complete history, the verdicts are what live said then.
    assert kinds(Feed().frame(second.history).diagnosis) == kinds(live[DEMO_EPOCH + 700])
    # A step within what is decoded: one frame, complete at once, nothing decoded.
    before = len(counting.decoded)
    player.step(-1)
    assert len(frames) == 4 and frames[3][0].complete and frames[3][0].after
    assert len(counting.decoded) == before


def test_a_newer_jump_supersedes_an_older_ones_decoding(
    recording: tuple[Path, dict[float, Diagnosis]],
) -> None:
    directory, _ = recording
    rec = Recording(directory)
    counting = Counting(rec)
    player = Player(rec, len(rec) - 1)
    frames: list[Frame] = []
    player.on_snapshot = lambda snap: frames.append(player.frame())  # type: ignore[arg-type]
    player.start()
    try:
        deadline = time.monotonic() + 30
        while not (frames and frames[-1].after == () and frames[-1].complete):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        # Jump A: hold the decoding of a block of its look-back (not the cursor's).
        a = DEMO_EPOCH + 300
        counting.hold = next(i for i, b in enumerate(rec.blocks) if b.first <= a - 200 <= b.last)
        rec._cache.clear()
        player.goto(a)
        assert counting.holding.wait(30)
        assert frames[-1].snapshot.time == a and not frames[-1].complete
        generation_a = frames[-1].generation
        # Jump B while A's look-back is held; then let A's decoding go on.
        player.goto(DEMO_EPOCH + 800)
        counting.release.set()
        while not (frames[-1].snapshot.time == DEMO_EPOCH + 800 and frames[-1].after):
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        counting.release.set()
        player.stop()
    of_a = [f for f in frames if f.generation == generation_a]
    assert of_a and all(not f.complete for f in of_a)  # A never got its verdicts' history
    assert player.superseded == 1
    # A's look-back stopped at the held block: nothing older than it was decoded for A.
    assert frames[-1].complete and frames[-1].generation > generation_a


async def test_replay_app_says_judging_and_never_shows_an_older_jumps_verdicts(
    recording: tuple[Path, dict[float, Diagnosis]],
) -> None:
    directory, live = recording
    rec = Recording(directory)
    counting = Counting(rec)
    player = Player(rec, rec.position(DEMO_EPOCH + 850))
    player.tick_now()
    app = ReplayApp(player)
    adopted: list[Diagnosis] = []
    adopt = app._adopt

    def spy(done: Diagnosis) -> Diagnosis:
        adopted.append(done)
        return adopt(done)

    app._adopt = spy  # type: ignore[method-assign]
    async with app.run_test(size=(120, 40)) as pilot:

        async def until(what: str, check: Any) -> None:
            await pilot_until(pilot, check, what)

        def ready_at(offset: float) -> bool:
            snap = app.snapshot
            return snap is not None and snap.time == DEMO_EPOCH + offset and app.judging is None

        await until("ready at +850", lambda: ready_at(850) and bool(app.frame and app.frame.after))
        assert kinds(app.diagnosis()) == kinds(live[DEMO_EPOCH + 850])  # type: ignore[arg-type]
        # Jump A: its look-back held. The frame shows at once, and says it is judging.
        a = DEMO_EPOCH + 300
        counting.hold = next(i for i, b in enumerate(rec.blocks) if b.first <= a - 200 <= b.last)
        rec._cache.clear()
        player.goto(a)
        await until("A's frame", lambda: app.snapshot is not None and app.snapshot.time == a)
        await until("A's look-back held", counting.holding.is_set)
        assert app.judging == JUDGING and app.diagnosis() is None
        header = "".join(text for text, _ in app.header_parts_now())
        assert JUDGING in header
        marks = app._verdict_marks()
        assert marks is not None and set(marks.values()) == {judging_mark(JUDGING)}
        lines = " ".join(b.text for b in app.gpu_panel.blocks.values())
        assert "judging" in lines
        # The jobs view while judging says so (no jobs from the old position).
        await pilot.press("j")
        await until("jobs", lambda: type(app.screen).__name__ == "JobsScreen")
        title = str(app.screen.query_one("#jobs-title").render())
        assert JUDGING in title
        await pilot.press("escape")
        # Jump B while A's decoding is held; release it: A's verdicts never come.
        player.goto(DEMO_EPOCH + 600)
        counting.release.set()
        await until("ready at +600", lambda: ready_at(600))
        assert kinds(app.diagnosis()) == kinds(live[DEMO_EPOCH + 600])  # type: ignore[arg-type]
        assert all(d.snapshot.time != a for d in adopted)
        assert player.superseded == 1
        # The detail charts cover the window around the cursor; the verdict is the
        # one judged on the history up to the cursor.
        await until("the window after", lambda: bool(app.frame and app.frame.after))
        await pilot.press("enter")
        await until("detail", lambda: type(app.screen).__name__ == "DetailScreen")
        screen: Any = app.screen
        assert screen.history[-1].time == DEMO_EPOCH + 600
        assert screen.history[0].time == DEMO_EPOCH  # 600 s before the cursor
        assert screen.after[0].time == DEMO_EPOCH + 601
        assert screen.after[-1].time == DEMO_EPOCH + 899  # the recording's end
        title = str(screen.query_one("#detail-title").render())
        assert "before the cursor" in title and "after" in title
        verdict = str(screen.query_one("#detail-verdict").render())
        assert live[DEMO_EPOCH + 600].gpus[screen.gpu_index].label in verdict
        await pilot.press("escape")
        # A late frame of an older move is dropped, never applied.
        now = app.snapshot
        stale = live[DEMO_EPOCH + 300].snapshot
        app.post_message(
            FrameArrived(pipeline.Frame(stale, (stale,), live[DEMO_EPOCH + 300], generation=0))
        )
        await pilot.pause(0.1)
        assert app.snapshot is now and app.stale_frames == 1
        assert all(d.snapshot.time != a for d in adopted)
    player.stop()
