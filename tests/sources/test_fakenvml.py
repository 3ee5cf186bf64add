"""The fake libnvidia-ml.so.1 itself: what it exports, the NVML gotchas it reproduces,
scenario parsing, error and delay injection, live reload, and nvitop running on it."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pynvml
import pytest

from tests.conftest import missing, require_tool
from tests.fakenvml import (
    FakeGpu,
    FakeNvml,
    FakeProcess,
    FakeSample,
    GiB,
    MiB,
    Scenario,
    gen_stubs,
    load_in_process,
    many_gpus,
    nvml_header,
)


@pytest.fixture
def nvml(fake_nvml: FakeNvml) -> Iterator[FakeNvml]:
    """pynvml initialised on the in-process fake, shut down afterwards."""
    pynvml.nvmlInit()
    try:
        yield fake_nvml
    finally:
        pynvml.nvmlShutdown()


def _lib() -> ctypes.CDLL:
    return load_in_process()


def test_exports_every_function_declared_in_nvml_h(fake_nvml_lib: Path) -> None:
    decls = gen_stubs.declarations(nvml_header().read_text(encoding="utf-8", errors="replace"))
    names = {name for _, name, _ in decls}
    assert len(names) > 400
    for must in ("nvmlInitWithFlags", "nvmlInit_v2", "nvmlInit", "nvmlShutdown", "nvmlErrorString"):
        assert must in names
    lib = ctypes.CDLL(str(fake_nvml_lib))
    missing = [n for n in sorted(names) if not hasattr(lib, n)]
    assert missing == []


def test_soname_lets_pynvml_reuse_the_loaded_library(fake_nvml_lib: Path) -> None:
    objdump = require_tool("objdump")
    out = subprocess.run(
        [objdump, "-p", str(fake_nvml_lib)], capture_output=True, text=True, check=True
    ).stdout
    assert "SONAME               libnvidia-ml.so.1" in out


def test_unimplemented_functions_answer_not_supported(nvml: FakeNvml) -> None:
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlDeviceGetBAR1MemoryInfo(handle)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlDeviceGetBoardPartNumber(handle)


def test_calls_before_init_answer_uninitialized(fake_nvml: FakeNvml) -> None:
    count = ctypes.c_uint(0)
    assert _lib().nvmlDeviceGetCount_v2(ctypes.byref(count)) == pynvml.NVML_ERROR_UNINITIALIZED


def test_init_results(fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_nvml.write(Scenario(init_result="DRIVER_NOT_LOADED"))
    with pytest.raises(pynvml.NVMLError_DriverNotLoaded):
        pynvml.nvmlInit()
    fake_nvml.write(Scenario(init_result="LIB_RM_VERSION_MISMATCH"))
    with pytest.raises(pynvml.NVMLError_LibRmVersionMismatch):
        pynvml.nvmlInit()
    # the C entry points other tools use answer the same
    assert _lib().nvmlInit_v2() == pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH
    monkeypatch.delenv("FAKE_NVML_SCENARIO")
    with pytest.raises(pynvml.NVMLError_DriverNotLoaded):
        pynvml.nvmlInit()
    monkeypatch.setenv("FAKE_NVML_SCENARIO", str(fake_nvml.path.with_name("missing.txt")))
    with pytest.raises(pynvml.NVMLError_Unknown):
        pynvml.nvmlInit()


def test_log_records_init_and_shutdown(
    fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    log = tmp_path / "nvml.log"
    monkeypatch.setenv("FAKE_NVML_LOG", str(log))
    pynvml.nvmlInit()
    pynvml.nvmlShutdown()
    fake_nvml.write(Scenario(init_result="DRIVER_NOT_LOADED"))
    with pytest.raises(pynvml.NVMLError_DriverNotLoaded):
        pynvml.nvmlInit()
    pid = os.getpid()
    assert log.read_text().splitlines() == [
        f"nvmlInit 0 {pid}",
        f"nvmlShutdown 0 {pid}",
        f"nvmlInit 9 {pid}",
    ]


def test_system_and_identity(nvml: FakeNvml) -> None:
    nvml.write(
        Scenario(
            driver_version="535.104.05",
            cuda_version=12020,
            nvml_version="12.535.104.05",
            gpus=[FakeGpu(name="NVIDIA A100-SXM4-80GB", uuid="GPU-abc", bus_id="00000000:3B:00.0")],
        )
    )
    assert pynvml.nvmlSystemGetDriverVersion() == "535.104.05"
    assert pynvml.nvmlSystemGetCudaDriverVersion_v2() == 12020
    assert pynvml.nvmlSystemGetNVMLVersion() == "12.535.104.05"
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    assert pynvml.nvmlDeviceGetName(h) == "NVIDIA A100-SXM4-80GB"
    assert pynvml.nvmlDeviceGetUUID(h) == "GPU-abc"
    pci = pynvml.nvmlDeviceGetPciInfo(h)
    assert pci.busId == "00000000:3B:00.0"
    assert pci.bus == 0x3B
    assert pynvml.nvmlDeviceGetMinorNumber(h) == 0
    assert pynvml.nvmlDeviceGetIndex(pynvml.nvmlDeviceGetHandleByUUID("GPU-abc")) == 0


def test_non_utf8_name_reaches_pynvml_as_raw_bytes(nvml: FakeNvml) -> None:
    nvml.write(Scenario(gpus=[FakeGpu(name=b"Tesla \xff\xfe")]))
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(UnicodeDecodeError):
        pynvml.nvmlDeviceGetName(h)
    assert pynvml.nvmlDeviceGetName.__wrapped__(h) == b"Tesla \xff\xfe"


def test_memory_v1_includes_reserved_and_v2_checks_the_version(nvml: FakeNvml) -> None:
    nvml.write(
        Scenario(gpus=[FakeGpu(memory_total=80 * GiB, memory_used=10 * GiB, memory_reserved=GiB)])
    )
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    v1 = pynvml.nvmlDeviceGetMemoryInfo(h)
    assert (v1.total, v1.used, v1.free) == (80 * GiB, 11 * GiB, 69 * GiB)
    v2 = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
    assert (v2.total, v2.used, v2.free, v2.reserved) == (80 * GiB, 10 * GiB, 69 * GiB, GiB)
    wrong = pynvml.c_nvmlMemory_v2_t()
    wrong.version = 1
    ret = _lib().nvmlDeviceGetMemoryInfo_v2(h, ctypes.byref(wrong))
    assert ret == pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH


def test_process_list_sizing_protocol(nvml: FakeNvml) -> None:
    nvml.write(Scenario(gpus=[FakeGpu(processes=[FakeProcess(11), FakeProcess(12)]), FakeGpu()]))
    lib = _lib()
    fn = lib.nvmlDeviceGetComputeRunningProcesses_v3
    h0 = pynvml.nvmlDeviceGetHandleByIndex(0)
    count = ctypes.c_uint(0)
    assert fn(h0, ctypes.byref(count), None) == pynvml.NVML_ERROR_INSUFFICIENT_SIZE
    assert count.value == 2
    count = ctypes.c_uint(1)
    arr = (pynvml.c_nvmlProcessInfo_v3_t * 1)()
    assert fn(h0, ctypes.byref(count), arr) == pynvml.NVML_ERROR_INSUFFICIENT_SIZE
    h1 = pynvml.nvmlDeviceGetHandleByIndex(1)
    count = ctypes.c_uint(0)
    assert fn(h1, ctypes.byref(count), None) == pynvml.NVML_SUCCESS
    assert count.value == 0


def test_process_lists_through_pynvml(nvml: FakeNvml) -> None:
    nvml.write(
        Scenario(
            gpus=[
                FakeGpu(
                    processes=[
                        FakeProcess(100, 2 * GiB),
                        FakeProcess(101, None, "C+G"),
                        FakeProcess(102, 5 * MiB, "G", gpu_instance_id=1, compute_instance_id=0),
                    ]
                )
            ]
        )
    )
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    compute = pynvml.nvmlDeviceGetComputeRunningProcesses(h)
    graphics = pynvml.nvmlDeviceGetGraphicsRunningProcesses(h)
    assert [(p.pid, p.usedGpuMemory) for p in compute] == [(100, 2 * GiB), (101, None)]
    assert [(p.pid, p.gpuInstanceId, p.computeInstanceId) for p in graphics] == [
        (101, 0xFFFFFFFF, 0xFFFFFFFF),
        (102, 1, 0),
    ]
    # the older entry points read the same lists
    assert [p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses_v2(h)] == [100, 101]


def test_process_utilization_not_found_when_no_newer_sample(nvml: FakeNvml) -> None:
    nvml.write(
        Scenario(
            gpus=[
                FakeGpu(
                    processes=[FakeProcess(7)],
                    samples=[FakeSample(7, 1000, sm=30), FakeSample(7, 2000, sm=50, mem=9)],
                )
            ]
        )
    )
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    assert [
        (s.pid, s.timeStamp, s.smUtil) for s in pynvml.nvmlDeviceGetProcessUtilization(h, 0)
    ] == [
        (7, 1000, 30),
        (7, 2000, 50),
    ]
    assert [s.memUtil for s in pynvml.nvmlDeviceGetProcessUtilization(h, 1000)] == [9]
    with pytest.raises(pynvml.NVMLError_NotFound):
        pynvml.nvmlDeviceGetProcessUtilization(h, 2000)


def test_relative_sample_timestamps_are_always_fresh(nvml: FakeNvml) -> None:
    nvml.write(Scenario(gpus=[FakeGpu(samples=[FakeSample(7, -500_000, sm=42)])]))
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    since = time.time_ns() // 1000 - 1_000_000
    (sample,) = pynvml.nvmlDeviceGetProcessUtilization(h, since)
    assert sample.smUtil == 42
    assert abs(sample.timeStamp - (time.time_ns() // 1000 - 500_000)) < 200_000


def test_every_metric_and_not_supported(nvml: FakeNvml) -> None:
    nvml.write(
        Scenario(
            gpus=[
                FakeGpu(
                    util_gpu=97,
                    util_mem=41,
                    temperature=71,
                    power_mw=312_345,
                    power_limit_mw=400_000,
                    fan=55,
                    sm_clock=1410,
                    mem_clock=1593,
                    sm_clock_max=1980,
                    mem_clock_max=2619,
                    clock_event_reasons=0x24,
                    pcie_gen=3,
                    pcie_width=8,
                    pcie_max_gen=4,
                    pcie_max_width=16,
                    pcie_tx_kbps=123,
                    pcie_rx_kbps=456,
                    encoder=12,
                    decoder=34,
                    mig_mode=(0, 1),  # MIG pending: utilization still given,
                    ecc_uncorrected=3,
                    ecc_uncorrected_aggregate=9,
                ),
                FakeGpu(fan=None, mig_mode=None, ecc_uncorrected=None, clock_event_reasons=None),
            ]
        )
    )
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    u = pynvml.nvmlDeviceGetUtilizationRates(h)
    assert (u.gpu, u.memory) == (97, 41)
    assert pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU) == 71
    assert pynvml.nvmlDeviceGetTemperatureV(h, pynvml.NVML_TEMPERATURE_GPU) == 71
    assert pynvml.nvmlDeviceGetPowerUsage(h) == 312_345
    assert pynvml.nvmlDeviceGetEnforcedPowerLimit(h) == 400_000
    assert pynvml.nvmlDeviceGetFanSpeed(h) == 55
    assert pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM) == 1410
    assert pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM) == 1593
    assert pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM) == 1980
    assert pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM) == 2619
    assert pynvml.nvmlDeviceGetCurrentClocksEventReasons(h) == 0x24
    assert pynvml.nvmlDeviceGetCurrPcieLinkGeneration(h) == 3
    assert pynvml.nvmlDeviceGetCurrPcieLinkWidth(h) == 8
    assert pynvml.nvmlDeviceGetMaxPcieLinkGeneration(h) == 4
    assert pynvml.nvmlDeviceGetMaxPcieLinkWidth(h) == 16
    assert pynvml.nvmlDeviceGetPcieThroughput(h, pynvml.NVML_PCIE_UTIL_TX_BYTES) == 123
    assert pynvml.nvmlDeviceGetPcieThroughput(h, pynvml.NVML_PCIE_UTIL_RX_BYTES) == 456
    assert pynvml.nvmlDeviceGetEncoderUtilization(h)[0] == 12
    assert pynvml.nvmlDeviceGetDecoderUtilization(h)[0] == 34
    assert pynvml.nvmlDeviceGetMigMode(h) == [0, 1]
    uncorrected = pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    assert pynvml.nvmlDeviceGetTotalEccErrors(h, uncorrected, pynvml.NVML_VOLATILE_ECC) == 3
    assert pynvml.nvmlDeviceGetTotalEccErrors(h, uncorrected, pynvml.NVML_AGGREGATE_ECC) == 9
    h1 = pynvml.nvmlDeviceGetHandleByIndex(1)
    calls: list[Callable[[], object]] = [
        lambda: pynvml.nvmlDeviceGetFanSpeed(h1),
        lambda: pynvml.nvmlDeviceGetMigMode(h1),
        lambda: pynvml.nvmlDeviceGetCurrentClocksEventReasons(h1),
        lambda: pynvml.nvmlDeviceGetTotalEccErrors(h1, uncorrected, pynvml.NVML_VOLATILE_ECC),
    ]
    for call in calls:
        with pytest.raises(pynvml.NVMLError_NotSupported):
            call()


def test_error_rules_match_exact_base_and_star(nvml: FakeNvml) -> None:
    nvml.write(
        Scenario(
            gpus=[
                FakeGpu(errors={"*": "GPU_IS_LOST", "nvmlDeviceGetHandleByIndex": 0}),
                FakeGpu(errors={"nvmlDeviceGetComputeRunningProcesses": "NO_PERMISSION"}),
                FakeGpu(errors={"nvmlDeviceGetMemoryInfo_v2": "FUNCTION_NOT_FOUND"}),
            ],
            errors={"nvmlDeviceGetFanSpeed": "NOT_SUPPORTED"},
        )
    )
    h0, h1, h2 = (pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(3))
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        pynvml.nvmlDeviceGetName(h0)
    with pytest.raises(pynvml.NVMLError_NoPermission):
        pynvml.nvmlDeviceGetComputeRunningProcesses(h1)  # _v3 matched by its base name
    with pytest.raises(pynvml.NVMLError_NoPermission):
        pynvml.nvmlDeviceGetComputeRunningProcesses_v2(h1)
    pynvml.nvmlDeviceGetGraphicsRunningProcesses(h1)
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        pynvml.nvmlDeviceGetMemoryInfo(h2, version=pynvml.nvmlMemory_v2)
    assert pynvml.nvmlDeviceGetMemoryInfo(h2).total == 80 * GiB  # exact rule: v1 unaffected
    for h in (h1, h2):  # global rule on every GPU
        with pytest.raises(pynvml.NVMLError_NotSupported):
            pynvml.nvmlDeviceGetFanSpeed(h)


def test_scenario_changes_are_seen_while_running(nvml: FakeNvml) -> None:
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    assert pynvml.nvmlDeviceGetUtilizationRates(h).gpu == 50
    nvml.write(Scenario(gpus=[FakeGpu(util_gpu=93)]))
    assert pynvml.nvmlDeviceGetUtilizationRates(h).gpu == 93
    nvml.write(Scenario(gpus=[FakeGpu(errors={"*": "GPU_IS_LOST"})]))
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        pynvml.nvmlDeviceGetUtilizationRates(h)
    nvml.write(Scenario(gpus=[FakeGpu(util_gpu=12)]))
    assert pynvml.nvmlDeviceGetUtilizationRates(h).gpu == 12


def test_malformed_edit_keeps_the_previous_scenario(nvml: FakeNvml) -> None:
    nvml.write(Scenario(gpus=[FakeGpu(util_gpu=61)]))
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    assert pynvml.nvmlDeviceGetUtilizationRates(h).gpu == 61
    nvml.path.write_text("version 1\nbogus directive\n")
    assert pynvml.nvmlDeviceGetUtilizationRates(h).gpu == 61


def test_sleep_rules_delay_calls_and_concurrent_calls_overlap(nvml: FakeNvml) -> None:
    """A sleep rule delays its call only, and sleeping calls run side by side (the
    scenario lock is not held while sleeping). Long sleeps, so that the bounds are
    generous for a loaded machine: each one separates "slept" from "did not" and "side by
    side" (1 s) from "in a row" (4 s) by a second or more."""
    nvml.write(Scenario(gpus=[FakeGpu(sleeps_ms={"nvmlDeviceGetPcieThroughput": 1000}), FakeGpu()]))
    h0, h1 = pynvml.nvmlDeviceGetHandleByIndex(0), pynvml.nvmlDeviceGetHandleByIndex(1)
    t = time.perf_counter()
    pynvml.nvmlDeviceGetPcieThroughput(h1, pynvml.NVML_PCIE_UTIL_TX_BYTES)
    assert time.perf_counter() - t < 0.5
    t = time.perf_counter()
    pynvml.nvmlDeviceGetPcieThroughput(h0, pynvml.NVML_PCIE_UTIL_TX_BYTES)
    assert time.perf_counter() - t >= 1.0
    threads = [
        threading.Thread(target=pynvml.nvmlDeviceGetPcieThroughput, args=(h0, c))
        for c in (0, 1, 0, 1)
    ]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    took = time.perf_counter() - t
    assert 1.0 <= took < 3.0, took  # 4 x 1 s side by side, not in a row


