"""Verdicts from measurement (issue 31): what the job's ranks measured of themselves
(gputop's probe, ``ProcessInfo.probe`` -> ``Job.probe``) comes before what the host
suggests; without a probe, everything is as before (the goldens, test_verdict_exact)."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from gputop.analysis.kinds import (
    ALLOCATOR_CACHE,
    GPU_BOUND,
    INPUT_CPU,
    INPUT_MEASURED,
    MEMORY_FULL,
    NOT_INPUT_MEASURED,
    UNDERUSED,
)
from gputop.analysis.thresholds import DEFAULT, Thresholds
from gputop.model import CudaMemory, Probe, ProcessInfo, Snapshot, Verdict, replace
from tests.builders import GiB, gpu_verdicts, job_verdicts, snapshot_history, trainer_processes

ROOT = 100


def probe(wait: float | None, step: float | None = 0.31, **kw: object) -> Probe:
    return Probe(
        time=0.0,
        window_seconds=20.0,
        steps=60,
        data_wait_ratio=wait,
        step_seconds=step,
        batches_per_second=None if step is None else 1 / step,
        **kw,  # type: ignore[arg-type]
    )


def with_probe(rows: list[ProcessInfo], p: Probe | None, pid: int = ROOT) -> list[ProcessInfo]:
    return [replace(r, probe=p) if r.pid == pid else r for r in rows]


def history(
    util: float,
    p: Probe | None,
    *,
    worker_cpu: float = 30.0,
    used: int | None = None,
) -> list[Snapshot]:
    rows = with_probe(trainer_processes(ROOT, worker_cpu=worker_cpu), p)
    gpu_kw = {} if used is None else {"used": used}
    hist = snapshot_history([util] * 20, tree=rows, gpu_kw=gpu_kw)
    # the rank holds what NVML counts as used, less the CUDA context's own
    return hist if used is None else rank_memory(hist, used - GiB // 2)


def rank_memory(hist: list[Snapshot], used: int | None) -> list[Snapshot]:
    return [
        replace(
            s,
            gpus=tuple(
                replace(g, processes=tuple(replace(q, gpu_memory=used) for q in g.processes))
                for g in s.gpus
            ),
        )
        for s in hist
    ]


def only_job(hist: list[Snapshot], t: Thresholds = DEFAULT) -> Verdict:
    (v,) = job_verdicts(hist, thresholds=t).values()
    return v


def test_a_measured_wait_above_the_threshold_is_input_bound_measured_with_its_figures() -> None:
    v = only_job(history(40.0, probe(0.42)))
    assert v.kind == INPUT_MEASURED
    assert v.severity == "warn"  # above DATA_WAIT_HIGH: the TF profiler's "high"
    assert v.evidence.startswith(
        "42 % of each step waiting for the next batch (step 310 ms, 1 rank)"
    )
    # the GPU's own verdict says the same: the one job on it measured it
    assert gpu_verdicts(history(40.0, probe(0.42)))[0].kind == INPUT_MEASURED


def test_a_moderate_wait_is_info_and_the_thresholds_are_the_declared_ones() -> None:
    assert only_job(history(40.0, probe(0.12))).severity == "info"
    t = Thresholds.from_overrides({"data_wait_moderate": 15, "data_wait_high": 30})
    assert only_job(history(40.0, probe(0.12)), t).kind != INPUT_MEASURED


def test_the_host_side_cause_says_where_the_measured_wait_comes_from() -> None:
    v = only_job(history(40.0, probe(0.42), worker_cpu=97.0))
    assert (v.kind, v.also) == (INPUT_MEASURED, (INPUT_CPU,))


def test_a_measured_wait_on_a_busy_gpu_is_not_gpu_bound() -> None:
    """util says busy, yet the ranks wait for data: the measurement wins, no 'gpu-bound'
    (whose advice says the input keeps up) beside it."""
    v = only_job(history(95.0, probe(0.30)))
    assert v.kind == INPUT_MEASURED and GPU_BOUND not in v.also
    assert only_job(history(95.0, probe(0.01))).kind == GPU_BOUND


def test_no_measured_wait_drops_the_inferred_input_cause_and_looks_at_the_gpu_side() -> None:
    before = only_job(history(40.0, None, worker_cpu=97.0))
    assert before.kind == INPUT_CPU  # inferred from the workers at a full core
    v = only_job(history(40.0, probe(0.02), worker_cpu=97.0))
    assert v.kind == NOT_INPUT_MEASURED
    assert INPUT_CPU not in v.also and UNDERUSED not in v.also
    assert v.evidence.startswith("2 % of each step waiting for the next batch")
    assert "input keeps up" in v.advice


def test_the_worst_rank_is_named_when_it_differs_much() -> None:
    rows = trainer_processes(ROOT, workers=0) + trainer_processes(200, workers=0, ppid=ROOT)
    rows = with_probe(with_probe(rows, probe(0.10)), probe(0.50), pid=200)
    hist = snapshot_history([40.0] * 20, tree=rows, gpu_pids=(ROOT, 200))
    v = only_job(hist)
    assert v.kind == INPUT_MEASURED
    assert "30 % of each step" in v.evidence and "2 ranks" in v.evidence
    assert "the worst rank (pid 200) waits 50 %" in v.evidence


def test_the_caching_allocator_holding_a_full_gpu_is_an_info_note() -> None:
    cuda = (CudaMemory(0, allocated=20 * GiB, reserved=76 * GiB, peak=60 * GiB),)
    v = only_job(history(95.0, probe(0.01, memory=cuda), used=78 * GiB))
    assert v.kind == GPU_BOUND and v.also[-2:] == (MEMORY_FULL, ALLOCATOR_CACHE)
    # only where CUDA figures exist, only while memory is nearly full, only when "most"
    assert ALLOCATOR_CACHE not in only_job(history(95.0, probe(0.01), used=78 * GiB)).also
    assert ALLOCATOR_CACHE not in only_job(history(95.0, probe(0.01, memory=cuda))).also
    tight = (CudaMemory(0, allocated=50 * GiB, reserved=76 * GiB),)
    assert (
        ALLOCATOR_CACHE
        not in only_job(history(95.0, probe(0.01, memory=tight), used=78 * GiB)).also
    )


def test_without_per_process_memory_the_gpu_s_used_memory_is_the_whole() -> None:
    cuda = (CudaMemory(0, allocated=20 * GiB, reserved=76 * GiB),)
    hist = rank_memory(history(95.0, probe(0.01, memory=cuda), used=78 * GiB), None)
    assert ALLOCATOR_CACHE in only_job(hist).also


def test_without_a_wait_figure_or_without_a_probe_nothing_is_measured() -> None:
    plain = only_job(history(40.0, None))
    assert only_job(history(40.0, probe(None, step=None))) == plain


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    wait=st.one_of(st.none(), st.floats(0, 1)),
    step=st.one_of(st.none(), st.floats(1e-6, 1e6)),
    util=st.floats(0, 100),
    reserved=st.integers(0, 2**50),
    allocated=st.integers(0, 2**50),
)
def test_any_probe_figures_in_the_model_s_bounds_give_one_verdict(
    wait: float | None, step: float | None, util: float, reserved: int, allocated: int
) -> None:
    """The model's bounds (LIMITS) are what the reader lets through: any figures within
    them give a verdict, never an exception; a finite evidence text. Derandomized: the
    same examples on every run (hypothesis prints the failing one)."""
    cuda = (CudaMemory(0, allocated=allocated, reserved=reserved),)
    v = only_job(history(util, probe(wait, step, memory=cuda), used=79 * GiB))
    assert v.kind and "nan" not in v.evidence and "inf" not in v.evidence
    if wait is not None and not math.isnan(wait):
        assert (v.kind == INPUT_MEASURED) == (100 * wait > DEFAULT.data_wait_moderate)
