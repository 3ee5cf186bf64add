"""The window cache: one snapshot's work (:class:`Tick`), what the analyzer carries
between calls (:class:`Carried`), and what one call judges with (:class:`Context`).
"""

from __future__ import annotations

import bisect
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

from gputop.analysis.gpu_rules import (
    GpuTick,
    Group,
    group_of,
    held,
    memory_full,
    scope_samples,
    span_read,
)
from gputop.analysis.holders import Runs, all_idle, idle_and_held
from gputop.analysis.input_rules import (
    HostView,
    JobSignals,
    JobTick,
    Track,
    cause_flags,
    signals_of,
)
from gputop.analysis.jobs import Job, JobStructure, build_jobs_reusing, process_index
from gputop.analysis.kinds import Finding
from gputop.analysis.thresholds import Thresholds
from gputop.model import GpuSample, ProcessInfo, Snapshot


class Tick:
    """The verdicts' work on one snapshot, done once (jobs, and per GPU set the parts)."""

    def __init__(self, snap: Snapshot, previous: Tick | None = None) -> None:
        self.snap = snap
        self.lost = [g for g in snap.gpus if g.lost]
        self.structure: JobStructure
        if previous is None or not _same_jobs(previous, snap):
            self._procs: dict[int, ProcessInfo] | None = process_index(snap)
            index = self._procs
            jobs, self.structure = build_jobs_reusing(
                snap, None if previous is None else previous.structure, index
            )
            self.jobs = {j.id: j for j in jobs}
            self.feats = {job_id: JobTick.of(job, index) for job_id, job in self.jobs.items()}
            self._ageless: bool | None = None
            self._by_gpu: dict[int, tuple[str, ...]] | None = None
        else:
            self._procs = previous._procs
            self.jobs = previous.jobs
            self.structure = previous.structure
            self.feats = previous.feats
            self._ageless = previous._ageless
            self._by_gpu = previous._by_gpu
        self._samples: dict[tuple[int, ...], list[GpuSample]] = {}
        self._gpu: dict[tuple[int, ...], GpuTick] = {}
        # the maps only, not the tick (which would chain every tick before)
        self._before = None if previous is None else (previous._gpu, previous.snap.unlisted_holders)
        self._idle: dict[tuple[int, ...], bool] = {}
        self._pids: dict[tuple[int, ...], frozenset[int]] = {}
        if previous is not None:
            # Only the newest tick's index is read: an older tick's would be one dict per
            # tick of the window, each as large as the process list.
            previous._procs = None

    @property
    def procs(self) -> dict[int, ProcessInfo]:
        """pid -> the snapshot's process row (``process_index``), made again if let go."""
        procs = self._procs
        if procs is None:
            procs = self._procs = process_index(self.snap)
        return procs

    def job_ids_by_gpu(self) -> dict[int, tuple[str, ...]]:
        """GPU index -> the ids of the jobs on it, by GPU memory (most first), root pid."""
        if self._by_gpu is None:
            by_gpu: dict[int, list[str]] = {}
            for j in sorted(self.jobs.values(), key=lambda j: (-(j.gpu_memory or 0), j.root_pid)):
                for g in j.gpus:
                    by_gpu.setdefault(g, []).append(j.id)
            self._by_gpu = {g: tuple(ids) for g, ids in by_gpu.items()}
        return self._by_gpu

    def ageless(self) -> bool:
        """Whether no job here knows its start (so no age moves on with the time)."""
        if self._ageless is None:
            self._ageless = all(j.create_time is None for j in self.jobs.values())
        return self._ageless

    def samples(self, gpus: tuple[int, ...]) -> list[GpuSample]:
        out = self._samples.get(gpus)
        if out is None:
            out = self._samples[gpus] = scope_samples(self.snap, gpus)
        return out

    def gpu(self, gpus: tuple[int, ...], t: Thresholds) -> GpuTick:
        out = self._gpu.get(gpus)
        if out is None:
            samples = self.samples(gpus)
            before = self._before
            if before is not None:
                part = before[0].get(gpus)
                if (
                    part is not None
                    and len(part.samples) == len(samples)
                    and all(map(operator.is_, part.samples, samples))
                    and before[1] == self.snap.unlisted_holders  # what ``held`` reads
                ):
                    out = part
            if out is None:
                out = GpuTick(self.snap, samples, t)
            self._gpu[gpus] = out
        return out

    def idle(self, gpus: tuple[int, ...], t: Thresholds) -> bool:
        idle = self._idle.get(gpus)
        if idle is None:
            samples = self.samples(gpus)
            idle = self._idle[gpus] = bool(samples) and all_idle(samples, t)
        return idle

    def idle_and_held(
        self, gpus: tuple[int, ...], pids: frozenset[int] | None, t: Thresholds
    ) -> bool:
        if not self.idle(gpus, t):
            return False
        samples = self.samples(gpus)
        if pids is not None:
            on = self._pids.get(gpus)
            if on is None:
                on = self._pids[gpus] = frozenset(p.pid for g in samples for p in g.processes)
            return not on.isdisjoint(pids)
        return all(held(self.snap, g, t) for g in samples)  # once a tick: the runs' memo


