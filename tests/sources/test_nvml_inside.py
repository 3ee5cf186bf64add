"""GPM activity and NVLink through the real pynvml against the fake libnvidia-ml.so.1
(issue 30): two GPM samples per metric, at least GPM_MIN_S apart; NVLink links, version,
far ends, throughput (GPM, else the cumulative KiB counters turned into a rate) and
capacity; n/a said once where GPM is absent; the parts in JSON, checked decoding and
recordings."""

from __future__ import annotations

import ctypes
import json
import math
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pynvml
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from gputop.model import Activity, DriverInfo, Nvlink, Snapshot
from gputop.record import codec
from gputop.sources.nvml import (
    GPM_MIN_S,
    GPM_PAIR_WINDOW_S,
    NvmlReader,
    counter_rate,
    same_bus,
)
from tests import builders as fx
from tests import fakenvml
from tests.fakenvml import HOPPER_GPM, FakeGpu, FakeLink, FakeMig, FakeNvml, Scenario, hopper
from tests.helpers.clock import clocked_reader
from tests.helpers.fuzz import SEED

HOPPER_ACTIVITY = Activity(sm=45.0, sm_occupancy=20.0, tensor=30.0, dram=40.0, fp64=1.0,
                           fp32=10.0, fp16=2.0)  # fmt: skip
MIB = 2**20
ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------- GPM


def test_gpm_metrics_come_from_the_previous_and_the_current_sample(
    fake_nvml: FakeNvml, made: list[NvmlReader]
) -> None:
    r, clock = clocked_reader(fake_nvml, made, Scenario(gpus=[hopper(0, links=0), FakeGpu()]))
    (first, plain), errors = r.read()
    assert first.activity == Activity() and errors == ()  # one sample: nothing yet
    clock.now += 0.5
    (second, plain), errors = r.read()
    assert second.activity == HOPPER_ACTIVITY
    assert plain.activity == Activity() and plain.nvlink == Nvlink()  # no GPM, no NVLink
    assert errors == ()
    # in the JSON: the H100's parts; the other GPU's document is as before they existed
    doc = Snapshot(0.0, "h", DriverInfo(True), gpus=(second, plain)).to_dict()
    assert doc["gpus"][0]["activity"]["sm"] == 45.0 and doc["gpus"][0]["activity"]["fp16"] == 2.0
    assert "activity" not in doc["gpus"][1] and "nvlink" not in doc["gpus"][1]


def test_samples_closer_than_gpm_needs_give_na_and_keep_the_older_sample(
    fake_nvml: FakeNvml, made: list[NvmlReader]
) -> None:
    r, clock = clocked_reader(fake_nvml, made, Scenario(gpus=[hopper(0, links=0)]))
    r.read()
    clock.now += GPM_MIN_S / 2
    (gpu,), _ = r.read()
    assert gpu.activity == Activity()  # too soon: n/a, not a value from a short window
    clock.now += GPM_MIN_S
    (gpu,), _ = r.read()
    assert gpu.activity == HOPPER_ACTIVITY  # the first sample was kept


def test_without_gpm_the_metrics_are_na_silently_and_never_asked(
    fake_nvml: FakeNvml, made: list[NvmlReader]
) -> None:
    # an A100 (the support query answers NOT_SUPPORTED) and a GPU that says "not a GPM
    # device", neither with NVLink: a GPM sample or field-value call would fail loudly if
    # it were made
    gpus = [FakeGpu(), FakeGpu(gpm=False)]
    for g in gpus:
        g.errors = {
            "nvmlGpmSampleGet": "UNKNOWN",
            "nvmlGpmSampleAlloc": "UNKNOWN",
            "nvmlGpmMetricsGet": "UNKNOWN",
            "nvmlDeviceGetFieldValues": "UNKNOWN",
        }
    r, clock = clocked_reader(fake_nvml, made, Scenario(gpus=gpus))
    for _ in range(3):
        samples, errors = r.read()
        clock.now += 1.0
        assert errors == ()
        assert all(g.activity == Activity() for g in samples)


