"""Recent history -> one verdict per GPU and per job: is it bound by the GPU or by its input?

Pure and deterministic: the same history and thresholds give the same verdicts.

The history is a sequence of snapshots, oldest first (sorted here by ``time`` anyway).
Most findings look at the *window*: the snapshots no older than ``WINDOW_SECONDS``
before the newest, or the newest ``MIN_SAMPLES`` snapshots when that reaches further
back (slow sampling intervals). A job is judged on the window ticks it existed in.
"idle memory holder" looks at the whole history given, and the process start times.

Every condition that applies becomes a finding with a rank; the lowest rank is the
verdict's ``kind``, the other kinds are listed in ``also`` (by rank). The ranks, and
when each kind applies, are declared once in :data:`gputop.analysis.kinds.KIND_SPECS`
(``docs/verdicts.md`` shows them as a table).

Layout: the kinds, labels and ranks are in :mod:`gputop.analysis.kinds`, the window
cache in :mod:`gputop.analysis.window`, the rules in :mod:`gputop.analysis.rules`; this
module is the API (every public name is importable from here).

Cost: the plain functions (``all_verdicts``...) build every window snapshot's jobs on
each call. A caller that judges a growing history tick after tick (the dashboard) uses
:class:`Analyzer` instead: same results, but each snapshot's own work is done once while
it is in the window, each job's window signals and each scope's idle-holder run are
carried from call to call, so a call costs about the new snapshot plus a small
aggregation per GPU and per job.

"util low or oscillating" (starved): mean < UTIL_LOW, or mean < UTIL_HIGH with standard
deviation >= UTIL_OSCILLATION. Findings for a GPU below UTIL_HIGH but not starved
(steady, moderate use) carry severity "info" instead of "warn". A busy main thread alone
proves nothing on a busy GPU (CUDA syncs spin), hence its stricter condition.
"""

from __future__ import annotations

import operator
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from typing import NamedTuple

from gputop.analysis.jobs import Job, build_jobs
from gputop.analysis.kinds import (
    GPU_BOUND,
    IDLE,
    IDLE_HOLDER,
    INPUT_CPU,
    INPUT_DISK,
    INPUT_MAIN,
    KINDS,
    LABELS,
    LINK_DEGRADED,
    LOST,
    MEMORY_FULL,
    MODERATE,
    SEVERITIES,
    THROTTLED,
    TRANSFER_PCIE,
    UNDERUSED,
    UNKNOWN,
    WARMING_UP,
    verdict_to_dict,
)
from gputop.analysis.rules import gpu_verdicts_of, job_verdict, job_verdicts_of, jobs_to_judge
from gputop.analysis.thresholds import DEFAULT, Thresholds
from gputop.analysis.window import (
    Carried,
    Context,
    Runs,
    Tick,
    Track,
    lookback_form,
    split_window,
)
from gputop.model import Snapshot, Verdict

__all__ = [
    "GPU_BOUND",
    "IDLE",
    "IDLE_HOLDER",
    "INPUT_CPU",
    "INPUT_DISK",
    "INPUT_MAIN",
    "KINDS",
    "LABELS",
    "LINK_DEGRADED",
    "LOST",
    "MEMORY_FULL",
    "MODERATE",
    "SEVERITIES",
    "THROTTLED",
    "TRANSFER_PCIE",
    "UNDERUSED",
    "UNKNOWN",
    "WARMING_UP",
    "Analysis",
    "Analyzer",
    "JobVerdicts",
    "all_verdicts",
    "gpu_verdicts",
    "job_verdicts",
    "verdict_to_dict",
    "window",
]


def window(history: Sequence[Snapshot], thresholds: Thresholds = DEFAULT) -> list[Snapshot]:
    """The snapshots the window covers (oldest first)."""
    return split_window(history, thresholds)[1] if history else []


