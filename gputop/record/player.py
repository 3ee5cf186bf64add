"""The replay source: plays a :class:`~gputop.record.store.Recording` to the dashboard
as a :class:`~gputop.sampler.Sampler` would (both are a :class:`gputop.pipeline.Stream`),
never ``can_signal`` (a replay's pids may be anyone's now). How a move is decoded and
handed over in stages: docs/recording.md."""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from gputop.model import Snapshot
from gputop.record.store import Recording, RecordingError, SegmentCut

SPEEDS = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
#: Recorded gaps longer than this are skipped while playing.
GAP_SECONDS = 60.0
_Snaps = tuple[Snapshot, ...]


@dataclass(frozen=True, slots=True)
class Frame:
    """The snapshot at the cursor and the decoded window ending with it; only when
    ``complete`` may verdicts be judged on it. An older ``generation`` is out of date."""

    generation: int
    snapshot: Snapshot
    history: _Snaps
    complete: bool
    after: _Snaps = ()


class Player:
    def __init__(
        self,
        recording: Recording,
        position: int | None = None,
        *,
        lookback: float = 600.0,
    ) -> None:
        self.recording = recording
        last = len(recording) - 1
        self.position = last if position is None else max(0, min(position, last))
        self.lookback = lookback
        self.after_seconds = lookback / 2  # the detail charts' window after the cursor
        self.on_snapshot: Callable[[Snapshot], None] | None = None
        self.source: object | None = None  # no live source: a replay's pids are of the past
        self.speed = 1.0
        self.playing = False
        self.stale = False
        self.last_error: str | None = None  # why the last move failed, in replay words
        self.cut: str | None = None  # a segment cut while open: said once, and it stays
        self.at_end = self.position == last
        # What it was recorded at; no replay key changes it (the dashboard's +/- are unbound).
        self.interval = float(recording.header.get("interval") or 1.0)
        # Enough decoded blocks for the whole window: playing decodes each once.
        span = max([b.last - b.first for b in recording.blocks[-8:]], default=0.0)
        needed = math.ceil((lookback + self.after_seconds) / max(span + self.interval, 1e-3))
        recording.cache_blocks = max(recording.cache_blocks, min(needed + 4, 4096))
        self._t = recording[self.position].time  # the cursor, recorded time
        self._frame: Frame | None = None
        self._generation = 0
        self._lock = threading.Lock()
        self._requests: deque[Callable[[], int]] = deque()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.superseded = 0  # moves whose decoding stopped for a newer request

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def paused(self) -> bool:
        """Not playing (the stream's pause, as the dashboard's pause key would set it)."""
        return not self.playing

    @paused.setter
    def paused(self, value: bool) -> None:
        if bool(value) == self.playing:
            self.toggle()

    def frame(self) -> Frame | None:
        with self._lock:
            return self._frame

    def latest(self) -> Snapshot | None:
        """The snapshot at the cursor (None before the first frame)."""
        frame = self.frame()
        return frame.snapshot if frame is not None else None

    def tick_now(self) -> Snapshot:
        """The frame at the cursor from its own block, not handed over; the worker
        completes it when started."""
        return self._set_frame(self.position, None).snapshot

    def load(self, pos: int) -> Frame:
        """The complete frame at ``pos``, not handed over (scripts, benchmarks)."""
        pos = max(0, min(pos, len(self.recording) - 1))
        self._generation += 1
        history = self.recording.window(pos, self.lookback)
        after = self.recording.after(pos, self.after_seconds)
        assert history is not None and after is not None  # not cancellable
        return self._set_frame(pos, history, after)

    def toggle(self) -> None:
        def run() -> int:
            # At the end it stays paused.
            self.playing = not self.playing and self.position < len(self.recording) - 1
            return self.position

        self._ask(run)

    def step(self, n: int) -> None:
        """``n`` samples on (back when negative); pauses playing."""

        def run() -> int:
            self.playing = False
            return self.position + n

        self._ask(run)

    def jump(self, seconds: float) -> None:
        """``seconds`` of recorded time on (back when negative)."""

        def run() -> int:
            here = self.recording[self.position].time
            target = self.recording.position(here + seconds)
            if seconds > 0 and target == self.position:
                target += 1  # a gap: on to the next snapshot
            return target

        self._ask(run)

    def goto(self, t: float) -> None:
        self._ask(lambda: self.recording.position(t))

    def newest(self) -> None:
        self.step(len(self.recording))  # past the end: the cursor stops at the newest

    def faster(self, up: bool) -> float:
        if up:
            self.speed = next((s for s in SPEEDS if s > self.speed), SPEEDS[-1])
        else:
            self.speed = next((s for s in reversed(SPEEDS) if s < self.speed), SPEEDS[0])
        self._wake.set()
        return self.speed

    def _ask(self, request: Callable[[], int]) -> None:
        self._requests.append(request)
        self._wake.set()
        if not self.running:  # tests without the thread
            self._serve()

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("player already started")
        self._thread = threading.Thread(target=self._run, name="gputop-replay", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    _mark = 0.0  # wall (monotonic) time the cursor was last advanced by playing

    def _run(self) -> None:
        try:
            self._move(self.position)  # completes what tick_now began (cheap when decoded)
        except RecordingError as exc:
            self._failed(exc)
        self._mark = time.monotonic()
        while not self._stopping.is_set():
            tick = min(1.0, max(0.2, self.interval / self.speed))
            self._wake.wait(tick if self.playing else None)
            self._wake.clear()
            if self._stopping.is_set():
                break
            self._serve()
            if self.playing:
                self._advance()

    def _serve(self) -> None:
        while self._requests:
            request = self._requests.popleft()
            try:
                target = request()
                self._t = self.recording[max(0, min(target, len(self.recording) - 1))].time
                self._move(target)
            except RecordingError as exc:
                self._failed(exc)
            self._mark = time.monotonic()

    def _advance(self) -> None:
        now = time.monotonic()
        self._t += (now - self._mark) * self.speed
        self._mark = now
        rec = self.recording
        last = len(rec) - 1
        try:
            target = rec.position(self._t)
            if target == self.position and self.position < last:
                following = rec[self.position + 1].time
                if following - self._t > GAP_SECONDS:
                    self._t = following
                    target = self.position + 1
            if target >= last:
                self.playing = False  # before the move: whoever sees the end sees it stopped
            if target != self.position:
                self._move(target)
        except RecordingError as exc:
            self._failed(exc)
            self.playing = False

    def _failed(self, exc: RecordingError) -> None:
        if isinstance(exc, SegmentCut):
            # The damage stays: the same words whatever move meets it next, never repeated.
            if self.cut is None:
                self.cut = (
                    f"{exc.path.name} was cut short while this replay had it open: "
                    "what it held past the cut cannot be shown"
                )
            self.last_error = self.cut
        else:
            self.last_error = f"cannot show this part of the recording: {exc}"

    def _superseded(self) -> bool:
        """A newer request waits (or the player stops): the move in progress gives way."""
        return bool(self._requests) or self._stopping.is_set()

    def _set_frame(self, pos: int, history: _Snaps | None, after: _Snaps = ()) -> Frame:
        """Make the frame at ``pos``: ``history`` the complete look-back, or None for
        what is decoded already."""
        rec = self.recording
        complete = history is not None
        if history is None:
            history = rec.window(pos, self.lookback, cached_only=True)
            assert history is not None
            t = history[-1].time
            complete = rec.is_cached(rec.blocks_between(t - self.lookback, t))
        frame = Frame(self._generation, history[-1], history, complete, after)
        with self._lock:
            self.position = pos
            self._frame = frame
        self.at_end = pos == len(rec) - 1
        return frame

    def _hand_over(self, frame: Frame) -> None:
        callback = self.on_snapshot
        if callback is not None:
            callback(frame.snapshot)

    def _move(self, pos: int) -> None:
        """Move the cursor to ``pos``: each stage handed over as it is ready."""
        rec = self.recording
        pos = max(0, min(pos, len(rec) - 1))
        self._generation += 1
        self.last_error = self.cut
        frame = self._set_frame(pos, None)
        t = frame.snapshot.time
        after_blocks = rec.blocks_between(t, t + self.after_seconds)
        if not frame.complete:
            self._hand_over(frame)
            history = rec.window(pos, self.lookback, cancelled=self._superseded)
            if history is None:
                self.superseded += 1
                return
            frame = self._set_frame(pos, history)
        if not rec.is_cached(after_blocks):
            self._hand_over(frame)  # the verdicts need no more than the look-back
        after = rec.after(pos, self.after_seconds, cancelled=self._superseded)
        if after is None:
            self.superseded += 1
            return
        self._hand_over(self._set_frame(pos, frame.history, after))
