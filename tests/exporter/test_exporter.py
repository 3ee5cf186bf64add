"""The exporter's metric families, in-process: naming rules, n/a, lost GPUs, jobs, counters,
the per-tick cache, and the Grafana dashboard shipped in contrib/ against the metric table.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from prometheus_client.exposition import generate_latest

from gputop.analysis.jobs import Job
from gputop.analysis.kinds import KINDS
from gputop.exporter import parse_listen
from gputop.exporter.metrics import METRICS, PROCESS_DEVICE, Totals, build, job_families
from gputop.exporter.server import ExportState, make_registry
from gputop.model import (
    DriverInfo,
    GpuMemory,
    GpuSample,
    HostSample,
    Snapshot,
    Utilization,
    Verdict,
)
from gputop.sources.demo import DemoSource
from tests.builders import diagnose
from tests.helpers.exporter import DASHBOARD, dashboard_exprs, parse, series

ROOT = Path(__file__).resolve().parents[2]
UNITS = ("bytes", "celsius", "watts", "hertz", "bytes_per_second", "seconds", "ratio")
METRIC_NAMES = frozenset(m.name for m in METRICS)


def markdown_table() -> str:
    """:data:`METRICS` as ``docs/exporter.md`` lists them."""
    lines = ["| metric | type | unit | labels | meaning |", "|---|---|---|---|---|"]
    for m in METRICS:
        about = f"{m.help} (`--jobs`)" if m.jobs else m.help
        lines.append(
            f"| `{m.name}` | {m.type} | {m.unit} | {', '.join(m.labels) or '—'} | {about} |"
        )
    return "\n".join(lines)


def _snap(*gpus: GpuSample, t: float = 1000.0, available: bool = True) -> Snapshot:
    return Snapshot(
        time=t,
        hostname="h",
        driver=DriverInfo(available=available, driver_version="550.1" if available else None),
        host=HostSample(cpu_count=8),
        gpus=gpus,
    )


def _text(snapshot: Snapshot, **kw: object) -> str:
    fams = build(snapshot, {}, (), {}, Totals(), **kw)  # type: ignore[arg-type]

    class One:
        def collect(self) -> list[object]:
            return list(fams)

    return generate_latest(One()).decode()  # type: ignore[arg-type]


# --- names -----------------------------------------------------------------------------


@pytest.mark.parametrize("m", METRICS, ids=lambda m: m.name)
def test_every_name_follows_the_prometheus_rules(m: object) -> None:
    from gputop.exporter.metrics import MetricDef

    assert isinstance(m, MetricDef)
    assert re.fullmatch(r"gputop_[a-z][a-z0-9_]*", m.name)
    assert m.name.count("gputop") == 1
    if m.type == "counter":
        assert m.name.endswith("_total")
    else:
        assert not m.name.endswith("_total")
    if m.type == "info":
        assert m.name.endswith("_info")
    if m.unit in ("bytes", "watts", "hertz", "seconds"):
        assert m.name.removesuffix("_total").endswith("_" + m.unit)
    if m.unit == "0-1":
        assert m.name.endswith("_ratio")
    if m.unit == "bytes/s":
        assert m.name.endswith("_bytes_per_second")
    # per job: no pid (cardinality); only the probe's per-process memory carries one,
    # capped at --max-jobs processes
    assert "pid" not in m.labels or m.labels == PROCESS_DEVICE
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", label) for label in m.labels)


def test_the_issue_set_is_exported_under_these_exact_names() -> None:
    """Other tools (the fleet view, dashboards) read these names: they do not change."""
    wanted = {
        "gputop_gpu_info",
        "gputop_gpu_utilization_ratio",
        "gputop_gpu_memory_used_bytes",
        "gputop_gpu_memory_total_bytes",
        "gputop_gpu_memory_reserved_bytes",
        "gputop_gpu_pcie_bytes_per_second",
        "gputop_gpu_pcie_link_max_bytes_per_second",
        "gputop_gpu_pcie_link_gen",
        "gputop_gpu_pcie_link_width",
        "gputop_gpu_pcie_link_max_gen",
        "gputop_gpu_pcie_link_max_width",
        "gputop_gpu_power_watts",
        "gputop_gpu_power_limit_watts",
        "gputop_gpu_temperature_celsius",
        "gputop_gpu_fan_ratio",
        "gputop_gpu_sm_clock_hertz",
        "gputop_gpu_clock_event_reason",
        "gputop_gpu_lost",
        "gputop_gpu_verdict",
        "gputop_gpu_verdict_seconds_total",
        "gputop_last_sample_timestamp_seconds",
        "gputop_sample_duration_seconds",
        "gputop_read_errors_total",
        "gputop_job_gpu_memory_bytes",
        "gputop_job_cpu_ratio",
        "gputop_job_workers",
        "gputop_job_verdict",
    }
    assert wanted <= METRIC_NAMES


def test_a_demo_scrape_names_only_metrics_of_the_table() -> None:
    source = DemoSource(1, start_time=0.0, step=1.0)
    history = [source.snapshot() for _ in range(25)]
    d = diagnose(history)
    totals = Totals()
    for s in history:
        totals.add(s, d.gpus, max_step=2.0)
    fams = build(history[-1], d.gpus, d.jobs, d.job_verdicts, totals, with_jobs=True)
    names = {s.name for f in fams for s in f.samples}
    assert names <= METRIC_NAMES, names - METRIC_NAMES
    assert {"gputop_job_verdict", "gputop_gpu_verdict_seconds_total"} <= names


# --- truth ------------------------------------------------------------------------------


def test_na_is_a_missing_series_never_zero() -> None:
    gpu = GpuSample(
        index=0,
        uuid="GPU-1",
        memory=GpuMemory(total=80 << 30, used=None),
        utilization=Utilization(gpu=None),
        fan_percent=None,
        power_w=120.0,
    )
    samples = parse(_text(_snap(gpu)))
    assert list(series(samples, "gputop_gpu_power_watts").values()) == [120.0]
    assert list(series(samples, "gputop_gpu_memory_total_bytes").values()) == [80 << 30]
    for name in (
        "gputop_gpu_utilization_ratio",
        "gputop_gpu_memory_used_bytes",
        "gputop_gpu_fan_ratio",
        "gputop_gpu_temperature_celsius",
        "gputop_gpu_clock_event_reason",
        "gputop_gpu_pcie_bytes_per_second",
    ):
        assert not series(samples, name), name


def test_units_are_base_units() -> None:
    from gputop.model import Clocks, Pcie

    gpu = GpuSample(
        index=3,
        utilization=Utilization(gpu=45.0),
        fan_percent=30.0,
        clocks=Clocks(sm_mhz=1755),
        pcie=Pcie(tx_bytes_per_s=1e6, rx_bytes_per_s=2e6),
        clock_event_reasons=("sw power cap",),
    )
    samples = parse(_text(_snap(gpu)))
    assert series(samples, "gputop_gpu_utilization_ratio", gpu="3") == {
        frozenset({("gpu", "3")}): 0.45
    }
    assert list(series(samples, "gputop_gpu_fan_ratio").values()) == [0.3]
    assert list(series(samples, "gputop_gpu_sm_clock_hertz").values()) == [1755e6]
    assert list(series(samples, "gputop_gpu_pcie_bytes_per_second", direction="rx").values()) == [
        2e6
    ]
    reasons = series(samples, "gputop_gpu_clock_event_reason")
    assert reasons[frozenset({("gpu", "3"), ("reason", "sw power cap")})] == 1.0
    assert reasons[frozenset({("gpu", "3"), ("reason", "hw thermal")})] == 0.0


def test_a_lost_gpu_keeps_only_info_and_lost() -> None:
    lost = GpuSample(index=1, uuid="GPU-lost", name="H100", lost=True, lost_reason="gone")
    ok = GpuSample(index=0, utilization=Utilization(gpu=10.0))
    totals = Totals()
    verdict = Verdict("lost", "GPU lost", "", "", "bad")
    snap = _snap(ok, lost)
    totals.add(snap, {1: verdict}, 2.0)
    fams = build(snap, {1: verdict}, (), {}, totals)
    names = {s.name for f in fams for s in f.samples if s.labels.get("gpu") == "1"}
    assert names == {"gputop_gpu_info", "gputop_gpu_lost"}


def test_no_driver_is_self_health_only() -> None:
    samples = parse(_text(_snap(available=False)))
    assert not [n for (n, _) in samples if n.startswith("gputop_gpu_")]
    assert list(series(samples, "gputop_driver_available").values()) == [0.0]
    assert series(samples, "gputop_last_sample_timestamp_seconds")


def test_verdict_seconds_count_time_in_each_verdict_and_cap_a_stall() -> None:
    totals = Totals()
    idle = Verdict("idle", "idle", "", "", "ok")
    busy = Verdict("gpu-bound", "GPU-bound", "", "", "ok")
    gpu = GpuSample(index=0)
    for t, v in [(0.0, idle), (1.0, idle), (2.0, busy), (3.0, busy), (60.0, busy)]:
        totals.add(_snap(gpu, t=t), {0: v}, max_step=2.0)
    assert totals.verdict_seconds[("0", "idle")] == 1.0
    assert totals.verdict_seconds[("0", "gpu-bound")] == 1.0 + 1.0 + 2.0  # the stall: 2 s
    assert {k for (_, k) in totals.verdict_seconds} == set(KINDS)  # every kind from 0


# --- jobs -----------------------------------------------------------------------------


def _demo_diagnosis() -> tuple[Snapshot, object]:
    source = DemoSource(0, start_time=0.0, step=1.0)
    history = [source.snapshot() for _ in range(25)]
    return history[-1], diagnose(history)


def _job_series(
    jobs: Sequence[Job], verdicts: Mapping[str, Verdict], max_jobs: int = 100
) -> tuple[list[tuple[str, ...]], dict[tuple[str, ...], float]]:
    """The labels of each job series set, in order, and GPU memory by labels."""
    fams = {f.name: f for f in job_families(jobs, verdicts, 64, max_jobs)}
    memory, workers = fams["gputop_job_gpu_memory_bytes"], fams["gputop_job_workers"]
    return [labels for labels, _ in workers.series], dict(memory.series)


def test_jobs_are_capped_merged_and_never_carry_a_pid() -> None:
    snap, d = _demo_diagnosis()
    jobs, verdicts = d.jobs, d.job_verdicts  # type: ignore[attr-defined]
    order, memory = _job_series(jobs, verdicts)
    assert 2 <= len(order) <= len(jobs)
    assert len({labels[:3] for labels in order}) == len(order)  # no duplicate series
    sizes = [memory.get(labels, 0) for labels in order]
    assert sizes == sorted(sizes, reverse=True)
    assert len(_job_series(jobs, verdicts, max_jobs=2)[0]) == 2
    # Two launches of the same command by the same user on the same GPUs: one series set.
    twice_order, twice = _job_series([*jobs, *jobs], verdicts)
    assert twice_order == order
    assert [twice.get(k) for k in order] == [2 * memory[k] if k in memory else None for k in order]
    text = _text(snap, with_jobs=True)
    assert "pid" not in text.replace("process_", "")


def test_an_ended_job_leaves_the_next_scrape() -> None:
    state = ExportState(with_jobs=True)
    source = DemoSource(0, start_time=0.0, step=1.0)
    history = [source.snapshot() for _ in range(25)]
    for snap in history:
        state.on_snapshot(snap)
    registry = make_registry(state)
    before = parse(generate_latest(registry).decode())
    jobs = series(before, "gputop_job_gpu_memory_bytes")
    assert jobs
    # The same host a tick later with no GPU process left.
    from gputop.model import replace

    last = history[-1]
    gone = replace(
        last,
        time=last.time + 1,
        gpus=tuple(replace(g, processes=()) for g in last.gpus),
        processes=(),
    )
    history.append(gone)
    state.on_snapshot(gone)
    after = parse(generate_latest(registry).decode())
    assert not series(after, "gputop_job_gpu_memory_bytes")
    assert not series(after, "gputop_job_verdict")


def test_two_scrapes_in_one_tick_build_once() -> None:
    state = ExportState()
    source = DemoSource(0, start_time=0.0, step=1.0)
    snap = source.snapshot()
    state.on_snapshot(snap)
    first = state.families()
    assert state.families() is first  # the same objects: nothing rebuilt
    state.on_snapshot(source.snapshot())
    assert state.families() is not first


# --- command line ---------------------------------------------------------------------


def test_listen_addresses() -> None:
    import argparse

    assert parse_listen("127.0.0.1:9867") == ("127.0.0.1", 9867)
    assert parse_listen("9000") == ("127.0.0.1", 9000)
    assert parse_listen(":9000") == ("0.0.0.0", 9000)
    assert parse_listen("[::1]:9000") == ("::1", 9000)
    for bad in ("host:http", "::1:9000", "1.2.3.4:70000", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_listen(bad)


# --- the Grafana dashboard ------------------------------------------------------------

_WORD = re.compile(r"\b(gputop_[a-z0-9_]+|process_[a-z0-9_]+)\b")


def test_grafana_dashboard_is_valid_and_names_only_exported_metrics() -> None:
    board = json.loads(DASHBOARD.read_text())
    assert board["title"] and board["uid"] and isinstance(board["panels"], list)
    exprs = dashboard_exprs(board)
    assert len(exprs) >= 6
    named = {m for e in exprs for m in _WORD.findall(e)}
    unknown = {m for m in named if m.startswith("gputop_") and m not in METRIC_NAMES}
    assert not unknown, unknown
    types = {p["type"] for p in board["panels"]}
    assert "state-timeline" in types  # the verdict timeline
    titles = " ".join(p.get("title", "") for p in board["panels"]).lower()
    for subject in ("utilization", "memory", "verdict", "pcie", "job"):
        assert subject in titles, subject
    # Every panel reads the Prometheus data source chosen on import.
    for p in board["panels"]:
        if p["type"] != "row":
            assert p["datasource"]["uid"] == "${datasource}", p["title"]


def test_grafana_dashboard_file_is_up_to_date() -> None:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "grafana_dashboard.py"), "--check"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr


# --- the systemd unit -----------------------------------------------------------------

UNIT = ROOT / "contrib" / "systemd" / "gputop-export.service"


def _exec_start() -> list[str]:
    (line,) = [x for x in UNIT.read_text().splitlines() if x.startswith("ExecStart=")]
    return line.removeprefix("ExecStart=").split()


def test_systemd_unit_runs_gputop_export_with_valid_arguments() -> None:
    from gputop.exporter import build_parser

    argv = _exec_start()
    assert argv[:2] == ["/usr/local/bin/gputop", "export"]
    args = build_parser().parse_args(argv[2:])
    assert args.listen == ("127.0.0.1", 9867)  # loopback unless the admin says otherwise


def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.conftest import missing, require_tool

    analyze = require_tool("systemd-analyze")
    gputop = Path(sys.executable).with_name("gputop")
    if not gputop.exists():
        missing("no gputop script next to this Python (pip install -e . first)")
    # The same unit, pointing at this checkout's gputop (verify wants the binary to exist).
    unit = tmp_path / UNIT.name
    unit.write_text(UNIT.read_text().replace("/usr/local/bin/gputop", str(gputop)))
    out = subprocess.run(
        [analyze, "verify", str(unit)], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    problems = [line for line in (out.stdout + out.stderr).splitlines() if UNIT.name in line]
    assert out.returncode == 0 and not problems, out.stdout + out.stderr


def test_grafana_verdict_colours_are_distinct() -> None:
    board = json.loads(DASHBOARD.read_text())
    (timeline,) = [p for p in board["panels"] if p["type"] == "state-timeline"]
    (mapping,) = timeline["fieldConfig"]["defaults"]["mappings"]
    colours = [m["color"] for m in mapping["options"].values()]
    assert len(colours) == len(KINDS) == len(set(colours))


def test_the_docs_metric_table_is_the_generated_one() -> None:
    """docs/exporter.md lists every family as :data:`METRICS` declares it."""
    doc = (ROOT / "docs" / "exporter.md").read_text()
    begin, end = (
        "<!-- BEGIN generated: exporter-metrics -->",
        "<!-- END generated: exporter-metrics -->",
    )
    assert doc.count(begin) == 1 and doc.count(end) == 1
    assert doc[doc.index(begin) + len(begin) + 1 : doc.index(end) - 1] == markdown_table()
    for m in METRICS:
        assert f"| `{m.name}` | {m.type} | {m.unit} |" in markdown_table(), m.name


def test_mig_devices_are_exported_where_present() -> None:
    source = DemoSource(0, start_time=0.0, step=1.0, mig=True)
    snap = source.snapshot()
    (mig_gpu,) = [g for g in snap.gpus if g.mig_devices]
    samples = parse(_text(snap))
    info = series(samples, "gputop_gpu_mig_info", gpu=str(mig_gpu.index))
    assert len(info) == len(mig_gpu.mig_devices) >= 2
    for m in mig_gpu.mig_devices:
        labels = dict(next(lab for lab in info if ("mig", str(m.index)) in lab))
        assert labels["uuid"] == m.uuid and labels["profile"] == m.profile
        assert labels["gpu_instance"] == str(m.gpu_instance_id)
        used = series(samples, "gputop_gpu_mig_memory_used_bytes", mig=str(m.index))
        assert list(used.values()) == [m.memory.used]
    assert series(samples, "gputop_gpu_mig_mode", gpu=str(mig_gpu.index)) == {
        frozenset({("gpu", str(mig_gpu.index))}): 1.0
    }
    other = next(g for g in snap.gpus if not g.mig_devices)
    assert not series(samples, "gputop_gpu_mig_info", gpu=str(other.index))


def test_the_live_exporter_reads_no_cpu_frequency(fake_nvml: object) -> None:
    """No metric carries the CPU frequency, so the exporter's live source does not read it
    (/proc/cpuinfo: large on a many-core server); the dashboard's still does."""
    from gputop.exporter import build_parser, make_source
    from gputop.sources.live import LiveSource

    source = make_source(build_parser().parse_args([]))
    try:
        assert isinstance(source, LiveSource)
        snap = source.snapshot()
        assert snap.host is not None and snap.host.cpu_count is not None
        assert snap.host.cpu_freq_mhz is None
    finally:
        source.close()
    dashboard = LiveSource()
    try:
        host = dashboard.snapshot().host
        assert host is not None
        if (
            Path("/proc/cpuinfo").read_text().count("cpu MHz")
            or Path("/sys/devices/system/cpu/cpu0/cpufreq").exists()
        ):
            assert host.cpu_freq_mhz is not None
    finally:
        dashboard.close()