class JobVerdicts(Mapping[str, Verdict]):
    """Job id -> verdict, each judged the first time it is read (then kept).

    What :meth:`Analyzer.update` returns: the GPU verdicts need every job's signals
    anyway, but a view that shows a few jobs only pays for those. ``dict(...)`` judges
    them all. Bound to the history it was made from: reading it later gives the same
    verdicts (it keeps that window alive while referenced)."""

    __slots__ = ("_ctx", "_done", "_jobs")

    def __init__(self, ctx: Context | None, jobs: dict[str, Job]) -> None:
        self._ctx = ctx
        self._jobs = jobs
        self._done: dict[str, Verdict] = {}

    def __getitem__(self, job_id: str) -> Verdict:
        done = self._done.get(job_id)
        if done is None:
            job = self._jobs[job_id]  # KeyError for a job not judged
            assert self._ctx is not None
            done = self._done[job_id] = job_verdict(self._ctx, job)
        return done

    def __iter__(self) -> Iterator[str]:
        return iter(self._jobs)

    def __len__(self) -> int:
        return len(self._jobs)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._jobs

    def __repr__(self) -> str:
        return f"JobVerdicts({len(self._jobs)} jobs, {len(self._done)} judged)"


class Analysis(NamedTuple):
    """What :meth:`Analyzer.update` returns (unpacks as a 3-tuple)."""

    gpu_verdicts: dict[int, Verdict]  # GPU index -> verdict, for the newest snapshot's GPUs
    job_verdicts: JobVerdicts  # job id -> verdict (judged on first read)
    jobs: tuple[Job, ...]  # the newest snapshot's jobs (``build_jobs``), sorted as it sorts


