"""One home for a rule's precedence: the rank in ``kinds.KIND_SPECS`` alone picks a
verdict's kind, and the families in ``kinds.FAMILIES`` alone say which findings drop out.
The judging code has no order of its own: the looks (``verdict.LOOKS``) in any order give
the same verdicts, and a table changed in a test changes the verdicts with it."""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Iterator
from itertools import combinations
from pathlib import Path

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from gputop.analysis import kinds, verdict
from gputop.analysis.kinds import (
    FAMILIES,
    GPU_BOUND,
    IDLE_HOLDER,
    KIND_SPECS,
    MEMORY_FULL,
    THROTTLED,
    TRANSFER_PCIE,
    UNDERUSED,
    WARMING_UP,
    Family,
    Finding,
    KindSpec,
    Precedence,
    finding,
)
from gputop.model import Pcie, Snapshot, Verdict
from tests.builders import GEN4_X16, T0, GiB, gpu_verdicts, snapshot_history, trainer_processes
from tests.helpers.fuzz import SEED
from tests.verdict_scenarios import GOLDEN, SCENARIOS, run

HIDES = {f.name: set(f.hides) for f in FAMILIES}


# --- the tables -----------------------------------------------------------------------------


def test_every_row_has_a_declared_family_and_every_family_a_row() -> None:
    names = [f.name for f in FAMILIES]
    assert len(names) == len(set(names))
    assert {s.family for s in KIND_SPECS} == set(names)
    for f in FAMILIES:
        assert set(f.hides) <= set(names), f.name
        assert f.name not in f.hides, f.name


def test_hiding_is_one_way_and_closed() -> None:
    """No two families hide each other (else two findings could drop out together and
    leave no verdict), and what a hidden family hides its hider hides too: so a family not
    looked for, because a finding hides it, could have hidden nothing that stays."""
    for a, b in combinations(HIDES, 2):
        assert not (b in HIDES[a] and a in HIDES[b]), (a, b)
    for a, hidden in HIDES.items():
        for b in hidden:
            assert HIDES[b] - {a} <= hidden, (a, b, HIDES[b] - hidden)


def test_the_docs_families_table_is_the_generated_one() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "verdicts.md").read_text()
    block = kinds.markdown_block("verdict-families")
    assert text.count(block) == 1


# --- Precedence.verdict against a plain reading of the tables ------------------------------


def _expected(findings: list[Finding], specs: dict[str, KindSpec]) -> Verdict:
    """The tables read plainly: drop a finding whose family another's family hides, then
    the lowest rank wins and the other kinds follow in rank order."""
    hides = {f.name: set(f.hides) for f in FAMILIES}
    shown = [
        f
        for f in findings
        if not any(
            specs[f.rule].family in hides[specs[g.rule].family] - {specs[g.rule].family}
            for g in findings
        )
    ]
    shown.sort(key=lambda f: specs[f.rule].rank)
    first = shown[0]
    also: list[str] = []
    for f in shown[1:]:
        if f.kind != first.kind and f.kind not in also:
            also.append(f.kind)
    return Verdict(
        first.kind,
        kinds.LABELS[first.kind],
        first.evidence,
        first.advice,
        first.severity,
        tuple(also),
    )


@seed(SEED)
@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_the_rank_alone_picks_the_kind(seed: int) -> None:
    """Hypothesis, seeded (GPUTOP_FUZZ_SEED replays it): any ranks, any findings in any
    order."""
    rng = random.Random(seed)
    ranks = list(range(1, len(KIND_SPECS) + 1))
    rng.shuffle(ranks)
    specs = {s.rule: dataclasses.replace(s, rank=r) for s, r in zip(KIND_SPECS, ranks, strict=True)}
    # at most one finding per rule, as the rules give them
    chosen = rng.sample(list(specs.values()), rng.randint(1, len(specs)))
    findings = [finding(s, f"evidence of {s.rule}", f"advice {s.rule}") for s in chosen]
    got = Precedence.of(specs.values(), FAMILIES).verdict(findings)
    assert got == _expected(findings, specs)


# --- the tables decide the real verdicts ------------------------------------------------------


