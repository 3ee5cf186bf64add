"""PCIe throughput from NVML's cumulative byte counters (fields 197/198, drivers 555 and
later), through the real pynvml against the fake libnvidia-ml.so.1: the rate across ticks
from the second tick, no PCIe thread where both counters answer, the per-GPU thread
(nvmlDeviceGetPcieThroughput) elsewhere; a counter that goes back is n/a for one tick,
silently; an impossible rate is n/a with an error."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pynvml
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from gputop.model import GPU_METRIC
from gputop.sources.nvml import NvmlReader
from tests import fakenvml
from tests.fakenvml import FakeGpu, FakeNvml, hopper
from tests.helpers.clock import Clock, clocked_reader
from tests.helpers.fuzz import SEED

NEW = fakenvml.PROFILES["r560"]  # a driver with the counters
OLD = fakenvml.PROFILES["current"]  # R550: without them
TX, RX = 197, 198
KIB = 1024.0


@pytest.fixture(autouse=True)
def _pcie_threads_joined() -> Iterator[None]:
    """After the readers are closed (``made``): the next count must not see their threads."""
    yield
    _join_pcie_threads()


def _pcie_threads() -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t.name.startswith("gputop-pcie-"))


def _join_pcie_threads() -> None:
    """After close(): a retired thread ends once it sees its queue (close waits only so
    long); the next count must not see it."""
    for t in threading.enumerate():
        if t.name.startswith("gputop-pcie-"):
            t.join(30)


class _Counted:
    """Wraps a pynvml function: its calls' first arguments (the handles), in order."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.calls: list[Any] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(args[0] if args else None)
        return self.fn(*args, **kwargs)


def test_the_counters_give_the_scenarios_rates_from_the_second_tick_and_no_thread(
    fake_nvml: FakeNvml, made: list[NvmlReader], monkeypatch: pytest.MonkeyPatch
) -> None:
    throughput = _Counted(pynvml.nvmlDeviceGetPcieThroughput)
    monkeypatch.setattr(pynvml, "nvmlDeviceGetPcieThroughput", throughput)
    gpus = [FakeGpu(pcie_tx_kbps=1000, pcie_rx_kbps=2000), FakeGpu(pcie_tx_kbps=0)]
    r, clock = clocked_reader(fake_nvml, made, NEW.scenario(gpus=gpus))
    (a, b), errors = r.read()
    assert errors == ()
    # the first tick has one reading of each counter: n/a, never 0; the link is there
    assert (a.pcie.tx_bytes_per_s, a.pcie.rx_bytes_per_s) == (None, None)
    assert (b.pcie.tx_bytes_per_s, b.pcie.rx_bytes_per_s) == (None, None)
    assert a.pcie.gen == 5 and a.pcie.link_max_bytes_per_s is not None
    for _ in range(3):
        clock.now += 1.0
        (a, b), errors = r.read()
        assert errors == ()
        assert (a.pcie.tx_bytes_per_s, a.pcie.rx_bytes_per_s) == (1000 * KIB, 2000 * KIB)
        assert (b.pcie.tx_bytes_per_s, b.pcie.rx_bytes_per_s) == (0.0, 2000 * KIB)
    clock.now += 2.0  # the rate covers the whole interval
    (a, _), _ = r.read()
    assert a.pcie.tx_bytes_per_s == 1000 * KIB / 2
    assert _pcie_threads() == []
    assert throughput.calls == []


def test_a_driver_without_the_fields_reads_through_one_thread_per_gpu(
    fake_nvml: FakeNvml, made: list[NvmlReader]
) -> None:
    assert _pcie_threads() == []
    r, _ = clocked_reader(fake_nvml, made, OLD.scenario(gpus=[FakeGpu(), FakeGpu()]))
    (a, b), errors = r.read()
    assert errors == ()
    assert a.pcie.tx_bytes_per_s == 1000 * KIB and b.pcie.rx_bytes_per_s == 2000 * KIB
    assert _pcie_threads() == ["gputop-pcie-gpu0", "gputop-pcie-gpu1"]


