"""The probe's families (issue 31): the job's measured data wait and step time with its
owner labels, each probed process's CUDA allocator per device; a missing series, never 0,
where no probe runs; promtool accepts the scrape."""

from __future__ import annotations

import subprocess
from pathlib import Path

from prometheus_client.exposition import generate_latest

from gputop.exporter.metrics import METRICS, Totals, build
from gputop.model import CudaMemory, Probe, Snapshot, replace
from gputop.pipeline import Feed
from gputop.sources.demo import DemoSource
from tests.exporter.test_exporter_real import need
from tests.helpers.exporter import exporter, parse, series

PROBE_FAMILIES = {
    "gputop_job_data_wait_ratio": ("user", "command", "gpus", "namespace", "pod", "container",
                                   "slurm_job"),
    "gputop_job_step_seconds": ("user", "command", "gpus", "namespace", "pod", "container",
                                "slurm_job"),
    "gputop_process_gpu_memory_allocated_bytes": ("pid", "device", "user", "namespace", "pod",
                                                  "container", "slurm_job"),
    "gputop_process_gpu_memory_reserved_bytes": ("pid", "device", "user", "namespace", "pod",
                                                 "container", "slurm_job"),
}  # fmt: skip


def scrape(node: str | None, ticks: int = 12, edit: object = None) -> str:
    source = DemoSource(0, start_time=0.0, step=1.0, node=node)
    feed, hist = Feed(), []
    for _ in range(ticks):
        snap = source.snapshot()
        hist.append(edit(snap) if callable(edit) else snap)
        d = feed.frame(hist).diagnosis
    fams = build(hist[-1], d.gpus, d.jobs, d.job_verdicts, Totals(), with_jobs=True)

    class One:
        def collect(self) -> list[object]:
            return list(fams)

    return generate_latest(One()).decode()  # type: ignore[arg-type]


def test_the_issue_s_families_are_declared_with_the_job_and_process_labels() -> None:
    defs = {m.name: m for m in METRICS}
    for name, labels in PROBE_FAMILIES.items():
        assert (defs[name].type, defs[name].labels, defs[name].jobs) == ("gauge", labels, True)


def test_the_probe_demo_exports_each_job_s_wait_and_step_and_the_allocator() -> None:
    samples = parse(scrape("h200-probe"))
    (kim,) = series(samples, "gputop_job_data_wait_ratio", user="kim").values()
    assert 0.3 <= kim <= 0.55  # the mean of its two ranks
    (lena,) = series(samples, "gputop_job_step_seconds", user="lena").values()
    assert 0.75 <= lena <= 0.95
    assert len(series(samples, "gputop_job_data_wait_ratio")) == 3  # kim, lena, mallory
    reserved = series(samples, "gputop_process_gpu_memory_reserved_bytes", user="mallory")
    allocated = series(samples, "gputop_process_gpu_memory_allocated_bytes", user="mallory")
    ((labels, held),) = reserved.items()
    assert dict(labels)["pid"] == "70360" and dict(labels)["device"] == "0"
    assert held > 2 * allocated[labels]
    # the processes that report no CUDA figures have no memory series
    assert len(series(samples, "gputop_process_gpu_memory_reserved_bytes")) == 1


def test_without_a_probe_every_probe_series_is_missing_never_zero() -> None:
    samples = parse(scrape(None))
    for name in PROBE_FAMILIES:
        assert series(samples, name) == {}, name


def test_a_probe_without_a_figure_gives_no_series_for_it() -> None:
    """A probe that measured no wait yet, and a CUDA device with no reserved figure."""

    def blank(snap: Snapshot) -> Snapshot:
        procs = tuple(
            p
            if p.probe is None
            else replace(
                p,
                probe=Probe(
                    time=snap.time, data_wait_ratio=None, memory=(CudaMemory(0, allocated=1),)
                ),
            )
            for p in snap.processes
        )
        return replace(snap, processes=procs)

    samples = parse(scrape("h200-probe", edit=blank))
    for name in ("gputop_job_data_wait_ratio", "gputop_job_step_seconds"):
        assert series(samples, name) == {}, name
    assert series(samples, "gputop_process_gpu_memory_reserved_bytes") == {}
    assert len(series(samples, "gputop_process_gpu_memory_allocated_bytes")) == 4


def test_promtool_check_metrics_on_the_probe_demo(tmp_path: Path) -> None:
    promtool = need("promtool")
    with exporter(["--demo", "--demo-node", "h200-probe", "--jobs"], tmp=tmp_path) as exp:
        text = exp.scrape()
    assert "gputop_job_data_wait_ratio{" in text
    assert "gputop_process_gpu_memory_reserved_bytes{" in text
    check = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.strip() == "" and check.stderr.strip() == "", check.stdout + check.stderr