class Analyzer:
    """The verdicts of a history that grows one snapshot at a time, at the cost of the
    new snapshot plus the window's aggregation (the dashboard's path).

    Snapshots are immutable, so what the verdicts compute from one snapshot alone (its
    jobs, pid index, per-job CPU/disk features, per-GPU-set samples and idle flags) is
    kept while it is in the window, keyed by the snapshot object itself; the "idle
    memory holder" runs are carried from one call to the next (extended by the new
    snapshots instead of walking back through the history). The results are exactly
    those of :func:`all_verdicts` on the same history, whatever history each call is
    given: when it is not the previous one cut at the start and extended at the end, the
    carried state is dropped and rebuilt.

    Not thread-safe: use one per consumer thread. Memory: the window's per-snapshot
    work and one small record per scope; nothing older.

    ``carry`` (seconds; :meth:`gputop.diagnosis.Diagnoser.push`): the caller gives only
    the window's snapshots (and a few more); the analyzer keeps the look-back beyond
    them itself, ``carry`` seconds of it, each snapshot in its look-back form (see
    :meth:`_carried`). The results are those of the whole history.

    ::

        analyzer = Analyzer(thresholds)
        gpu_v, job_v, jobs = analyzer.update(history)   # each tick, history oldest first
    """

    def __init__(self, thresholds: Thresholds = DEFAULT, *, carry: float | None = None) -> None:
        """``carry``: seconds of look-back this analyzer keeps itself (see
        :meth:`_carried`); None: the history given is the whole history."""
        self.thresholds = thresholds
        self._carry = carry
        self._given: list[Snapshot] = []  # carry: the previous call's history as given
        self._older: deque[Snapshot] = deque()  # carry: look-back forms, oldest first
        self._ticks: dict[int, Tick] = {}  # id(snapshot) -> its work; tick.snap pins it
        self._full: list[Snapshot] = []  # the previous call's sorted history
        self._base = 0  # sequence number of _full[0]
        self._runs = Runs()
        self.memory = Carried()  # the job tracks and GPU groups the rules read
        self._window: tuple[int, list[Tick]] = (0, [])  # (sequence number of [0], ticks)

    def jobs(self, snapshot: Snapshot) -> tuple[Job, ...]:
        """``build_jobs(snapshot)``, from the cache when the snapshot is in the window."""
        tick = self._ticks.get(id(snapshot))
        if tick is not None and tick.snap is snapshot:
            return tuple(tick.jobs.values())
        return build_jobs(snapshot)

    def _tick(self, snap: Snapshot, previous: Tick | None = None) -> Tick:
        tick = self._ticks.get(id(snap))
        if tick is None or tick.snap is not snap:  # id() of a collected snapshot reused
            tick = Tick(snap, previous)
        return tick

    def _sequence(self, full: list[Snapshot]) -> tuple[int, bool]:
        """(the sequence number of full[0], whether it continues the previous call's
        numbering): it does when ``full`` is the previous history cut at the start and
        extended at the end; otherwise the numbering starts afresh above every number
        given so far, and what was carried between calls is dropped."""
        cut = _continues(self._full, full)
        if cut is not None:
            return self._base + cut, True
        self._runs = Runs()
        return self._base + len(self._full) + 1, False

    @property
    def carried(self) -> int:
        """How many look-back forms are carried (``carry`` mode)."""
        return len(self._older)

    def _carried(self, given: list[Snapshot]) -> tuple[list[Snapshot], int, bool]:
        """Carry mode: the caller gives the window's snapshots (and a few more), not the
        whole look-back. The snapshots cut from the start of the previous history given
        are kept here in their look-back form (``lookback_form``: what the verdicts
        read outside the window), as long as ``carry`` seconds. Returns (the full
        history: those forms then ``given``, the sequence number of its first snapshot,
        whether it continues the previous call's numbering). When ``given`` does not
        continue the previous history (cut at the start, extended at the end), the
        forms are dropped: the look-back starts afresh."""
        prev, older = self._given, self._older
        cut = _continues(prev, given)
        if cut is None:
            older.clear()
            self._runs = Runs()
            base, continued = self._base + len(self._full) + 1, False
        else:
            for snap in prev[:cut]:
                older.append(lookback_form(snap, older[-1] if older else None))
            assert self._carry is not None
            horizon = given[-1].time - self._carry
            popped = 0
            while older and not older[0].time >= horizon:  # as ``diagnosis.recent``
                older.popleft()
                popped += 1
            base, continued = self._base + popped, True
        self._given = given
        return [*older, *given], base, continued

    def _slide(self, first: int, ticks: list[Tick], continued: bool) -> None:
        """Bring the job tracks to the window ``ticks`` (sequence numbers from ``first``):
        drop the ticks that left it, add the new ones; rebuild when it did not slide."""
        tracks = self.memory.tracks
        last = first + len(ticks) - 1
        pfirst, pticks = self._window
        plast = pfirst + len(pticks) - 1
        if continued and pticks and first == pfirst + 1 and last == plast + 1:
            # The steady case: one tick left, one came. A job in both whose track is all
            # one object, the one that came (its input did not change), would be popped
            # and pushed back unchanged: skipped.
            left, came = pticks[0].feats, ticks[-1].feats
            steady: set[str] = set()
            for job_id in left:
                gone = tracks[job_id]
                if gone.steady(came.get(job_id)):
                    steady.add(job_id)
                    continue
                gone.pop()
                if not gone.feats:
                    del tracks[job_id]
            for job_id, f in came.items():
                if job_id not in steady:
                    track = tracks.get(job_id)
                    if track is None:
                        track = tracks[job_id] = Track()
                    track.push(f)
            self._window = (first, ticks)
            return
        if continued and pticks and first >= pfirst and last >= plast:
            for seq in range(pfirst, min(first, plast + 1)):
                for job_id in pticks[seq - pfirst].feats:
                    gone = tracks[job_id]
                    gone.pop()
                    if not gone.feats:
                        del tracks[job_id]
            new = range(max(plast + 1, first), last + 1)
        else:
            tracks.clear()
            new = range(first, last + 1)
        for seq in new:
            for job_id, f in ticks[seq - first].feats.items():
                track = tracks.get(job_id)
                if track is None:
                    track = tracks[job_id] = Track()
                track.push(f)
        self._window = (first, ticks)

    def context(self, history: Sequence[Snapshot], track: bool = True) -> Context | None:
        """The context one call judges with; ``track``: keep the job tracks (worth it
        when called again with the next history)."""
        if not history:
            return None
        t = self.thresholds
        full, window = split_window(history, t)
        if self._carry is not None:  # the window is a suffix of what was given
            full, base, continued = self._carried(full)
        else:
            base, continued = self._sequence(full)
        ticks: list[Tick] = []
        for s in window:  # a new snapshot may take its jobs over from the one before
            ticks.append(self._tick(s, ticks[-1] if ticks else None))
        self._full, self._base = full, base
        self._ticks = {id(tk.snap): tk for tk in ticks}  # the window only
        self._runs.prune(base + len(full) - 2)  # scopes not judged last call or this one
        memory = self.memory
        memory.generation += 1
        memory.groups_before, memory.groups_now = memory.groups_now, {}
        if not track:
            memory.tracks, self._window = {}, (0, [])
            return Context(t, full, window, ticks, base, self._runs)
        self._slide(base + len(full) - len(window), ticks, continued)
        return Context(
            t, full, window, ticks, base, self._runs, carried=memory, generation=memory.generation
        )

    def update(
        self,
        history: Sequence[Snapshot],
        jobs: Sequence[Job] | Mapping[str, Job] | None = None,
    ) -> Analysis:
        """``(gpu_verdicts, job_verdicts, jobs)`` for ``history`` (oldest first; sorted by
        time anyway): what ``build_jobs(history[-1])`` and ``all_verdicts(history, jobs,
        thresholds)`` give. ``jobs``: the jobs to judge (default: the newest snapshot's).
        The job verdicts are judged when read (:class:`JobVerdicts`)."""
        ctx = self.context(history)
        if ctx is None:
            return Analysis({}, JobVerdicts(None, {}), ())
        latest_jobs = tuple(ctx.latest_jobs.values())
        return Analysis(
            gpu_verdicts_of(ctx), JobVerdicts(ctx, jobs_to_judge(ctx, jobs)), latest_jobs
        )


