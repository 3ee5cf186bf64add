"""The replay source: plays a :class:`~gputop.record.store.Recording` to the dashboard
the way the sampler plays a live source.

It offers what the dashboard uses of a :class:`~gputop.sampler.Sampler` (``latest``,
``history``, ``on_snapshot``, ``interval``, ``start``/``stop``...), and never
``can_signal``: a replay shows processes of the past, whose pids may be anyone's now.

- A worker thread moves a cursor through the recording: while playing, by the wall
  time elapsed times ``speed`` (1x to 600x), skipping gaps (recorder stopped) longer
  than a minute; every move hands the snapshot at the cursor to ``on_snapshot``, with
  ``history()`` the recorded window ending at it (``lookback`` seconds: what the
  verdicts judge and the charts show). Memory: that window plus a few decoded blocks.
- Keys only ask (:meth:`step`, :meth:`jump`, :meth:`goto`, :meth:`newest`,
  :meth:`toggle`): the move is made on the worker thread, one at a time.
- At the newest snapshot playing stops (``at_end``).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from gputop.model import Snapshot
from gputop.record.store import Recording, RecordingError

SPEEDS = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
#: Recorded gaps longer than this are skipped while playing.
GAP_SECONDS = 60.0


class Player:
    kind = "replay"

    def __init__(
        self,
        recording: Recording,
        position: int | None = None,
        *,
        lookback: float = 600.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.recording = recording
        last = len(recording) - 1
        self._pos = last if position is None else max(0, min(position, last))
        self.lookback = lookback
        self.on_snapshot: Callable[[Snapshot], None] | None = None
        self.speed = 1.0
        self.playing = False
        self.paused = False  # the dashboard's "draw nothing" (not bound in a replay)
        self.stale = False
        self.last_error: str | None = None
        self.at_end = self._pos == last
        self._monotonic = monotonic
        self._interval = float(recording.header.get("interval") or 1.0)
        self._t = recording[self._pos].time  # the cursor, recorded time
        self._latest: Snapshot | None = None
        self._history: tuple[Snapshot, ...] = ()
        self._lock = threading.Lock()
        self._requests: deque[Callable[[], int]] = deque()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.moves = 0  # snapshots handed over
        self.last_move_seconds: float | None = None  # what the last move cost (wall)

    # --- what the dashboard reads ------------------------------------------------------

    @property
    def interval(self) -> float:
        """The recording's sampling interval."""
        return self._interval

    @interval.setter
    def interval(self, value: float) -> None:
        pass  # a recording's interval is what it was

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def position(self) -> int:
        return self._pos

    def latest(self) -> Snapshot | None:
        with self._lock:
            return self._latest

    def history(self) -> tuple[Snapshot, ...]:
        with self._lock:
            return self._history

    def tick_now(self) -> Snapshot:
        """Load the snapshot at the cursor (and its history) without handing it over."""
        return self._load(self._pos)

    # --- keys ------------------------------------------------------------------------------

    def toggle(self) -> None:
        def run() -> int:
            if self._pos >= len(self.recording) - 1:
                self.playing = False
                return self._pos
            self.playing = not self.playing
            self._mark = self._monotonic()
            return self._pos

        self._ask(run)

    def step(self, n: int) -> None:
        """``n`` samples on (back when negative); pauses playing."""

        def run() -> int:
            self.playing = False
            return self._pos + n

        self._ask(run)

    def jump(self, seconds: float) -> None:
        """``seconds`` of recorded time on (back when negative)."""

        def run() -> int:
            here = self.recording[self._pos].time
            target = self.recording.position(here + seconds)
            if seconds > 0 and target == self._pos:
                target += 1  # a gap: on to the next snapshot
            return target

        self._ask(run)

    def goto(self, t: float) -> None:
        self._ask(lambda: self.recording.position(t))

    def newest(self) -> None:
        def run() -> int:
            self.playing = False
            return len(self.recording) - 1

        self._ask(run)

    def faster(self, up: bool) -> float:
        speeds = SPEEDS
        if up:
            self.speed = next((s for s in speeds if s > self.speed), speeds[-1])
        else:
            self.speed = next((s for s in reversed(speeds) if s < self.speed), speeds[0])
        self._wake.set()
        return self.speed

    def _ask(self, request: Callable[[], int]) -> None:
        self._requests.append(request)
        self._wake.set()
        if not self.running:  # tests without the thread
            self._serve()

    # --- lifecycle ---------------------------------------------------------------------

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

    def close(self) -> None:
        self.stop()

    # --- worker ------------------------------------------------------------------------

    _mark = 0.0  # wall (monotonic) time the cursor was last advanced by playing

    def _tick_seconds(self) -> float:
        return min(1.0, max(0.2, self._interval / self.speed))

    def _run(self) -> None:
        if self._latest is None:
            self._move(self._pos)
        self._mark = self._monotonic()
        while not self._stopping.is_set():
            self._wake.wait(self._tick_seconds() if self.playing else None)
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
                self.last_error = str(exc)
            self._mark = self._monotonic()

    def _advance(self) -> None:
        now = self._monotonic()
        self._t += (now - self._mark) * self.speed
        self._mark = now
        rec = self.recording
        last = len(rec) - 1
        try:
            target = rec.position(self._t)
            if target == self._pos and self._pos < last:
                following = rec[self._pos + 1].time
                if following - self._t > GAP_SECONDS:
                    self._t = following
                    target = self._pos + 1
            if target >= last:
                self.playing = False  # before the move: whoever sees the end sees it stopped
            if target != self._pos:
                self._move(target)
        except RecordingError as exc:
            self.last_error = str(exc)
            self.playing = False

    def _load(self, pos: int) -> Snapshot:
        pos = max(0, min(pos, len(self.recording) - 1))
        history = self.recording.window(pos, self.lookback)
        snap = history[-1]
        with self._lock:
            self._pos = pos
            self._latest = snap
            self._history = history
        self.at_end = pos == len(self.recording) - 1
        return snap

    def _move(self, pos: int) -> None:
        start = time.perf_counter()
        snap = self._load(pos)
        self.last_error = None
        self.moves += 1
        self.last_move_seconds = time.perf_counter() - start
        callback = self.on_snapshot
        if callback is not None:
            callback(snap)
