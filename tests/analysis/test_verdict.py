"""History -> verdicts (gputop.analysis.verdict) and thresholds, on synthetic histories.

Each verdict is checked on both sides of the threshold that decides it.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from gputop.analysis import thresholds as th
from gputop.analysis.jobs import build_jobs
from gputop.analysis.kinds import (
    GPU_BOUND,
    IDLE,
    IDLE_HOLDER,
    INPUT_CPU,
    INPUT_DISK,
    INPUT_MAIN,
    KINDS,
    LABELS,
    LINK_DEGRADED,
    LOST,
    MEMORY_FULL,
    MODERATE,
    THROTTLED,
    TRANSFER_PCIE,
    UNDERUSED,
    UNKNOWN,
    WARMING_UP,
)
from gputop.analysis.thresholds import ThresholdError, Thresholds
from gputop.analysis.verdict import Analyzer
from gputop.analysis.window import split_window
from gputop.model import Pcie, ProcessInfo, Snapshot, UnlistedHolder, Verdict, replace
from gputop.sources.demo import DemoSource
from tests.builders import (
    GEN4_X16,
    T0,
    GiB,
    MiB,
    all_verdicts,
    busy_node_snapshots,
    gpu_process,
    gpu_sample,
    gpu_verdicts,
    job_verdicts,
    process_info,
    snapshot,
    snapshot_history,
    trainer_processes,
)

N = 20  # samples, 1 s apart: 19 s, inside the default 20 s window


def steady(value: float, n: int = N) -> list[float]:
    return [value] * n


def around(mean: float, sd: float, n: int = N) -> list[float]:
    """Alternating mean +- sd: population standard deviation exactly sd."""
    return [mean + sd if i % 2 else mean - sd for i in range(n)]


def gv(snaps: list[Snapshot], t: Thresholds = th.DEFAULT) -> Verdict:
    return gpu_verdicts(snaps, t)[0]


def jv(snaps: list[Snapshot], t: Thresholds = th.DEFAULT) -> Verdict:
    verdicts = job_verdicts(snaps, build_jobs(snaps[-1]), t)
    assert len(verdicts) == 1
    return next(iter(verdicts.values()))


# --- gpu-bound / moderate / underused: the util bands ----------------------------------


def test_gpu_bound_when_util_high() -> None:
    snaps = snapshot_history(around(95, 3), tree=trainer_processes(worker_cpu=30))
    v = gv(snaps)
    assert (v.kind, v.severity, v.label) == (GPU_BOUND, "ok", "GPU-bound")
    assert v.evidence == "util mean 95 % (min 92, max 98) over 19 s"
    assert v.also == ()
    assert jv(snaps).kind == GPU_BOUND


def test_util_high_boundary() -> None:
    at = snapshot_history(steady(85.0), tree=trainer_processes(worker_cpu=95))
    below = snapshot_history(steady(84.9), tree=trainer_processes(worker_cpu=95))
    assert gv(at).kind == GPU_BOUND
    v = gv(below)
    assert v.kind == INPUT_CPU
    assert v.severity == "info"  # steady, moderate use: not starved


def test_util_low_boundary_without_cause() -> None:
    quiet = trainer_processes(worker_cpu=30, main_cpu=30)
    v_low = gv(snapshot_history(steady(49.9), tree=quiet))
    v_mid = gv(snapshot_history(steady(50.0), tree=quiet))
    assert (v_low.kind, v_low.severity) == (UNDERUSED, "warn")
    assert (v_mid.kind, v_mid.severity) == (MODERATE, "info")


def test_oscillation_boundary() -> None:
    quiet = trainer_processes(worker_cpu=30, main_cpu=30)
    steady_enough = gv(snapshot_history(around(70, 14.9), tree=quiet))
    oscillating = gv(snapshot_history(around(70, 15.0), tree=quiet))
    assert steady_enough.kind == MODERATE
    assert oscillating.kind == UNDERUSED
    assert "oscillating (sd 15)" in oscillating.evidence


# --- input-bound: cpu workers ----------------------------------------------------------


def test_starved_gpu_with_busy_workers() -> None:
    utils = [12, 61, 38, 40, 25, 55, 38, 30, 45, 36] * 2
    tree = trainer_processes(workers=8, worker_cpu=96, main_cpu=40)
    snaps = snapshot_history(utils, tree=tree, host_kw={"cpu": 71.0})
    v = gv(snaps)
    assert (v.kind, v.severity) == (INPUT_CPU, "warn")
    assert v.evidence == (
        "util mean 38 % (min 12, max 61) over 19 s; "
        "job 100: 8 workers at 96 % of a core each; host CPU 71 %, iowait 0 %"
    )
    assert "num_workers" in v.advice
    j = jv(snaps)
    assert j.kind == INPUT_CPU
    assert "8 workers at 96 % of a core each" in j.evidence
    assert "job 100" not in j.evidence


def test_worker_busy_boundary() -> None:
    busy = gv(snapshot_history(steady(30), tree=trainer_processes(worker_cpu=80.0)))
    not_busy = gv(snapshot_history(steady(30), tree=trainer_processes(worker_cpu=79.9)))
    assert busy.kind == INPUT_CPU
    assert not_busy.kind == UNDERUSED


def test_one_busy_worker_of_four_is_not_busy_workers() -> None:
    """The workers' CPU is their mean, not the busiest one's: 1 worker at a full core and
    3 idle (mean 26 %) do not make the job "input-bound: cpu workers"."""
    tree = trainer_processes(workers=4, worker_cpu=2.0, main_cpu=30)
    tree[1] = replace(tree[1], cpu_percent=100.0)  # worker 101 spins, 102-104 idle
    snaps = snapshot_history(steady(30), tree=tree)
    for v in (gv(snaps), jv(snaps)):
        assert v.kind == UNDERUSED, (v.kind, v.evidence)
        assert INPUT_CPU not in v.also


def test_host_cpu_saturated_boundary() -> None:
    tree = trainer_processes(worker_cpu=50, main_cpu=50)
    saturated = gv(snapshot_history(steady(30), tree=tree, host_kw={"cpu": 90.0}))
    not_quite = gv(snapshot_history(steady(30), tree=tree, host_kw={"cpu": 89.9}))
    assert saturated.kind == INPUT_CPU
    assert "host CPU saturated (90 %)" in saturated.evidence
    assert not_quite.kind == UNDERUSED


# --- input-bound: main process ----------------------------------------------------------


def test_main_process_bound() -> None:
    v = gv(snapshot_history(steady(30), tree=trainer_processes(worker_cpu=5, main_cpu=99)))
    assert (v.kind, v.severity) == (INPUT_MAIN, "warn")
    assert "main process 100 at 99 % of a core, 4 workers at 5 % of a core each" in v.evidence
    assert ".item()" in v.advice


def test_main_process_without_workers() -> None:
    v = gv(snapshot_history(steady(30), tree=trainer_processes(workers=0, main_cpu=100)))
    assert v.kind == INPUT_MAIN
    assert "no workers" in v.evidence


def test_main_busy_boundary() -> None:
    assert (
        gv(snapshot_history(steady(30), tree=trainer_processes(worker_cpu=5, main_cpu=90.0))).kind
        == INPUT_MAIN
    )
    assert (
        gv(snapshot_history(steady(30), tree=trainer_processes(worker_cpu=5, main_cpu=89.9))).kind
        == UNDERUSED
    )


def test_worker_idle_boundary_for_main_process() -> None:
    assert (
        gv(snapshot_history(steady(30), tree=trainer_processes(worker_cpu=20.0, main_cpu=99))).kind
        == INPUT_MAIN
    )
    assert (
        gv(snapshot_history(steady(30), tree=trainer_processes(worker_cpu=20.1, main_cpu=99))).kind
        == UNDERUSED
    )


def test_busy_main_on_a_steady_moderate_gpu_is_not_main_bound() -> None:
    # CUDA syncs spin: a busy main thread alone proves nothing unless util is low/oscillating
    v = gv(snapshot_history(steady(70), tree=trainer_processes(worker_cpu=5, main_cpu=100)))
    assert v.kind == MODERATE


# --- input-bound: disk ----------------------------------------------------------------------


def _dsleep_tree(n_sleeping: int) -> object:
    def make(i: int, t: float) -> list[ProcessInfo]:
        status = "disk-sleep" if i < n_sleeping else "sleeping"
        return trainer_processes(worker_cpu=10, worker_status=status, worker_read=5 * MiB)

    return make


def test_disk_sleep_fraction_boundary() -> None:
    v = gv(snapshot_history(steady(30), tree=_dsleep_tree(10)))  # type: ignore[arg-type]
    assert (v.kind, v.severity) == (INPUT_DISK, "warn")
    assert "disk wait (D state) in 10 of 20 samples" in v.evidence
    assert gv(snapshot_history(steady(30), tree=_dsleep_tree(9))).kind == UNDERUSED  # type: ignore[arg-type]


def test_iowait_boundary_needs_the_job_to_read() -> None:
    def tree(read: float) -> list[ProcessInfo]:
        return trainer_processes(worker_cpu=10, worker_read=read)

    reading = tree(th.DEFAULT.disk_min_read / 4)  # 4 workers: the job reads exactly DISK_MIN_READ
    v = gv(snapshot_history(steady(30), tree=reading, host_kw={"iowait": 20.0}))
    assert v.kind == INPUT_DISK
    assert "iowait 20 %" in v.evidence
    assert (
        gv(snapshot_history(steady(30), tree=reading, host_kw={"iowait": 19.9})).kind == UNDERUSED
    )
    trickle = tree(th.DEFAULT.disk_min_read / 4 - 1)
    assert (
        gv(snapshot_history(steady(30), tree=trickle, host_kw={"iowait": 50.0})).kind == UNDERUSED
    )


def test_disk_near_observed_peak() -> None:
    peak = 1000 * MiB

    def run(now_fraction: float, job_read: float) -> Verdict:
        # 20 older samples with the peak, then 21 in the window reading at now_fraction
        utils = steady(90, 20) + steady(30, 21)

        def host_kw(i: int, t: float) -> dict[str, float]:
            return {"disk_read": peak if i < 20 else peak * now_fraction}

        tree = trainer_processes(worker_cpu=30, worker_read=job_read / 4)
        return gv(snapshot_history(utils, tree=tree, host_kw=host_kw))

    near = run(0.8, 50 * MiB)
    assert near.kind == INPUT_DISK
    assert "80 % of the peak" in near.evidence
    assert run(0.79, 50 * MiB).kind == UNDERUSED
    assert run(0.8, th.DEFAULT.disk_min_read - 4).kind == UNDERUSED  # the job hardly reads


def test_disk_wait_outranks_busy_workers() -> None:
    def make(i: int, t: float) -> list[ProcessInfo]:
        return trainer_processes(worker_cpu=95, worker_status="disk-sleep", worker_read=MiB)

    v = gv(snapshot_history(steady(30), tree=make))
    assert v.kind == INPUT_DISK
    assert INPUT_CPU in v.also


# --- transfer-bound: pcie, link degraded --------------------------------------------------


def _pcie_kw(rx_fraction: float, gen: int = 4) -> dict[str, Pcie]:
    lane = {3: 8e9 * 128 / 130 / 8, 4: 16e9 * 128 / 130 / 8}[gen]
    return {
        "pcie": Pcie(
            gen=gen,
            width=16,
            max_gen=4,
            max_width=16,
            link_max_bytes_per_s=GEN4_X16,
            rx_bytes_per_s=rx_fraction * lane * 16,
            tx_bytes_per_s=1e6,
        )
    }


def test_pcie_near_max_boundary() -> None:
    tree = trainer_processes(worker_cpu=30)
    v = gv(snapshot_history(steady(40), tree=tree, gpu_kw=_pcie_kw(0.701)))
    assert (v.kind, v.severity) == (TRANSFER_PCIE, "warn")
    assert "70 % of the link on GPU 0" in v.evidence
    assert gv(snapshot_history(steady(40), tree=tree, gpu_kw=_pcie_kw(0.699))).kind == UNDERUSED


def test_pcie_capacity_follows_a_degraded_link() -> None:
    # gen3: 70 % of the *current* (gen3) capacity is only 35 % of the gen4 maximum
    v = gv(
        snapshot_history(
            steady(40), tree=trainer_processes(worker_cpu=30), gpu_kw=_pcie_kw(0.701, gen=3)
        )
    )
    assert v.kind == TRANSFER_PCIE


def test_busy_gpu_with_a_full_link_is_gpu_bound() -> None:
    v = gv(
        snapshot_history(steady(95), tree=trainer_processes(worker_cpu=30), gpu_kw=_pcie_kw(0.9))
    )
    assert v.kind == GPU_BOUND


def test_link_degraded_while_busy() -> None:
    degraded = Pcie(gen=3, width=8, max_gen=4, max_width=16, link_max_bytes_per_s=GEN4_X16)
    v = gv(
        snapshot_history(
            steady(95), tree=trainer_processes(worker_cpu=30), gpu_kw={"pcie": degraded}
        )
    )
    assert (v.kind, v.severity) == (LINK_DEGRADED, "warn")
    assert "link gen3 x8, max gen4 x16" in v.evidence
    assert v.also == (GPU_BOUND,)


def test_link_degraded_fraction_boundary_and_idle_gpus() -> None:
    degraded = Pcie(gen=3, width=16, max_gen=4, max_width=16, link_max_bytes_per_s=GEN4_X16)
    full = Pcie(gen=4, width=16, max_gen=4, max_width=16, link_max_bytes_per_s=GEN4_X16)

    def kw(n: int) -> object:
        return lambda i, t: {"pcie": degraded if i < n else full}

    tree = trainer_processes(worker_cpu=30)
    assert gv(snapshot_history(steady(95), tree=tree, gpu_kw=kw(10))).kind == LINK_DEGRADED  # type: ignore[arg-type]
    assert gv(snapshot_history(steady(95), tree=tree, gpu_kw=kw(9))).kind == GPU_BOUND  # type: ignore[arg-type]
    # an idle GPU drops its link to save power: not degraded
    low = Pcie(gen=1, width=16, max_gen=4, max_width=16, link_max_bytes_per_s=GEN4_X16)
    assert gv(snapshot_history(steady(0), gpu_pids=(), gpu_kw={"pcie": low})).kind == IDLE


# --- throttled, memory ----------------------------------------------------------------------


def test_thermal_throttle_while_busy() -> None:
    kw = {"reasons": ("sw thermal", "sw power cap")}
    v = gv(snapshot_history(steady(95), tree=trainer_processes(worker_cpu=30), gpu_kw=kw))
    assert (v.kind, v.severity) == (THROTTLED, "bad")
    assert "sw thermal in 20 of 20 busy samples on GPU 0" in v.evidence
    assert GPU_BOUND in v.also


def test_throttle_fraction_boundary() -> None:
    def kw(n: int) -> object:
        return lambda i, t: {"reasons": ("hw slowdown",) if i < n else ("idle",)}

    tree = trainer_processes(worker_cpu=30)
    assert gv(snapshot_history(steady(95), tree=tree, gpu_kw=kw(10))).kind == THROTTLED  # type: ignore[arg-type]
    assert gv(snapshot_history(steady(95), tree=tree, gpu_kw=kw(9))).kind == GPU_BOUND  # type: ignore[arg-type]


def test_power_cap_alone_is_a_secondary_flag() -> None:
    v = gv(
        snapshot_history(
            steady(95), tree=trainer_processes(worker_cpu=30), gpu_kw={"reasons": ("sw power cap",)}
        )
    )
    assert (v.kind, v.severity) == (GPU_BOUND, "ok")
    assert v.also == (THROTTLED,)


def test_memory_nearly_full_boundary() -> None:
    tree = trainer_processes(worker_cpu=30)
    full = gv(snapshot_history(steady(95), tree=tree, gpu_kw={"used": int(0.95 * 80 * GiB)}))
    assert full.kind == GPU_BOUND
    assert full.also == (MEMORY_FULL,)
    roomy = gv(snapshot_history(steady(95), tree=tree, gpu_kw={"used": int(0.94 * 80 * GiB)}))
    assert roomy.also == ()


# --- idle, idle memory holder -------------------------------------------------------------


def test_idle_gpu_even_from_one_sample() -> None:
    assert gv(snapshot_history(steady(0), gpu_pids=())).kind == IDLE
    v = gv(snapshot_history([0.0], gpu_pids=()))
    assert (v.kind, v.severity) == (IDLE, "ok")
    assert v.evidence.startswith("no processes, util max 0 %")


def test_idle_util_boundary_without_processes() -> None:
    assert gv(snapshot_history(steady(5.0), gpu_pids=())).kind == IDLE
    v = gv(snapshot_history(steady(5.1), gpu_pids=()))
    assert v.kind == UNDERUSED
    assert "no process listed" in v.evidence


def _holder_history(seconds: float, interval: float = 10.0, age: float = 1000) -> list[Snapshot]:
    n = int(seconds / interval) + 1
    return snapshot_history(
        steady(0, n), interval=interval, tree=trainer_processes(workers=2, worker_cpu=0, main_cpu=0,
                                                      create_time=T0 - age)
    )  # fmt: skip


def test_idle_memory_holder_after_idle_holder_seconds() -> None:
    v = gv(_holder_history(300))
    assert (v.kind, v.severity) == (IDLE_HOLDER, "warn")
    assert v.evidence.startswith("util <= 5 % for 5:00; holding")
    assert jv(_holder_history(300)).kind == IDLE_HOLDER
    # 290 s observed, with the process only 290 s older than the first sample: too short
    assert gv(_holder_history(290, age=0)).kind == UNDERUSED


def test_idle_memory_holder_from_process_age() -> None:
    # only 60 s observed, all idle, and the process has run for 1000 s + 60 s
    v = gv(_holder_history(60))
    assert v.kind == IDLE_HOLDER
    assert "for all 1:00 observed; running for 17:40" in v.evidence
    assert gv(_holder_history(50)).kind == UNDERUSED  # observed too briefly
    assert gv(_holder_history(60, age=200)).kind == UNDERUSED  # too young


def test_a_busy_past_in_history_is_not_idle_holding() -> None:
    utils = steady(90, 5) + steady(0, 11)
    snaps = snapshot_history(utils, interval=10.0, tree=trainer_processes(worker_cpu=0, main_cpu=0))
    assert gv(snaps).kind != IDLE_HOLDER


def test_unlisted_holder_memory_counts_as_held() -> None:
    snaps = [
        replace(s, unlisted_holders=(UnlistedHolder(pid=4242, gpu=0),))
        for s in snapshot_history(steady(0, 31), interval=10.0, gpu_pids=())
    ]
    assert gv(snaps).kind == IDLE_HOLDER
    by_memory = snapshot_history(
        steady(0, 31), interval=10.0, gpu_pids=(), gpu_kw={"used": 20 * GiB}
    )
    assert gv(by_memory).kind == IDLE_HOLDER


# --- warming up, lost, unknown, scope details ----------------------------------------------


def test_warming_up_boundaries() -> None:
    tree = trainer_processes(worker_cpu=95)
    few = gv(snapshot_history(steady(30, 4), tree=tree))
    assert (few.kind, few.severity) == (WARMING_UP, "info")
    assert few.evidence == "4 samples over 3.0 s; need 5 samples and 4 s"
    assert gv(snapshot_history(steady(30, 5), tree=tree)).kind == INPUT_CPU  # 5 samples, 4.0 s
    short = gv(snapshot_history(steady(30, 5), interval=0.975, tree=tree))  # 5 samples, 3.9 s
    assert short.kind == WARMING_UP


def test_warming_up_still_reports_memory_nearly_full() -> None:
    v = gv(snapshot_history(steady(95, 2), tree=trainer_processes(), gpu_kw={"used": 79 * GiB}))
    assert v.kind == WARMING_UP
    assert v.also == (MEMORY_FULL,)


def test_a_new_job_warms_up_on_a_gpu_with_long_history() -> None:
    def tree(i: int, t: float) -> list[ProcessInfo]:
        return trainer_processes(worker_cpu=95) if i >= 17 else []

    snaps = snapshot_history(steady(30), tree=tree)
    # the GPU has 20 samples; the job (host rows) only 3, so the job is warming up
    assert jv(snaps).kind == WARMING_UP


def test_a_job_is_judged_on_the_ticks_it_existed() -> None:
    # GPU idle for 10 s before the job started; then 10 s at 95 %: the job is gpu-bound
    def tree(i: int, t: float) -> list[ProcessInfo]:
        return trainer_processes(worker_cpu=30) if i >= 10 else []

    snaps = snapshot_history(steady(0, 10) + steady(95, 10), tree=tree)
    v = jv(snaps)
    assert v.kind == GPU_BOUND
    assert v.evidence == "util mean 95 % (min 95, max 95) over 9 s"


def test_lost_gpu() -> None:
    snaps = snapshot_history(steady(95), tree=trainer_processes())
    snaps.append(snapshot(T0 + N, [gpu_sample(0, lost=True)], trainer_processes()))
    v = gv(snaps)
    assert (v.kind, v.severity, v.evidence) == (LOST, "bad", "GPU 0 is lost: GPU is lost")


def test_lost_gpu_makes_its_job_lost() -> None:
    snaps = []
    for i in range(N):
        gpus = [gpu_sample(0, 90, [gpu_process(21)]), gpu_sample(1, 90, [gpu_process(22)])]
        if i == N - 1:
            gpus = [gpu_sample(0, 90, [gpu_process(21)]), gpu_sample(1, lost=True)]
        rows = [process_info(20, 1, command="torchrun"), process_info(21, 20), process_info(22, 20)]
        snaps.append(snapshot(T0 + i, gpus, rows))
    g = gpu_verdicts(snaps)
    assert g[0].kind == GPU_BOUND and g[1].kind == LOST
    # the job seen in the last snapshot only lists GPU 0; judged with its old GPUs it is lost
    old_job = build_jobs(snaps[-2])[0]
    assert old_job.gpus == (0, 1)
    assert job_verdicts(snaps, [old_job])[old_job.id].kind == LOST


def test_unknown_utilization() -> None:
    v = gv(snapshot_history([None] * N, tree=trainer_processes()))
    assert v.kind == UNKNOWN
    assert "not reported" in v.evidence


def test_invisible_processes_still_judged_on_gpu_metrics() -> None:
    hidden = ProcessInfo(pid=100, visible=False)
    v = gv(snapshot_history(steady(30), tree=[hidden]))
    assert v.kind == UNDERUSED
    assert "not visible from here" in v.evidence
    assert gv(snapshot_history(steady(95), tree=[hidden])).kind == GPU_BOUND


def test_multi_gpu_job_verdict() -> None:
    def rows() -> list[ProcessInfo]:
        out = [process_info(20, 1, command="torchrun train.py")]
        for r in range(4):
            out += [process_info(21 + r, 20, cpu=40.0)]
            out += [process_info(100 + 10 * r + w, 21 + r, cpu=97.0) for w in range(2)]
        return out

    snaps = [
        snapshot(T0 + i, [gpu_sample(r, 35.0, [gpu_process(21 + r)]) for r in range(4)], rows())
        for i in range(N)
    ]
    v = jv(snaps)
    assert v.kind == INPUT_CPU
    assert "on GPUs 0,1,2,3" in v.evidence
    assert "8 workers at 97 % of a core each" in v.evidence
    assert set(gpu_verdicts(snaps)) == {0, 1, 2, 3}
    assert all(x.kind == INPUT_CPU for x in gpu_verdicts(snaps).values())


def test_shared_gpu_verdict_names_the_job() -> None:
    def rows(i: int, t: float) -> list[ProcessInfo]:
        return trainer_processes(100, worker_cpu=5, main_cpu=5) + trainer_processes(
            200, worker_cpu=95
        )

    snaps = snapshot_history(steady(30), tree=rows, gpu_pids=(100, 200))
    v = gv(snaps)
    assert v.kind == INPUT_CPU
    assert "job 200: 4 workers at 95 %" in v.evidence
    jobs = job_verdicts(snaps)
    assert {j.kind for j in jobs.values()} == {INPUT_CPU, UNDERUSED}


def test_window_ignores_older_snapshots() -> None:
    snaps = snapshot_history(steady(10, 30) + steady(95, 21), tree=trainer_processes(worker_cpu=30))
    assert len(split_window(snaps, th.DEFAULT)[1]) == 21
    assert gv(snaps).kind == GPU_BOUND
    assert gv(snaps, Thresholds.from_overrides({"window_seconds": 60})).kind != GPU_BOUND


def test_pure_and_deterministic() -> None:
    snaps = snapshot_history(around(38, 20), tree=trainer_processes(worker_cpu=96))
    shuffled = list(snaps)
    random.Random(7).shuffle(shuffled)
    assert gpu_verdicts(snaps) == gpu_verdicts(shuffled) == gpu_verdicts(list(snaps))
    assert job_verdicts(snaps) == job_verdicts(shuffled)
    assert gpu_verdicts([]) == {} and job_verdicts([]) == {}
    assert all_verdicts(snaps) == (gpu_verdicts(snaps), job_verdicts(snaps))
    assert all_verdicts([]) == ({}, {})


def test_verdict_json_shape() -> None:
    v = gv(
        snapshot_history(
            steady(95), tree=trainer_processes(worker_cpu=30), gpu_kw={"reasons": ("sw power cap",)}
        )
    )
    d = v.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d == {
        "kind": GPU_BOUND,
        "label": "GPU-bound",
        "severity": "ok",
        "evidence": v.evidence,
        "advice": v.advice,
        "also": [THROTTLED],
    }
    assert set(LABELS) == set(KINDS)


# --- thresholds ---------------------------------------------------------------------------


def test_threshold_overrides_change_verdicts() -> None:
    snaps = snapshot_history(steady(87), tree=trainer_processes(worker_cpu=95))
    assert gv(snaps).kind == GPU_BOUND
    strict = Thresholds.from_overrides({"util_high": 90})
    assert strict.util_high == 90.0
    assert gv(snaps, strict).kind == INPUT_CPU


def test_threshold_names_values_and_errors() -> None:
    t = Thresholds.from_overrides({"UTIL_HIGH": "90", "min-samples": "3", "idle_util": 2})
    assert (t.util_high, t.min_samples, t.idle_util) == (90.0, 3, 2.0)
    assert isinstance(t.min_samples, int)
    assert Thresholds.from_strings(["UTIL_LOW=40", "window_seconds=30"]).window_seconds == 30.0
    assert Thresholds.from_overrides({}, base=t) == t
    with pytest.raises(ThresholdError, match="unknown threshold 'util_hgh'; known: UTIL_HIGH"):
        Thresholds.from_overrides({"util_hgh": 90})
    with pytest.raises(ThresholdError, match="UTIL_HIGH: expected a number, got 'high'"):
        Thresholds.from_overrides({"util_high": "high"})
    with pytest.raises(ThresholdError, match="MIN_SAMPLES: expected a whole number"):
        Thresholds.from_overrides({"min_samples": "2.5"})
    with pytest.raises(ThresholdError, match="between 0 and 100"):
        Thresholds.from_overrides({"util_high": 120})
    with pytest.raises(ThresholdError, match="above 0 and at most 1"):
        Thresholds.from_overrides({"pcie_near_max": 1.5})
    with pytest.raises(ThresholdError, match=r"UTIL_LOW=95\.0 must not exceed UTIL_HIGH=85\.0"):
        Thresholds.from_overrides({"util_low": 95})
    with pytest.raises(ThresholdError, match="expected NAME=VALUE"):
        Thresholds.from_strings(["UTIL_HIGH"])
    with pytest.raises(ThresholdError, match="finite"):
        Thresholds.from_overrides({"util_high": "nan"})
    with pytest.raises(ThresholdError):
        Thresholds.from_overrides({"util_high": True})


def test_defaults_are_documented_in_docs_verdicts() -> None:
    """The threshold table of docs/verdicts.md is the code's: a default changed in the code
    and not in the docs (or the other way round) fails here."""
    d = th.DEFAULT
    for name in Thresholds.names():
        assert name in th.DOCS
    table = th.markdown_table()
    doc = (Path(__file__).resolve().parents[2] / "docs" / "verdicts.md").read_text()
    assert table in doc, "docs/verdicts.md's thresholds table differs from th.markdown_table()"
    for name in Thresholds.names():
        assert f"`{name.upper()}`" in table
    assert "| `UTIL_HIGH` | 85 % |" in table and "| `WINDOW_SECONDS` | 20 s |" in table
    d.check()


def test_slow_sampling_window_keeps_min_samples() -> None:
    # one sample every 10 s: the 20 s window would hold 3; it is widened to MIN_SAMPLES
    snaps = snapshot_history(steady(30, 8), interval=10.0, tree=trainer_processes(worker_cpu=95))
    assert len(split_window(snaps, th.DEFAULT)[1]) == th.DEFAULT.min_samples
    v = gv(snaps)
    assert v.kind == INPUT_CPU
    assert "over 40 s" in v.evidence


# --- the cached path (Analyzer) gives what the plain functions give -----------------------


def _as_dicts(verdicts: Mapping[Any, Verdict]) -> dict[Any, dict[str, Any]]:
    return {k: v.to_dict() for k, v in verdicts.items()}


def _same_as_plain(
    analyzer: Analyzer, hist: Sequence[Snapshot], thresholds: Thresholds, where: str
) -> None:
    gpus, jobs_v, jobs = analyzer.update(hist)
    plain_gpus, plain_jobs = all_verdicts(hist, None, thresholds)
    assert _as_dicts(gpus) == _as_dicts(plain_gpus), where
    assert _as_dicts(jobs_v) == _as_dicts(plain_jobs), where
    assert jobs == build_jobs(max(hist, key=lambda s: s.time)), where


def test_analyzer_matches_the_plain_functions_over_a_long_demo_run() -> None:
    # The dashboard's call pattern: one snapshot a second, the analyzer fed every tick,
    # the plain (uncached) functions compared at several points, verdicts varied.
    source = DemoSource(seed=0, start_time=1_700_000_000.0, step=1.0)
    analyzer = Analyzer(th.DEFAULT)
    hist: list[Snapshot] = []
    kinds: set[str] = set()
    for tick in range(400):
        hist.append(source.snapshot())
        if tick % 37 == 5 or tick == 399:
            _same_as_plain(analyzer, hist, th.DEFAULT, f"tick {tick}")
            kinds.update(v.kind for v in analyzer.update(hist).gpu_verdicts.values())
        else:
            analyzer.update(hist)
    assert {GPU_BOUND, IDLE_HOLDER, INPUT_CPU, UNDERUSED} <= kinds, kinds


def test_analyzer_matches_when_history_is_cut_reordered_or_replaced() -> None:
    # The golden "irregular" scenario: short thresholds so that the history is cut
    # (lookback) and idle holders show; every tick compared; gaps, older histories and
    # reversed order exercise the rebuild paths.
    from tests.verdict_scenarios import SCENARIOS

    t, hists = SCENARIOS["irregular"]()
    analyzer = Analyzer(t)
    kinds: set[str] = set()
    for tick, recent in enumerate(hists):
        _same_as_plain(analyzer, recent, t, f"tick {tick}")
        kinds.update(v.kind for v in all_verdicts(recent, None, t)[0].values())
    assert IDLE_HOLDER in kinds, kinds


def test_analyzer_matches_with_processes_coming_and_going() -> None:
    # Workers vanish and come back, CPU readings go missing, GPUs drop their utilization
    # or are lost: the per-job window tracks take their slow paths.
    rng = random.Random(7)
    t = Thresholds.from_overrides({"window_seconds": 8})
    analyzer = Analyzer(t)
    hist: list[Snapshot] = []
    for tick, snap in enumerate(busy_node_snapshots(4, 8, ranks=2, seed=4)):
        if tick == 120:
            break
        procs = []
        for p in snap.processes:
            r = rng.random()
            if r < 0.1:
                continue
            procs.append(replace(p, cpu_percent=None) if r < 0.2 else p)
        gpus = [
            replace(g, lost=True, lost_reason="fell off the bus")
            if rng.random() < 0.03
            else replace(g, processes=tuple(p for p in g.processes if rng.random() > 0.1))
            for g in snap.gpus
        ]
        hist.append(replace(snap, processes=tuple(procs), gpus=tuple(gpus)))
        _same_as_plain(analyzer, hist[-40:], t, f"tick {tick}")


def test_job_verdicts_are_judged_on_request_and_stay_valid() -> None:
    source = DemoSource(seed=1, start_time=1_700_000_000.0, step=1.0)
    hist = [source.snapshot() for _ in range(30)]
    analyzer = Analyzer()
    first = analyzer.update(hist)
    hist.append(source.snapshot())
    lean = analyzer.update(hist, judge_jobs=False)  # the main screen's path: GPUs only
    assert lean.job_verdicts == {} and lean.jobs and lean.gpu_verdicts
    # the analyzer moved on; the first result is not affected
    assert set(first.job_verdicts) == {j.id for j in first.jobs}
    assert _as_dicts(first.job_verdicts) == _as_dicts(all_verdicts(hist[:-1])[1])
    with pytest.raises(KeyError):
        first.job_verdicts["no such job"]
    assert _as_dicts(analyzer.update(hist).job_verdicts) == _as_dicts(all_verdicts(hist)[1])
    assert analyzer.update([]) == ({}, {}, ())


def test_jobs_are_built_again_only_when_their_input_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A snapshot whose process rows, GPU process lists and utilization are the objects
    of the snapshot before (the sources share unchanged ones) takes that tick's jobs
    over; a changed row, or a job whose age moves on, makes them built again. Verdicts
    and jobs stay those of the plain functions."""
    from gputop.analysis import window as window_mod

    built: list[float] = []
    real_build = window_mod.build_jobs_reusing

    def counting(snap: Snapshot, *args: Any) -> Any:
        built.append(snap.time)
        return real_build(snap, *args)

    monkeypatch.setattr(window_mod, "build_jobs_reusing", counting)

    def run(rows: Sequence[ProcessInfo], change_at: int | None = None) -> list[float]:
        """The times of the snapshots whose jobs the analyzer built, tick after tick."""
        rows_t = tuple(rows)
        g = gpu_sample(0, 30.0, [gpu_process(100)])
        hist: list[Snapshot] = []
        analyzer = Analyzer()
        built.clear()
        for i in range(12):
            if i == change_at:  # one process's CPU reading changes: new rows
                rows_t = tuple(replace(r, cpu_percent=55.0) if r.pid == 101 else r for r in rows_t)
            hist.append(snapshot(T0 + i, [g], rows_t))
            analyzer.update(hist)
        during = list(built)
        _same_as_plain(analyzer, hist, th.DEFAULT, "after the run")
        if change_at is not None:
            job = analyzer.update(hist).jobs[0]
            assert job.cpu_percent == build_jobs(hist[-1])[0].cpu_percent
            assert job.cpu_percent is not None and job.cpu_percent >= 55.0
        return during

    # Ages unknown (no create time: e.g. pids of another PID namespace): built once.
    unknown_age = [replace(r, create_time=None) for r in trainer_processes(100, 2)]
    assert run(unknown_age) == [T0]
    assert run(unknown_age, change_at=7) == [T0, T0 + 7]  # the change, and nothing else
    # Known create times: each tick's jobs have a new age, so each tick builds them.
    assert run(trainer_processes(100, 2)) == [T0 + i for i in range(12)]