def _continues(prev: list[Snapshot], given: list[Snapshot]) -> int | None:
    """How many of ``prev``'s first snapshots ``given`` cut when it is ``prev`` cut at the
    start and extended at the end (the same objects); None when it is not."""
    if not prev:
        return None
    last = prev[-1]
    for i in range(len(given) - 1, -1, -1):
        if given[i] is last:
            cut = len(prev) - (i + 1)
            if cut >= 0 and all(map(operator.is_, given[: i + 1], prev[cut:])):
                return cut
            return None
    return None


def _context(history: Sequence[Snapshot], t: Thresholds) -> Context | None:
    """A context with nothing cached (the plain functions): a throwaway :class:`Analyzer`
    that keeps no job tracks (they would be built for one use)."""
    return Analyzer(t).context(history, track=False)


def gpu_verdicts(
    history: Sequence[Snapshot], thresholds: Thresholds = DEFAULT
) -> dict[int, Verdict]:
    """One verdict per GPU of the newest snapshot, keyed by GPU index."""
    ctx = _context(history, thresholds)
    return {} if ctx is None else gpu_verdicts_of(ctx)


def job_verdicts(
    history: Sequence[Snapshot],
    jobs: Sequence[Job] | Mapping[str, Job] | None = None,
    thresholds: Thresholds = DEFAULT,
) -> dict[str, Verdict]:
    """One verdict per job, keyed by job id. ``jobs`` defaults to the newest snapshot's."""
    ctx = _context(history, thresholds)
    return {} if ctx is None else job_verdicts_of(ctx, jobs)


def all_verdicts(
    history: Sequence[Snapshot],
    jobs: Sequence[Job] | Mapping[str, Job] | None = None,
    thresholds: Thresholds = DEFAULT,
) -> tuple[dict[int, Verdict], dict[str, Verdict]]:
    """``(gpu_verdicts, job_verdicts)`` in one pass (the window's jobs are built once).
    Over a growing history, :class:`Analyzer` gives the same for a fraction of the cost."""
    ctx = _context(history, thresholds)
    if ctx is None:
        return {}, {}
    return gpu_verdicts_of(ctx), job_verdicts_of(ctx, jobs)
