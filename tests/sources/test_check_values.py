"""Untrusted numbers checked by value (issue 21, items 1, 2 and 11): one check
(``model.check_values``) for a remote line and a decoded recording, with the driver's
bounds; real cards' values pass, every number out of range is n/a with an error."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputop.model import (
    GPU_METRICS,
    LIMITS,
    Clocks,
    GpuMemory,
    GpuProcess,
    GpuSample,
    HostSample,
    Pcie,
    SampleError,
    Snapshot,
    Utilization,
    check_values,
)
from gputop.sources.nvml import check_gpus
from gputop.sources.remote import LineError, parse_line, summarize, to_snapshot
from tests.builders import demo_host_lines

MiB = 2**20


def card(name: str, **values: Any) -> GpuSample:
    """A GPU as its spec sheet and nvidia-smi -q give it (max clocks, limit, memory, link)."""
    memory = GpuMemory(total=values.pop("mib") * MiB, used=512 * MiB, free=None)
    clocks = Clocks(
        sm_mhz=values["sm"],
        memory_mhz=values["mem"],
        sm_max_mhz=values["sm"],
        memory_max_mhz=values["mem"],
    )
    gen = values.get("gen")
    return GpuSample(
        index=0,
        name=name,
        memory=memory,
        clocks=clocks,
        power_w=values.get("watts"),
        power_limit_w=values.get("watts"),
        temperature_c=values.get("temp", 80.0),
        pcie=Pcie(gen=gen, max_gen=gen, width=gen and 16, max_width=gen and 16),
    )


# Maximum clocks as nvidia-smi -q reports them (memory: half the per-pin data rate), the
# board's power limit, its memory and link, from each card's datasheet.
REAL_CARDS = [
    card("NVIDIA GeForce RTX 4090", sm=3120, mem=10501, watts=600.0, mib=24564, gen=4),
    card("NVIDIA GeForce RTX 5090", sm=3090, mem=14001, watts=575.0, mib=32607, gen=5),
    card("NVIDIA H100 80GB HBM3", sm=1980, mem=2619, watts=700.0, mib=81559, gen=5),
    card("NVIDIA H200", sm=1980, mem=3201, watts=700.0, mib=143771, gen=5),
    card("NVIDIA B200", sm=1965, mem=3996, watts=1000.0, mib=183359, gen=6),
    card("NVIDIA GB200", sm=2062, mem=3996, watts=1200.0, mib=189471, gen=6),
    card("NVIDIA A100-SXM4-80GB", sm=1410, mem=1593, watts=400.0, mib=81920, gen=4),
    card("Tesla T4", sm=1590, mem=5001, watts=70.0, mib=15360, gen=3),
    card("Orin (nvgpu)", sm=1300, mem=3199, mib=62841, temp=95.0),  # Jetson: no power, no PCIe
]


@pytest.mark.parametrize("gpu", REAL_CARDS, ids=lambda g: g.name)
def test_real_cards_values_are_all_admitted(gpu: GpuSample) -> None:
    errors: list[SampleError] = []
    (checked,) = check_gpus([gpu], errors)
    assert errors == [] and checked is gpu


def test_the_bounds_keep_headroom_above_the_real_cards() -> None:
    for m in GPU_METRICS:
        if m.bounds is None or m.unit not in ("MHz", "W", "bytes"):
            continue
        top = max((v for g in REAL_CARDS if (v := m.get(g)) is not None), default=None)
        if top is not None:
            assert m.bounds[1] >= 2 * top, m.field


def remote(data: dict[str, Any]) -> Snapshot:
    return to_snapshot(parse_line(json.dumps(data)))


@pytest.fixture(scope="module")
def line() -> dict[str, Any]:
    """A demo line holding a row of every kind LIMITS names: MIG devices and an error too."""
    data = demo_host_lines(3, 2, mig=True)[-1]
    data["errors"].append({"source": "nvml", "message": "x", "gpu": 0, "metric": "power"})
    if not any(p.get("probe") for p in data["processes"]):  # a probe (issue 31), with CUDA
        data["processes"][0]["probe"] = {
            "time": data["time"] - 1.0,
            "window_seconds": 20.0,
            "steps": 64,
            "data_wait_ratio": 0.42,
            "step_seconds": 0.31,
            "batches_per_second": 3.2,
            "memory": [{"device": 0, "allocated": 2**30, "reserved": 3 * 2**30, "peak": 2**31}],
        }
    return data


def test_the_issues_remote_values_become_na_with_an_error_each(line: dict[str, Any]) -> None:
    data = json.loads(json.dumps(line))
    data["gpus"][0]["utilization"]["gpu"] = 1e308
    data["host"]["load_average"] = [10.0**120, 1.0, 1.0]
    data["gpus"][1]["memory"].update(used=2**63 - 1, total=1)
    data["gpus"][2]["index"] = -1
    data["processes"][0]["pid"] = -7
    data["tick_seconds"] = 1e308
    snap = remote(data)
    assert snap.gpus[0].utilization.gpu is None
    assert snap.host is not None and snap.host.load_average is None
    assert snap.gpus[1].memory.used is None and snap.gpus[1].memory.total is None
    assert [g.index for g in snap.gpus] == [0, 1, *range(3, len(line["gpus"]))]
    assert (
        all(p.pid >= 0 for p in snap.processes)
        and len(snap.processes) == len(line["processes"]) - 1
    )
    assert snap.tick_seconds is None
    said = {e.metric: e.message for e in snap.errors if e.source == "remote"}
    assert said["utilization.gpu"] == (
        "GPU 0: the remote host reported utilization.gpu = 1e+308, outside 0-100 %: shown as n/a"
    )
    assert "left out" in said["gpus.index"] and "left out" in said["processes.pid"]
    assert {"host.load_average", "memory.used", "memory.total", "tick_seconds"} <= set(said)
    # The fleet row reads the same bounds.
    row = summarize(parse_line(json.dumps(data)))
    assert row.gpus[0].util is None and row.gpus[1].mem_total is None and row.gpus[2].index == 2


@pytest.mark.parametrize("time", ["1e999", "-1e999", "NaN", "-5", "1e300"])
def test_a_line_with_an_impossible_time_is_refused(time: str) -> None:
    with pytest.raises(LineError, match="time"):
        parse_line('{"schema":1,"time":' + time + ',"gpus":[]}')


def test_a_sane_line_is_unchanged(line: dict[str, Any]) -> None:
    snap = Snapshot.from_dict(line)
    assert remote(line) == snap
    assert check_values(snap, "replay", "the recording") is snap


@pytest.mark.parametrize("key", sorted(LIMITS, key=lambda k: (k[0].__name__, k[1])), ids=str)
def test_every_limit_turns_a_value_beyond_it_into_na(
    key: tuple[type, str], line: dict[str, Any]
) -> None:
    """For each (class, field) of LIMITS: a value past its top, NaN and inf are refused."""
    cls, name = key
    snap = Snapshot.from_dict(line)
    low, high, _ = LIMITS[key]
    for bad in (high * 2 + 1, -1 if low == 0 else low / 2, math.nan, math.inf):
        made = _set_first(snap, cls, name, bad)
        assert made is not None, f"the line has no {cls.__name__}"
        if cls is Snapshot and name == "time":
            with pytest.raises(ValueError, match="time"):
                check_values(made, "replay", "the recording")
            continue
        out = check_values(made, "replay", "the recording")
        assert out.errors[len(made.errors) :], (key, bad)
        assert bad not in _values(out, cls, name), (key, bad)


def _set_first(obj: Any, cls: type, name: str, value: Any) -> Any:
    """``obj`` with the first ``cls`` object's ``name`` set to ``value`` (a tuple field: its
    first item); None when there is none."""
    if type(obj) is cls:
        old = getattr(obj, name)
        new = (value, *old[1:]) if isinstance(old, tuple) and old else value
        if isinstance(old, tuple) and not old:
            new = (value,)
        return dataclasses.replace(obj, **{name: new})
    if dataclasses.is_dataclass(obj):
        for f in dataclasses.fields(obj):
            child = getattr(obj, f.name)
            made = _set_first(child, cls, name, value)
            if made is not None:
                return dataclasses.replace(obj, **{f.name: made})
    if isinstance(obj, tuple):
        for i, child in enumerate(obj):
            made = _set_first(child, cls, name, value)
            if made is not None:
                return (*obj[:i], made, *obj[i + 1 :])
    return None


def _values(obj: Any, cls: type, name: str) -> list[Any]:
    if type(obj) is cls:
        v = getattr(obj, name)
        return list(v) if isinstance(v, tuple) else [v]
    if dataclasses.is_dataclass(obj):
        return [
            x for f in dataclasses.fields(obj) for x in _values(getattr(obj, f.name), cls, name)
        ]
    if isinstance(obj, tuple):
        return [x for child in obj for x in _values(child, cls, name)]
    return []


def test_host_sample_tuples_of_the_wrong_kind_are_na() -> None:
    snap = Snapshot(
        time=1.0,
        hostname="h",
        driver=Snapshot.from_dict(
            {"time": 1, "hostname": "h", "driver": {"available": False}}
        ).driver,
        host=HostSample(load_average=5, cpu_per_core=(1.0, float("nan"))),  # type: ignore[arg-type]
    )
    out = check_values(snap, "replay", "the recording")
    assert out.host is not None and out.host.load_average is None and out.host.cpu_per_core == ()


_ANY_NUMBER = st.one_of(
    st.none(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, 15, 16, 100, 101, 2**64 - 1, 2**64, -1, True]),
)


@st.composite
def _samples(draw: st.DrawFn) -> GpuSample:
    """A GPU as a broken driver could give it: any number in any numeric field."""

    def num() -> Any:
        return draw(_ANY_NUMBER)

    rows = tuple(
        GpuProcess(
            pid=draw(st.sampled_from([0, 1, 4242, 2**32 - 1])), gpu_memory=num(), sm_percent=num()
        )
        for _ in range(draw(st.integers(0, 3)))
    )
    return GpuSample(
        index=draw(st.integers(0, 3)),
        memory=GpuMemory(total=num(), used=num(), free=num(), reserved=num()),
        utilization=Utilization(gpu=num(), memory=num()),
        temperature_c=num(),
        power_w=num(),
        fan_percent=num(),
        performance_state=num(),
        clocks=Clocks(sm_mhz=num(), memory_mhz=num(), sm_max_mhz=num()),
        pcie=Pcie(gen=num(), width=num(), tx_bytes_per_s=num()),
        ecc_uncorrected=num(),
        processes=rows,
    )


@settings(derandomize=True, max_examples=300, deadline=None)
@given(_samples())
def test_the_check_finds_what_it_gave_out_whole(sample: GpuSample) -> None:
    """What the NVML reader's check passes without a walk (the last read's sample and
    parts, ``check_gpu``'s ``given``) is what the check gave out: checked again, it is
    whole, the same object, without an error."""
    errors: list[SampleError] = []
    (made,) = check_gpus([sample], errors)
    again: list[SampleError] = []
    (twice,) = check_gpus([made], again)
    assert again == [] and twice is made
