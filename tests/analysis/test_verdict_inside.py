"""Verdicts that see inside utilization (issue 30, section 5): GPM's SM, tensor and DRAM
activity and NVLink traffic, each kind on both sides of the threshold that decides it; and
without GPM, the verdicts of before (the goldens of tests/analysis/test_verdict_exact.py
and tests/cli/test_json_golden.py run unchanged)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from gputop.analysis.kinds import (
    GPU_BOUND,
    INPUT_MAIN,
    LAUNCH_MAIN,
    LOW_SM,
    MEMORY_BANDWIDTH,
    MODERATE,
    RULES,
    TENSOR_IDLE,
    TRANSFER_NVLINK,
    UNDERUSED,
)
from gputop.analysis.thresholds import DEFAULT, ThresholdError, Thresholds
from gputop.model import Activity, Nvlink, Snapshot, Verdict, replace
from tests.analysis_oracle import all_verdicts as plain_verdicts
from tests.builders import (
    T0,
    GiB,
    all_verdicts,
    gpu_process,
    gpu_sample,
    process_info,
    snapshot,
    snapshot_history,
    trainer_processes,
)
from tests.helpers.fuzz import SEED

LINKS = 18
CAP = LINKS * 25e9  # NVLink 4.0: bytes/s per direction


def inside(
    snaps: Sequence[Snapshot],
    *,
    sm: float | None = None,
    tensor: float | None = None,
    dram: float | None = None,
    nvlink: float | None = None,
) -> list[Snapshot]:
    """``snaps`` with every GPU reporting these GPM means (percent) and NVLink traffic
    (a share of the links' capacity, both directions)."""
    out = []
    for s in snaps:
        gpus = []
        for g in s.gpus:
            g = replace(g, activity=Activity(sm=sm, tensor=tensor, dram=dram))
            if nvlink is not None:
                g = replace(
                    g,
                    nvlink=Nvlink(
                        links=LINKS,
                        version="4.0",
                        rx_bytes_per_s=nvlink * CAP,
                        tx_bytes_per_s=nvlink * CAP / 2,
                        max_bytes_per_s=CAP,
                        peers=("switch",) * LINKS,
                    ),
                )
            gpus.append(g)
        out.append(replace(s, gpus=tuple(gpus)))
    return out


def steady(u: float, n: int = 21) -> list[float]:
    return [u] * n


def trainer(util: float = 97.0, main_cpu: float = 30.0, workers: int = 2) -> list[Snapshot]:
    return snapshot_history(
        steady(util), tree=trainer_processes(workers=workers, worker_cpu=10.0, main_cpu=main_cpu)
    )


def judged(snaps: Sequence[Snapshot], t: Thresholds = DEFAULT) -> tuple[Verdict, Verdict]:
    """(GPU 0's verdict, the one job's), the same by the plain rules (the oracle)."""
    gpus, jobs = all_verdicts(snaps, thresholds=t)
    assert (gpus, jobs) == plain_verdicts(snaps, None, t)
    (job,) = jobs.values()
    return gpus[0], job


# --- busy but hollow: launch-bound, low SM activity -------------------------------------


def test_launch_bound_when_util_high_sm_low_and_main_at_a_full_core() -> None:
    gpu, job = judged(inside(trainer(main_cpu=99.0), sm=20.0, tensor=2.0))
    assert (gpu.kind, gpu.severity, gpu.label) == (
        LAUNCH_MAIN,
        "warn",
        "launch-bound: main proc.",
    )
    assert gpu.evidence == (
        "util mean 97 % (min 97, max 97) over 20 s, SM active 20 %; job 100: main process 100 "
        "at 99 % of a core"
    )
    assert "CUDA graphs" in gpu.advice and "torch.compile" in gpu.advice
    assert GPU_BOUND not in (gpu.kind, *gpu.also)
    assert job.kind == LAUNCH_MAIN and job.evidence.endswith("main process 100 at 99 % of a core")


def test_low_sm_activity_when_the_main_process_is_not_at_a_full_core() -> None:
    gpu, job = judged(inside(trainer(main_cpu=30.0), sm=20.0))
    assert (gpu.kind, gpu.severity, gpu.label) == (LOW_SM, "warn", "low SM activity")
    assert gpu.evidence == "util mean 97 % (min 97, max 97) over 20 s, SM active 20 %"
    assert GPU_BOUND not in (gpu.kind, *gpu.also) and job.kind == LOW_SM


def test_sm_active_boundaries() -> None:
    """Below SM_ACTIVE_LOW hollow; from SM_ACTIVE_HIGH gpu-bound; between: moderate."""
    assert judged(inside(trainer(), sm=49.9))[0].kind == LOW_SM
    assert judged(inside(trainer(), sm=50.0))[0].kind == MODERATE
    assert judged(inside(trainer(), sm=79.9))[0].kind == MODERATE
    v = judged(inside(trainer(), sm=80.0))[0]
    assert (v.kind, v.evidence) == (
        GPU_BOUND,
        "util mean 97 % (min 97, max 97) over 20 s, SM active 80 %",
    )
    t = Thresholds.from_overrides({"sm_active_low": 30, "sm_active_high": 40})
    assert judged(inside(trainer(), sm=35.0), t)[0].kind == MODERATE
    assert judged(inside(trainer(), sm=40.0), t)[0].kind == GPU_BOUND


def test_launch_needs_main_busy_cpu() -> None:
    assert judged(inside(trainer(main_cpu=90.0), sm=20.0))[0].kind == LAUNCH_MAIN
    assert judged(inside(trainer(main_cpu=89.9), sm=20.0))[0].kind == LOW_SM


def test_without_gpm_the_verdicts_are_those_of_before() -> None:
    """No activity reported: util alone judges, the evidence says nothing of SMs."""
    gpu, _ = judged(trainer(main_cpu=99.0))
    assert (gpu.kind, gpu.evidence) == (GPU_BOUND, "util mean 97 % (min 97, max 97) over 20 s")
    low = judged(trainer(util=30.0, main_cpu=99.0, workers=0))[0]
    assert low.kind == INPUT_MAIN and "SM active" not in low.evidence


# --- tensor cores idle, memory-bandwidth-bound ------------------------------------------


def test_tensor_cores_idle_when_sms_busy_and_tensor_about_zero() -> None:
    gpu, job = judged(inside(trainer(), sm=92.0, tensor=0.3))
    assert (gpu.kind, gpu.severity, gpu.label) == (TENSOR_IDLE, "info", "tensor cores idle")
    assert gpu.evidence.endswith("SM active 92 %; tensor cores active 0.3 %")
    assert "AMP" in gpu.advice and "bf16" in gpu.advice
    assert gpu.also == (GPU_BOUND,) and job.kind == TENSOR_IDLE


def test_tensor_idle_boundary_and_unknown_tensor() -> None:
    assert judged(inside(trainer(), sm=92.0, tensor=1.0))[0].kind == TENSOR_IDLE
    assert judged(inside(trainer(), sm=92.0, tensor=1.1))[0].kind == GPU_BOUND
    # no tensor reading: no tensor cores said to idle
    assert judged(inside(trainer(), sm=92.0, tensor=None))[0].kind == GPU_BOUND
    # SMs not busy enough: the tensor cores are not the story
    assert TENSOR_IDLE not in judged(inside(trainer(), sm=60.0, tensor=0.0))[0].also


def test_memory_bandwidth_bound_when_dram_near_top_and_sm_moderate() -> None:
    gpu, job = judged(inside(trainer(), sm=62.0, dram=88.0))
    assert (gpu.kind, gpu.severity, gpu.label) == (
        MEMORY_BANDWIDTH,
        "info",
        "memory-bandwidth-bound",
    )
    assert gpu.evidence.endswith("SM active 62 %; DRAM bandwidth 88 % of its peak")
    assert gpu.also == (MODERATE,) and job.kind == MEMORY_BANDWIDTH
    assert judged(inside(trainer(), sm=62.0, dram=79.9))[0].kind == MODERATE
    # SMs busy too: the GPU is simply busy
    assert judged(inside(trainer(), sm=85.0, dram=90.0))[0].kind == GPU_BOUND


# --- communication-bound: NVLink -------------------------------------------------------


def two_gpu_job(util: float, n: int = 21) -> list[Snapshot]:
    """torchrun (pid 20) with ranks 21 and 22 on GPUs 0 and 1: one job on two GPUs."""
    rows = [
        process_info(20, 10, name="torchrun", command="torchrun --nproc-per-node 2 train.py"),
        process_info(21, 20, command="python -u train.py", cpu=50.0),
        process_info(22, 20, command="python -u train.py", cpu=50.0),
    ]
    return [
        snapshot(
            T0 + i,
            [gpu_sample(r, util, [gpu_process(21 + r, mem=10 * GiB)]) for r in range(2)],
            rows,
        )
        for i in range(n)
    ]


def test_communication_bound_when_gpus_wait_and_nvlink_near_capacity() -> None:
    snaps = inside(two_gpu_job(40.0), sm=25.0, nvlink=0.9)
    gpus, jobs = all_verdicts(snaps)
    assert (gpus, jobs) == plain_verdicts(snaps, None, DEFAULT)
    (job,) = jobs.values()
    assert (job.kind, job.severity) == (TRANSFER_NVLINK, "warn")
    assert job.label == "comm-bound: NVLink"
    assert job.evidence == (
        "util mean 40 % (min 40, max 40) over 20 s on GPUs 0,1, SM active 25 %; NVLink RX "
        "377.2GiB/s = 90 % of the links on GPU 0"
    )
    assert gpus[0].kind == gpus[1].kind == TRANSFER_NVLINK
    assert UNDERUSED not in job.also  # a cause hides the fallback


def test_communication_bound_when_busy_but_hollow() -> None:
    """Utilization high, SMs mostly idle, NVLink full: the GPUs wait on each other."""
    job = all_verdicts(inside(two_gpu_job(97.0), sm=20.0, nvlink=0.9))[1]
    assert next(iter(job.values())).kind == TRANSFER_NVLINK


def test_nvlink_boundaries() -> None:
    def kind(util: float, share: float, sm: float | None = 25.0) -> str:
        return next(
            iter(all_verdicts(inside(two_gpu_job(util), sm=sm, nvlink=share))[1].values())
        ).kind

    assert kind(40.0, 0.8) == TRANSFER_NVLINK
    assert kind(40.0, 0.79) == UNDERUSED
    assert kind(40.0, 0.9, sm=None) == TRANSFER_NVLINK  # NVLink without GPM (an A100)
    assert kind(97.0, 0.95, sm=90.0) == GPU_BOUND  # busy GPUs do not wait


def test_a_one_gpu_job_is_not_communication_bound() -> None:
    _, job = judged(inside(trainer(util=40.0), sm=25.0, nvlink=0.95))
    assert job.kind == UNDERUSED


# --- properties --------------------------------------------------------------------------


@seed(SEED)
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_gpm_never_makes_a_hollow_gpu_gpu_bound(seed: int) -> None:
    """Hypothesis, seeded (GPUTOP_FUZZ_SEED replays it): random GPM means and NVLink
    shares; the analyzer agrees with the plain rules, and a GPU whose SM active is below
    SM_ACTIVE_HIGH is never gpu-bound, whatever its utilization."""
    rng = random.Random(seed)
    util = rng.choice([20.0, 60.0, 90.0, 99.0])
    sm = rng.choice([None, rng.uniform(0, 100)])
    snaps = inside(
        trainer(util=util, main_cpu=rng.choice([10.0, 99.0])),
        sm=sm,
        tensor=rng.choice([None, 0.0, rng.uniform(0, 100)]),
        dram=rng.choice([None, rng.uniform(0, 100)]),
        nvlink=rng.choice([None, rng.uniform(0, 1)]),
    )
    gpu, _ = judged(snaps)
    if sm is not None and sm < DEFAULT.sm_active_high:
        assert gpu.kind != GPU_BOUND and GPU_BOUND not in gpu.also, (seed, util, sm)


def test_the_new_kinds_are_declared_with_their_families() -> None:
    assert RULES["nvlink"].family == RULES["pcie"].family == "cause"
    assert RULES["launch"].family == "cause"
    assert RULES["low_sm"].family == RULES["underused"].family == "fallback"
    assert RULES["tensor_idle"].family == RULES["memory_bandwidth"].family == "load"
    assert RULES["tensor_idle"].rank < RULES["gpu_bound"].rank
    assert RULES["memory_bandwidth"].rank < RULES["moderate"].rank


def test_the_thresholds_are_checked() -> None:
    with pytest.raises(ThresholdError, match=r"SM_ACTIVE_LOW=90\.0 must not exceed SM_ACTIVE_HIGH"):
        Thresholds.from_overrides({"sm_active_low": 90})
    with pytest.raises(ThresholdError, match=r"NVLINK_NEAR_MAX=0\.0: must be above 0"):
        Thresholds.from_overrides({"nvlink_near_max": 0})
    with pytest.raises(ThresholdError, match=r"TENSOR_IDLE=101\.0: must be between 0 and 100"):
        Thresholds.from_strings(["TENSOR_IDLE=101"])
    d = DEFAULT
    assert (d.sm_active_low, d.sm_active_high, d.tensor_idle) == (50.0, 80.0, 1.0)
    assert (d.dram_near_max, d.nvlink_near_max) == (80.0, 0.8)
