"""Every driver generation and MIG, through the real pynvml (issue 10).

The fake libnvidia-ml.so.1 is built once per driver profile (tests/fakenvml: a linker
version script leaves out the symbols an older branch lacks; r535-legacy fills ``_v3`` with
32-byte entries) and each profile plays the same machine (tests/driver_profiles.py): five
real ``sleep`` processes on two GPUs, the second an A100 in MIG mode (a V100 on r418).
``gputop --once --json`` and the dashboard (Pilot, in a subprocess: one process loads one
build) must show every process, no phantom, and the MIG devices.
"""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import fakenvml
from tests.driver_profiles import (
    PROFILE_NAMES,
    ROOT,
    once_json,
    profile_scenario,
    sleepers,
)
from tests.fakenvml import DriverProfile, FakeGpu, FakeProcess, GiB

pytestmark = pytest.mark.usefixtures("fake_nvml_lib")


@pytest.fixture(scope="module")
def pids() -> Iterator[list[int]]:
    """Five GPU processes and a sixth, the phantom: real, but not on any GPU."""
    with sleepers(6) as pids:
        yield pids


def _expected_processes(profile: str, pids: list[int]) -> dict[int, list[tuple[int, str, int]]]:
    a, b, c, d, e = pids[:5]
    return {
        0: [(a, "C", 1 * GiB), (b, "C", 2 * GiB), (c, "C+G", 3 * GiB)],
        1: [(d, "C", 4 * GiB), (e, "C", 5 * GiB if profile == "r418" else 2 * GiB)],
    }


@pytest.mark.parametrize("profile", PROFILE_NAMES)
def test_once_json_shows_every_process_on_every_profile(
    profile: str, pids: list[int], tmp_path: Path
) -> None:
    rc, data, err = once_json(profile, profile_scenario(profile, pids[:5], pids[5]), tmp_path)
    assert rc == 0, err
    assert data is not None
    assert data["driver"]["driver_version"] == fakenvml.PROFILES[profile].driver_version
    want = _expected_processes(profile, pids)
    for g in data["gpus"]:
        got = sorted((p["pid"], p["type"], p["gpu_memory"]) for p in g["processes"])
        assert got == want[g["index"]], (profile, g["index"])
        assert g["processes_unavailable"] is None
        assert all(p["visible"] is True for p in g["processes"])
    shown = {p["pid"] for g in data["gpus"] for p in g["processes"]}
    assert pids[5] not in shown  # the phantom (a memory value read as a pid) never shows
    messages = " ".join(e["message"] for e in data["errors"])
    assert "not supported" not in messages
    assert "cannot be a real process" not in messages
    compat = data["driver"]["compat"]
    if profile == "r418":
        assert any("RunningProcesses (v1)" in c for c in compat)
        assert any("MIG" in c for c in compat)
        assert data["gpus"][1]["mig_devices"] == []
    elif profile == "r470":
        assert any("RunningProcesses_v2 (v2)" in c for c in compat)
    elif profile == "r535-legacy":
        assert any("535.43-535.86 layout" in c for c in compat)
    else:
        assert compat == []
    if profile != "r418":
        g1 = data["gpus"][1]
        assert g1["mig_mode"] is True and g1["utilization"]["gpu"] is None
        migs = g1["mig_devices"]
        assert [(m["profile"], m["gpu_instance_id"], m["compute_instance_id"]) for m in migs] == [
            ("3g.40gb", 1, 0),
            ("2g.20gb", 2, 0),
            ("1g.10gb", 3, 0),
        ]
        assert [(m["memory"]["used"], m["memory"]["total"]) for m in migs] == [
            (5 * GiB, 40 * GiB),
            (2 * GiB, 20 * GiB),
            (0, 10 * GiB),
        ]
        assert all(m["uuid"].startswith("MIG-") for m in migs)
        assert data["schema"] == 1


