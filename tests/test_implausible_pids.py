"""A pid NVML lists but that cannot be a real process is never shown, so never offered to a
signal (issue 10): 0, 4294967295, above pid_max, listed twice, or holding no /dev/nvidia*
device where that can be checked."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputop.actions import pid_max
from gputop.sources.nvml import NvmlReader, PidCheck
from tests.fakenvml import FakeGpu, FakeNvml, FakeProcess, Scenario
from tests.pids import free_pid


@pytest.fixture
def devices(tmp_path: Path) -> Path:
    """Stand-ins for /dev/nvidia0 and /dev/nvidiactl (a prefix the check is pointed at)."""
    d = tmp_path / "dev"
    d.mkdir()
    (d / "nvidia0").write_bytes(b"")
    (d / "nvidiactl").write_bytes(b"")
    return d


@pytest.fixture
def holder(devices: Path) -> Iterator[int]:
    """A process holding the stand-in /dev/nvidia0 open, like a CUDA process."""
    code = "import sys, time; f = open(sys.argv[1]); print('ok', flush=True); time.sleep(60)"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(devices / "nvidia0")], stdout=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stdout.readline() == b"ok\n"
    yield proc.pid
    proc.kill()
    proc.wait()


@pytest.fixture
def bystander() -> Iterator[int]:
    proc = subprocess.Popen(["sleep", "60"])
    yield proc.pid
    proc.kill()
    proc.wait()


def test_pid_check(devices: Path, holder: int, bystander: int, tmp_path: Path) -> None:
    check = PidCheck(device_prefix=str(devices / "nvidia"))
    assert check.checkable()
    assert check.holds_device(holder) is True
    assert check.holds_device(holder) is True  # remembered
    assert check.holds_device(bystander) is False
    free = free_pid()
    assert check.holds_device(free) is None  # not in this PID namespace: cannot tell
    nowhere = PidCheck(device_prefix=str(tmp_path / "nodev" / "nvidia"))
    assert not nowhere.checkable()
    assert nowhere.holds_device(bystander) is None  # no device nodes here: cannot tell


def test_reader_drops_every_implausible_entry(
    fake_nvml: FakeNvml, devices: Path, holder: int, bystander: int
) -> None:
    fake_nvml.write(
        Scenario(
            gpus=[
                FakeGpu(
                    processes=[
                        FakeProcess(holder, used_memory=1 << 30),
                        FakeProcess(holder, used_memory=1 << 30),  # listed twice
                        FakeProcess(bystander),  # holds no /dev/nvidia*
                        FakeProcess(0),
                        FakeProcess(2**32 - 1),
                        FakeProcess(pid_max() + 1),
                    ]
                )
            ]
        )
    )
    r = NvmlReader(pid_check=PidCheck(device_prefix=str(devices / "nvidia")))
    try:
        (g,), errors = r.read()
    finally:
        r.close()
    assert [p.pid for p in g.processes] == [holder]
    (err,) = errors
    for why in (
        "pid 0",
        "pid 4294967295",
        "pid above pid_max",
        "a pid listed twice",
        "holding no /dev/nvidia* device",
    ):
        assert why in err.message
    assert "5 process entries" in err.message and "never signalled" in err.message


def test_nothing_plausible_says_why(fake_nvml: FakeNvml) -> None:
    fake_nvml.write(Scenario(gpus=[FakeGpu(processes=[FakeProcess(0), FakeProcess(2**32 - 1)])]))
    r = NvmlReader()
    try:
        (g,), _ = r.read()
    finally:
        r.close()
    assert g.processes == ()
    assert g.processes_unavailable is not None
    assert g.processes_unavailable.startswith("process list unavailable: all 2 entries")
