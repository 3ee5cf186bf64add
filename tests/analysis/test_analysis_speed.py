"""The analysis stays fast on a big node: a tick of the cached analyzer is not quadratic.

``tests.builders.busy_node_snapshots`` builds synthetic snapshots of a busy node: N GPUs
with P processes each, every GPU process with a couple of DataLoader workers, launched
from per-user shells (never a job's root). ``bench/bench_analysis.py`` uses it too.

The tests count work (calls, lookups, items read), never wall-clock time: a regression
to quadratic or to rebuilding every window snapshot each tick fails them on any machine,
however loaded. The times are measured by ``bench/bench_analysis.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gputop.analysis import jobs as jobs_mod
from gputop.analysis import window as analysis_window
from gputop.analysis.input_rules import Track
from gputop.analysis.jobs import build_jobs
from gputop.analysis.thresholds import DEFAULT
from gputop.analysis.verdict import Analyzer
from gputop.model import (
    ProcessInfo,
    Snapshot,
)
from tests.builders import T0, all_verdicts, busy_node_snapshots, gpu_verdicts
from tests.helpers.counting import count_calls


def take(n: int, **kwargs: object) -> list[Snapshot]:
    it = busy_node_snapshots(**kwargs)  # type: ignore[arg-type]
    return [next(it) for _ in range(n)]


def test_a_tick_at_16x64_does_the_new_snapshots_work_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """16 GPUs x 64 processes, 2 workers each: 1,024 jobs, ~3,100 processes, a full 20 s
    window plus some. Work counted, not timed (``bench/bench_analysis.py`` times it): a
    steady tick groups the new snapshot's processes into jobs once and pushes each of its
    jobs onto its track once; the plain path (every window snapshot rebuilt each tick,
    ~1 s a tick here) did that for all 21 window snapshots. The verdicts are exactly the
    plain path's."""
    snaps = busy_node_snapshots(16, 64)
    hist = [next(snaps) for _ in range(int(DEFAULT.window_seconds) + 10)]
    analyzer = Analyzer(DEFAULT)
    dict(analyzer.update(hist).job_verdicts)  # the first call builds the whole window
    builds = count_calls(monkeypatch, analysis_window, "build_jobs_reusing")  # the window cache's
    pushes = count_calls(monkeypatch, Track, "push")
    for tick in range(1, 4):
        hist = [*hist[1:], next(snaps)]
        result = analyzer.update(hist)
        job_verdicts = dict(result.job_verdicts)
        assert builds[0] == tick  # the new snapshot's jobs, built once
        assert len(result.jobs) == 16 * 64
        assert pushes[0] == tick * len(result.jobs)  # one track step per job
    monkeypatch.undo()
    plain_gpus, plain_jobs = all_verdicts(hist, build_jobs(hist[-1]), DEFAULT)
    assert result.gpu_verdicts == plain_gpus
    assert job_verdicts == plain_jobs
    assert len(plain_gpus) == 16 and len(plain_jobs) == 16 * 64
    # the fleet's patterns are all judged: not 1,040 copies of one verdict
    assert len({v.kind for v in plain_gpus.values()}) >= 3, plain_gpus
    assert len({v.kind for v in plain_jobs.values()}) >= 2


class _CountingDict(dict[int, ProcessInfo]):
    """The pid index, counting its lookups."""

    lookups = 0

    def get(self, key: int, default: Any = None) -> Any:
        _CountingDict.lookups += 1
        return super().get(key, default)

    def __getitem__(self, key: int) -> ProcessInfo:
        _CountingDict.lookups += 1
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        _CountingDict.lookups += 1
        return super().__contains__(key)


class _CountingList(list[tuple[int, int, tuple[int, int]]]):
    """The GPU entries, counting the items read from them."""

    reads = 0

    def __iter__(self) -> Iterator[tuple[int, int, tuple[int, int]]]:
        for item in super().__iter__():
            _CountingList.reads += 1
            yield item


def test_build_jobs_is_linear_in_the_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Work counted, not timed: pid lookups and GPU entries read by one ``build_jobs``.
    Single-rank jobs: the GPU entries are grouped by root in one pass, not scanned once
    per root (that grouping was quadratic: 16x the processes cost ~45x the time)."""
    real_index, real_entries = jobs_mod.process_index, jobs_mod._gpu_entries
    monkeypatch.setattr(jobs_mod, "process_index", lambda s: _CountingDict(real_index(s)))
    monkeypatch.setattr(jobs_mod, "_gpu_entries", lambda s: _CountingList(real_entries(s)))

    def work(n_gpus: int) -> tuple[int, int, int]:
        snap = next(busy_node_snapshots(n_gpus, 64))
        _CountingDict.lookups = _CountingList.reads = 0
        jobs = build_jobs(snap)
        assert len(jobs) == n_gpus * 64
        assert all(len(j.pids) == 3 for j in jobs)  # the main process and its 2 workers
        return _CountingDict.lookups, _CountingList.reads, len(snap.processes)

    small_lookups, small_reads, small_procs = work(1)
    big_lookups, big_reads, big_procs = work(16)
    print(
        f"\nbuild_jobs: lookups {small_lookups} -> {big_lookups}, "
        f"entries read {small_reads} -> {big_reads}"
    )
    # A bounded number of lookups per process and reads per GPU entry, at any size.
    assert big_lookups <= 12 * big_procs and small_lookups <= 12 * small_procs
    assert small_reads <= 3 * 64 and big_reads <= 3 * 16 * 64, (small_reads, big_reads)


def test_the_analyzer_keeps_only_the_window() -> None:
    t = DEFAULT
    snaps = busy_node_snapshots(2, 4)
    hist = [next(snaps) for _ in range(5)]
    analyzer = Analyzer(t)
    for _ in range(80):
        hist = [*hist[-59:], next(snaps)]  # a 60 s lookback
        analyzer.update(hist)
    n_window = len(analysis_window.split_window(hist, t)[1])
    assert len(analyzer._window[1]) == n_window  # per-snapshot work: the window's only
    assert analyzer._window[1][-1].snap is hist[-1]
    assert len(analyzer.memory.tracks) == 2 * 4  # one per job in the window
    # idle-holder runs: one per GPU and per job judged in the last two calls
    assert len(analyzer._runs.memo) <= 2 + 2 * 4
    # a history unrelated to the last one: nothing carried over wrongly
    other = [next(busy_node_snapshots(2, 4, seed=9, start=T0 + 1e6))]
    assert analyzer.update(other).gpu_verdicts == gpu_verdicts(other, t)