def _same_jobs(previous: Tick, snap: Snapshot) -> bool:
    """Whether ``build_jobs(snap)`` is ``previous``'s jobs (sources reuse unchanged objects)."""
    before = previous.snap
    if snap.processes is not before.processes or len(snap.gpus) != len(before.gpus):
        return False
    for g, h in zip(snap.gpus, before.gpus, strict=True):
        if g is not h and (
            g.index != h.index
            or g.lost != h.lost
            or g.processes is not h.processes
            or g.utilization.gpu != h.utilization.gpu
        ):
            return False
    # a job's age moves on with the time, unless no job knows its start
    return snap.time == before.time or previous.ageless()


_time = operator.attrgetter("time")


def dropped(before: Sequence[Tick], ticks: Sequence[Tick]) -> int | None:
    """How many of the ``before`` window's first ticks ``ticks`` dropped, when it starts
    with all the others, in order (None: it does not)."""
    if not ticks:
        return None
    first = ticks[0]
    for k, tick in enumerate(before):
        if tick is first:
            kept = len(before) - k
            same = kept <= len(ticks) and all(map(operator.is_, before[k:], ticks[:kept]))
            return k if same else None
    return None


def continues(prev: Sequence[Snapshot], given: Sequence[Snapshot]) -> int | None:
    """How many snapshots ``given`` cut from ``prev``'s start, if it continues it; else None."""
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


def split_window(
    history: Sequence[Snapshot], t: Thresholds
) -> tuple[list[Snapshot], list[Snapshot]]:
    """(the full history sorted by time, the window: a suffix of it)."""
    full = sorted(history, key=_time)
    end = full[-1].time
    if math.isnan(sum(map(_time, full))):  # NaN times: no order (kept as it was)
        window = [s for s in full if s.time >= end - t.window_seconds]
    else:  # ordered times: the snapshots from the window's start on
        window = full[bisect.bisect_left(full, end - t.window_seconds, key=_time) :]
    if len(window) < t.min_samples:  # slow sampling: at least MIN_SAMPLES snapshots
        window = full[-t.min_samples :]
    return full, window


#: (GPU set, ticks present): the key of a GPU group.
GroupKey = tuple[tuple[int, ...], tuple[bool, ...]]
#: (a GPU set's part in each window tick, whether it had samples there).
KeptParts = tuple[list[GpuTick], tuple[bool, ...]]
#: (window parts, what it read of their span, group): a group with what it was judged from.
KeptGroup = tuple[Sequence[GpuTick | None], tuple[bool, str], Group]


@dataclass(slots=True, eq=False)
class Carried:
    """Carried between calls: the job tracks and the GPU groups of the last call and this."""

    tracks: dict[str, Track] = field(default_factory=dict)  # job id -> its track over the window
    groups_before: dict[GroupKey, KeptGroup] = field(default_factory=dict)
    groups_now: dict[GroupKey, KeptGroup] = field(default_factory=dict)
    # GPU set -> (its part in each window tick, whether it had samples there)
    parts_before: dict[tuple[int, ...], KeptParts] = field(default_factory=dict)
    parts_now: dict[tuple[int, ...], KeptParts] = field(default_factory=dict)


