"""A pid NVML lists but that cannot be a real process is never shown, so never offered to a
signal (issue 10): 0, 4294967295, above pid_max, listed twice, or holding no /dev/nvidia*
device where that can be checked."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
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


def test_pid_check_answers_steady_holders_from_pidfds_with_the_same_answers(
    devices: Path, holder: int, bystander: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counted: a process found holding is answered from its pidfd, tick after tick, with
    no /proc/PID/stat read; once it exits (a zombie first, then reaped) its pid goes back to
    the start-time comparison, and every answer equals a check without pidfds."""
    fast = PidCheck(device_prefix=str(devices / "nvidia"))
    plain = PidCheck(device_prefix=str(devices / "nvidia"))
    plain._use_pidfds, plain._poll = False, None
    if not fast._use_pidfds:
        pytest.skip("no pidfds here (os.pidfd_open and select.poll)")
    reads: list[int] = []
    start = PidCheck._start

    def counted(self: PidCheck, pid: int) -> bytes | None:
        if self is fast:
            reads.append(pid)
        return start(self, pid)

    monkeypatch.setattr(PidCheck, "_start", counted)

    def tick() -> list[bool | None]:
        answers = [fast.holds_device(holder), fast.holds_device(bystander)]
        assert answers == [plain.holds_device(holder), plain.holds_device(bystander)]
        for check in (fast, plain):
            check.forget_except({holder, bystander})
        return answers

    assert tick() == [True, False]
    assert reads == [holder, bystander]  # found holding: read once
    for _ in range(3):
        assert tick() == [True, False]
    assert reads.count(holder) == 1  # then answered by its pidfd
    os.kill(holder, signal.SIGKILL)  # a zombie until reaped (its parent is this test)
    deadline = time.monotonic() + 30
    while fast._poll is not None and not fast._poll.poll(0):
        assert time.monotonic() < deadline, "the pidfd never reported the exit"
    assert tick()[0] is True  # a zombie keeps its start time: both checks say so
    assert reads.count(holder) == 2  # the pidfd reported the exit: back to /proc stat
    os.waitpid(holder, 0)  # reaped: the pid is gone
    assert tick()[0] is None  # not in this PID namespace any more: cannot tell, both
    fast.close()
    assert fast._pidfds == {}