def test_an_error_in_one_fields_entry_falls_back_for_that_gpu_only(
    fake_nvml: FakeNvml, made: list[NvmlReader]
) -> None:
    broken = FakeGpu(pcie_tx_kbps=7, field_errors={RX: "UNKNOWN"})
    r, clock = clocked_reader(fake_nvml, made, NEW.scenario(gpus=[broken, FakeGpu()]))
    (a, b), errors = r.read()
    assert errors == ()  # a fallback is not an error
    assert a.pcie.tx_bytes_per_s == 7 * KIB  # the thread answers in the first tick
    assert b.pcie.tx_bytes_per_s is None
    assert _pcie_threads() == ["gputop-pcie-gpu0"]
    clock.now += 1.0
    (a, b), errors = r.read()
    assert errors == ()
    assert a.pcie.tx_bytes_per_s == 7 * KIB and b.pcie.tx_bytes_per_s == 1000 * KIB


def test_nvlink_and_pcie_counters_are_one_call_per_gpu(
    fake_nvml: FakeNvml, made: list[NvmlReader], monkeypatch: pytest.MonkeyPatch
) -> None:
    gpus = [hopper(0, 2, links=2, gpm=None), FakeGpu()]  # NVLink counters; PCIe only
    r, clock = clocked_reader(fake_nvml, made, NEW.scenario(gpus=gpus))
    r.read()
    fields = _Counted(pynvml.nvmlDeviceGetFieldValues)
    monkeypatch.setattr(pynvml, "nvmlDeviceGetFieldValues", fields)
    clock.now += 1.0
    (a, b), errors = r.read()
    assert errors == ()
    assert len(fields.calls) == 2 and fields.calls[0] != fields.calls[1]
    assert a.nvlink.tx_bytes_per_s == 2**30 and a.pcie.tx_bytes_per_s == 1000 * KIB
    assert b.pcie.rx_bytes_per_s == 2000 * KIB


def test_a_counter_that_goes_back_is_na_for_one_tick_without_an_error(
    fake_nvml: FakeNvml, made: list[NvmlReader]
) -> None:
    gpu = FakeGpu(pcie_count_start=(10**12, 10**12))
    r, clock = clocked_reader(fake_nvml, made, NEW.scenario(gpus=[gpu]))
    r.read()
    clock.now += 1.0
    (g,), _ = r.read()
    assert g.pcie.tx_bytes_per_s == 1000 * KIB
    # the driver reset its counters (the fake starts them again when it reads the
    # scenario again, at the next call)
    fake_nvml.write(NEW.scenario(gpus=[FakeGpu()]))
    clock.now += 1.0
    (g,), errors = r.read()
    assert (g.pcie.tx_bytes_per_s, g.pcie.rx_bytes_per_s) == (None, None)
    assert errors == ()
    clock.now += 1.0
    (g,), errors = r.read()
    assert errors == ()
    assert (g.pcie.tx_bytes_per_s, g.pcie.rx_bytes_per_s) == (1000 * KIB, 2000 * KIB)


def test_a_counter_that_wraps_is_na_for_one_tick(
    fake_nvml: FakeNvml, made: list[NvmlReader]
) -> None:
    # the attach probe and the first tick each add 1000 KiB: the second tick's read wraps
    gpu = FakeGpu(pcie_count_start=(2**64 - 2500 * 1024, 0))
    r, clock = clocked_reader(fake_nvml, made, NEW.scenario(gpus=[gpu]))
    r.read()
    clock.now += 1.0
    (g,), errors = r.read()
    assert errors == ()
    assert g.pcie.tx_bytes_per_s is None and g.pcie.rx_bytes_per_s == 2000 * KIB
    clock.now += 1.0
    (g,), _ = r.read()
    assert g.pcie.tx_bytes_per_s == 1000 * KIB


def test_an_impossible_rate_is_na_with_an_error(
    fake_nvml: FakeNvml, made: list[NvmlReader]
) -> None:
    r, clock = clocked_reader(fake_nvml, made, NEW.scenario(gpus=[FakeGpu()]))
    r.read()
    # the counter jumps by 2**50 bytes in a second: far above any PCIe link
    fake_nvml.write(NEW.scenario(gpus=[FakeGpu(pcie_count_start=(2**50, 0))]))
    clock.now += 1.0
    (g,), errors = r.read()
    assert g.pcie.tx_bytes_per_s is None
    (error,) = errors
    assert error.gpu == 0 and error.metric is not None and "tx_bytes_per_s" in error.metric
    assert g.pcie.rx_bytes_per_s is None  # went back to 0: n/a, silently


def test_the_field_ids_are_the_bindings() -> None:
    assert (pynvml.NVML_FI_DEV_PCIE_COUNT_TX_BYTES, pynvml.NVML_FI_DEV_PCIE_COUNT_RX_BYTES) == (
        TX,
        RX,
    )