def test_sixteen_gpus_with_64_processes(nvml: FakeNvml) -> None:
    nvml.write(many_gpus(16, 64))
    assert pynvml.nvmlDeviceGetCount() == 16
    for i in range(16):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        procs = pynvml.nvmlDeviceGetComputeRunningProcesses(h)
        assert [p.pid for p in procs] == list(range(10_000 + 64 * i, 10_000 + 64 * (i + 1)))
        assert len(pynvml.nvmlDeviceGetProcessUtilization(h, 0)) == 64
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        pynvml.nvmlDeviceGetHandleByIndex(16)


def test_nvitop_runs_on_the_fake(fake_nvml_env: Callable[..., dict[str, str]]) -> None:
    nvitop = shutil.which("nvitop") or str(Path(sys.executable).with_name("nvitop"))
    if not Path(nvitop).exists():
        missing("nvitop is not installed (pip install -e '.[test]')")
    scenario = many_gpus(2, 3)
    scenario.gpus[1].name = "NVIDIA Fake Second"
    env = fake_nvml_env(scenario)
    env["COLUMNS"] = "120"
    result = subprocess.run(
        [nvitop, "-1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "550.54.15" in result.stdout
    assert "Fake Second" in result.stdout
    assert "00000000:19:00.0" in result.stdout
    assert "10005" in result.stdout  # a process on the second GPU
