"""gputop.diagnosis: the one place where a history becomes jobs and verdicts."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from gputop.analysis import verdict as vd
from gputop.analysis.jobs import build_jobs
from gputop.analysis.kinds import WARMING_UP
from gputop.analysis.thresholds import DEFAULT, Thresholds
from gputop.diagnosis import Diagnoser, Diagnosis, lookback_seconds, recent
from gputop.model import Snapshot
from gputop.pipeline import Feed
from tests import builders as fx
from tests.builders import diagnose


def _kinds(d: Diagnosis) -> tuple[dict[int, str], dict[str, str]]:
    return (
        {i: v.kind for i, v in d.gpus.items()},
        {j: v.kind for j, v in d.job_verdicts.items()},
    )


def test_incremental_and_one_shot_agree_tick_after_tick() -> None:
    history = fx.demo_snapshots(40, seed=2)
    diagnoser = Feed(DEFAULT)
    for n in range(1, len(history) + 1):
        seen = history[:n]
        live = diagnoser.frame(seen).diagnosis
        once = diagnose(seen)
        assert live.snapshot is seen[-1]
        assert live.error is None
        assert [j.id for j in live.jobs] == [j.id for j in once.jobs]
        assert live.gpus == once.gpus
        assert live.job_verdicts == once.job_verdicts
    # and what the analysis' plain functions say
    gpus, jobs = fx.all_verdicts(history)
    assert dict(live.gpus) == gpus and dict(live.job_verdicts) == jobs
    assert [j.id for j in live.jobs] == [j.id for j in build_jobs(history[-1])]
    assert _kinds(live)[0][0] != WARMING_UP  # the demo has real verdicts by now


def test_a_jump_in_time_is_judged_as_if_fresh() -> None:
    """A replay seeks: the diagnoser is given an unrelated history; same results."""
    history = fx.demo_snapshots(60, seed=1)
    diagnoser = Feed()
    diagnoser.frame(history[:50])
    jumped = diagnoser.frame(history[5:20]).diagnosis
    fresh = diagnose(history[5:20])
    assert jumped.gpus == fresh.gpus and jumped.job_verdicts == fresh.job_verdicts


def test_only_the_lookback_is_judged() -> None:
    t = Thresholds.from_overrides({"window_seconds": 5.0, "idle_holder_seconds": 10.0})
    assert lookback_seconds(t) == 20.0
    history = fx.demo_snapshots(60)
    long = Feed(t).frame(history).diagnosis
    cut = Feed(t).frame(recent(history, 20.0)).diagnosis
    assert long.gpus == cut.gpus and long.job_verdicts == cut.job_verdicts


def test_the_result_is_immutable() -> None:
    d = diagnose(fx.demo_snapshots(10))
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.error = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        d.gpus[0] = d.gpus[1]  # type: ignore[index]
    with pytest.raises(TypeError):
        d.job_verdicts["x"] = d.gpus[1]  # type: ignore[index]
    assert d.thresholds is DEFAULT and d.seconds >= 0


def test_only_narrows_to_the_chosen_gpus_and_keeps_jobs_whole() -> None:
    d = diagnose(fx.demo_snapshots(30))
    assert d.only(None) is d
    chosen = d.only({1})
    assert set(chosen.gpus) == {1}
    assert chosen.jobs and all(1 in j.gpus for j in chosen.jobs)
    assert set(chosen.job_verdicts) == {j.id for j in chosen.jobs}
    for job in chosen.jobs:
        assert chosen.job_verdicts[job.id] == d.job_verdicts[job.id]  # judged whole
        assert chosen.job(job.id) is job
    assert chosen.snapshot is d.snapshot
    assert d.only(set()).jobs == () and not d.only(set()).gpus


def test_a_failing_analysis_is_carried_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_a: object, **_k: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(vd.Analyzer, "update", broken)
    history = fx.demo_snapshots(3)
    d = Feed().frame(history).diagnosis
    assert d.error == "boom" and d.traceback and "RuntimeError" in d.traceback
    assert d.snapshot is history[-1]
    assert d.jobs == () and not d.gpus and not d.job_verdicts


def test_an_empty_history_is_a_caller_bug() -> None:
    with pytest.raises(ValueError, match="empty"):
        Diagnoser().push()


def test_calls_from_two_threads_are_serialized() -> None:
    """The dashboard calls it from the sampler's thread and the UI thread."""
    history = fx.demo_snapshots(30)
    diagnoser = Feed()
    expected = diagnose(history)
    results: list[Diagnosis] = []
    errors: list[BaseException] = []

    def work(hist: tuple[Snapshot, ...] | list[Snapshot]) -> None:
        try:
            for _ in range(20):
                results.append(diagnoser.frame(hist).diagnosis)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(history[: 20 + i],)) for i in range(0, 11, 10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert all(r.error is None for r in results)
    last = [r for r in results if r.snapshot is history[-1]]
    assert last and all(r.gpus == expected.gpus for r in last)