@dataclass(eq=False)
class Context:
    """What one diagnosis' rules read: thresholds, history, the window's ticks, the runs kept."""

    t: Thresholds
    history: list[Snapshot]  # the full history, oldest first
    ticks: list[Tick]  # one per window snapshot: a suffix of ``history``
    base: int  # sequence number of history[0] (idle-holder run memo)
    runs: Runs
    carried: Carried | None = None  # valid until the analyzer's next call
    # with ``carried``: how many ticks the window dropped from the last call's, whose
    # others are its first (None: it does not go on from the last call's)
    dropped: int | None = None
    groups: dict[GroupKey, Group] = field(default_factory=dict)
    causes: dict[str, tuple[JobSignals, int] | None] = field(default_factory=dict)
    memory: dict[tuple[int, ...], Finding | None] = field(default_factory=dict)
    parts: dict[tuple[int, ...], KeptParts] = field(default_factory=dict)

    @property
    def latest(self) -> Snapshot:
        return self.ticks[-1].snap

    @property
    def span(self) -> float:
        return self.ticks[-1].snap.time - self.ticks[0].snap.time

    @property
    def latest_jobs(self) -> dict[str, Job]:
        return self.ticks[-1].jobs

    @cached_property
    def host(self) -> HostView:
        return HostView([tk.snap for tk in self.ticks], self.history, self.t)

    # --- the GPU side -------------------------------------------------------------------

    def gpu_parts(self, gpus: tuple[int, ...]) -> list[GpuTick]:
        """``gpus``' part in each window tick (``Tick.gpu``)."""
        return self._parts(gpus)[0]

    def gpu_present(self, gpus: tuple[int, ...]) -> tuple[bool, ...]:
        """Whether ``gpus`` had samples in each window tick."""
        return self._parts(gpus)[1]

    def _parts(self, gpus: tuple[int, ...]) -> KeptParts:
        out = self.parts.get(gpus)
        if out is None:
            t, ticks, c = self.t, self.ticks, self.carried
            kept = None if c is None or self.dropped is None else c.parts_before.get(gpus)
            parts: list[GpuTick] = []
            present: tuple[bool, ...] = ()
            if kept is not None:  # the window went on: the last call's parts of the ticks it kept
                parts, present = kept[0][self.dropped :], kept[1][self.dropped :]
            new = [tk._gpu.get(gpus) or tk.gpu(gpus, t) for tk in ticks[len(parts) :]]
            parts += new
            present += tuple(p.n > 0 for p in new)
            out = self.parts[gpus] = (parts, present)
            if c is not None:
                c.parts_now[gpus] = out
        return out

    def memory_full(self, gpus: tuple[int, ...]) -> Finding | None:
        if gpus not in self.memory:
            self.memory[gpus] = memory_full(self.ticks[-1].samples(gpus), self.t)
        return self.memory[gpus]

    def group(self, gpus: tuple[int, ...], present: tuple[bool, ...] | None) -> Group:
        """The GPU side on ``gpus`` over the ticks where ``present`` (None: with samples)."""
        if present is None:
            # the group of a scope present in exactly those ticks is the same group
            present = self.gpu_present(gpus)
        done = self.groups.get((gpus, present))
        if done is None:
            done = self.groups[gpus, present] = self.group_of_parts(gpus, present)
        return done

    def group_of_parts(self, gpus: tuple[int, ...], present: tuple[bool, ...]) -> Group:
        """``group_of`` the parts, or the last call's group when judged from the same parts
        and an equal read of their span (``span_read``)."""
        parts: Sequence[GpuTick | None] = self.gpu_parts(gpus)
        if False in present:  # else, the common case, no list is made
            parts = [p if here else None for p, here in zip(parts, present, strict=True)]
        n = present.count(True)
        span = 0.0
        if n:
            first, last = present.index(True), len(present) - 1 - present[::-1].index(True)
            span = self.ticks[last].snap.time - self.ticks[first].snap.time
        read = span_read(n, span, self.t)
        c = self.carried
        key: GroupKey = (gpus, present)
        kept = None if c is None else c.groups_before.get(key)
        # the key fixes how many ticks and parts there are: the rest must match
        if kept is not None and kept[1] == read and all(map(operator.is_, kept[0], parts)):
            group = kept[2]
        else:
            ticks = [tk.snap.time for tk, here in zip(self.ticks, present, strict=True) if here]
            group = group_of(self.t, gpus, parts, ticks, span)
        if c is not None:
            c.groups_now[key] = (parts, read, group)
        return group

    # --- the jobs -----------------------------------------------------------------------

    def track(self, job_id: str) -> Track | None:
        return None if self.carried is None else self.carried.tracks.get(job_id)

    def feats(self, job_id: str) -> list[JobTick | None]:
        """The job in each window tick (a job judged on its own id may be in none)."""
        return [tk.feats.get(job_id) for tk in self.ticks]

    def present(self, job_id: str) -> tuple[bool, ...]:
        """Whether the job is in each window tick."""
        track = self.track(job_id)
        if track is not None and len(track.feats) == len(self.ticks):
            return (True,) * len(self.ticks)
        return tuple(f is not None for f in self.feats(job_id))

    def causes_of(self, job_id: str) -> tuple[JobSignals, int] | None:
        """The job's window signals and their ``cause_flags``, memoized."""
        causes = self.causes
        if job_id in causes:
            return causes[job_id]
        track = self.track(job_id)
        out: tuple[JobSignals, int] | None = None
        if track is not None:
            sig = track.signals()
            if track.cause is None or track.cause[0] is not sig:
                track.cause = (sig, cause_flags(self.t, sig))
            out = track.cause
        elif feats := [f for f in self.feats(job_id) if f is not None]:
            sig = signals_of(feats)
            out = (sig, cause_flags(self.t, sig))
        causes[job_id] = out
        return out

    # --- the idle-holder runs -----------------------------------------------------------

    def idle_and_held(self, i: int, gpus: tuple[int, ...], pids: frozenset[int] | None) -> bool:
        """``idle_and_held`` on history[i]; memoized when history[i] is in the window."""
        w = i - (len(self.history) - len(self.ticks))
        if w >= 0:
            return self.ticks[w].idle_and_held(gpus, pids, self.t)
        return idle_and_held(self.history[i], gpus, pids, self.t)

    def run_start(self, gpus: tuple[int, ...], pids: frozenset[int] | None) -> int:
        """Where the idle-and-held run ending the history starts (``len(history)``: none)."""
        return self.runs.start(
            (gpus, pids), len(self.history), self.base, lambda i: self.idle_and_held(i, gpus, pids)
        )
