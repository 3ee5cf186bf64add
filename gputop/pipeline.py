"""The pipeline: a :class:`Feed` turns one stream's snapshots into immutable frames, the one
place a Diagnoser is driven (docs/architecture.md).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from gputop.analysis.thresholds import DEFAULT, Thresholds
from gputop.model import Snapshot

if TYPE_CHECKING:  # the diagnosis' modules load with the first judging (Feed._judge)
    from gputop.diagnosis import Diagnoser, Diagnosis

#: A frame's ``judging`` when its snapshot was handed over before being judged
#: (``Feed.push(..., judge=False)``: the dashboard's first frame).
NOT_JUDGED_YET = "judging the first sample…"


@runtime_checkable
class Stream(Protocol):
    """What the dashboard drives of the stream it shows: the live ``Sampler`` and the
    replay's ``Player`` both are one (mypy checks each where it is handed to the app)."""

    #: Called on the stream's own thread with each new snapshot (None: nobody listens).
    on_snapshot: Callable[[Snapshot], None] | None
    interval: float  # seconds between snapshots; the dashboard's +/- set it
    paused: bool  # the dashboard's pause key sets it

    @property
    def source(self) -> object | None:
        """Where the snapshots come from (None: no live source, nothing to signal)."""

    @property
    def running(self) -> bool: ...

    @property
    def stale(self) -> bool:
        """Whether the snapshot being made is overdue."""

    @property
    def last_error(self) -> str | None:
        """Why the last snapshot failed, in words (None: it did not)."""

    def latest(self) -> Snapshot | None: ...

    def start(self) -> None: ...

    def stop(self, timeout: float = ...) -> None: ...


@dataclass(frozen=True, slots=True, eq=False)
class Frame:
    """One snapshot as every subscriber sees it."""

    snapshot: Snapshot
    history: tuple[Snapshot, ...]  # ends with ``snapshot``: what the views chart
    diagnosis: Diagnosis | None  # None while ``judging``
    judging: str | None = None  # why there are no verdicts yet (None: judged)
    after: tuple[Snapshot, ...] = ()  # a replay: what was recorded after (detail charts)
    generation: int | None = None  # a replay: the player's move it belongs to


class Feed:
    """Judges each snapshot of one stream once and hands the frame to its subscribers."""

    def __init__(
        self, thresholds: Thresholds = DEFAULT, *, history: int = 1, judge_jobs: bool = True
    ) -> None:
        self.thresholds = thresholds
        self.judge_jobs = judge_jobs  # False: no job verdict is presented (see Diagnoser.push)
        self.subscribers: list[Callable[[Frame], None]] = []
        self._history: deque[Snapshot] = deque(maxlen=max(1, history))
        self._lock = threading.Lock()
        self._diagnoser: Diagnoser | None = None  # made on the first judging (_judge)
        self._waiting: list[Snapshot] = []  # pushed with judge=False, not judged since
        self._judged: Diagnosis | None = None  # the diagnosis of the newest snapshot pushed
        self._given: tuple[Snapshot, ...] = ()  # the history it was judged on

    @property
    def kept(self) -> tuple[int, int]:
        """(snapshots the diagnoser keeps whole, look-back forms)."""
        return (0, 0) if self._diagnoser is None else self._diagnoser.kept

    def push(
        self,
        snapshot: Snapshot,
        *,
        judge_jobs: bool | None = None,
        publish: bool = True,
        judge: bool = True,
    ) -> Frame:
        """The frame of the stream's newest ``snapshot``, handed to subscribers if ``publish``.
        ``judge`` False: the frame has no diagnosis yet (``judging``); the snapshot is judged
        with the next push or by :meth:`judge`, whichever comes first."""
        with self._lock:
            history = self._history
            if history and not snapshot.time >= history[-1].time:
                history.clear()  # the clock went back: a new stream
                self._waiting.clear()
            elif history and snapshot.time == history[-1].time:
                self._restate(history.pop())
            history.append(snapshot)
            if judge:
                new, self._waiting = (*self._waiting, snapshot), []
                frame = self._frame(tuple(history), new, judge_jobs)
            else:
                self._waiting.append(snapshot)
                frame = Frame(snapshot, tuple(history), None, NOT_JUDGED_YET)
        return self._publish(frame, publish)

    def _restate(self, before: Snapshot) -> None:
        """A snapshot of the same time as ``before`` (the newest) is the same reading
        restated, e.g. completed (the dashboard's first snapshot, its processes read after
        the first frame): it takes ``before``'s place. One already judged cannot be taken
        back from the diagnoser: the history is then judged afresh."""
        if any(s is before for s in self._waiting):
            self._waiting = [s for s in self._waiting if s is not before]
        elif self._diagnoser is not None:
            self._diagnoser = None
            self._judged = None
            self._waiting = list(self._history)

    def judge(self, *, publish: bool = True) -> Frame | None:
        """The newest snapshot's frame, judged, if it was pushed with ``judge=False`` and no
        push has judged it since (None: nothing waits)."""
        with self._lock:
            if not self._waiting:
                return None
            new, self._waiting = tuple(self._waiting), []
            frame = self._frame(tuple(self._history), new, None)
        return self._publish(frame, publish)

    def _publish(self, frame: Frame, publish: bool) -> Frame:
        for subscriber in self.subscribers if publish else ():
            subscriber(frame)
        return frame

    def frame(
        self,
        history: Sequence[Snapshot],
        *,
        judging: str | None = None,
        after: Sequence[Snapshot] = (),
        generation: int | None = None,
    ) -> Frame:
        """The frame of ``history[-1]``, not published; only what is new is judged."""
        history = tuple(sorted(history, key=lambda s: s.time))  # judged in time order
        with self._lock:
            if judging is not None:
                return Frame(history[-1], history, None, judging, tuple(after), generation)
            return self._frame(history, self._new(history), None, tuple(after), generation)

    def _frame(
        self,
        history: tuple[Snapshot, ...],
        new: tuple[Snapshot, ...],
        judge_jobs: bool | None,
        after: tuple[Snapshot, ...] = (),
        generation: int | None = None,
    ) -> Frame:
        self._given = history
        done = self._judged
        if new or done is None:
            jobs = self.judge_jobs if judge_jobs is None else judge_jobs
            done = self._judged = self._judge(new or history, jobs)
        return Frame(history[-1], history, done, None, after, generation)

    def _judge(self, snapshots: tuple[Snapshot, ...], judge_jobs: bool) -> Diagnosis:
        if self._diagnoser is None:
            # Here, not at the top: a dashboard draws its first frame before it judges
            # (push's ``judge``), and the diagnosis' modules are not needed before.
            from gputop.diagnosis import Diagnoser

            self._diagnoser = Diagnoser(self.thresholds)
        return self._diagnoser.push(*snapshots, judge_jobs=judge_jobs)

    def _new(self, history: tuple[Snapshot, ...]) -> tuple[Snapshot, ...]:
        """The snapshots after those judged before if ``history`` continues them, else all
        of it, to a fresh diagnoser."""
        from gputop.analysis.window import continues  # with the diagnosis (see _judge)

        cut = continues(self._given, history)
        if cut is not None:
            return history[len(self._given) - cut :]
        self._diagnoser = None  # a fresh one
        self._judged = None
        return history
