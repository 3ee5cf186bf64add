"""Recent history -> one verdict per GPU and per job (docs/verdicts.md): a scope's
findings, family by family (:data:`LOOKS`), :class:`Analyzer` and the API. The order of
the looks is not the verdicts' order: which finding wins, and which drop out, is the
declared tables' alone (``kinds.PRECEDENCE``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import NamedTuple

from gputop.analysis import kinds
from gputop.analysis.gpu_rules import Group, idle, lost_finding
from gputop.analysis.holders import Runs, idle_holder, lookback_form
from gputop.analysis.input_rules import JobTick, Track, input_causes, launch_bound
from gputop.analysis.jobs import Job
from gputop.analysis.kinds import RULES, Finding, finding
from gputop.analysis.measured import (
    Measured,
    allocator_cache,
    data_wait,
    input_bound,
    measured_of,
)
from gputop.analysis.thresholds import DEFAULT, Thresholds
from gputop.analysis.window import Carried, Context, Tick, continues, dropped, split_window
from gputop.model import Snapshot, Verdict

# --- judging one scope ---------------------------------------------------------------------


class Scope:
    """What one verdict is about: a GPU set, the jobs that explain its state, the job
    judged or None; its GPU side (:class:`Group`) read once, when a look needs it."""

    __slots__ = ("_group", "_measured", "ctx", "gpus", "job", "job_ids")

    def __init__(
        self, ctx: Context, gpus: tuple[int, ...], job_ids: tuple[str, ...], job: Job | None
    ) -> None:
        self.ctx, self.gpus, self.job_ids, self.job = ctx, gpus, job_ids, job
        self._group: Group | None = None
        self._measured: tuple[Measured | None] | None = None

    @property
    def measured(self) -> Measured | None:
        """What the scope's ranks measured of themselves (gputop's probe), read once."""
        if self._measured is None:
            tick = self.ctx.ticks[-1]
            self._measured = (
                measured_of(
                    self.job,
                    self.job_ids,
                    self.gpus,
                    tick.jobs,
                    tick.samples(self.gpus),
                    tick.procs,
                ),
            )
        return self._measured[0]

    @property
    def group(self) -> Group:
        """The GPU side, shared by every scope on the same GPUs and ticks."""
        if self._group is None:
            ctx, job = self.ctx, self.job
            self._group = ctx.group(self.gpus, None if job is None else ctx.present(job.id))
        return self._group


def look_lost(scope: Scope) -> list[Finding]:
    for g in scope.ctx.ticks[-1].lost:
        if g.index in scope.gpus:
            return [lost_finding(g)]
    return []


def look_idle(scope: Scope) -> list[Finding]:
    if scope.job is not None:
        return []  # a job is never idle: it is there
    found = idle(scope.ctx.gpu_parts(scope.gpus), scope.ctx.span)
    return [] if found is None else [found]


def look_holder(scope: Scope) -> list[Finding]:
    found = _idle_holder(scope.ctx, scope.gpus, scope.job)
    return [] if found is None else [found]


def look_memory(scope: Scope) -> list[Finding]:
    ctx = scope.ctx
    full = ctx.memory_full(scope.gpus)
    cache = allocator_cache(scope.measured, ctx.ticks[-1].procs, full is not None, ctx.t)
    return cache if full is None else [full, *cache]


def look_measured(scope: Scope) -> list[Finding]:
    return data_wait(scope.measured, scope.group, scope.ctx.t)


def look_reading(scope: Scope) -> list[Finding]:
    early = scope.group.early
    return [] if early is None else [early]


def look_load(scope: Scope) -> list[Finding]:
    group = scope.group
    if not group.full or input_bound(scope.measured, scope.ctx.t):
        # not busy, or busy with few SMs active (GPM); or busy while the job's probe
        # measured its steps waiting for data: then the input does not keep up
        return [*group.throttle_link, *group.activity]
    advice = (
        "The GPU is the bottleneck and the input keeps up: speed-ups must come from the "
        "model side (mixed precision, torch.compile, larger batch)"
    )
    return [*group.throttle_link, *group.activity, finding(RULES["gpu_bound"], group.base, advice)]


def look_causes(scope: Scope) -> list[Finding]:
    group, ctx = scope.group, scope.ctx
    if group.busy and not group.hollow:
        return []  # a busy GPU waits on nothing
    jobs = (ctx.causes_of(job_id) for job_id in scope.job_ids)
    own = scope.job is not None
    # a job waits on NVLink only when it spans GPUs that talk over it
    nvlink = [*group.nvlink] if not own or len(scope.gpus) > 1 else []
    if group.hollow:  # kernels always run, on few SMs: only launching can starve them
        return nvlink + launch_bound(ctx.t, jobs, own, group.base)
    causes = input_causes(ctx.t, ctx.host, jobs, own, group.base, group.starved, group.severity)
    return group.pcie + nvlink + causes


def look_fallback(scope: Scope) -> list[Finding]:
    group = scope.group
    if group.full:
        return []
    if group.hollow:
        spec, advice = (
            RULES["low_sm"],
            "Kernels run on few SMs: small kernels or low occupancy; raise the batch, fuse "
            "kernels (torch.compile), check occupancy with Nsight Compute",
        )
    elif group.starved:
        spec, advice = (
            RULES["underused"],
            "The GPU waits but no host cause is visible: profile a step "
            "(torch.profiler) to see what it waits for",
        )
    else:
        spec = RULES["moderate"]
        advice = "Steady partial use: profile a step (torch.profiler) if you expected more"
    note = _no_host_view_note(scope.ctx, scope.job_ids, scope.job)
    return [finding(spec, group.base + note, advice)]


#: A family's look: the findings of its rules on a scope.
Look = Callable[[Scope], list[Finding]]

#: (family, the look that finds its findings), in an order that reads the cheap and the
#: shared first. A family that a finding already found hides is not looked for; the
#: families' hides are closed (tests/analysis/test_verdict_kinds.py), so any order of
#: the looks gives the same verdicts.
LOOKS: tuple[tuple[str, Look], ...] = (
    (kinds.GONE, look_lost),
    (kinds.QUIET, look_idle),
    (kinds.HOLDER, look_holder),
    (kinds.NOTE, look_memory),
    (kinds.READING, look_reading),
    (kinds.LOAD, look_load),
    (kinds.WAIT, look_measured),  # its findings: WAIT or NO_WAIT, hidden alike
    (kinds.CAUSE, look_causes),  # its findings: CAUSE or INPUT
    (kinds.FALLBACK, look_fallback),
)


def judge(
    ctx: Context, gpus: tuple[int, ...], job_ids: tuple[str, ...], job: Job | None
) -> Verdict:
    """A scope's verdict: a GPU set, the jobs that explain its state, the job judged or None."""
    precedence = kinds.PRECEDENCE
    hides = precedence.hides
    scope = Scope(ctx, gpus, job_ids, job)
    found: list[Finding] = []
    hidden: set[str] = set()  # the families the findings so far hide
    for family, look in LOOKS:
        if family not in hidden and (new := look(scope)):
            found += new
            for f in new:
                hidden.update(hides[f.rule])
    return precedence.verdict(found, hidden)


