"""The exporter's families for what is inside utilization (issue 30, section 4): GPM
activity and NVLink, declared in the metric table's rows (one home), a labelled family
(``pipe``, ``direction``) made of several rows, per GPU and per MIG device; n/a is a
missing series, never 0."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from prometheus_client.core import Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as om_latest
from prometheus_client.registry import Collector

from gputop.exporter.encode import OpenMetricsEncoder, TextEncoder
from gputop.exporter.metrics import (
    CONVERSIONS,
    GPU_LABELLED,
    METRICS,
    MIG_PARTS,
    Totals,
    build,
    mig_name,
)
from gputop.model import (
    GPU_METRICS,
    Activity,
    DriverInfo,
    GpuMemory,
    GpuSample,
    HostSample,
    MigDevice,
    Snapshot,
)
from tests import builders as fx
from tests.helpers.exporter import parse, series

#: The names the issue asks for, with the label that tells a family's rows apart.
ISSUE_FAMILIES = {
    "gputop_gpu_sm_active_ratio": ("gpu",),
    "gputop_gpu_sm_occupancy_ratio": ("gpu",),
    "gputop_gpu_tensor_active_ratio": ("gpu",),
    "gputop_gpu_dram_active_ratio": ("gpu",),
    "gputop_gpu_pipe_active_ratio": ("gpu", "pipe"),
    "gputop_gpu_nvlink_bytes_per_second": ("gpu", "direction"),
    "gputop_gpu_nvlink_link_max_bytes_per_second": ("gpu",),
}


def _scrape(*gpus: GpuSample) -> str:
    snap = Snapshot(
        time=1000.0,
        hostname="h",
        driver=DriverInfo(available=True, driver_version="550.1"),
        host=HostSample(cpu_count=8),
        gpus=gpus,
    )
    fams = build(snap, {}, (), {}, Totals())

    class One:
        def collect(self) -> list[object]:
            return list(fams)

    return generate_latest(One()).decode()  # type: ignore[arg-type]


def test_the_issue_families_are_exported_under_these_exact_names_and_labels() -> None:
    defs = {m.name: m for m in METRICS}
    for name, labels in ISSUE_FAMILIES.items():
        assert name in defs, name
        assert (defs[name].type, defs[name].labels) == ("gauge", labels), name
    assert {
        m.export_label[1] for m in GPU_LABELLED["gputop_gpu_pipe_active_ratio"] if m.export_label
    } == {"fp64", "fp32", "fp16"}


def test_a_labelled_family_is_rows_of_the_table_with_one_unit_and_one_label() -> None:
    """Each row that shares a family says its label value; the rows agree on the unit and
    the label's name, and no two give the same value."""
    assert GPU_LABELLED  # the facility is used
    for name, rows in GPU_LABELLED.items():
        assert len(rows) >= 2, name
        assert len({(m.export_unit, m.unit) for m in rows}) == 1, name
        labels = [m.export_label for m in rows]
        assert all(lab is not None for lab in labels)
        assert len({lab[0] for lab in labels if lab}) == 1, name
        assert len({lab[1] for lab in labels if lab}) == len(rows), name
    # A name is a labelled family or a row's own gauge, never both.
    own = [m.export for m in GPU_METRICS if m.export and m.export_label is None]
    assert not set(own) & set(GPU_LABELLED)
    # GPM's percent becomes a ratio; NVLink's bytes/s stay.
    for m in GPU_METRICS:
        if m.export and m.field.startswith(("activity.", "nvlink.")):
            assert m.unit == m.export_unit or (m.unit, m.export_unit) in CONVERSIONS, m.field


def test_activity_and_nvlink_are_exported_in_base_units() -> None:
    samples = parse(_scrape(fx.with_inside(fx.full_gpu_sample(2))))
    one = frozenset({("gpu", "2")})
    assert series(samples, "gputop_gpu_sm_active_ratio") == {one: 0.45}
    assert series(samples, "gputop_gpu_sm_occupancy_ratio") == {one: 0.2}
    assert series(samples, "gputop_gpu_tensor_active_ratio") == {one: 0.3}
    assert series(samples, "gputop_gpu_dram_active_ratio") == {one: 0.4}
    assert series(samples, "gputop_gpu_pipe_active_ratio") == {
        one | {("pipe", "fp64")}: 0.01,
        one | {("pipe", "fp32")}: 0.1,
        one | {("pipe", "fp16")}: 0.02,
    }
    assert series(samples, "gputop_gpu_nvlink_bytes_per_second") == {
        one | {("direction", "rx")}: 5e10,
        one | {("direction", "tx")}: 6e10,
    }
    assert series(samples, "gputop_gpu_nvlink_link_max_bytes_per_second") == {one: 18 * 25e9}


