"""Diagnosis: the one place a snapshot and its history become jobs and verdicts
(docs/architecture.md). :class:`Diagnoser` never raises for an analysis bug: the
diagnosis then carries ``error`` and no verdicts.
"""

from __future__ import annotations

import bisect
import time
import traceback as tb
from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

from gputop.analysis.jobs import Job
from gputop.analysis.thresholds import DEFAULT, Thresholds
from gputop.analysis.verdict import Analyzer
from gputop.analysis.window import split_window
from gputop.model import Snapshot, Verdict


@dataclass(frozen=True, slots=True, eq=False)
class Diagnosis:
    """The jobs and verdicts of one snapshot: computed once, shared by every view."""

    snapshot: Snapshot  # the snapshot judged: the newest of the history given
    jobs: tuple[Job, ...]  # the snapshot's jobs (``build_jobs`` order)
    gpus: Mapping[int, Verdict]  # GPU index -> verdict
    job_verdicts: Mapping[str, Verdict]  # job id -> verdict
    thresholds: Thresholds = DEFAULT  # what it was judged with
    seconds: float = 0.0  # what computing it cost, wall seconds
    error: str | None = None  # the analysis failed: why (every verdict is then missing)
    traceback: str | None = None

    def job(self, job_id: str) -> Job | None:
        return next((j for j in self.jobs if j.id == job_id), None)

    def only(self, indices: Collection[int] | None) -> Diagnosis:
        """Narrowed to the GPUs ``indices`` (None: unchanged). A job on one of them stays
        whole, so the same job has the same verdict in every view."""
        if indices is None:
            return self
        keep = frozenset(indices)
        jobs = tuple(j for j in self.jobs if keep.intersection(j.gpus))
        verdicts = self.job_verdicts
        return replace(
            self,
            jobs=jobs,
            gpus=MappingProxyType({i: v for i, v in self.gpus.items() if i in keep}),
            job_verdicts=MappingProxyType({j.id: verdicts[j.id] for j in jobs if j.id in verdicts}),
        )


def lookback_seconds(thresholds: Thresholds) -> float:
    """How much history the verdicts are given ("idle memory holder" reaches furthest);
    bounded so the cost stays flat (an idle holder's duration is then a lower bound)."""
    return 2.0 * max(thresholds.window_seconds, thresholds.idle_holder_seconds)


def recent(history: Sequence[Snapshot], seconds: float) -> Sequence[Snapshot]:
    """The snapshots no older than ``seconds`` before the newest (history is time-ordered)."""
    if not history:
        return history
    start = bisect.bisect_left(history, history[-1].time - seconds, key=lambda s: s.time)
    return history[start:]


class Diagnoser:
    """Turns a history into the :class:`Diagnosis` of its newest snapshot; not thread-safe
    (:class:`~gputop.pipeline.Feed` serializes the calls)."""

    def __init__(self, thresholds: Thresholds = DEFAULT) -> None:
        self.thresholds = thresholds
        # The window's snapshots, whole (the rest of the look-back is carried by _analyzer).
        self._recent: deque[Snapshot] = deque()
        self._analyzer = Analyzer(thresholds, carry=lookback_seconds(thresholds))

    def push(self, *snapshots: Snapshot, judge_jobs: bool = True) -> Diagnosis:
        """The diagnosis of the newest of ``snapshots`` (time-ordered, after those pushed
        before), judged once on the last ``lookback_seconds``; an older snapshot starts
        afresh. ``judge_jobs=False``: job verdicts left empty."""
        if not snapshots:
            raise ValueError("nothing to diagnose: the history is empty")
        kept = self._recent
        new = 0
        for snapshot in snapshots:
            if kept and not snapshot.time >= kept[-1].time:
                kept.clear()  # the clock stepped back: start afresh from this snapshot
                new = 0
            kept.append(snapshot)
            new += 1
        # Only the window stays whole; the analyzer must see an overlap and every new
        # snapshot once, so the old ones go before judging and the new ones after.
        drop = len(kept) - len(split_window(kept, self.thresholds)[1])
        now = min(drop, max(0, len(kept) - new - 1))
        for _ in range(now):
            kept.popleft()
        done = self._judge(recent(list(kept), lookback_seconds(self.thresholds)), judge_jobs)
        for _ in range(drop - now):
            kept.popleft()
        return done

    @property
    def kept(self) -> tuple[int, int]:
        """What is kept between pushes: (snapshots kept whole, look-back forms)."""
        return len(self._recent), self._analyzer.carried

    def _judge(self, history: Sequence[Snapshot], judge_jobs: bool) -> Diagnosis:
        start = time.perf_counter()
        error = trace = None
        try:
            gpus, job_verdicts, jobs = self._analyzer.update(history, judge_jobs)
        except Exception as exc:  # a bug in the analysis must not take a consumer down
            error = str(exc) or type(exc).__name__
            trace = tb.format_exc()
            gpus, job_verdicts, jobs = {}, {}, ()
        seconds = time.perf_counter() - start
        verdicts = MappingProxyType(gpus), MappingProxyType(job_verdicts)
        return Diagnosis(history[-1], jobs, *verdicts, self.thresholds, seconds, error, trace)