def _idle_holder(ctx: Context, gpus: tuple[int, ...], job: Job | None) -> Finding | None:
    tick = ctx.ticks[-1]
    if not tick.idle(gpus, ctx.t):
        return None  # no run of idle-and-held snapshots ends the history
    samples = tick.samples(gpus)
    start = ctx.run_start(gpus, None if job is None else frozenset(job.main_pids))
    holders: Sequence[int] = (
        job.main_pids if job is not None else [p.pid for g in samples for p in g.processes]
    )
    return idle_holder(ctx.t, ctx.history, start, samples, tick.procs, holders)


def _no_host_view_note(ctx: Context, job_ids: tuple[str, ...], job: Job | None) -> str:
    latest_jobs = ctx.latest_jobs
    jobs = [latest_jobs[j] for j in job_ids if j in latest_jobs]
    if jobs and all(j.visible is not True for j in jobs):
        return "; its processes are not visible from here (other PID namespace?)"
    if not jobs and job is None:
        return "; no process listed"
    return ""


def gpu_verdicts_of(ctx: Context) -> dict[int, Verdict]:
    by_gpu = ctx.ticks[-1].job_ids_by_gpu()
    return {g.index: judge(ctx, (g.index,), by_gpu.get(g.index, ()), None) for g in ctx.latest.gpus}


def job_verdict(ctx: Context, job: Job) -> Verdict:
    return judge(ctx, job.gpus, (job.id,), job)


# --- the API ----------------------------------------------------------------------------


class Analysis(NamedTuple):
    """What :meth:`Analyzer.update` returns (unpacks as a 3-tuple)."""

    gpu_verdicts: dict[int, Verdict]  # GPU index -> verdict, for the newest snapshot's GPUs
    job_verdicts: dict[str, Verdict]  # job id -> verdict (empty: jobs not judged)
    jobs: tuple[Job, ...]  # the newest snapshot's jobs (``build_jobs``), sorted as it sorts