def test_an_activity_or_nvlink_value_not_given_is_no_series_never_zero() -> None:
    """A GPU without GPM or NVLink has none of the series; a GPU whose FP16 pipe and RX
    are n/a has no series for them, and the others of the same family stay."""
    plain = fx.full_gpu_sample(0)
    partial = fx.with_inside(fx.full_gpu_sample(1))
    partial = dataclasses.replace(
        partial,
        activity=dataclasses.replace(partial.activity, fp16=None, tensor=None),
        nvlink=dataclasses.replace(partial.nvlink, rx_bytes_per_s=None, max_bytes_per_s=None),
    )
    samples = parse(_scrape(plain, partial))
    for name in ISSUE_FAMILIES:
        assert not series(samples, name, gpu="0"), name
    assert not series(samples, "gputop_gpu_tensor_active_ratio")
    assert not series(samples, "gputop_gpu_nvlink_link_max_bytes_per_second")
    pipes = series(samples, "gputop_gpu_pipe_active_ratio", gpu="1")
    assert sorted(dict(k)["pipe"] for k in pipes) == ["fp32", "fp64"]
    links = series(samples, "gputop_gpu_nvlink_bytes_per_second", gpu="1")
    assert [dict(k)["direction"] for k in links] == ["tx"]
    assert 0.0 not in pipes.values() and 0.0 not in links.values()


def test_mig_devices_export_their_gpu_instances_activity_as_mig_memory_is() -> None:
    """As the MIG device's memory (``gputop_gpu_mig_memory_*{gpu, mig}``): the GPU's GPM
    families under ``gputop_gpu_mig_``, per MIG device; n/a is no series."""
    busy = MigDevice(0, "MIG-a", memory=GpuMemory(used=1, total=2), activity=Activity(sm=60.0))
    quiet = MigDevice(1, "MIG-b", activity=Activity(sm=None, fp32=25.0))
    gpu = dataclasses.replace(fx.full_gpu_sample(1, util=None), mig_devices=(busy, quiet))
    samples = parse(_scrape(gpu))
    assert series(samples, "gputop_gpu_mig_sm_active_ratio") == {
        frozenset({("gpu", "1"), ("mig", "0")}): 0.6
    }
    assert series(samples, "gputop_gpu_mig_pipe_active_ratio") == {
        frozenset({("gpu", "1"), ("mig", "1"), ("pipe", "fp32")}): 0.25
    }
    assert not series(samples, "gputop_gpu_sm_active_ratio")  # the GPU's own: n/a
    defs = {m.name for m in METRICS}
    for m in GPU_METRICS:
        if m.export and m.field.partition(".")[0] in MIG_PARTS:
            assert mig_name(m.export) in defs, m.field
    assert not any(n.startswith("gputop_gpu_mig_nvlink") for n in defs)  # links are the GPU's


def test_the_fast_encoders_write_the_new_families_as_prometheus_client_does() -> None:
    """The encoders' byte-for-byte equality with the library (tests/exporter/
    test_exporter_encode.py) holds for labelled families of the table and MIG rows."""
    mig = MigDevice(0, "MIG-a", activity=Activity(sm=60.0, fp64=3.0))
    gpus = (
        fx.with_inside(fx.full_gpu_sample(0)),
        dataclasses.replace(fx.full_gpu_sample(1), mig_devices=(mig,)),
        fx.full_gpu_sample(2),
    )
    snap = Snapshot(1000.0, "h", DriverInfo(True, driver_version="550.1"), gpus=gpus)
    fams = build(snap, {}, (), {}, Totals())

    class One(Collector):
        def collect(self) -> Iterable[Metric]:
            return list(fams)

    text, om = TextEncoder()(One()), OpenMetricsEncoder()(One())
    assert text == generate_latest(One())
    assert om == om_latest(One())  # type: ignore[no-untyped-call]
    assert b'gputop_gpu_pipe_active_ratio{gpu="0",pipe="fp64"} 0.01\n' in text
    assert b'gputop_gpu_mig_pipe_active_ratio{gpu="1",mig="0",pipe="fp64"} 0.03\n' in text


def test_the_grafana_board_shows_sm_tensor_dram_pipes_and_nvlink_against_capacity() -> None:
    """Each new family has a panel, and NVLink's traffic sits with its capacity."""
    import json

    from tests.helpers.exporter import DASHBOARD

    board = json.loads(DASHBOARD.read_text())
    panels = {p["title"]: " ".join(t["expr"] for t in p["targets"]) for p in board["panels"]}
    wanted = {
        "sm active": ("gputop_gpu_sm_active_ratio", "gputop_gpu_utilization_ratio"),
        "tensor": ("gputop_gpu_tensor_active_ratio",),
        "dram": ("gputop_gpu_dram_active_ratio",),
        "pipes": ("gputop_gpu_pipe_active_ratio",),
        "nvlink": (
            "gputop_gpu_nvlink_bytes_per_second",
            "gputop_gpu_nvlink_link_max_bytes_per_second",
        ),
    }
    for subject, names in wanted.items():
        exprs = [e for title, e in panels.items() if subject in title.lower()]
        assert exprs, subject
        assert any(all(n in e for n in names) for e in exprs), subject
    mig = [e for title, e in panels.items() if "mig" in title.lower()]
    assert any("gputop_gpu_mig_sm_active_ratio" in e for e in mig)