def test_no_permission_on_samples_is_said_once(fake_nvml: FakeNvml, made: list[NvmlReader]) -> None:
    gpu = hopper(0, links=0, errors={"nvmlGpmSampleGet": "NO_PERMISSION"})
    r, clock = clocked_reader(fake_nvml, made, Scenario(gpus=[gpu]))
    (g,), errors = r.read()
    assert g.activity == Activity()
    (error,) = errors
    assert error.metric == "gpm" and "no permission" in error.message
    for _ in range(3):
        clock.now += 1.0
        (g,), errors = r.read()
        assert errors == () and g.activity == Activity()


def test_a_metric_the_gpu_lacks_is_na_in_its_own_slot(
    fake_nvml: FakeNvml, made: list[NvmlReader]
) -> None:
    gpu = hopper(0, links=0, gpm_metrics={**HOPPER_GPM, 5: None, 13: None})
    r, clock = clocked_reader(fake_nvml, made, Scenario(gpus=[gpu]))
    r.read()
    for _ in range(2):
        clock.now += 1.0
        (g,), errors = r.read()
        assert errors == ()
        assert g.activity.tensor is None and g.activity.fp16 is None
        assert g.activity.sm == 45.0 and g.activity.fp32 == 10.0


@pytest.mark.parametrize("value", ["nan", "150", "-3"])
def test_an_impossible_gpm_value_is_na_with_an_error(
    fake_nvml: FakeNvml, made: list[NvmlReader], value: str
) -> None:
    gpu = hopper(0, links=0, gpm_metrics={**HOPPER_GPM, 2: float(value)})
    r, clock = clocked_reader(fake_nvml, made, Scenario(gpus=[gpu]))
    r.read()
    clock.now += 1.0
    (g,), errors = r.read()
    assert g.activity.sm is None and g.activity.tensor == 30.0
    (error,) = errors
    assert error.metric == "activity.sm" and "outside 0-100" in error.message


def test_the_fake_refuses_more_metrics_than_the_array_holds(nvml_session: None) -> None:
    """What makes the next test mean something: an over-long request is refused."""
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    first, second = pynvml.nvmlGpmSampleAlloc(), pynvml.nvmlGpmSampleAlloc()
    try:
        pynvml.nvmlGpmSampleGet(handle, first)
        pynvml.nvmlGpmSampleGet(handle, second)
        request = pynvml.c_nvmlGpmMetricsGet_t()
        request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
        request.sample1, request.sample2 = first, second
        for n, expect in ((len(request.metrics) + 1, "INVALID_ARGUMENT"), (5, "INVALID_ARGUMENT")):
            request.numMetrics = n
            with pytest.raises(pynvml.NVMLError) as caught:
                pynvml.nvmlGpmMetricsGet(request)
            assert caught.value.value == getattr(pynvml, f"NVML_ERROR_{expect}")
        request.numMetrics = 4
        request.version = 2
        with pytest.raises(pynvml.NVMLError_ArgumentVersionMismatch):
            pynvml.nvmlGpmMetricsGet(request)
    finally:
        pynvml.nvmlGpmSampleFree(first)
        pynvml.nvmlGpmSampleFree(second)


@pytest.fixture
def nvml_session(fake_nvml: FakeNvml) -> Iterator[None]:
    fake_nvml.write(Scenario(gpus=[hopper(0, links=0, gpm_slots=4)]))
    pynvml.nvmlInit()
    try:
        yield
    finally:
        pynvml.nvmlShutdown()