class Analyzer:
    """The verdicts of a history that grows one snapshot at a time, carrying the work
    between calls. ``carry``: seconds of look-back forms kept beyond the history
    given (None: the history given is the whole history). Not thread-safe."""

    def __init__(self, thresholds: Thresholds = DEFAULT, *, carry: float | None = None) -> None:
        self.thresholds = thresholds
        self._carry = carry
        self._given: list[Snapshot] = []  # carry: the previous call's history as given
        self._older: deque[Snapshot] = deque()  # carry: look-back forms, oldest first
        self._full: list[Snapshot] = []  # the previous call's sorted history
        self._base = 0  # sequence number of _full[0]
        self._runs = Runs()
        self.memory = Carried()  # the job tracks and GPU groups the rules read
        # (sequence number of [0], ticks): the window's work, the only snapshots kept
        self._window: tuple[int, list[Tick]] = (0, [])

    @property
    def carried(self) -> int:
        """How many look-back forms are carried (``carry`` mode)."""
        return len(self._older)

    def _restart(self) -> tuple[int, bool]:
        """A history that does not continue the previous one: new numbers, no runs."""
        self._runs = Runs()
        return self._base + len(self._full) + 1, False

    def _carried(self, given: list[Snapshot]) -> tuple[list[Snapshot], int, bool]:
        """Carry mode: (the history with look-back forms, its sequence number, continued)."""
        prev, older = self._given, self._older
        self._given = given
        cut = continues(prev, given)
        if cut is None:
            older.clear()
            return [*given], *self._restart()
        for snap in prev[:cut]:
            older.append(lookback_form(snap, older[-1] if older else None))
        assert self._carry is not None
        horizon = given[-1].time - self._carry
        popped = 0
        while older and not older[0].time >= horizon:  # as ``diagnosis.recent``
            older.popleft()
            popped += 1
        return [*older, *given], self._base + popped, True

    def _slide(self, first: int, ticks: list[Tick], continued: bool) -> None:
        """Bring the job tracks to the window ``ticks`` (numbered from ``first``); rebuild
        them when the window did not slide."""
        tracks = self.memory.tracks
        last = first + len(ticks) - 1
        pfirst, pticks = self._window
        plast = pfirst + len(pticks) - 1
        self._window = (first, ticks)
        if not (continued and pticks and first >= pfirst and last >= plast):
            tracks.clear()
            for tick in ticks:
                _push(tracks, tick.feats)
            return
        steady: set[str] = set()
        if first == pfirst + 1 and last == plast + 1:
            # a track all of the one object that came would be popped and pushed back as is
            came = ticks[-1].feats
            steady = {j for j in pticks[0].feats if tracks[j].steady(came.get(j))}
        for seq in range(pfirst, min(first, plast + 1)):
            for job_id in pticks[seq - pfirst].feats:
                if job_id not in steady:
                    gone = tracks[job_id]
                    gone.pop()
                    if not gone.feats:
                        del tracks[job_id]
        for seq in range(max(plast + 1, first), last + 1):
            _push(tracks, ticks[seq - first].feats, steady)

    def context(self, history: Sequence[Snapshot], track: bool = True) -> Context | None:
        """The context one call judges with; ``track``: keep the job tracks for the next."""
        if not history:
            return None
        t = self.thresholds
        full, window = split_window(history, t)
        if self._carry is not None:  # the window is a suffix of what was given
            full, base, continued = self._carried(full)
        else:  # full[0]'s sequence number, whether it continues the previous numbering
            cut = continues(self._full, full)
            base, continued = self._restart() if cut is None else (self._base + cut, True)
        before = {id(tk.snap): tk for tk in self._window[1]}  # the ticks pin their snapshots
        ticks: list[Tick] = []
        for s in window:  # a new snapshot may take its jobs over from the one before
            tick = before.get(id(s))
            ticks.append(Tick(s, ticks[-1] if ticks else None) if tick is None else tick)
        self._full, self._base = full, base
        self._runs.prune(base + len(full) - 2)  # scopes not judged last call or this one
        memory = self.memory
        memory.groups_before, memory.groups_now = memory.groups_now, {}
        memory.parts_before, memory.parts_now = memory.parts_now, {}
        went_on = dropped(self._window[1], ticks) if track and continued else None
        if track:
            self._slide(base + len(full) - len(window), ticks, continued)
        else:
            memory.tracks, self._window = {}, (0, [])
        carried = memory if track else None  # the plain path carries nothing to the next
        return Context(t, full, ticks, base, self._runs, carried, went_on)

    def update(self, history: Sequence[Snapshot], judge_jobs: bool = True) -> Analysis:
        """``build_jobs(history[-1])`` and the verdicts on ``history`` (``judge_jobs=False``:
        no job verdict, the main screen's and the exporter's lean path)."""
        ctx = self.context(history)
        if ctx is None:
            return Analysis({}, {}, ())
        gpus, jobs = gpu_verdicts_of(ctx), ctx.latest_jobs
        job_verdicts = {i: job_verdict(ctx, j) for i, j in jobs.items()} if judge_jobs else {}
        return Analysis(gpus, job_verdicts, tuple(jobs.values()))


def _push(
    tracks: dict[str, Track], feats: dict[str, JobTick], skip: set[str] | None = None
) -> None:
    for job_id, f in feats.items():
        if skip is None or job_id not in skip:
            track = tracks.get(job_id)
            if track is None:
                track = tracks[job_id] = Track()
            track.push(f)
