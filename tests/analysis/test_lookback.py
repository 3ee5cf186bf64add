"""The look-back a streaming consumer keeps (``Diagnoser.push``): the window's snapshots
whole, the older ones in their look-back form (``holders.lookback_form``).

The form must answer what the verdicts ask of a snapshot outside the window exactly as
the snapshot does, and pushing snapshots one at a time must judge every tick as the
whole history does (the golden digests of :mod:`tests.verdict_scenarios`, and a long
run with short thresholds whose idle-holder runs reach back into the forms).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import islice
from typing import Any

import pytest

from gputop.analysis import window as window_mod
from gputop.analysis.holders import idle_and_held, lookback_form
from gputop.analysis.kinds import IDLE_HOLDER
from gputop.analysis.thresholds import DEFAULT, Thresholds
from gputop.diagnosis import Diagnoser, lookback_seconds
from gputop.exporter.server import ExportState
from gputop.model import (
    DriverInfo,
    GpuMemory,
    GpuProcess,
    GpuSample,
    HostSample,
    IoRate,
    ProcessInfo,
    Snapshot,
    UnlistedHolder,
    Utilization,
    replace,
)
from gputop.sources.demo import DemoSource
from tests.builders import diagnose
from tests.verdict_scenarios import GOLDEN, SCENARIOS, START, digest, kinds

SHORT = Thresholds.from_overrides(
    {"window_seconds": 8, "idle_holder_seconds": 30, "idle_holder_min_observed": 10}
)


def _snapshots(name: str) -> list[Snapshot]:
    """The snapshots of a scenario, each once, in order (its histories grow by one)."""
    _, hists = SCENARIOS[name]()
    return [h[-1] for h in hists]


def _scopes(snap: Snapshot) -> Iterator[tuple[tuple[int, ...], frozenset[int] | None]]:
    from gputop.analysis.jobs import build_jobs

    indices = tuple(g.index for g in snap.gpus)
    yield indices, None
    for i in indices:
        yield (i,), None
    for job in build_jobs(snap):
        yield tuple(sorted(set(job.gpus))), frozenset(job.main_pids)
        yield indices, frozenset(job.main_pids)


@pytest.mark.parametrize("name", ["demo", "demo_mig", "coming_and_going", "steady_objects"])
@pytest.mark.parametrize(
    "thresholds",
    [DEFAULT, SHORT, Thresholds.from_overrides({"held_memory_fraction": 0.01, "idle_util": 40})],
)
def test_a_form_answers_as_its_snapshot(name: str, thresholds: Thresholds) -> None:
    form = None
    asked = 0
    for snap in _snapshots(name):
        form = lookback_form(snap, form)  # chained: parts shared with the form before
        assert form.time == snap.time
        disk = None if snap.host is None else snap.host.disk.read_bytes_per_s
        assert (None if form.host is None else form.host.disk.read_bytes_per_s) == disk
        for gpus, pids in _scopes(snap):
            want = idle_and_held(snap, gpus, pids, thresholds)
            assert idle_and_held(form, gpus, pids, thresholds) == want, (snap.time, gpus, pids)
            asked += 1
    assert asked > 100


def test_a_form_answers_as_its_snapshot_without_listed_processes() -> None:
    """What ``held`` reads when NVML lists no process: unlisted holders, then the share of
    memory used (used or total unknown, zero, at and around the fraction)."""
    gib = 1 << 30
    t = Thresholds.from_overrides({"held_memory_fraction": 0.25})
    form = None
    asked = 0
    for used in (None, 0, gib, 20 * gib, 20 * gib + 1, 80 * gib):
        for total in (None, 0, 80 * gib):
            for util in (None, 0.0, 1.0, 50.0, 3, 2.5, float("nan")):
                for holders in ((), (UnlistedHolder(7, 0),), (UnlistedHolder(7, None),)):
                    snap = replace(
                        _idle_job(0),
                        gpus=(
                            GpuSample(
                                0,
                                memory=GpuMemory(total=total, used=used),
                                utilization=Utilization(gpu=util),
                            ),
                            GpuSample(1, lost=True),
                        ),
                        unlisted_holders=holders,
                    )
                    form = lookback_form(snap, form)  # chained, and on its own:
                    for f in (form, lookback_form(snap, None)):
                        for gpus in ((0,), (1,), (0, 1)):
                            want = idle_and_held(snap, gpus, None, t)
                            assert idle_and_held(f, gpus, None, t) == want
                            asked += want
    assert asked > 10


def test_a_form_keeps_no_rows_and_shares_what_did_not_change() -> None:
    snaps = _snapshots("steady_objects")
    a = lookback_form(snaps[0], None)
    assert a.processes == () and a.errors == ()
    assert a.host is not None and a.host.cpu_per_core == () and a.host.cpu_percent is None
    rows = [p for g in a.gpus for p in g.processes]
    assert rows and all(p == GpuProcess(p.pid) for p in rows)  # bare: no host, no memory
    assert [[p.pid for p in g.processes] for g in a.gpus] == [
        [p.pid for p in g.processes] for g in snaps[0].gpus
    ]
    b = lookback_form(snaps[1], a)  # the very same objects, only the time moved
    assert b.gpus is a.gpus and b.host is a.host
    # One GPU's utilization moves: its form is new, with the same pid tuple; the others
    # are the very forms before.
    moved = replace(
        snaps[2],
        gpus=tuple(
            replace(g, utilization=replace(g.utilization, gpu=(g.utilization.gpu or 0) + 1))
            if g.index == 0
            else g
            for g in snaps[2].gpus
        ),
    )
    c = lookback_form(moved, b)
    assert c.gpus[0] is not b.gpus[0] and c.gpus[0].processes is b.gpus[0].processes
    assert all(x is y for x, y in zip(c.gpus[1:], b.gpus[1:], strict=True))
    # A process leaves GPU 0: the rows left are the same bare rows.
    fewer = replace(
        moved,
        gpus=tuple(
            replace(g, processes=g.processes[1:]) if g.index == 0 else g for g in moved.gpus
        ),
    )
    d = lookback_form(fewer, c)
    assert all(x is y for x, y in zip(d.gpus[0].processes, c.gpus[0].processes[1:], strict=True))


@pytest.mark.parametrize("name", ["demo", "demo_mig", "busy_node", "steady_objects"])
def test_pushed_one_at_a_time_every_tick_is_judged_as_before(name: str) -> None:
    golden = json.loads(GOLDEN.read_text())[name]["ticks"]
    thresholds, _ = SCENARIOS[name]()
    diagnoser = Diagnoser(thresholds)
    snaps = _snapshots(name)
    assert len(snaps) == len(golden)
    for i, snap in enumerate(snaps):
        d = diagnoser.push(snap)
        assert d.error is None, d.traceback
        assert digest(d.gpus, d.job_verdicts, d.jobs) == golden[i], f"{name}: tick {i}"
    whole, compact = diagnoser.kept
    assert whole <= 21 and whole + compact == min(len(snaps), 601)


def test_pushed_over_a_long_run_judged_as_the_whole_history() -> None:
    """Short thresholds (window 8 s, idle holder 30 s: look-back 60 s) and a 2 s step over
    15 minutes: idle-holder runs reach back past the window into the forms, and the
    look-back is cut at the start all along."""
    source = DemoSource(seed=3, start_time=START, step=2.0)
    pushed = Diagnoser(SHORT)
    history: list[Snapshot] = []
    seen: set[str] = set()
    for _ in range(450):
        snap = source.snapshot()
        history.append(snap)
        a, b = pushed.push(snap), diagnose(history, SHORT)
        assert a.error is None, a.traceback
        assert digest(a.gpus, a.job_verdicts, a.jobs) == digest(b.gpus, b.job_verdicts, b.jobs)
        seen |= kinds(a.gpus, a.job_verdicts)
    assert IDLE_HOLDER in seen
    kept_whole, compact = pushed.kept
    assert kept_whole <= SHORT.window_seconds / 2 + 1
    assert kept_whole + compact == lookback_seconds(SHORT) / 2 + 1


def _idle_job(tick: int) -> Snapshot:
    """A job idle on GPU 0 holding memory; a second process joins it on the GPU at tick
    20 (a new pid set: its idle-holder run is walked back, through the forms)."""
    gib = 1 << 30
    info = [ProcessInfo(100, ppid=1, user="ann", name="python", create_time=START - 900)]
    rows = [GpuProcess(100, gpu_memory=4 * gib, host=info[0])]
    if tick >= 20:
        info.append(ProcessInfo(101, ppid=100, user="ann", name="python", create_time=START))
        rows.append(GpuProcess(101, gpu_memory=gib, host=info[1]))
    return Snapshot(
        START + 2.0 * tick,
        "node",
        DriverInfo(True, driver_version="550.54.15"),
        host=HostSample(cpu_percent=3.0, disk=IoRate(read_bytes_per_s=0.0)),
        gpus=(
            GpuSample(
                0,
                memory=GpuMemory(total=80 * gib, used=5 * gib),
                utilization=Utilization(gpu=0.0, memory=0.0),
                processes=tuple(rows),
            ),
        ),
        processes=tuple(info),
    )


def test_a_new_scope_walks_back_through_the_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    real = window_mod.idle_and_held
    asked: list[Snapshot] = []

    def counted(snap: Snapshot, *args: Any) -> bool:
        asked.append(snap)
        return real(snap, *args)

    monkeypatch.setattr(window_mod, "idle_and_held", counted)
    pushed = Diagnoser(SHORT)
    history: list[Snapshot] = []
    for tick in range(40):
        snap = _idle_job(tick)
        history.append(snap)
        a, b = pushed.push(snap), diagnose(history, SHORT)
        assert a.error is None, a.traceback
        assert digest(a.gpus, a.job_verdicts, a.jobs) == digest(b.gpus, b.job_verdicts, b.jobs)
        if tick >= 20:  # the job with its new pid set: idle for the whole look-back
            (verdict,) = a.job_verdicts.values()
            assert verdict.kind == IDLE_HOLDER
    forms = [s for s in asked if s not in history]
    assert forms and all(not s.processes for s in forms)  # the forms were asked


def test_a_snapshot_older_than_the_one_before_restarts_the_look_back() -> None:
    source = DemoSource(seed=1, start_time=START, step=1.0)
    snaps = list(islice(iter(source.snapshot, None), 60))
    diagnoser = Diagnoser(SHORT)
    for snap in snaps[:50]:
        diagnoser.push(snap)
    assert diagnoser.kept[1] > 0
    d = diagnoser.push(snaps[10])  # the wall clock stepped back
    assert d.error is None and d.snapshot is snaps[10]
    assert diagnoser.kept == (1, 0)  # the history starts afresh
    for snap in snaps[50:]:
        d = diagnoser.push(snap)
        assert d.error is None
    # Judged as a fresh run that saw the step back and what came after.
    fresh = diagnose([snaps[10], *snaps[50:]], SHORT)
    assert digest(d.gpus, d.job_verdicts, d.jobs) == digest(
        fresh.gpus, fresh.job_verdicts, fresh.jobs
    )


def test_the_exporter_judges_as_the_whole_history() -> None:
    state = ExportState(SHORT, with_jobs=True)
    source = DemoSource(seed=3, start_time=START, step=2.0)
    history: list[Snapshot] = []
    for _ in range(120):
        snap = source.snapshot()
        history.append(snap)
        state.on_snapshot(snap)
        want = diagnose(history, SHORT)
        _, gpu_verdicts, _, job_verdicts = state._latest  # what the scrapes are built from
        assert gpu_verdicts == dict(want.gpus)
        assert job_verdicts == dict(want.job_verdicts)
    assert state.feed.kept[1] > 0
