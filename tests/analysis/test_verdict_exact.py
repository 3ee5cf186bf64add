"""The verdicts are exactly what they were before the diagnosis was made incremental.

Every tick of the scenarios of :mod:`tests.verdict_scenarios` (demo, MIG, a busy node,
processes and GPUs coming and going, the exporter's steady state of unchanged objects,
irregular histories) is judged by the analyzer's path (a Diagnoser fed tick after tick,
carrying its state: what every consumer uses) and, every few ticks, by the plain rules
of ``tests/analysis_oracle.py`` (nothing carried); each tick's digest (every GPU and job
verdict in full, the jobs) must equal the one the analysis gave before
(``tests/verdict_golden.json``).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from gputop.analysis import window as window_mod
from gputop.analysis.gpu_rules import GpuTick
from gputop.analysis.holders import Runs
from gputop.analysis.input_rules import Track
from gputop.analysis.jobs import build_jobs
from gputop.analysis.verdict import Analyzer
from gputop.analysis.window import Tick, split_window
from gputop.model import Snapshot, replace
from tests.analysis_oracle import all_verdicts
from tests.helpers.counting import count_calls
from tests.verdict_scenarios import (
    GOLDEN,
    SCENARIOS,
    START,
    busy_node,
    digest,
    run,
    steady_objects,
)


def _golden(name: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(GOLDEN.read_text())[name]
    return out


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_tick_is_judged_as_before(name: str) -> None:
    golden = _golden(name)
    ticks, seen = run(name)
    assert len(ticks) == len(golden["ticks"])
    for i, (got, want) in enumerate(zip(ticks, golden["ticks"], strict=True)):
        assert got == want, f"{name}: tick {i} is judged differently"
    assert sorted(seen) == golden["kinds"]


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_the_plain_functions_judge_as_before(name: str) -> None:
    golden = _golden(name)["ticks"]
    thresholds, hists = SCENARIOS[name]()
    checked = 0
    for i, hist in enumerate(hists):  # every history is made (the scenario is seeded)
        if i % 7 and i != len(golden) - 1:
            continue
        gpus, job_verdicts = all_verdicts(hist, None, thresholds)
        jobs = build_jobs(max(hist, key=lambda s: s.time))
        assert digest(gpus, job_verdicts, jobs) == golden[i], f"{name}: tick {i}"
        checked += 1
    assert checked >= len(golden) // 7


# --- the work skipped, counted (never timed) ------------------------------------------------


def _fresh_signals(analyzer: Analyzer) -> dict[str, Any]:
    """Each job's signals from a track built afresh from the window's ticks."""
    out = {}
    for job_id in analyzer.memory.tracks:
        track = Track()
        for tick in analyzer._window[1]:
            f = tick.feats.get(job_id)
            if f is not None:
                track.push(f)
        out[job_id] = track.signals()
    return out


def test_a_steady_tick_moves_no_job_track_and_rereads_no_signals(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The exporter's steady state (``steady_objects``): once every tick of a job's window
    is the one object its unchanged input gives, a tick pops and pushes none of the job
    tracks and reads no signals again; a change (tick 30: a process's CPU) makes every
    job's tick new, so every track moves, until the window is uniform again. Each track's
    signals always equal a track built afresh from the window."""
    thresholds, hists = steady_objects()
    analyzer = Analyzer(thresholds)
    pushes = count_calls(monkeypatch, Track, "push")
    pops = count_calls(monkeypatch, Track, "pop")
    flags = count_calls(monkeypatch, window_mod, "cause_flags")
    moved: list[tuple[int, int, int]] = []
    n_jobs: list[int] = []
    for hist in hists:
        before = (pushes[0], pops[0], flags[0])
        _, job_verdicts, jobs = analyzer.update(hist)
        dict(job_verdicts)
        moved.append((pushes[0] - before[0], pops[0] - before[1], flags[0] - before[2]))
        n_jobs.append(len(jobs))
        tracks = {job_id: track.signals() for job_id, track in analyzer.memory.tracks.items()}
        assert tracks == _fresh_signals(analyzer)
    window = int(thresholds.window_seconds) + 1  # ticks, 1 s apart
    for tick in (*range(window, 30), *range(80 + window, len(moved))):
        assert moved[tick] == (0, 0, 0), f"tick {tick}: {moved[tick]}"
    # every job's tick is new: each track moves, the causes are read again (for the jobs
    # on GPUs that are not busy: a busy GPU's verdict needs none)
    assert n_jobs[30] == 24
    assert moved[30][:2] == (24, 24) and 0 < moved[30][2] <= 24
    assert moved[31][:2] == (24, 24)  # mixed windows: the tracks move


