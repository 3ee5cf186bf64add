"""``gputop fleet --prometheus`` reads what is inside utilization (issue 30, section 4):
the exporter's GPM activity and NVLink gauges become each host's ``activity`` and
``nvlink``, so the host's dashboard shows them. The gauge names, labels and units come
from the metric table (one home), and each value is checked by type, shape and range as
every other remote value: a bad label is that series' problem, a value out of range is
n/a with an error. The fuzz test is seeded (GPUTOP_FUZZ_SEED=<seed> replays it)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from gputop.exporter.metrics import CONVERSIONS, Totals, build
from gputop.model import GPU_METRICS, DriverInfo, GpuSample, HostSample, Snapshot
from gputop.sources.prometheus import (
    FROM_EXPORTED,
    INSIDE,
    INSIDE_PARTS,
    KNOWN_METRICS,
    PrometheusFleet,
    build_hosts,
)
from gputop.sources.remote import parse_line, to_snapshot
from tests import builders as fx
from tests.helpers import exporter as helpers

HOST = "node:9867"


def scraped(*gpus: GpuSample) -> list[dict[str, Any]]:
    """The exporter's families of ``gpus`` as Prometheus's instant query gives them."""
    now = time.time()
    snap = Snapshot(now, "h", DriverInfo(True, driver_version="550.1"), HostSample(), gpus=gpus)
    out = []
    for fam in build(snap, {}, (), {}, Totals()):
        for labels, value in fam.series:  # type: ignore[attr-defined]
            metric = {"__name__": fam.sample_name, "instance": HOST}  # type: ignore[attr-defined]
            metric.update(zip(fam.labelnames, labels, strict=True))  # type: ignore[attr-defined]
            out.append({"metric": metric, "value": [now, repr(float(value))]})
    return [s for s in out if s["metric"]["__name__"] in KNOWN_METRICS]


def host_snapshot(series: list[dict[str, Any]]) -> Snapshot:
    hosts, _ = build_hosts(series)
    return to_snapshot(parse_line(json.dumps(hosts[HOST])))


def test_the_exporters_gpm_and_nvlink_gauges_come_back_as_the_gpus_values() -> None:
    """exporter -> Prometheus -> fleet: every activity and NVLink value of the table's
    exported rows arrives as it left (percent back from the ratio), per GPU."""
    sent = [fx.with_inside(fx.full_gpu_sample(0)), fx.with_inside(fx.full_gpu_sample(3), sm=7.0)]
    snap = host_snapshot(scraped(*sent))
    assert snap.errors == ()
    got = {g.index: g for g in snap.gpus}
    assert sorted(got) == [0, 3]
    rows = [m for m in GPU_METRICS if m.export and m.field.partition(".")[0] in INSIDE_PARTS]
    assert len(rows) == len(INSIDE) == 10
    for g in sent:
        for m in rows:
            assert m.get(got[g.index]) == pytest.approx(m.get(g)), (g.index, m.field)
    assert got[3].activity.sm == pytest.approx(7.0)


def test_a_gpu_without_gpm_or_nvlink_has_them_na_never_zero() -> None:
    snap = host_snapshot(scraped(fx.full_gpu_sample(0)))
    (g,) = snap.gpus
    assert g.activity == type(g.activity)() and g.nvlink == type(g.nvlink)()
    assert json.loads(json.dumps(snap.to_dict()))["gpus"][0].get("activity") is None


def test_conversions_back_from_the_exported_unit_are_the_exporters_inverse() -> None:
    for key, factor in FROM_EXPORTED.items():
        for x in (0.0, 12.5, 100.0):
            assert CONVERSIONS[key](x) * factor == pytest.approx(x)
    for (_name, _label), (_part, _key, factor) in INSIDE.items():
        assert factor in (1.0, *FROM_EXPORTED.values())


def _one(name: str, value: str, **labels: Any) -> dict[str, Any]:
    return {"metric": {"__name__": name, "instance": HOST, **labels}, "value": [time.time(), value]}


BASE = [
    _one("up", "1"),
    _one("gputop_gpu_utilization_ratio", "0.9", gpu="0"),
]


@pytest.mark.parametrize("label", ["fp8", "", "FP64", 7, None, "fp64 ", "x" * 5000])
def test_a_pipe_label_the_exporter_does_not_write_is_that_series_problem(label: Any) -> None:
    bad = _one("gputop_gpu_pipe_active_ratio", "0.5", gpu="0", pipe=label)
    good = _one("gputop_gpu_pipe_active_ratio", "0.25", gpu="0", pipe="fp32")
    hosts, _ = build_hosts([*BASE, bad, good])
    (said,) = hosts[HOST]["errors"]
    assert "pipe label" in said["message"] and said["metric"] == "gputop_gpu_pipe_active_ratio"
    assert len(said["message"]) < 200
    snap = to_snapshot(parse_line(json.dumps(hosts[HOST])))
    assert snap.gpus[0].activity.fp32 == pytest.approx(25.0)
    assert snap.gpus[0].activity.fp64 is None and snap.gpus[0].utilization.gpu == 90.0


def test_a_direction_missing_is_skipped_and_said() -> None:
    bad = _one("gputop_gpu_nvlink_bytes_per_second", "1e9", gpu="0")
    hosts, _ = build_hosts([*BASE, bad])
    (said,) = hosts[HOST]["errors"]
    assert "direction label None" in said["message"]


@pytest.mark.parametrize(
    ("name", "value", "labels", "field"),
    [
        ("gputop_gpu_sm_active_ratio", "1.5", {}, "activity.sm"),  # 150 %
        ("gputop_gpu_tensor_active_ratio", "-0.01", {}, "activity.tensor"),
        ("gputop_gpu_pipe_active_ratio", "1e300", {"pipe": "fp16"}, "activity.fp16"),
        ("gputop_gpu_nvlink_bytes_per_second", "-1", {"direction": "tx"}, "nvlink.tx_bytes_per_s"),
        ("gputop_gpu_nvlink_link_max_bytes_per_second", "1e20", {}, "nvlink.max_bytes_per_s"),
    ],
)
def test_a_value_out_of_range_is_na_with_an_error(
    name: str, value: str, labels: dict[str, str], field: str
) -> None:
    snap = host_snapshot([*BASE, _one(name, value, gpu="0", **labels)])
    (g,) = snap.gpus
    assert next(m for m in GPU_METRICS if m.field == field).get(g) is None
    assert g.utilization.gpu == 90.0  # the rest of the GPU stays
    assert any(e.metric == field for e in snap.errors), snap.errors


def test_nan_and_inf_are_skipped_like_every_other_series() -> None:
    skipped: list[Any] = []
    series = [
        *BASE,
        _one("gputop_gpu_dram_active_ratio", "NaN", gpu="0"),
        _one("gputop_gpu_nvlink_bytes_per_second", "+Inf", gpu="0", direction="rx"),
    ]
    hosts, _ = build_hosts(series, skipped)
    assert len(skipped) == 2
    snap = to_snapshot(parse_line(json.dumps(hosts[HOST])))
    assert snap.gpus[0].activity.dram is None and snap.gpus[0].nvlink.rx_bytes_per_s is None


INSIDE_NAMES = sorted({name for name, _ in INSIDE})
values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-(2**70), 2**70).map(str),
    st.text(max_size=30),
)
labels = st.one_of(
    st.sampled_from(["fp64", "fp32", "fp16", "rx", "tx"]),
    st.text(max_size=10),
    st.none(),
    st.integers(),
    st.lists(st.integers(), max_size=2),
)


def test_fuzz_inside_series_never_break_the_host_and_stay_in_range(fuzz_seed: int) -> None:
    """Seeded: GPUTOP_FUZZ_SEED replays it."""

    @seed(fuzz_seed)
    @settings(max_examples=300, deadline=None, database=None, print_blob=True)
    @given(
        st.lists(
            st.tuples(st.sampled_from(INSIDE_NAMES), values, labels, labels, st.sampled_from("01")),
            max_size=12,
        )
    )
    def one(rows: list[tuple[str, str, Any, Any, str]]) -> None:
        series = [*BASE]
        for name, value, pipe, direction, gpu in rows:
            series.append(_one(name, value, gpu=gpu, pipe=pipe, direction=direction))
        hosts, _ = build_hosts(series)
        snap = to_snapshot(parse_line(json.dumps(hosts[HOST])))
        for g in snap.gpus:
            for m in GPU_METRICS:
                v = m.get(g)
                if v is not None and m.bounds is not None:
                    assert isinstance(v, int | float) and math.isfinite(v)
                    assert m.bounds[0] <= v <= m.bounds[1], (m.field, v)

    one()


def test_a_real_prometheus_brings_a_hoppers_gpm_and_nvlink_to_the_fleet(
    tmp_path: Path, fake_nvml_env: Any
) -> None:
    """gputop export on the fake NVML (an H100 with GPM and NVLink, one GPU without),
    scraped by a real Prometheus, read by the fleet: the host's snapshot (what its
    dashboard shows) and its history carry the values of --once --json."""
    from tests.fakenvml import FakeGpu, Scenario, hopper
    from tests.lifecycle_harness import need

    need("prometheus")
    env = fake_nvml_env(Scenario(gpus=[hopper(0, 2), hopper(1, 2), FakeGpu()]), tmp_path / "s")
    with (
        helpers.exporter(["--interval", "0.5"], env=env, tmp=tmp_path) as exp,
        helpers.prometheus([exp.url.split("//", 1)[1]], tmp_path) as prom,
    ):
        prom.wait_for("gputop_gpu_nvlink_link_max_bytes_per_second")
        prom.wait_for("gputop_gpu_pipe_active_ratio")
        target = exp.url.split("//", 1)[1]
        fleet = PrometheusFleet(prom.url, interval=1.0)
        fleet.poll()
        view = fleet.view(target)
        assert view.data is not None and view.data["errors"] == []
        gpus = {g.index: g for g in to_snapshot(view.data).gpus}
        for index in (0, 1):
            g = gpus[index]
            assert g.activity.sm == pytest.approx(45.0) and g.activity.fp16 == pytest.approx(2.0)
            assert g.nvlink.rx_bytes_per_s == pytest.approx(1024 * 2**20)
            assert g.nvlink.max_bytes_per_s == pytest.approx(18 * 25e9)
        assert gpus[2].activity.sm is None and gpus[2].nvlink.max_bytes_per_s is None
        history = fleet.history(target, seconds=60)
        assert history and history[-1]["gpus"][0]["activity"]["sm"] == pytest.approx(45.0)
