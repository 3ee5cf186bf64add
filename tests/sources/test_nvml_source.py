"""gputop.sources.nvml.NvmlReader through the real pynvml against the fake libnvidia-ml.so.1."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pynvml
import pytest

from gputop import model
from gputop.model import GpuSample, SampleError
from gputop.sources.nvml import (
    NvmlReader,
    _PcieAnswers,
    _PcieCall,
    cuda_version_string,
    decode_clock_event_reasons,
    link_max_bytes_per_s,
)
from tests.fakenvml import (
    FakeGpu,
    FakeNvml,
    FakeProcess,
    FakeSample,
    GiB,
    MiB,
    Scenario,
    many_gpus,
)

ROOT = Path(__file__).resolve().parents[2]

Reader = Callable[[], NvmlReader]


@pytest.fixture
def reader(fake_nvml: FakeNvml) -> Iterator[Reader]:
    """Make NvmlReaders on the in-process fake; every one is closed after the test."""
    made: list[NvmlReader] = []

    def make() -> NvmlReader:
        r = NvmlReader()
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


def _messages(errors: tuple[SampleError, ...], gpu: int | None = None) -> list[str]:
    return [e.message for e in errors if gpu is None or e.gpu == gpu]


# ---------------------------------------------------------------------------- pure helpers


def test_link_max_bytes_per_s() -> None:
    gen3_x16 = link_max_bytes_per_s(3, 16)
    assert gen3_x16 is not None and abs(gen3_x16 - 15.754e9) < 0.01e9
    assert link_max_bytes_per_s(1, 1) == pytest.approx(250e6)
    assert link_max_bytes_per_s(2, 16) == pytest.approx(8e9)
    assert link_max_bytes_per_s(4, 16) == pytest.approx(2 * gen3_x16)
    assert link_max_bytes_per_s(5, 16) == pytest.approx(4 * gen3_x16)
    # PCI-SIG's figure: gen6 x16 moves about 121 GB/s per direction (128 GB/s raw, FLIT
    # encoding 242/256); gen5 x16 about 63 GB/s.
    assert link_max_bytes_per_s(6, 16) == pytest.approx(121e9, rel=0.005)
    assert link_max_bytes_per_s(5, 16) == pytest.approx(63e9, rel=0.005)
    for gen, width in ((None, 16), (3, None), (0, 16), (99, 16), (3, 0)):
        assert link_max_bytes_per_s(gen, width) is None


def test_decode_clock_event_reasons() -> None:
    assert decode_clock_event_reasons(0) == ()
    assert decode_clock_event_reasons(0x1) == ("idle",)
    assert decode_clock_event_reasons(0x1FF) == (
        "idle",
        "applications clocks",
        "sw power cap",
        "hw slowdown",
        "sync boost",
        "sw thermal",
        "hw thermal",
        "hw power brake",
        "display clocks",
    )
    assert decode_clock_event_reasons(0x4 | 0x400 | 0x10000) == ("sw power cap", "0x400", "0x10000")


def test_cuda_version_string() -> None:
    assert cuda_version_string(12040) == "12.4"
    assert cuda_version_string(13010) == "13.1"
    assert cuda_version_string(11080) == "11.8"
    assert cuda_version_string(0) is None
    assert cuda_version_string(None) is None


# ---------------------------------------------------------------------------- happy path


def test_driver_info(fake_nvml: FakeNvml, reader: Reader) -> None:
    fake_nvml.write(
        Scenario(driver_version="535.104.05", cuda_version=12020, nvml_version="12.535.104.05")
    )
    driver = reader().driver
    assert driver.available is True
    assert driver.error is None
    assert driver.driver_version == "535.104.05"
    assert driver.cuda_version == "12.2"
    assert driver.nvml_version == "12.535.104.05"


def test_every_metric(fake_nvml: FakeNvml, reader: Reader) -> None:
    fake_nvml.write(
        Scenario(
            gpus=[
                FakeGpu(
                    name="NVIDIA A100-SXM4-80GB",
                    uuid="GPU-1234",
                    bus_id="00000000:3B:00.0",
                    minor=5,
                    memory_total=80 * GiB,
                    memory_used=30 * GiB,
                    memory_reserved=MiB * 600,
                    util_gpu=97,
                    util_mem=41,
                    temperature=71,
                    power_mw=312_500,
                    power_limit_mw=400_000,
                    fan=55,
                    sm_clock=1410,
                    mem_clock=1593,
                    sm_clock_max=1980,
                    mem_clock_max=2619,
                    clock_event_reasons=0x1 | 0x40,
                    pcie_gen=3,
                    pcie_width=8,
                    pcie_max_gen=4,
                    pcie_max_width=16,
                    pcie_tx_kbps=1500,
                    pcie_rx_kbps=250_000,
                    encoder=12,
                    decoder=34,
                    mig_mode=(0, 1),  # MIG pending only: utilization still given,
                    ecc_uncorrected=3,
                    ecc_uncorrected_aggregate=9,
                )
            ]
        )
    )
    r = reader()
    gpus, errors = r.read()
    assert errors == ()
    (g,) = gpus
    assert isinstance(g, GpuSample)
    assert (g.index, g.name, g.uuid, g.pci_bus_id, g.minor_number) == (
        0,
        "NVIDIA A100-SXM4-80GB",
        "GPU-1234",
        "00000000:3B:00.0",
        5,
    )
    assert g.lost is False and g.lost_reason is None
    assert g.memory.total == 80 * GiB
    assert g.memory.used == 30 * GiB  # v2: excludes reserved
    assert g.memory.reserved == 600 * MiB
    assert g.memory.free == 80 * GiB - 30 * GiB - 600 * MiB
    assert (g.utilization.gpu, g.utilization.memory) == (97.0, 41.0)
    assert g.temperature_c == 71.0
    assert g.power_w == pytest.approx(312.5)
    assert g.power_limit_w == pytest.approx(400.0)
    assert g.fan_percent == 55.0
    assert (g.clocks.sm_mhz, g.clocks.memory_mhz) == (1410, 1593)
    assert (g.clocks.sm_max_mhz, g.clocks.memory_max_mhz) == (1980, 2619)
    assert g.clock_event_reasons == ("idle", "hw thermal")
    assert (g.pcie.gen, g.pcie.width, g.pcie.max_gen, g.pcie.max_width) == (3, 8, 4, 16)
    assert g.pcie.link_max_bytes_per_s == link_max_bytes_per_s(4, 16)  # from the MAX link
    assert g.pcie.tx_bytes_per_s == 1500 * 1024.0
    assert g.pcie.rx_bytes_per_s == 250_000 * 1024.0
    assert (g.encoder_percent, g.decoder_percent) == (12.0, 34.0)
    assert g.mig_mode is False
    assert g.ecc_uncorrected == 3  # volatile, not the aggregate 9
    assert g.processes == ()


def test_processes_merged_typed_and_utilized(fake_nvml: FakeNvml, reader: Reader) -> None:
    fake_nvml.write(
        Scenario(
            gpus=[
                FakeGpu(
                    processes=[
                        FakeProcess(100, 2 * GiB),
                        FakeProcess(101, None, "C+G"),
                        FakeProcess(102, 5 * MiB, "G"),
                        FakeProcess(103, GiB, gpu_instance_id=2, compute_instance_id=0),
                    ],
                    samples=[
                        FakeSample(100, 1_000, sm=40, mem=10),
                        FakeSample(100, 2_000, sm=60, mem=30),
                        FakeSample(102, 2_000, sm=5, mem=1),
                        FakeSample(999, 2_000, sm=77, mem=7),  # not listed: ignored
                    ],
                )
            ]
        )
    )
    r = reader()
    (g,), errors = r.read()
    assert errors == ()
    procs = {p.pid: p for p in g.processes}
    assert sorted(procs) == [100, 101, 102, 103]
    assert all(p.host is None for p in g.processes)
    assert (procs[100].type, procs[101].type, procs[102].type) == ("C", "C+G", "G")
    assert procs[100].gpu_memory == 2 * GiB
    assert procs[101].gpu_memory is None  # NVML_VALUE_NOT_AVAILABLE
    assert (procs[103].gpu_instance_id, procs[103].compute_instance_id) == (2, 0)
    assert procs[100].gpu_instance_id is None and procs[100].compute_instance_id is None
    assert (procs[100].sm_percent, procs[100].memory_bandwidth_percent) == (50.0, 20.0)  # mean
    assert (procs[102].sm_percent, procs[102].memory_bandwidth_percent) == (5.0, 1.0)
    assert (procs[101].sm_percent, procs[101].memory_bandwidth_percent) == (0.0, 0.0)  # idle

    # Next tick: nothing newer than timestamp 2000 -> NVML says NotFound -> all idle.
    (g,), errors = r.read()
    assert errors == ()
    assert {p.pid: p.sm_percent for p in g.processes} == {100: 0.0, 101: 0.0, 102: 0.0, 103: 0.0}

    # New samples appear: only those newer than the last tick count.
    scenario = Scenario(gpus=[FakeGpu(processes=[FakeProcess(100)])])
    scenario.gpus[0].samples = [FakeSample(100, 2_000, sm=60), FakeSample(100, 3_000, sm=90)]
    fake_nvml.write(scenario)
    (g,), _ = r.read()
    assert g.processes[0].sm_percent == 90.0


def test_invalid_pids_are_dropped_with_an_error(fake_nvml: FakeNvml, reader: Reader) -> None:
    fake_nvml.write(
        Scenario(
            gpus=[
                FakeGpu(processes=[FakeProcess(0), FakeProcess(2**32 - 1), FakeProcess(4242)]),
                FakeGpu(),
            ]
        )
    )
    (g0, _), errors = reader().read()
    assert [p.pid for p in g0.processes] == [4242]
    (err,) = errors
    assert (
        err.gpu == 0
        and err.metric == "processes"
        and "cannot be a real process" in err.message
        and "pid 4294967295" in err.message
    )
    assert "2 process" in err.message


def test_non_utf8_and_hostile_gpu_name(fake_nvml: FakeNvml, reader: Reader) -> None:
    fake_nvml.write(Scenario(gpus=[FakeGpu(name=b"Tesla \xff\x1b[31mRED\x1b[0m\xe2\x80\xae!")]))
    (g,), errors = reader().read()
    assert errors == ()
    assert g.name == "Tesla \ufffdRED!"


def test_sixteen_gpus_with_64_processes(fake_nvml: FakeNvml, reader: Reader) -> None:
    fake_nvml.write(many_gpus(16, 64))
    r = reader()
    for _ in range(2):
        gpus, errors = r.read()
        assert errors == ()
        assert [g.index for g in gpus] == list(range(16))
        for g in gpus:
            assert len(g.processes) == 64
            assert [p.pid for p in g.processes] == list(
                range(10_000 + 64 * g.index, 10_000 + 64 * (g.index + 1))
            )
            assert g.processes[3].gpu_memory == 4 * 64 * MiB
            assert g.processes[3].sm_percent == 3.0  # fresh sample every tick
            assert g.pcie.tx_bytes_per_s == 1000 * 1024.0


# ---------------------------------------------------------------------------- fallbacks


def test_memory_falls_back_to_v1(fake_nvml: FakeNvml, reader: Reader) -> None:
    gpu = FakeGpu(memory_total=16 * GiB, memory_used=4 * GiB, memory_reserved=GiB)
    gpu.errors = {"nvmlDeviceGetMemoryInfo_v2": "FUNCTION_NOT_FOUND"}
    fake_nvml.write(Scenario(gpus=[gpu, FakeGpu()]))
    (g0, g1), errors = reader().read()
    assert errors == ()
    assert (g0.memory.total, g0.memory.used, g0.memory.reserved) == (16 * GiB, 5 * GiB, None)
    assert g0.memory.free == 11 * GiB
    assert g1.memory.reserved == 512 * MiB


def test_older_symbols_are_used_when_newer_ones_are_missing(
    fake_nvml: FakeNvml, reader: Reader
) -> None:
    gpu = FakeGpu(
        temperature=66,
        clock_event_reasons=0x4,
        processes=[FakeProcess(31), FakeProcess(32, type="G")],
    )
    gpu.errors = {
        "nvmlDeviceGetTemperatureV": "FUNCTION_NOT_FOUND",
        "nvmlDeviceGetCurrentClocksEventReasons": "FUNCTION_NOT_FOUND",
        "nvmlDeviceGetComputeRunningProcesses_v3": "FUNCTION_NOT_FOUND",
        "nvmlDeviceGetGraphicsRunningProcesses_v3": "FUNCTION_NOT_FOUND",
    }
    fake_nvml.write(
        Scenario(gpus=[gpu], errors={"nvmlSystemGetCudaDriverVersion_v2": "FUNCTION_NOT_FOUND"})
    )
    r = reader()
    assert r.driver.cuda_version == "12.4"
    for _ in range(2):
        (g,), errors = r.read()
        assert errors == ()
        assert g.temperature_c == 66.0
        assert g.clock_event_reasons == ("sw power cap",)
        assert [(p.pid, p.type) for p in g.processes] == [(31, "C"), (32, "G")]


def test_each_scalar_call_is_asked_once_a_tick_its_fallback_remembered(
    fake_nvml: FakeNvml, reader: Reader, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tick's scalar reads call the variant that worked; a failing call is asked once
    a tick (never again the same tick), a missing newer variant once in all."""
    gpu = FakeGpu(temperature=66)
    gpu.errors = {
        "nvmlDeviceGetTemperatureV": "FUNCTION_NOT_FOUND",
        "nvmlDeviceGetPowerUsage": "NO_PERMISSION",
    }
    fake_nvml.write(Scenario(gpus=[gpu]))
    asked: dict[str, int] = {}
    for name in (
        "nvmlDeviceGetTemperatureV",
        "nvmlDeviceGetTemperature",
        "nvmlDeviceGetPowerUsage",
    ):
        if hasattr(pynvml, name):
            real = getattr(pynvml, name)

            def counted(*args: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
                asked[_name] = asked.get(_name, 0) + 1
                return _real(*args, **kw)

            monkeypatch.setattr(pynvml, name, counted)
    r = reader()
    for tick in range(1, 4):
        (g,), errors = r.read()
        assert g.temperature_c == 66.0 and g.power_w is None
        assert [e.metric for e in errors] == ["power"]
        assert asked.get("nvmlDeviceGetPowerUsage") == tick
        assert asked.get("nvmlDeviceGetTemperature") == tick
        assert asked.get("nvmlDeviceGetTemperatureV", 0) <= 1


def test_missing_process_symbols_fall_back_to_v2_then_v1(
    fake_nvml: FakeNvml, reader: Reader, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A symbol the library lacks (pynvml's lookup raises FunctionNotFound): compute falls
    back to _v2, graphics to the unversioned v1 call; probed once, not on every tick."""
    lookup = pynvml._nvmlGetFunctionPointer
    asked: list[str] = []
    absent = {
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetGraphicsRunningProcesses_v3",
        "nvmlDeviceGetGraphicsRunningProcesses_v2",
    }

    def fake_lookup(name: str) -> object:
        asked.append(name)
        if name in absent:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        return lookup(name)

    monkeypatch.setattr(pynvml, "_nvmlGetFunctionPointer", fake_lookup)
    fake_nvml.write(
        Scenario(gpus=[FakeGpu(processes=[FakeProcess(77), FakeProcess(78, type="G")])])
    )
    r = reader()
    for _ in range(3):
        (g,), errors = r.read()
        assert errors == ()
        assert [(p.pid, p.type, p.gpu_memory) for p in g.processes] == [
            (77, "C", GiB),
            (78, "G", GiB),
        ]
    assert asked.count("nvmlDeviceGetGraphicsRunningProcesses_v3") == 1
    assert "graphics process list read with nvmlDeviceGetGraphicsRunningProcesses (v1)" in (
        r.driver.compat
    )


# ---------------------------------------------------------------------------- failures


def test_not_supported_is_none_on_that_gpu_only(fake_nvml: FakeNvml, reader: Reader) -> None:
    bare = FakeGpu(
        fan=None,
        util_gpu=None,
        temperature=None,
        power_mw=None,
        power_limit_mw=None,
        sm_clock=None,
        mem_clock=None,
        sm_clock_max=None,
        mem_clock_max=None,
        clock_event_reasons=None,
        pcie_gen=None,
        pcie_max_gen=None,
        pcie_tx_kbps=None,
        encoder=None,
        decoder=None,
        mig_mode=None,
        ecc_uncorrected=None,
        memory_total=None,
    )
    bare.errors = {
        "nvmlDeviceGetComputeRunningProcesses": "NOT_SUPPORTED",
        "nvmlDeviceGetMinorNumber": "NOT_SUPPORTED",
    }
    fake_nvml.write(Scenario(gpus=[FakeGpu(), bare]))
    r = reader()
    for _ in range(2):
        (full, g), errors = r.read()
        assert errors == ()  # NotSupported is a fact, not an error
        assert full.fan_percent == 30.0 and full.utilization.gpu == 50.0
        assert full.pcie.tx_bytes_per_s is not None and full.ecc_uncorrected == 0
        assert g.lost is False
        assert g.name == "NVIDIA H100 80GB HBM3"
        assert g.minor_number is None
        assert g.fan_percent is None
        assert g.utilization.gpu is None and g.utilization.memory is None
        assert g.temperature_c is None
        assert g.power_w is None and g.power_limit_w is None
        assert (g.clocks.sm_mhz, g.clocks.memory_mhz) == (None, None)
        assert (g.clocks.sm_max_mhz, g.clocks.memory_max_mhz) == (None, None)
        assert g.clock_event_reasons is None
        assert g.pcie.gen is None and g.pcie.max_gen is None
        assert g.pcie.width == 16 and g.pcie.link_max_bytes_per_s is None
        assert g.pcie.tx_bytes_per_s is None
        assert g.encoder_percent is None and g.decoder_percent is None
        assert g.mig_mode is None and g.ecc_uncorrected is None
        assert g.memory.total is None and g.memory.used is None
        assert g.processes == ()


def test_performance_state_unknown_or_unsupported_is_none(
    fake_nvml: FakeNvml, reader: Reader
) -> None:
    """P0-P15 as NVML says; its "unknown" (32) and NotSupported are n/a without an error;
    a value no GPU has (16-31) is the driver's garbage: n/a, said."""
    states = (0, 8, 15, 32, None, 20)
    fake_nvml.write(Scenario(gpus=[FakeGpu(pstate=p) for p in states]))
    gpus, errors = reader().read()
    assert [g.performance_state for g in gpus] == [0, 8, 15, None, None, None]
    (error,) = errors
    assert error.gpu == 5 and error.metric == "performance_state"
    assert "performance_state = 20, outside 0-15" in error.message


def test_no_permission_is_none_and_said(fake_nvml: FakeNvml, reader: Reader) -> None:
    gpu = FakeGpu(processes=[FakeProcess(5), FakeProcess(6, type="G")])
    gpu.errors = {
        "nvmlDeviceGetPowerUsage": "NO_PERMISSION",
        "nvmlDeviceGetTotalEccErrors": "NO_PERMISSION",
    }
    fake_nvml.write(Scenario(gpus=[gpu, FakeGpu()]))
    r = reader()
    (g, other), errors = r.read()
    assert g.power_w is None and g.ecc_uncorrected is None
    assert g.power_limit_w == 700.0
    assert other.power_w == 250.0
    assert {e.metric for e in errors} == {"power", "ecc"}
    assert all(e.gpu == 0 and "no permission" in e.message for e in errors)
    assert [p.pid for p in g.processes] == [5, 6]


def test_no_permission_on_process_lists(fake_nvml: FakeNvml, reader: Reader) -> None:
    gpu = FakeGpu(processes=[FakeProcess(5), FakeProcess(6, type="G")])
    gpu.errors = {
        "nvmlDeviceGetComputeRunningProcesses": "NO_PERMISSION",
        "nvmlDeviceGetGraphicsRunningProcesses": "NO_PERMISSION",
    }
    fake_nvml.write(Scenario(gpus=[gpu, FakeGpu(processes=[FakeProcess(7)])]))
    (g, other), errors = reader().read()
    assert g.processes == ()
    assert [p.pid for p in other.processes] == [7]
    msgs = _messages(errors, gpu=0)
    assert any("no permission to list compute processes" in m for m in msgs)
    assert any("no permission to list graphics processes" in m for m in msgs)
    assert all("not shown" in m for m in msgs)


def test_process_utilization_unavailable_is_none_not_zero(
    fake_nvml: FakeNvml, reader: Reader
) -> None:
    a = FakeGpu(processes=[FakeProcess(5)], samples=[FakeSample(5, sm=50)])
    a.errors = {"nvmlDeviceGetProcessUtilization": "NOT_SUPPORTED"}
    b = FakeGpu(processes=[FakeProcess(6)], samples=[FakeSample(6, sm=50)])
    b.errors = {"nvmlDeviceGetProcessUtilization": "NO_PERMISSION"}
    fake_nvml.write(Scenario(gpus=[a, b]))
    (ga, gb), errors = reader().read()
    for g in (ga, gb):
        (p,) = g.processes
        assert p.sm_percent is None and p.memory_bandwidth_percent is None
    assert [e.metric for e in errors] == ["process_utilization"]
    assert errors[0].gpu == 1


def test_other_errors_are_none_and_reported(fake_nvml: FakeNvml, reader: Reader) -> None:
    gpu = FakeGpu()
    gpu.errors = {"nvmlDeviceGetUtilizationRates": "TIMEOUT"}
    fake_nvml.write(Scenario(gpus=[gpu]))
    (g,), errors = reader().read()
    assert g.utilization.gpu is None and g.lost is False
    (err,) = errors
    assert err.metric == "utilization" and "Timeout" in err.message


def test_gpu_lost_mid_run_then_unknown_then_back(fake_nvml: FakeNvml, reader: Reader) -> None:
    def scenario(
        util: int, lost: str | None = None, name: str = "NVIDIA H100 80GB HBM3"
    ) -> Scenario:
        gpus = [FakeGpu(util_gpu=util + i, processes=[FakeProcess(100 + i)]) for i in range(3)]
        gpus[1].name = name
        if lost:
            gpus[1].errors = {"*": lost}
        return Scenario(gpus=gpus)

    fake_nvml.write(scenario(10))
    r = reader()
    gpus, errors = r.read()
    assert errors == () and [g.utilization.gpu for g in gpus] == [10.0, 11.0, 12.0]

    fake_nvml.write(scenario(20, lost="GPU_IS_LOST"))
    (g0, g1, g2), errors = r.read()
    assert (g0.utilization.gpu, g2.utilization.gpu) == (20.0, 22.0)  # others keep updating
    assert g1.lost is True
    assert g1.lost_reason is not None and "lost" in g1.lost_reason.lower()
    assert g1.uuid == "GPU-fa4e0000-0000-4000-8000-000000000001"  # which GPU it was
    assert g1.utilization.gpu is None and g1.memory.total is None and g1.processes == ()
    assert g1.pcie.tx_bytes_per_s is None
    assert [e.gpu for e in errors] == [1] and errors[0].metric == "lost"

    fake_nvml.write(scenario(30, lost="UNKNOWN"))
    (g0, g1, g2), errors = r.read()
    assert g1.lost is True and g1.lost_reason is not None and "Unknown" in g1.lost_reason
    assert g0.utilization.gpu == 30.0

    fake_nvml.write(scenario(40, name="NVIDIA H100 (back)"))
    (g0, g1, g2), errors = r.read()
    assert errors == ()
    assert g1.lost is False and g1.lost_reason is None
    assert g1.utilization.gpu == 41.0
    assert g1.name == "NVIDIA H100 (back)"  # static information read afresh
    assert [p.pid for p in g1.processes] == [101]
    assert g1.pcie.tx_bytes_per_s == 1000 * 1024.0


@pytest.mark.parametrize(
    ("code", "word"),
    [("GPU_IS_LOST", "GpuIsLost"), ("UNKNOWN", "Unknown"), ("RESET_REQUIRED", "ResetRequired")],
)
@pytest.mark.parametrize("where", ["every call", "the handle", "one metric"])
def test_each_lost_code_marks_the_gpu_lost_and_it_comes_back(
    fake_nvml: FakeNvml, reader: Reader, code: str, word: str, where: str
) -> None:
    """The fault table of docs/troubleshooting.md: GpuIsLost, Unknown and ResetRequired
    from any call make that GPU lost (with the reason in words), the others keep updating,
    and it comes back by itself."""
    errors_of = {
        "every call": {"*": code},
        "the handle": {"nvmlDeviceGetHandleByIndex": code},
        "one metric": {"nvmlDeviceGetTemperatureV": code, "nvmlDeviceGetTemperature": code},
    }[where]

    def scenario(util: int, lost: bool) -> Scenario:
        gpus = [FakeGpu(util_gpu=util + i, processes=[FakeProcess(100 + i)]) for i in range(2)]
        if lost:
            gpus[1].errors = dict(errors_of)
        return Scenario(gpus=gpus)

    fake_nvml.write(scenario(10, lost=False))
    r = reader()
    (_, g1), errors = r.read()
    assert errors == () and g1.lost is False
    fake_nvml.write(scenario(20, lost=True))
    if where == "the handle":  # the handle is got when a GPU is opened: at start-up
        r = reader()
    (g0, g1), errors = r.read()
    assert g1.lost is True, errors
    assert g1.lost_reason is not None and word in g1.lost_reason
    assert g1.utilization.gpu is None and g1.processes == ()
    assert g0.lost is False and g0.utilization.gpu == 20.0  # the other keeps updating
    assert [(e.gpu, e.metric) for e in errors] == [(1, "lost")]
    fake_nvml.write(scenario(30, lost=False))
    (g0, g1), errors = r.read()
    assert errors == () and g1.lost is False and g1.utilization.gpu == 31.0


def test_gpu_lost_on_a_single_metric_or_pcie(fake_nvml: FakeNvml, reader: Reader) -> None:
    a, b, c = FakeGpu(), FakeGpu(), FakeGpu()
    a.errors = {"nvmlDeviceGetUtilizationRates": "GPU_IS_LOST"}  # handle still works
    b.errors = {"nvmlDeviceGetPcieThroughput": "UNKNOWN"}
    c.errors = {"nvmlDeviceGetProcessUtilization": "GPU_IS_LOST"}
    c.processes = [FakeProcess(9)]
    fake_nvml.write(Scenario(gpus=[a, b, c, FakeGpu()]))
    r = reader()
    for _ in range(2):  # retried, and still lost
        (ga, gb, gc, gd), errors = r.read()
        assert (ga.lost, gb.lost, gc.lost, gd.lost) == (True, True, True, False)
        assert gd.utilization.gpu == 50.0
        assert sorted(e.gpu or 0 for e in errors if e.metric == "lost") == [0, 1, 2]
    fake_nvml.write(Scenario(gpus=[FakeGpu(), FakeGpu(), FakeGpu(), FakeGpu()]))
    gpus, errors = r.read()
    assert errors == () and not any(g.lost for g in gpus)


def test_handle_refused_without_loss(fake_nvml: FakeNvml, reader: Reader) -> None:
    gpu = FakeGpu()
    gpu.errors = {"nvmlDeviceGetHandleByIndex": "NO_PERMISSION"}
    fake_nvml.write(Scenario(gpus=[gpu, FakeGpu()]))
    (g0, g1), errors = reader().read()
    assert g0.lost is False and g0.name is None and g0.utilization.gpu is None
    assert g1.utilization.gpu == 50.0
    (err,) = errors
    assert err.gpu == 0 and "cannot open the GPU" in err.message


def test_device_count_failure_is_retried(fake_nvml: FakeNvml, reader: Reader) -> None:
    fake_nvml.write(Scenario(gpus=[FakeGpu()], errors={"nvmlDeviceGetCount": "UNKNOWN"}))
    r = reader()
    assert r.driver.available is True
    gpus, errors = r.read()
    assert gpus == () and "cannot count GPUs" in errors[0].message
    fake_nvml.write(Scenario(gpus=[FakeGpu(), FakeGpu()]))
    gpus, errors = r.read()
    assert errors == () and len(gpus) == 2


# ---------------------------------------------------------------------------- slow NVML


class _InFlight:
    """Wraps an NVML function: how many calls run at once (now, and at most), in all."""

    def __init__(self, fn: Callable[..., object]) -> None:
        self.fn = fn
        self.lock = threading.Lock()
        self.now = self.most = self.total = 0

    def __call__(self, *args: object) -> object:
        with self.lock:
            self.total += 1
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            return self.fn(*args)
        finally:
            with self.lock:
                self.now -= 1


def test_pcie_throughput_read_concurrently(
    fake_nvml: FakeNvml, reader: Reader, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counted, not timed: the 16 slow PCIe calls of 8 GPUs run side by side."""
    fake_nvml.write(many_gpus(8, 4, pcie_sleep_ms=20))  # 16 calls x 20 ms = 320 ms in a row
    r = reader()
    r.read()  # warm the pool
    calls = _InFlight(pynvml.nvmlDeviceGetPcieThroughput)
    monkeypatch.setattr(pynvml, "nvmlDeviceGetPcieThroughput", calls)
    gpus, errors = r.read()
    assert errors == ()
    assert all(g.pcie.tx_bytes_per_s == 1000 * 1024.0 for g in gpus)
    assert calls.most > 1  # one at a time would be 1


def test_very_slow_pcie_does_not_hold_the_tick(
    fake_nvml: FakeNvml, reader: Reader, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Causal, not timed: the read returns while the slow PCIe call still runs."""
    slow = FakeGpu(pcie_tx_kbps=7, pcie_rx_kbps=8)
    slow.sleeps_ms = {"nvmlDeviceGetPcieThroughput": 3000}
    fake_nvml.write(Scenario(gpus=[slow, FakeGpu()]))
    calls = _InFlight(pynvml.nvmlDeviceGetPcieThroughput)
    monkeypatch.setattr(pynvml, "nvmlDeviceGetPcieThroughput", calls)
    r = reader()
    (g0, g1), errors = r.read()
    assert calls.now == 1  # GPU 0's call (TX, RX after it) still sleeps: the read did not wait
    assert g0.pcie.tx_bytes_per_s is None and g0.utilization.gpu == 50.0
    assert g1.pcie.tx_bytes_per_s == 1000 * 1024.0
    assert [(e.gpu, e.metric) for e in errors] == [(0, "pcie_throughput")]
    (g0, g1), errors = r.read()  # still unanswered: not asked again, n/a again
    assert g0.pcie.tx_bytes_per_s is None and g1.pcie.rx_bytes_per_s == 2000 * 1024.0
    assert [(e.gpu, e.metric) for e in errors] == [(0, "pcie_throughput")]
    deadline = time.monotonic() + 30
    while calls.total < 2 + 2 + 2 or calls.now:  # GPU 0's TX, then RX, in the background
        assert time.monotonic() < deadline, "the PCIe calls never returned"
        time.sleep(0.05)
    (g0, _), errors = r.read()  # their answers are used now, no second call was started
    assert errors == ()
    assert calls.total == 2 + 2 + 2 + 2  # GPU 0 once (TX and RX); GPU 1 on each read
    assert (g0.pcie.tx_bytes_per_s, g0.pcie.rx_bytes_per_s) == (7 * 1024.0, 8 * 1024.0)


class _GatedNv:
    """A stand-in for pynvml's one PCIe call, held until the test lets it answer."""

    NVML_PCIE_UTIL_TX_BYTES = 0
    NVML_PCIE_UTIL_RX_BYTES = 1

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls: list[int] = []  # the counters asked, in order

    def nvmlDeviceGetPcieThroughput(self, handle: object, counter: int) -> int:
        self.calls.append(counter)
        self.entered.set()
        assert self.release.wait(30)
        if handle == "broken" and counter == 1:
            raise ValueError("no answer")
        return 42 + counter


def _pcie_call(nv: _GatedNv, handle: str) -> tuple[_PcieCall, _PcieAnswers]:
    answers = _PcieAnswers()
    counters = (nv.NVML_PCIE_UTIL_TX_BYTES, nv.NVML_PCIE_UTIL_RX_BYTES)
    return _PcieCall(nv, handle, counters, "test", answers), answers


def test_a_pcie_call_thread_answers_once_per_start_and_ends_when_retired() -> None:
    """The per-GPU thread: TX then RX per start, the answers or the errors handed over,
    and retiring ends it whether it is idle, calling, or just handed a call."""
    nv = _GatedNv()
    call, answers = _pcie_call(nv, "h")
    call.start()
    assert nv.entered.wait(30) and call.pending
    answers.wait([call], 0)
    assert call.answer is None and call.pending  # still in NVML: not answered, still pending
    nv.release.set()
    answers.wait([call], 30)
    assert call.result() == ((42, None), (43, None)) and not call.pending
    assert nv.calls == [0, 1]
    call.retire()  # idle: ends at once without calling
    call.thread.join(30)
    assert not call.thread.is_alive() and nv.calls == [0, 1]

    nv = _GatedNv()
    call, answers = _pcie_call(nv, "broken")
    call.start()
    assert nv.entered.wait(30)
    call.retire()  # in a call: ends when NVML answers, the answer is not waited for
    assert call.thread.is_alive()
    nv.release.set()
    call.thread.join(30)
    assert not call.thread.is_alive() and nv.calls == [0, 1]

    nv = _GatedNv()
    nv.release.set()
    call, answers = _pcie_call(nv, "broken")
    call.start()
    answers.wait([call], 30)
    (tx, tx_error), (_, rx_error) = call.result()
    assert (tx, tx_error) == (42, None)  # each direction answers for itself
    assert isinstance(rx_error, ValueError) and "no answer" in str(rx_error)
    call.start()
    call.retire()  # just handed a call: the thread may not have taken it yet
    call.thread.join(30)
    assert not call.thread.is_alive() and len(nv.calls) <= 4


def test_the_pcie_wait_ends_with_the_last_answer_or_the_timeout() -> None:
    """One wait for all the calls: it returns once every call it waits for has answered
    (not before), and at its timeout when one has not; an answer that comes with
    nobody waiting is kept for the next collection."""
    gated, free = _GatedNv(), _GatedNv()
    free.release.set()
    answers = _PcieAnswers()
    counters = (0, 1)
    slow = _PcieCall(gated, "h", counters, "slow", answers)
    fast = _PcieCall(free, "h", counters, "fast", answers)
    try:
        slow.start()
        fast.start()
        answers.wait([slow, fast], 0.05)  # the slow one holds: the wait ends at its timeout
        assert slow.answer is None
        gated.release.set()
        answers.wait([slow, fast], 30)  # ends when the last answers
        assert slow.answer is not None and fast.answer is not None
        assert slow.result() == fast.result() == ((42, None), (43, None))
        fast.start()
        deadline = time.monotonic() + 30
        while fast.answer is None:  # answered with nobody waiting
            assert time.monotonic() < deadline, "the call never answered"
            time.sleep(0.01)
        answers.wait([fast], 0)
        assert fast.result() == ((42, None), (43, None))
    finally:
        gated.release.set()
        for call in (slow, fast):
            call.retire()
            call.thread.join(30)


def test_a_lost_gpu_ends_its_pcie_threads_and_close_leaves_none(
    fake_nvml: FakeNvml, reader: Reader
) -> None:
    fake_nvml.write(Scenario(gpus=[FakeGpu(), FakeGpu()]))
    before = threading.active_count()
    r = reader()
    r.read()
    assert threading.active_count() == before + 2  # one per GPU: TX and RX
    lost = FakeGpu()
    lost.errors = {"nvmlDeviceGetUtilizationRates": "GPU_IS_LOST"}
    fake_nvml.write(Scenario(gpus=[lost, FakeGpu()]))
    (g0, g1), _ = r.read()
    assert g0.lost and not g1.lost
    deadline = time.monotonic() + 30
    while threading.active_count() > before + 1:  # GPU 0's thread ends
        assert time.monotonic() < deadline, "a lost GPU's PCIe thread did not end"
        time.sleep(0.01)
    r.close()
    assert threading.active_count() == before


def test_slow_calls_delay_but_do_not_break(fake_nvml: FakeNvml, reader: Reader) -> None:
    gpu = FakeGpu(temperature=80)
    gpu.sleeps_ms = {"nvmlDeviceGetTemperatureV": 300}
    fake_nvml.write(Scenario(gpus=[gpu, FakeGpu()]))
    r = reader()
    start = time.perf_counter()
    (g0, g1), errors = r.read()
    assert time.perf_counter() - start >= 0.3
    assert errors == () and g0.temperature_c == 80.0 and g1.temperature_c == 45.0


# ---------------------------------------------------------------------------- no NVML


def test_driver_not_loaded(fake_nvml: FakeNvml, reader: Reader) -> None:
    fake_nvml.write(Scenario(init_result="DRIVER_NOT_LOADED"))
    r = reader()
    assert r.driver.available is False
    assert r.driver.error is not None and "driver is not loaded" in r.driver.error
    assert r.read() == ((), ())
    r.close()
    r.close()


def test_version_mismatch(fake_nvml: FakeNvml, reader: Reader) -> None:
    fake_nvml.write(Scenario(init_result="LIB_RM_VERSION_MISMATCH"))
    r = reader()
    assert r.driver.available is False
    assert r.driver.error is not None and "version mismatch" in r.driver.error
    assert "reboot" in r.driver.error.lower()


def test_other_init_failures_are_said(fake_nvml: FakeNvml, reader: Reader) -> None:
    fake_nvml.write(Scenario(init_result="NO_PERMISSION"))
    assert "No permission" in (reader().driver.error or "")
    fake_nvml.write(Scenario(init_result="INSUFFICIENT_POWER"))
    error = reader().driver.error or ""
    assert "NVML failed to initialize" in error and "Insufficient External Power" in error


def test_close_is_idempotent_and_stops_reading(fake_nvml: FakeNvml, reader: Reader) -> None:
    r = reader()
    assert len(r.read()[0]) == 1
    before = threading.active_count()
    r.close()
    r.close()
    assert r.read() == ((), ())
    assert threading.active_count() <= before
    # NVML was shut down as many times as it was started: a new reader works
    assert len(reader().read()[0]) == 1


_PROBE = """
import ctypes, json
try:
    ctypes.CDLL("libnvidia-ml.so.1")
    print(json.dumps({"real": True}))
except OSError:
    from gputop.sources.nvml import NvmlReader
    r = NvmlReader()
    print(json.dumps({"real": False, "available": r.driver.available, "error": r.driver.error,
                      "read": repr(r.read())}))
    r.close()
"""


def test_no_library_at_all(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": str(tmp_path), "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result = json.loads(out.stdout)
    if result["real"]:
        pytest.skip("this machine has a real libnvidia-ml.so.1")
    assert result["available"] is False
    assert "libnvidia-ml.so.1 not found" in result["error"]
    assert result["read"] == "((), ())"


def test_in_a_subprocess_via_the_environment(
    fake_nvml_env: Callable[..., dict[str, str]],
) -> None:
    env = fake_nvml_env(many_gpus(2, 2))
    env["PYTHONPATH"] = str(ROOT)
    code = (
        "from gputop.sources.nvml import NvmlReader; r = NvmlReader(); g, e = r.read(); "
        "print(r.driver.driver_version, len(g), [len(x.processes) for x in g]); r.close()"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "550.54.15 2 [2, 2]"


# ------------------------------------------------------- static values, shared unchanged parts


def test_static_values_are_read_once_per_handle_and_again_after_a_lost_gpu(
    fake_nvml: FakeNvml, reader: Reader, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Identity and limits (max PCIe link, max clocks, PCI ids) are read when a GPU is
    opened, not every tick; a GPU that was lost is opened again and they are read afresh
    (here its max link changed while it was away)."""
    counted = ("nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetPciInfo")
    calls: dict[str, list[object]] = {name: [] for name in counted}
    for name in counted:
        real = getattr(pynvml, name)

        def counting(handle: object, *args: object, _real: Any = real, _name: str = name) -> object:
            calls[_name].append(handle)
            return _real(handle, *args)

        monkeypatch.setattr(pynvml, name, counting)

    def scenario(lost: bool = False, max_gen: int = 4) -> Scenario:
        gpus = [FakeGpu(pcie_gen=4, pcie_max_gen=max_gen) for _ in range(2)]
        if lost:
            gpus[1].errors = {"*": "GPU_IS_LOST"}
        return Scenario(gpus=gpus)

    fake_nvml.write(scenario())
    r = reader()
    for _ in range(5):
        gpus, _ = r.read()
    assert [len(calls[name]) for name in counted] == [2, 2]  # once per GPU, not per tick
    assert [g.pcie.max_gen for g in gpus] == [4, 4]
    fake_nvml.write(scenario(lost=True))
    (_, g1), _ = r.read()
    assert g1.lost and g1.pcie.max_gen is None
    fake_nvml.write(scenario(max_gen=5))
    for _ in range(3):
        (g0, g1), _ = r.read()
    assert [len(calls[name]) for name in counted] == [3, 3]  # GPU 1 once more, on its return
    assert (g0.pcie.max_gen, g1.pcie.max_gen) == (4, 5)  # read afresh, not the old value
    assert g1.pcie.link_max_bytes_per_s == link_max_bytes_per_s(5, 16)


def test_unchanged_parts_of_a_gpu_sample_are_shared_from_tick_to_tick(
    fake_nvml: FakeNvml, reader: Reader
) -> None:
    """An unchanged GPU gives last read's sample object again (the history holds one
    copy); a changed value makes a new sample with that value, sharing the parts that
    did not change. Values are never stale: each read reflects NVML's answers."""
    fake_nvml.write(Scenario(gpus=[FakeGpu(util_gpu=10, processes=[FakeProcess(100)])]))
    r = reader()
    (a,), _ = r.read()
    (b,), _ = r.read()
    assert b is a
    fake_nvml.write(Scenario(gpus=[FakeGpu(util_gpu=55, processes=[FakeProcess(100)])]))
    (c,), _ = r.read()
    assert c is not a and c.utilization.gpu == 55.0 and a.utilization.gpu == 10.0
    assert c.memory is a.memory and c.clocks is a.clocks and c.pcie is a.pcie
    assert c.processes is a.processes
    fake_nvml.write(
        Scenario(gpus=[FakeGpu(util_gpu=55, memory_used=3 * GiB, processes=[FakeProcess(100)])])
    )
    (d,), _ = r.read()
    assert d.memory.used == 3 * GiB and d.memory is not c.memory
    assert d.utilization is c.utilization


def test_a_changed_process_row_shares_its_unchanged_values(
    fake_nvml: FakeNvml, reader: Reader
) -> None:
    """A row whose SM % moved is a new row with the new value, but its pid and memory are
    the last row's objects, and a whole percentage is one shared float: a history of 600
    snapshots of busy processes holds one copy of what did not change."""

    def scenario(sm: int) -> Scenario:
        proc = FakeProcess(4321, used_memory=5 * GiB)
        return Scenario(gpus=[FakeGpu(processes=[proc], samples=[FakeSample(4321, sm=sm)])])

    fake_nvml.write(scenario(30))
    r = reader()
    (a,), _ = r.read()
    fake_nvml.write(scenario(40))
    (b,), _ = r.read()
    (pa,), (pb,) = a.processes, b.processes
    assert (pa.sm_percent, pb.sm_percent) == (30.0, 40.0)  # fresh values, never stale
    assert pb is not pa and pb.pid is pa.pid and pb.gpu_memory is pa.gpu_memory
    fake_nvml.write(scenario(30))
    (c,), _ = r.read()
    (pc,) = c.processes
    assert pc.sm_percent is pa.sm_percent  # one float object for 30 %


def test_each_read_walks_only_what_changed_and_says_each_impossible_value(
    fake_nvml: FakeNvml, reader: Reader, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check walks what the last read's check did not give out: a GPU whose values did
    not change, and the parts of one that did, are the last read's objects, not walked
    again; an impossible value is n/a and said at every read, as at the first."""
    fake_nvml.write(
        Scenario(
            gpus=[
                FakeGpu(memory_used=90 * GiB, memory_free=0, processes=[FakeProcess(5)]),
                FakeGpu(pstate=20, processes=[FakeProcess(6)]),
                FakeGpu(processes=[FakeProcess(7)]),
            ]
        )
    )
    walked: list[str] = []
    walk = model._Check.walk

    def counted(check: Any, obj: Any, path: str) -> Any:
        if id(obj) not in check.ok:
            walked.append(type(obj).__name__)
        return walk(check, obj, path)

    monkeypatch.setattr(model._Check, "walk", counted)
    r = reader()
    reads = []
    for _ in range(3):
        walked.clear()
        reads.append((*r.read(), sorted(walked)))
    first, *later = reads
    assert sorted(first[2]) == sorted(["GpuSample", "GpuProcess", *_PARTS] * 3)
    for gpus, errors, walks in later:
        # the GPU with an impossible scalar is made anew; its memory part is refused anew
        assert walks == ["GpuMemory", "GpuSample", "GpuSample"]
        assert [(e.gpu, e.metric) for e in errors] == [(0, "memory.used"), (1, "performance_state")]
        assert errors == first[1]
        assert gpus[0].memory.used is None and gpus[1].performance_state is None
        assert gpus[2] is first[0][2]  # unchanged: the same object
        assert all(a.processes is b.processes for a, b in zip(gpus, first[0], strict=True))


#: The parts of a GpuSample the check walks (each a dataclass of the model).
_PARTS = ("Activity", "Clocks", "GpuMemory", "Nvlink", "Pcie", "Utilization")