def test_a_job_track_of_one_unchanged_tick_keeps_its_signals_and_stays_exact() -> None:
    """A job whose ticks are all one object (its input did not change) has its window
    signals kept between calls; any other tick in the window makes them computed again,
    and they are always what a track built afresh from the same ticks gives."""
    from gputop.analysis.input_rules import JobTick, Track

    a_snap = snapshot(
        T0, [gpu_sample(0, 30.0, [gpu_process(100)])], trainer_processes(100, 2, worker_cpu=90.0)
    )
    b_snap = snapshot(
        T0, [gpu_sample(0, 30.0, [gpu_process(100)])], trainer_processes(100, 2, worker_cpu=10.0)
    )
    a, b = (Analyzer().context([s]).ticks[-1].feats for s in (a_snap, b_snap))  # type: ignore[union-attr]
    fa, fb = next(iter(a.values())), next(iter(b.values()))
    assert isinstance(fa, JobTick) and isinstance(fb, JobTick)

    def fresh(feats: list[JobTick]) -> Any:
        t = Track()
        for f in feats:
            t.push(f)
        return t.signals()

    track = Track()
    window: list[JobTick] = []

    def step(f: JobTick, keep: int = 5) -> Any:
        track.push(f)
        window.append(f)
        if len(window) > keep:
            track.pop()
            window.pop(0)
        return track.signals()

    first = step(fa)
    for _ in range(7):
        assert step(fa) == fresh(window)
    kept = track.signals()
    assert track.signals() is kept  # all one object: kept
    mixed = step(fb)
    assert mixed == fresh(window) and mixed != kept and mixed.worker_cpu != first.worker_cpu
    for _ in range(5):  # fb fills the window again: uniform once more
        assert step(fb) == fresh(window)
    assert track.signals() is track.signals() and track.signals() == fresh(window)