def _with(
    monkeypatch: pytest.MonkeyPatch,
    ranks: dict[str, int] | None = None,
    hides: dict[str, tuple[str, ...]] | None = None,
) -> None:
    """Judge with the declared tables changed: new ranks for rules, new hides for families."""
    specs = [dataclasses.replace(s, rank=(ranks or {}).get(s.rule, s.rank)) for s in KIND_SPECS]
    families = [Family(f.name, (hides or {}).get(f.name, f.hides), f.why) for f in kinds.FAMILIES]
    monkeypatch.setattr(kinds, "PRECEDENCE", Precedence.of(specs, families))


def _throttled_busy() -> list[Snapshot]:
    return snapshot_history(
        [95.0] * 20,
        tree=trainer_processes(worker_cpu=30),
        gpu_kw={"reasons": ("sw thermal",)},
    )


def test_swapping_two_ranks_in_the_table_swaps_the_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    before = gpu_verdicts(_throttled_busy())[0]
    assert (before.kind, before.also) == (THROTTLED, (GPU_BOUND,))
    rank = {s.rule: s.rank for s in KIND_SPECS}
    _with(
        monkeypatch, ranks={"gpu_bound": rank["throttle_hard"], "throttle_hard": rank["gpu_bound"]}
    )
    after = gpu_verdicts(_throttled_busy())[0]
    assert (after.kind, after.also) == (GPU_BOUND, (THROTTLED,))


def _pcie_bound() -> list[Snapshot]:
    lane = 16e9 * 128 / 130 / 8
    pcie = Pcie(
        gen=4,
        width=16,
        max_gen=4,
        max_width=16,
        link_max_bytes_per_s=GEN4_X16,
        rx_bytes_per_s=0.9 * lane * 16,
        tx_bytes_per_s=1e6,
    )
    return snapshot_history(
        [40.0] * 20, tree=trainer_processes(worker_cpu=30), gpu_kw={"pcie": pcie}
    )


def test_a_cause_hides_the_fallback_because_its_family_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = gpu_verdicts(_pcie_bound())[0]
    assert (before.kind, before.also) == (TRANSFER_PCIE, ())
    _with(monkeypatch, hides={kinds.CAUSE: ()})
    after = gpu_verdicts(_pcie_bound())[0]
    assert (after.kind, after.also) == (TRANSFER_PCIE, (UNDERUSED,))


def test_what_a_warming_verdict_lists_is_its_family_s_hides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def history() -> list[Snapshot]:
        return snapshot_history([95.0, 95.0], tree=trainer_processes(), gpu_kw={"used": 79 * GiB})

    assert gpu_verdicts(history())[0].also == (MEMORY_FULL,)
    _with(monkeypatch, hides={kinds.READING: (kinds.NOTE, *sorted(HIDES[kinds.READING]))})
    after = gpu_verdicts(history())[0]
    assert (after.kind, after.also) == (WARMING_UP, ())


def test_an_idle_holder_hides_the_load_because_its_family_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def history() -> list[Snapshot]:
        tree = trainer_processes(workers=2, worker_cpu=0, main_cpu=0, create_time=T0 - 1000)
        return snapshot_history([0.0] * 31, interval=10.0, tree=tree)

    before = gpu_verdicts(history())[0]
    assert (before.kind, before.also) == (IDLE_HOLDER, ())
    # without its hides, the load is judged too: starved, no cause seen
    _with(monkeypatch, hides={kinds.HOLDER: ()})
    after = gpu_verdicts(history())[0]
    assert (after.kind, after.also) == (IDLE_HOLDER, (UNDERUSED,))


# --- the looks have no order of their own -----------------------------------------------------


def _orders() -> Iterator[tuple[str, tuple[tuple[str, verdict.Look], ...]]]:
    looks = verdict.LOOKS
    yield "reversed", tuple(reversed(looks))
    rng = random.Random(30)
    shuffled = list(looks)
    rng.shuffle(shuffled)
    yield "shuffled", tuple(shuffled)


@pytest.mark.parametrize(
    ("order", "looks"), list(_orders()), ids=lambda v: v if isinstance(v, str) else ""
)
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_the_looks_in_any_order_judge_every_golden_tick_alike(
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    order: str,
    looks: tuple[tuple[str, verdict.Look], ...],
) -> None:
    monkeypatch.setattr(verdict, "LOOKS", looks)
    golden = json.loads(GOLDEN.read_text())[name]
    ticks, _ = run(name)
    assert ticks == golden["ticks"], f"{name}: judged otherwise with the looks {order}"