def test_a_snapshots_gpu_parts_are_made_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU side's per-snapshot parts (``GpuTick``) are made once per snapshot and GPU
    set while the snapshot is in the window: a steady tick makes one per GPU (8 here),
    not one per window tick and GPU (21 x 8)."""
    thresholds, hists = busy_node()
    analyzer = Analyzer(thresholds)
    made = count_calls(monkeypatch, GpuTick, "__init__")
    per_tick = []
    for hist in hists:
        before = made[0]
        gpus, job_verdicts, _ = analyzer.update(hist)
        dict(job_verdicts)
        per_tick.append(made[0] - before)
    assert len(gpus) == 8
    assert per_tick[0] == 8 and set(per_tick[1:]) == {8}, per_tick


def test_no_idle_holder_run_is_walked_for_a_scope_busy_now(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The idle-holder run of a scope whose GPUs are not all idle in the newest snapshot
    is not looked for (there is none): ``Runs.start`` runs only for the scopes idle
    now (the busy node's idle GPUs 3 and 7 and their jobs), every tick."""
    thresholds, hists = busy_node()
    analyzer = Analyzer(thresholds)
    starts = count_calls(monkeypatch, Runs, "start")
    for hist in hists:
        before = starts[0]
        gpus, job_verdicts, jobs = analyzer.update(hist)
        dict(job_verdicts)
        newest = hist[-1]
        idle = {
            g.index
            for g in newest.gpus
            if g.utilization.gpu is not None and g.utilization.gpu <= thresholds.idle_util
        }
        scopes = [(i,) for i in gpus] + [j.gpus for j in jobs]
        assert starts[0] - before == sum(1 for s in scopes if set(s) <= idle)
    assert idle == {3, 7}


def test_an_unchanged_gpu_shares_its_parts_and_its_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """A snapshot whose samples of a GPU are the very objects of the snapshot before takes
    that snapshot's part over (``Tick.gpu``), and a GPU whose window parts, ticks and span
    are the last call's keeps the last call's group: a steady tick of ``steady_objects``
    makes no part and judges no group again, also when only a process changed (tick 30);
    a GPU whose utilization changed (tick 45) makes one part, and its group is judged
    again while the window holds both values. The verdicts are the golden ones
    (``test_every_tick_is_judged_as_before``)."""
    thresholds, hists = steady_objects()
    analyzer = Analyzer(thresholds)
    made = count_calls(monkeypatch, GpuTick, "__init__")
    judged = count_calls(monkeypatch, window_mod, "group_of")
    work: list[tuple[int, int]] = []
    for hist in hists:
        before = (made[0], judged[0])
        _, job_verdicts, _ = analyzer.update(hist)
        dict(job_verdicts)
        work.append((made[0] - before[0], judged[0] - before[1]))
    window = int(thresholds.window_seconds) + 1
    for tick in (*range(window, 45), *range(101, len(work))):
        assert work[tick] == (0, 0), f"tick {tick}: {work[tick]}"
    assert work[45] == (1, 1)  # GPU 1: one new part, its group judged again...
    assert all(work[tick] == (0, 1) for tick in range(46, 60))  # ...while the window moves
    assert work[60] == (1, 2)  # a job left GPU 2: its new part; both groups judged


def test_a_steady_gpu_on_a_live_clock_keeps_its_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a live clock the ticks are not a whole second apart, so the window's span moves
    by a fraction of a millisecond each tick; a GPU whose parts are the last call's keeps
    its group while the span reads the same (``span_read``: "over 19 s"), and every tick is
    judged as the plain rules judge it (``all_verdicts``, nothing carried)."""
    thresholds, hists = steady_objects()
    timed: dict[int, Snapshot] = {}

    def live(snap: Snapshot) -> Snapshot:
        # about 1 ms late a tick, with some jitter: each span a little different
        if id(snap) not in timed:
            tick = snap.time - START
            timed[id(snap)] = replace(snap, time=START + tick * 1.001 + (tick * 7 % 5) * 1e-4)
        return timed[id(snap)]

    analyzer = Analyzer(thresholds)
    judged = count_calls(monkeypatch, window_mod, "group_of")
    spans: set[float] = set()
    for tick, hist in enumerate(itertools.islice(hists, 30)):
        history = [live(s) for s in hist]
        before = judged[0]
        gpus, job_verdicts, _ = analyzer.update(history)
        if tick > thresholds.window_seconds + 1:
            window = split_window(history, thresholds)[1]
            spans.add(window[-1].time - window[0].time)
            assert judged[0] == before, f"tick {tick}: {judged[0] - before} groups judged"
        assert (gpus, job_verdicts) == all_verdicts(history, None, thresholds), f"tick {tick}"
    assert len(spans) > 1  # the span did move


def test_a_window_that_goes_on_reads_the_parts_of_its_new_tick_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A GPU set's parts over a window that went on from the last call's are the last
    call's for the ticks it kept (``Context.gpu_parts``): a steady tick looks up each GPU
    set's part in its new tick alone, not in each of the window's ticks (21 here); the
    verdicts are the plain rules' (``all_verdicts``, nothing carried)."""

    class Counted(dict[tuple[int, ...], GpuTick]):
        def get(self, key: Any, default: Any = None) -> Any:
            looked[0] += 1
            return super().get(key, default)

    looked = [0]
    plain_init = Tick.__init__

    def init(tick: Tick, *args: Any) -> None:
        plain_init(tick, *args)
        tick._gpu = Counted()

    monkeypatch.setattr(Tick, "__init__", init)
    thresholds, hists = busy_node()
    analyzer = Analyzer(thresholds)
    for n, hist in enumerate(hists):
        before = looked[0]
        gpus, job_verdicts, jobs = analyzer.update(hist)
        scopes = {(g,) for g in gpus} | {j.gpus for j in jobs}
        if n > thresholds.window_seconds + 1:
            # each scope: its part in the new tick looked up, then made (``Tick.gpu``: in
            # its own map, and in the tick before's for a part to take over)
            assert looked[0] - before <= 3 * len(scopes), f"tick {n}"
        if n % 10 == 0:
            assert (gpus, job_verdicts) == all_verdicts(hist, None, thresholds), f"tick {n}"
