"""gputop.actions against real child processes: safe signalling and its refusals."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from typing import cast

import psutil
import pytest

from gputop import actions
from gputop.actions import KillOutcome, KillTarget, send_signal, send_signals, summary
from gputop.model import GpuProcess, ProcessInfo
from tests.builders import kill_target
from tests.helpers.nobody import as_nobody


def _target(pid: int, create_time: float | None) -> KillTarget:
    return KillTarget(pid, create_time, "root", "sleep 60", 0, 2**30)


def _default_signals() -> None:
    """In the child: SIGINT and SIGQUIT back to their defaults. A test run started in
    the background by a non-interactive shell (CI scripts, `pytest &`) inherits them
    ignored, and an ignored SIGINT would not end the child."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "60"], preexec_fn=_default_signals)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=5)


def _live_target(proc: subprocess.Popen[bytes]) -> KillTarget:
    return _target(proc.pid, psutil.Process(proc.pid).create_time())


def test_sigterm_kills_the_child(child: subprocess.Popen[bytes]) -> None:
    outcome = send_signal(_live_target(child), signal.SIGTERM)
    assert outcome == KillOutcome(child.pid, True, f"SIGTERM sent to pid {child.pid}")
    assert child.wait(timeout=5) == -signal.SIGTERM


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_other_offered_signals(child: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    assert send_signal(_live_target(child), sig).ok
    assert child.wait(timeout=5) == -sig


def test_changed_create_time_is_refused_and_child_lives(
    child: subprocess.Popen[bytes],
) -> None:
    real = psutil.Process(child.pid).create_time()
    outcome = send_signal(_target(child.pid, real - 5.0), signal.SIGKILL)
    assert not outcome.ok
    assert outcome.message == f"pid {child.pid} is now a different process; not signalled"
    time.sleep(0.05)
    assert child.poll() is None


def test_unknown_identity_is_refused(child: subprocess.Popen[bytes]) -> None:
    outcome = send_signal(_target(child.pid, None), signal.SIGKILL)
    assert not outcome.ok
    assert "identity" in outcome.message and "not signalled" in outcome.message
    assert child.poll() is None


def test_readonly_refuses(child: subprocess.Popen[bytes]) -> None:
    outcomes = send_signals([_live_target(child)], signal.SIGKILL, readonly=True)
    assert outcomes == (
        KillOutcome(child.pid, False, f"read-only mode: pid {child.pid} not signalled"),
    )
    time.sleep(0.05)
    assert child.poll() is None


def test_signal_not_offered_is_refused(child: subprocess.Popen[bytes]) -> None:
    outcome = send_signal(_live_target(child), signal.SIGHUP)
    assert not outcome.ok and "not offered" in outcome.message
    assert child.poll() is None


@pytest.mark.parametrize(
    ("pid", "words"),
    [
        (0, "not a single process"),
        (-1, "not a single process"),
        (-os.getpid(), "not a single process"),
        (1, "init"),
        (2**32 - 1, "pid_max"),
        (actions.pid_max() + 1, "pid_max"),
        (os.getpid(), "gputop itself"),
        (os.getppid(), "gputop's parent"),
    ],
)
def test_forbidden_pids_are_refused(pid: int, words: str) -> None:
    # A plausible create_time (or the real one), so only the pid rule can refuse.
    try:
        created: float | None = psutil.Process(pid).create_time()
    except (psutil.Error, ValueError, OverflowError):
        created = time.time() - 10
    outcome = send_signal(_target(pid, created), signal.SIGKILL)
    assert not outcome.ok
    assert words in outcome.message
    assert "not signalled" in outcome.message


def test_already_gone() -> None:
    proc = subprocess.Popen(["sleep", "60"])
    target = _live_target(proc)
    proc.kill()
    proc.wait(timeout=5)
    outcome = send_signal(target, signal.SIGTERM)
    assert outcome == KillOutcome(proc.pid, False, f"pid {proc.pid} already gone")


def test_zombie_is_already_gone() -> None:
    proc = subprocess.Popen(["sleep", "60"])
    target = _live_target(proc)
    os.kill(proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while psutil.Process(proc.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    outcome = send_signal(target, signal.SIGTERM)
    assert not outcome.ok and "already gone" in outcome.message and "zombie" in outcome.message
    proc.wait(timeout=5)


def _send_as_nobody(target: KillTarget) -> dict[str, object]:
    """Run send_signal as nobody (``as_nobody``)."""

    def send() -> dict[str, object]:
        out = send_signal(target, signal.SIGKILL)
        return {"ok": out.ok, "message": out.message}

    return cast("dict[str, object]", as_nobody(send))


@pytest.mark.requires_root("needs root to drop to nobody")
def test_permission_denied_for_another_users_process(child: subprocess.Popen[bytes]) -> None:
    result = _send_as_nobody(_live_target(child))
    assert result["ok"] is False
    assert result["message"] == (
        f"permission denied: pid {child.pid} belongs to root (you are nobody)"
    )
    time.sleep(0.05)
    assert child.poll() is None


def test_send_signals_signals_each_pid_once(child: subprocess.Popen[bytes]) -> None:
    live = _live_target(child)
    on_gpu1 = KillTarget(live.pid, live.create_time, live.user, live.command, 1, None)
    outcomes = send_signals([live, on_gpu1, _target(1, 1.0)], signal.SIGTERM)
    assert [o.pid for o in outcomes] == [child.pid, 1]
    assert [o.ok for o in outcomes] == [True, False]
    assert child.wait(timeout=5) == -signal.SIGTERM
    text = summary(outcomes, signal.SIGTERM)
    assert text == "SIGTERM: sent to 1 of 2; pid 1 is init; not signalled"


def test_summary_single_and_empty() -> None:
    assert summary([KillOutcome(5, False, "pid 5 already gone")], signal.SIGKILL) == (
        "pid 5 already gone"
    )
    assert summary([], signal.SIGINT) == "SIGINT: no process selected"


def test_targets_from_model() -> None:
    from gputop.model import DriverInfo, GpuSample, Snapshot

    def target(process: GpuProcess, gpu: int) -> KillTarget:
        gpus = (GpuSample(index=gpu, processes=(process,)),)
        snap = Snapshot(time=1.0, hostname="h", driver=DriverInfo(True), gpus=gpus)
        return kill_target(snap, process.pid, gpu)

    info = ProcessInfo(
        pid=42, user="alice", name="python", command="python train.py", create_time=123.5
    )
    assert target(GpuProcess(pid=42, gpu_memory=1024, host=info), 3) == KillTarget(
        42, 123.5, "alice", "python train.py", 3, 1024
    )
    # No host view, or a pid not visible in this namespace: identity unknown.
    assert target(GpuProcess(pid=42), 0).create_time is None
    hidden = ProcessInfo(pid=42, visible=False)
    assert target(GpuProcess(pid=42, host=hidden), 0).create_time is None


def test_kill_target_joins_the_host_view() -> None:
    from gputop.model import DriverInfo, GpuSample, Snapshot

    info = ProcessInfo(pid=7, user="bob", command="python ppo.py", create_time=55.0)
    snap = Snapshot(
        time=100.0,
        hostname="h",
        driver=DriverInfo(True),
        gpus=(
            GpuSample(index=0),
            GpuSample(index=1, processes=(GpuProcess(pid=7, gpu_memory=2048), GpuProcess(pid=8))),
        ),
        processes=(info,),
    )
    assert kill_target(snap, 7) == KillTarget(7, 55.0, "bob", "python ppo.py", 1, 2048)
    # A pid the host cannot see: no identity, so it will be refused.
    assert kill_target(snap, 8) == KillTarget(8, None, None, "n/a", 1, None)