def test_jobs_and_owners_carry_dcgm_exporters_pod_labels_with_bounded_cardinality() -> None:
    from tests.builders import with_owners

    state = ExportState(with_jobs=True, max_jobs=3)
    source = DemoSource(0, start_time=0.0, step=1.0)
    for _ in range(25):
        state.on_snapshot(with_owners(source.snapshot()))
    got = parse(generate_latest(make_registry(state)).decode())
    pod = {"namespace": "ml-research", "pod": "llama-pretrain-0", "container": "trainer"}
    (job,) = series(got, "gputop_job_gpu_memory_bytes", **pod).items()
    assert dict(job[0])["slurm_job"] == "" and dict(job[0])["command"] == "torchrun"
    owned = series(got, "gputop_process_owner_gpu_memory_bytes", **pod)
    assert {dict(k)["gpu"] for k in owned} == {"0", "1"}  # one series per GPU of the pod
    assert len(series(got, "gputop_process_owner_gpu_memory_bytes")) == 3  # --max-jobs
    wide = ExportState(with_jobs=True)
    for _ in range(2):
        wide.on_snapshot(with_owners(source.snapshot()))
    everything = parse(generate_latest(make_registry(wide)).decode())
    assert series(everything, "gputop_process_owner_gpu_memory_bytes", slurm_job="81234")
    docker = series(everything, "gputop_process_owner_gpu_memory_bytes", container="9c0ffee19c0f")
    assert docker and all(dict(k)["pod"] == "" for k in docker)
    # a process nobody owns is in no owner series
    assert not series(everything, "gputop_process_owner_gpu_memory_bytes", gpu="3")
