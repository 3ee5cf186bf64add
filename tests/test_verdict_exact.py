"""The verdicts are exactly what they were before the diagnosis was made incremental.

Every tick of the scenarios of :mod:`tests.verdict_scenarios` (demo, MIG, a busy node,
processes and GPUs coming and going, the exporter's steady state of unchanged objects,
irregular histories) is judged by the analyzer's path (a Diagnoser fed tick after tick,
carrying its state: what every consumer uses) and, every few ticks, by the plain
functions (nothing carried); each tick's digest (every GPU and job verdict in full, the
jobs) must equal the one the analysis gave before (``tests/verdict_golden.json``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from gputop.analysis.jobs import build_jobs
from gputop.analysis.verdict import all_verdicts
from tests.verdict_scenarios import GOLDEN, SCENARIOS, digest, run


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