def test_requests_never_exceed_the_bindings_metrics_array(
    fake_nvml: FakeNvml, made: list[NvmlReader], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A binding whose metrics[] holds 4 (the driver refuses more): the reader asks in
    requests of 4, and every metric still comes right."""

    class Short(ctypes.Structure):
        _fields_ = [
            ("version", ctypes.c_uint),
            ("numMetrics", ctypes.c_uint),
            ("sample1", pynvml.c_nvmlGpmSample_t),
            ("sample2", pynvml.c_nvmlGpmSample_t),
            ("metrics", pynvml.c_nvmlGpmMetric_t * 4),
        ]

    monkeypatch.setattr(pynvml, "c_nvmlGpmMetricsGet_t", Short)
    r, clock = clocked_reader(fake_nvml, made, Scenario(gpus=[hopper(0, links=0, gpm_slots=4)]))
    r.read()
    clock.now += 1.0
    (g,), errors = r.read()
    assert errors == ()
    assert g.activity == HOPPER_ACTIVITY


def test_gpm_samples_are_freed(fake_nvml: FakeNvml, made: list[NvmlReader]) -> None:
    """Two samples per GPU at most, each freed once: a double free answers
    INVALID_ARGUMENT, which close() would swallow, so count the calls instead."""
    r, clock = clocked_reader(fake_nvml, made, Scenario(gpus=[hopper(0, links=0)]))
    allocs: list[object] = []
    frees: list[object] = []
    real_alloc, real_free = pynvml.nvmlGpmSampleAlloc, pynvml.nvmlGpmSampleFree

    def alloc() -> object:
        allocs.append(real_alloc())
        return allocs[-1]

    def free(sample: object) -> None:
        frees.append(sample)
        real_free(sample)

    mp = pytest.MonkeyPatch()
    mp.setattr(pynvml, "nvmlGpmSampleAlloc", alloc)
    mp.setattr(pynvml, "nvmlGpmSampleFree", free)
    try:
        for _ in range(5):
            r.read()
            clock.now += 1.0
        assert len(allocs) == 2  # the previous and the current, swapped
        r.close()
        assert sorted(map(id, frees)) == sorted(map(id, allocs))
    finally:
        mp.undo()


# ---------------------------------------------------------------------------- NVLink


def test_nvlink_links_version_peers_capacity_and_gpm_throughput(
    fake_nvml: FakeNvml, made: list[NvmlReader]
) -> None:
    r, clock = clocked_reader(
        fake_nvml, made, Scenario(gpus=[hopper(0, 2, links=4), hopper(1, 2, links=4)])
    )
    (a, b), errors = r.read()
    assert errors == ()
    assert a.nvlink.links == 4 and a.nvlink.version == "4.0"
    assert a.nvlink.max_bytes_per_s == 4 * 25e9
    assert a.nvlink.peers == ("GPU 1",) * 4 and b.nvlink.peers == ("GPU 0",) * 4
    assert a.nvlink.rx_bytes_per_s is None  # one sample, one counter reading: no rate yet
    clock.now += 0.5
    (a, b), errors = r.read()
    assert a.nvlink.rx_bytes_per_s == 1024 * MIB  # GPM 60, MiB/s
    assert a.nvlink.tx_bytes_per_s == 2048 * MIB  # GPM 61


def test_nvlink_far_ends_are_matched_once_not_every_tick(
    fake_nvml: FakeNvml, made: list[NvmlReader], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Matching each link's bus id against every GPU per tick cost more than all the GPM
    and NVLink reads together at 16 GPUs x 18 links (bench/bench_sampler.py --gpm)."""
    import gputop.sources.nvml as nvml_module

    calls: list[tuple[str | None, str | None]] = []

    def counted(a: str | None, b: str | None) -> bool:
        calls.append((a, b))
        return same_bus(a, b)

    monkeypatch.setattr(nvml_module, "same_bus", counted)
    r, clock = clocked_reader(
        fake_nvml, made, Scenario(gpus=[hopper(0, 2, links=4), hopper(1, 2, links=4)])
    )
    (a, b), _ = r.read()
    assert a.nvlink.peers == ("GPU 1",) * 4 and b.nvlink.peers == ("GPU 0",) * 4
    assert calls  # worked out on the first reading
    calls.clear()
    for _ in range(3):
        clock.now += 1.0
        (a, b), errors = r.read()
        assert errors == ()
        assert a.nvlink.peers == ("GPU 1",) * 4 and b.nvlink.peers == ("GPU 0",) * 4
    assert calls == []


def test_nvlink_throughput_from_the_counters_without_gpm(
    fake_nvml: FakeNvml, made: list[NvmlReader]
) -> None:
    gpu = hopper(0, links=2, gpm=None)  # an A100-like GPU: NVLink, no GPM
    r, clock = clocked_reader(fake_nvml, made, Scenario(gpus=[gpu]))
    (g,), _ = r.read()
    assert g.activity == Activity() and g.nvlink.peers == ("switch", "switch")
    clock.now += 2.0
    (g,), errors = r.read()
    assert errors == ()
    # 1 GiB TX and 512 MiB RX (in KiB) a read, 2 s apart
    assert g.nvlink.tx_bytes_per_s == 2**30 / 2.0
    assert g.nvlink.rx_bytes_per_s == 2**29 / 2.0


def test_a_counter_that_goes_back_is_na_for_one_tick(
    fake_nvml: FakeNvml, made: list[NvmlReader]
) -> None:
    gpu = hopper(0, links=2, gpm=None, nvlink_kib_start=(10**9, 10**9))
    r, clock = clocked_reader(fake_nvml, made, Scenario(gpus=[gpu]))
    r.read()
    clock.now += 1.0
    (g,), _ = r.read()
    assert g.nvlink.tx_bytes_per_s == 2**30
    # the driver reset its counters (here: the fake reloads them from 0)
    fake_nvml.write(Scenario(gpus=[hopper(0, links=2, gpm=None)]))
    clock.now += 1.0
    (g,), errors = r.read()
    assert g.nvlink.tx_bytes_per_s is None and g.nvlink.rx_bytes_per_s is None
    assert errors == ()
    clock.now += 1.0
    (g,), _ = r.read()
    assert g.nvlink.tx_bytes_per_s == 2**30


def test_a_gpu_without_nvlink_has_an_empty_part(
    fake_nvml: FakeNvml, made: list[NvmlReader]
) -> None:
    r, clock = clocked_reader(fake_nvml, made, Scenario(gpus=[hopper(0, links=0)]))
    r.read()
    clock.now += 1.0
    (g,), _ = r.read()
    assert g.nvlink == Nvlink()  # no rate from GPM 60/61 on a GPU without links


def test_far_ends_a_gpu_a_switch_or_unknown(fake_nvml: FakeNvml, made: list[NvmlReader]) -> None:
    links = [
        FakeLink("0000:19:00.0", 0),  # GPU 1's bus id, written with a 4-digit domain
        FakeLink("00000000:A0:00.0", 2),
        FakeLink("00000000:B0:00.0", 255),
        FakeLink("00000000:19:00.0", 0, active=False),
    ]
    gpu = hopper(0, links=0, nvlinks=links, nvlink_version=7)
    r, _ = clocked_reader(fake_nvml, made, Scenario(gpus=[gpu, FakeGpu()]))
    (g, _other), _ = r.read()
    assert g.nvlink.links == 3 and g.nvlink.version == "5.0"
    assert g.nvlink.max_bytes_per_s == 3 * 50e9
    assert g.nvlink.peers == ("GPU 1", "switch", "unknown")


def test_same_bus() -> None:
    assert same_bus("00000000:19:00.0", "0000:19:00.0")
    assert same_bus("00000000:1A:00.0", "00000000:1a:00.0")
    assert not same_bus("00000000:19:00.0", "00000001:19:00.0")
    assert not same_bus("00000000:19:00.0", None) and not same_bus("", "")


@seed(SEED)
@settings(max_examples=300, deadline=None, database=None, derandomize=False,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(
    before=st.integers(0, 2**64 - 1),
    after=st.integers(0, 2**64 - 1),
    seconds=st.floats(allow_nan=True, allow_infinity=True),
)
def test_counter_rate_never_negative_never_raises(before: int, after: int, seconds: float) -> None:
    """Seeded: GPUTOP_FUZZ_SEED replays it."""
    rate = counter_rate((before, 0.0), (after, seconds), 1024.0)
    if after < before or not 0 < seconds < math.inf:
        assert rate is None
    else:
        assert rate is not None and rate >= 0
    assert counter_rate(None, (after, seconds), 1024.0) is None


# ---------------------------------------------------------------------------- the parts travel


def _inside_snapshot() -> Snapshot:
    return Snapshot(
        1.7e9,
        "h",
        DriverInfo(True),
        gpus=(fx.with_inside(fx.full_gpu_sample(0)), fx.full_gpu_sample(1)),
    )


def test_the_parts_round_trip_through_json_checked_json_and_a_recording() -> None:
    snap = _inside_snapshot()
    assert Snapshot.from_dict(snap.to_dict()) == snap
    assert Snapshot.from_dict(snap.to_dict(), checked=True) == snap
    older = Snapshot(1.7e9 + 1, "h", DriverInfo(True), gpus=(fx.full_gpu_sample(0),))
    rows = [codec.flatten(s) for s in (snap, older, snap)]
    assert codec.decode_snapshots(codec.encode_rows(rows)) == [snap, older, snap]


def test_a_remote_hosts_impossible_nvlink_values_are_na_with_errors() -> None:
    doc = _inside_snapshot().to_dict()
    doc["gpus"][0]["nvlink"]["rx_bytes_per_s"] = 1e300
    doc["gpus"][0]["activity"]["tensor"] = 101
    doc["gpus"][0]["nvlink"]["peers"] = ["GPU 1\x1b[31m", 7]
    got = Snapshot.from_dict(doc, checked=True)
    g = got.gpus[0]
    assert g.nvlink.rx_bytes_per_s is None and g.activity.tensor is None
    assert g.nvlink.tx_bytes_per_s == 6e10 and g.activity.sm == 45.0
    # a list of texts with a number in it is the wrong shape: n/a, said (as every field)
    assert g.nvlink.peers == ()
    said = {e.metric for e in got.errors}
    assert {"nvlink.rx_bytes_per_s", "activity.tensor", "nvlink.peers"} <= said
    doc["gpus"][0]["nvlink"]["peers"] = ["GPU 1\x1b[31m"]  # a text is cleaned
    assert Snapshot.from_dict(doc, checked=True).gpus[0].nvlink.peers == ("GPU 1",)


def test_the_reader_asks_for_a_longer_pair_window_only_with_gpm(
    fake_nvml: FakeNvml, made: list[NvmlReader]
) -> None:
    r, _ = clocked_reader(fake_nvml, made, Scenario(gpus=[FakeGpu()]))
    r.read()
    assert r.min_pair_window_s == 0.0  # today's 0.1 s window, unchanged
    r2, _ = clocked_reader(fake_nvml, made, Scenario(gpus=[FakeGpu(), hopper(1, links=0)]))
    r2.read()
    assert r2.min_pair_window_s == GPM_PAIR_WINDOW_S > GPM_MIN_S


def test_once_json_on_a_hopper_has_activity_and_nvlink(
    fake_nvml_env: Callable[..., dict[str, str]],
) -> None:
    """The real ``--once --json`` (two readings): GPM's two samples are far enough apart."""
    env = fake_nvml_env(Scenario(gpus=[hopper(0, 2, links=4), hopper(1, 2, links=4)]))
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "gputop", "--once", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    g = doc["gpus"][0]
    assert g["activity"] == {"sm": 45.0, "sm_occupancy": 20.0, "tensor": 30.0, "dram": 40.0,
                             "fp64": 1.0, "fp32": 10.0, "fp16": 2.0}  # fmt: skip
    assert g["nvlink"]["links"] == 4 and g["nvlink"]["peers"] == ["GPU 1"] * 4
    assert g["nvlink"]["rx_bytes_per_s"] == 1024 * MIB
    text = subprocess.run(
        [sys.executable, "-m", "gputop", "--once"], env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert text.returncode == 0 and "Traceback" not in text.stderr, text.stderr


def test_mig_gpm_per_gpu_instance(fake_nvml: FakeNvml, made: list[NvmlReader]) -> None:
    """In MIG mode: nvmlGpmMigSampleGet per GPU instance, into each MIG device; the parent
    (no whole-GPU activity in MIG mode, as utilization) stays n/a."""
    migs = [FakeMig(0, 1, 0, "3g.40gb"), FakeMig(1, 2, 0, "3g.40gb")]
    gpu = hopper(0, links=0, mig_mode=(1, 1), util_gpu=None, util_mem=None, migs=migs)
    r, clock = clocked_reader(fake_nvml, made, Scenario(gpus=[gpu]))
    (g,), errors = r.read()
    assert [m.activity for m in g.mig_devices] == [Activity(), Activity()]
    clock.now += 1.0
    (g,), errors = r.read()
    assert errors == ()
    assert g.activity == Activity()
    assert [m.activity for m in g.mig_devices] == [HOPPER_ACTIVITY, HOPPER_ACTIVITY]
    doc = Snapshot(0.0, "h", DriverInfo(True), gpus=(g,)).to_dict()
    assert doc["gpus"][0]["mig_devices"][1]["activity"]["tensor"] == 30.0
    assert "activity" not in doc["gpus"][0]
    snap = Snapshot(1.7e9, "h", DriverInfo(True), gpus=(g,))
    assert Snapshot.from_dict(snap.to_dict(), checked=True) == snap


@pytest.mark.parametrize("profile", ["r470", "current"])
def test_drivers_before_gpm_show_no_activity_and_say_nothing(profile: str, tmp_path: Path) -> None:
    """R470 has no nvmlGpm* symbol (FunctionNotFound): n/a, silently, as on an A100; NVLink
    (field values) still reads. The current profile on the same GPUs shows both."""
    from tests.driver_profiles import once_json

    scenario = fakenvml.PROFILES[profile].scenario(
        gpus=[hopper(0, 2, links=2), hopper(1, 2, links=2)]
    )
    rc, data, err = once_json(profile, scenario, tmp_path)
    assert rc == 0, err
    assert data is not None
    g = data["gpus"][0]
    assert g["nvlink"]["links"] == 2 and g["nvlink"]["peers"] == ["GPU 1", "GPU 1"]
    assert g["nvlink"]["tx_bytes_per_s"] is not None  # counters, or GPM
    assert [e for e in data["errors"] if e["source"] == "nvml"] == []
    if profile == "r470":
        assert "activity" not in g
    else:
        assert g["activity"]["sm"] == 45.0


def test_the_parts_travel_in_a_stream_line() -> None:
    """``--stream``'s line (the JSON document) read back by the fleet's remote source."""
    from gputop.present import to_json_dict
    from gputop.sources.remote import parse_line, to_snapshot
    from gputop.stream import json_line

    snap = _inside_snapshot()
    got = to_snapshot(parse_line(json_line(to_json_dict(snap))))
    assert got.gpus == snap.gpus
    assert got.errors == ()


def test_a_gpu_lost_at_its_gpm_sample_is_lost_and_comes_back(
    fake_nvml: FakeNvml, made: list[NvmlReader]
) -> None:
    r, clock = clocked_reader(fake_nvml, made, Scenario(gpus=[hopper(0, links=0)]))
    r.read()
    fake_nvml.write(Scenario(gpus=[hopper(0, links=0, errors={"nvmlGpmSampleGet": "GPU_IS_LOST"})]))
    clock.now += 1.0
    (g,), _ = r.read()
    assert g.lost and g.activity == Activity()
    fake_nvml.write(Scenario(gpus=[hopper(0, links=0)]))
    for _ in range(2):
        clock.now += 1.0
        (g,), _ = r.read()
    assert not g.lost and g.activity == HOPPER_ACTIVITY


def test_the_fakes_gpm_support_query_checks_its_version(nvml_session: None) -> None:
    lib = ctypes.CDLL("libnvidia-ml.so.1")
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    support = pynvml.c_nvmlGpmSupport_t()
    support.version = 2
    assert lib.nvmlGpmQueryDeviceSupport(handle, ctypes.byref(support)) == 25  # VERSION_MISMATCH
    support.version = pynvml.NVML_GPM_SUPPORT_VERSION
    assert lib.nvmlGpmQueryDeviceSupport(handle, ctypes.byref(support)) == 0
    assert support.isSupportedDevice == 1


HOSTILE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**80), 2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
PART_FIELDS = {
    "activity": ("sm", "sm_occupancy", "tensor", "dram", "fp64", "fp32", "fp16"),
    "nvlink": ("links", "version", "rx_bytes_per_s", "tx_bytes_per_s", "max_bytes_per_s", "peers"),
}


@seed(SEED)
@settings(max_examples=200, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(
    part=st.sampled_from(sorted(PART_FIELDS)),
    values=st.dictionaries(st.integers(0, 6), HOSTILE, min_size=1, max_size=4),
    whole=st.one_of(st.none(), HOSTILE),
)
def test_a_remote_lines_hostile_parts_never_raise_and_stay_in_bounds(
    part: str, values: dict[int, object], whole: object
) -> None:
    """Untrusted lines: any type in any field of the parts, or the part itself not an
    object: a value or n/a (with an error when out of range), never an exception.
    Seeded: GPUTOP_FUZZ_SEED replays it."""
    from gputop.model import LIMITS, check_values
    from gputop.sources.remote import to_snapshot

    doc = _inside_snapshot().to_dict()
    names = PART_FIELDS[part]
    if whole is not None:
        doc["gpus"][0][part] = whole
    else:
        for k, v in values.items():
            doc["gpus"][0][part][names[k % len(names)]] = v
    got = to_snapshot(doc)
    g = next(g for g in got.gpus if g.index == 0)
    assert check_values(got, "t", "t").errors == got.errors  # nothing left out of bounds
    for name in names:
        value = getattr(getattr(g, part), name)
        key = (type(getattr(g, part)), name)
        if key in LIMITS and value is not None:
            low, high, _ = LIMITS[key]
            assert type(value) in (int, float) and low <= value <= high
    assert all(type(p) is str and p.isprintable() for p in g.nvlink.peers)


def test_a_destroyed_mig_instances_gpm_samples_are_freed(
    fake_nvml: FakeNvml, made: list[NvmlReader], monkeypatch: pytest.MonkeyPatch
) -> None:
    frees: list[object] = []
    real_free = pynvml.nvmlGpmSampleFree

    def free(sample: object) -> None:
        frees.append(sample)
        real_free(sample)

    monkeypatch.setattr(pynvml, "nvmlGpmSampleFree", free)

    def scenario(*gis: int) -> Scenario:
        migs = [FakeMig(k, gi, 0, "3g.40gb") for k, gi in enumerate(gis)]
        return Scenario(gpus=[hopper(0, links=0, mig_mode=(1, 1), util_gpu=None, migs=migs)])

    r, clock = clocked_reader(fake_nvml, made, scenario(1, 2))
    for _ in range(2):
        r.read()
        clock.now += 1.0
    assert frees == []
    fake_nvml.write(scenario(1))
    (g,), _ = r.read()
    assert len(frees) == 2  # instance 2's previous and spare sample
    assert [m.activity for m in g.mig_devices] == [HOPPER_ACTIVITY]


def test_every_read_of_the_table_names_what_the_binding_has() -> None:
    """The table is the one home of each read: a misspelt call, constant, GPM id or field
    id there would be a metric silently n/a, so each is checked against pynvml."""
    from gputop.model import GPU_METRICS, CounterRead, GpmRead, PerLinkRead, ScalarRead

    gpm_ids = {v for k, v in vars(pynvml).items() if k.startswith("NVML_GPM_METRIC_")}
    field_ids = {v for k, v in vars(pynvml).items() if k.startswith("NVML_FI_DEV_NVLINK_")}
    kinds = set()
    for m in GPU_METRICS:
        for r in m.reads:
            kinds.add(type(r))
            if isinstance(r, ScalarRead):
                for fn, *consts in r.calls:
                    assert callable(getattr(pynvml, fn)), (m.field, fn)
                    assert all(isinstance(getattr(pynvml, c), int) for c in consts), m.field
            elif isinstance(r, GpmRead):
                assert r.metric_id in gpm_ids, m.field
            elif isinstance(r, CounterRead):
                assert r.field_id in field_ids, m.field
            else:
                assert isinstance(r, PerLinkRead) and callable(getattr(pynvml, r.call))
    assert kinds == {ScalarRead, GpmRead, CounterRead, PerLinkRead}
    assert pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX == 138
    assert pynvml.NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC == 60


def test_stream_lines_on_a_hopper_have_activity_from_the_first(
    fake_nvml_env: Callable[..., dict[str, str]],
) -> None:
    env = fake_nvml_env(Scenario(gpus=[hopper(0, links=2)]))
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "gputop", "--stream", "--count", "3", "--interval", "0.2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(lines) == 3
    for doc in lines:
        assert doc["gpus"][0]["activity"]["sm"] == 45.0
        assert doc["gpus"][0]["nvlink"]["tx_bytes_per_s"] == 2048 * MIB