_REAL_FIELD_VALUES = pynvml.nvmlDeviceGetFieldValues
_U64 = 2**64
_HIGH = GPU_METRIC["pcie.tx_bytes_per_s"].bounds
assert _HIGH is not None


#: One step of a counter: the same value, a step up (it may wrap), a reset, a huge jump.
_STEPS = st.one_of(
    st.just(("same", 0)),
    st.tuples(st.just("up"), st.integers(0, 2**35)),
    st.tuples(st.just("up"), st.integers(2**41, _U64 - 1)),  # a huge jump, or a wrap
    st.tuples(st.just("set"), st.integers(0, _U64 - 1)),  # a reset, or anything
)


@seed(SEED)
@settings(
    max_examples=100,
    deadline=None,
    database=None,
    derandomize=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(start=st.integers(0, _U64 - 1), steps=st.lists(_STEPS, min_size=1, max_size=8))
def test_any_counter_sequence_gives_its_rate_or_na_never_raises(
    fake_nvml: FakeNvml, start: int, steps: list[tuple[str, int]]
) -> None:
    """Each tick's TX counter as the sequence says (RX stays still), one second apart: the
    rate where the counter did not go back and the rate is possible, else n/a; an error
    for an impossible rate only. Seeded: GPUTOP_FUZZ_SEED replays it."""
    values = [start]
    for kind, n in steps:
        last = values[-1]
        values.append(last if kind == "same" else (last + n) % _U64 if kind == "up" else n)
    feed = iter([values[0], *values])  # the attach probe, then one per tick
    real = _REAL_FIELD_VALUES

    def field_values(handle: Any, ids: list[Any]) -> Any:
        out = real(handle, ids)
        for entry in out:
            if entry.fieldId == TX:
                entry.value.ullVal = next(feed)
            elif entry.fieldId == RX:
                entry.value.ullVal = 5
        return out

    fake_nvml.write(NEW.scenario(gpus=[FakeGpu()]))
    with pytest.MonkeyPatch.context() as patch:  # one example's, undone before the next
        patch.setattr(pynvml, "nvmlDeviceGetFieldValues", field_values)
        _check_sequence(values)


def _check_sequence(values: list[int]) -> None:
    r = NvmlReader()
    clock = Clock()
    r._clock = clock
    try:
        for i, value in enumerate(values):
            (g,), errors = r.read()
            clock.now += 1.0
            delta = None if i == 0 else value - values[i - 1]
            possible = delta is not None and 0 <= delta <= _HIGH[1]
            assert g.pcie.tx_bytes_per_s == (float(delta) if possible else None), (i, values)
            assert g.pcie.rx_bytes_per_s == (None if i == 0 else 0.0)
            impossible = delta is not None and delta > _HIGH[1]
            assert len(errors) == int(impossible), (i, values, errors)
    finally:
        r.close()


def test_the_live_source_on_a_new_driver_starts_no_pcie_thread(fake_nvml: FakeNvml) -> None:
    """The whole live source (NVML, host, holders) on 8 GPUs: no thread of PCIe; on the
    driver before the counters, one per GPU."""
    from gputop.sources.live import LiveSource

    for profile, threads in ((NEW, 0), (OLD, 8)):
        fake_nvml.write(profile.scenario(gpus=[FakeGpu() for _ in range(8)]))
        source = LiveSource()
        try:
            for _ in range(2):
                snap = source.snapshot()
                assert len(snap.gpus) == 8
            assert len(_pcie_threads()) == threads, profile.name
        finally:
            source.close()
            _join_pcie_threads()
        assert _pcie_threads() == []


def test_the_first_frame_shows_pcie_as_na_never_0(
    fake_nvml: FakeNvml, made: list[NvmlReader]
) -> None:
    """The dashboard's first frame is the first reading: one reading of each counter, no
    rate yet. The GPU's line says n/a, the link is shown."""
    from gputop.views.gpu_view import gpu_view
    from gputop.views.parts import plain

    r, clock = clocked_reader(fake_nvml, made, NEW.scenario(gpus=[FakeGpu()]))
    (g,), _ = r.read()
    text = " ".join(plain(line) for line in gpu_view(g, compact=False, bar_width=20).lines)
    assert "PCIe TX n/a RX n/a" in text and "0B/s" not in text
    clock.now += 1.0
    (g,), _ = r.read()
    text = " ".join(plain(line) for line in gpu_view(g, compact=False, bar_width=20).lines)
    assert "PCIe TX n/a" not in text and "RX n/a" not in text