def test_legacy_layout_read_as_24_byte_entries_shows_the_phantom(
    pids: list[int], tmp_path: Path
) -> None:
    """The bug the detection fixes, shown on the fake itself: reading r535-legacy's _v3 with
    nvml.h's 24-byte entries yields the phantom pid (so the profile is a faithful test)."""
    import pynvml  # noqa: F401  (the fake is driven in a subprocess below)

    scenario = profile_scenario("r535-legacy", pids[:5], pids[5])
    path = scenario.write(tmp_path / "s.txt")
    env = fakenvml.subprocess_env(path, profile="r535-legacy")
    code = (
        "import pynvml; pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByIndex(0);"
        "print([p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses_v3(h)])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert pids[5] in seen  # 24-byte reading: the memory value taken as a pid


def test_a_driver_without_any_process_call_says_so(tmp_path: Path) -> None:
    base = "nvmlDeviceGet{}RunningProcesses{}"
    bare = DriverProfile(
        "no-process-calls",
        "410.129",
        10000,
        hidden=tuple(
            base.format(kind, v)
            for kind in ("Compute", "Graphics", "MPSCompute")
            for v in ("", "_v2", "_v3")
        ),
    )
    scenario = bare.scenario(gpus=[FakeGpu(processes=[FakeProcess(4242)])])
    path = scenario.write(tmp_path / "s.txt")
    env = fakenvml.subprocess_env(path, profile=bare)
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run(
        [sys.executable, "-m", "gputop", "--once", "--json"],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    (g,) = json.loads(out.stdout)["gpus"]
    assert g["processes"] == []
    why = g["processes_unavailable"]
    assert why.startswith("process list unavailable: driver lacks")
    assert "not supported" not in why
    text = subprocess.run(
        [sys.executable, "-m", "gputop", "--once"],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    ).stdout
    assert "driver lacks nvmlDeviceGetComputeRunningProcesses" in " ".join(text.split())


def _dashboard(profile: str, scenario: fakenvml.Scenario, tmp_path: Path) -> dict[str, Any]:
    path = scenario.write(tmp_path / f"dash-{profile}.txt")
    env = fakenvml.subprocess_env(path, profile=profile)
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run(
        [sys.executable, "-m", "tests.profile_dashboard", "200", "50"],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    data: dict[str, Any] = json.loads(out.stdout)
    return data


@pytest.mark.parametrize("profile", PROFILE_NAMES)
def test_dashboard_on_every_profile(profile: str, pids: list[int], tmp_path: Path) -> None:
    data = _dashboard(profile, profile_scenario(profile, pids[:5], pids[5]), tmp_path)
    a, b, c, d, e = pids[:5]
    assert data["rows"] == sorted([f"0:{a}", f"0:{b}", f"0:{c}", f"1:{d}", f"1:{e}"]), profile
    screen = data["screen"]
    assert str(pids[5]) not in screen
    assert "not supported" not in screen
    gpu1 = data["gpus"]["1"]
    if profile == "r418":
        assert "MIG" not in gpu1
    else:
        assert "MIG on, 3 devices" in gpu1
        lines = [ln for ln in gpu1.splitlines() if ln.strip().startswith("MIG ")]
        assert len(lines) == 3
        assert "3g.40gb" in lines[0] and "GI  1 CI  0" in lines[0] and f"procs 1: {d}" in lines[0]
        assert "2g.20gb" in lines[1] and f"procs 1: {e}" in lines[1]
        assert "1g.10gb" in lines[2] and "procs 0" in lines[2]
        assert "5.0GiB/40.0GiB" in lines[0]
        assert "cannot tell" in gpu1


def test_gpus_accepts_a_mig_uuid(pids: list[int], tmp_path: Path) -> None:
    scenario = profile_scenario("current", pids[:5])
    mig = scenario.gpus[1].migs[1].default_uuid(1)
    rc, data, err = once_json("current", scenario, tmp_path, "--gpus", mig)
    assert rc == 0, err
    assert data is not None
    assert [g["index"] for g in data["gpus"]] == [1]
    rc, data, err = once_json("current", scenario, tmp_path, "--gpus", "MIG-0000dead")
    assert rc == 2 and "matches no GPU" in err


def test_fake_mig_handles_through_pynvml(fake_nvml: fakenvml.FakeNvml) -> None:
    """The fake's MIG calls, in-process through the real pynvml (default build)."""
    import pynvml

    scenario = profile_scenario("current", [11, 12, 13, 14, 15])
    fake_nvml.write(scenario)
    pynvml.nvmlInit()
    try:
        h = pynvml.nvmlDeviceGetHandleByIndex(1)
        assert pynvml.nvmlDeviceGetMigMode(h) == [1, 1]
        assert pynvml.nvmlDeviceGetMaxMigDeviceCount(h) == 7
        m = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(h, 1)
        assert pynvml.nvmlDeviceGetName(m) == "NVIDIA A100-SXM4-80GB MIG 2g.20gb"
        assert pynvml.nvmlDeviceGetUUID(m) == scenario.gpus[1].migs[1].default_uuid(1)
        assert (pynvml.nvmlDeviceGetGpuInstanceId(m), pynvml.nvmlDeviceGetComputeInstanceId(m)) == (
            2,
            0,
        )
        mem = pynvml.nvmlDeviceGetMemoryInfo(m)
        assert (mem.total, mem.used) == (20 * GiB, 2 * GiB)
        parent = pynvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(m)
        assert ctypes.cast(parent, ctypes.c_void_p).value == ctypes.cast(h, ctypes.c_void_p).value
        assert [p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(m)] == [15]
        with pytest.raises(pynvml.NVMLError_NotFound):
            pynvml.nvmlDeviceGetMigDeviceHandleByIndex(h, 5)
        with pytest.raises(pynvml.NVMLError_NotSupported):
            pynvml.nvmlDeviceGetUtilizationRates(h)  # not given for a GPU in MIG mode
        with pytest.raises(pynvml.NVMLError_NotSupported):
            pynvml.nvmlDeviceGetGpuInstanceId(h)  # not a MIG device handle
        by_uuid = pynvml.nvmlDeviceGetHandleByUUID(scenario.gpus[1].migs[0].default_uuid(1))
        assert pynvml.nvmlDeviceGetGpuInstanceId(by_uuid) == 1
    finally:
        pynvml.nvmlShutdown()


def test_once_text_says_what_an_old_driver_made_gputop_fall_back_to(
    pids: list[int], tmp_path: Path
) -> None:
    path = profile_scenario("r418", pids[:5]).write(tmp_path / "s.txt")
    env = fakenvml.subprocess_env(path, profile="r418")
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run(
        [sys.executable, "-m", "gputop", "--once"],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert (
        "Older driver: compute process list read with nvmlDeviceGetComputeRunningProcesses (v1)"
        in text
    )
    assert "not supported" not in text
    for pid in pids[:5]:
        assert f" {pid} " in out.stdout
