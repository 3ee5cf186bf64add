"""Signalling processes, with the guards that make it safe to do from a dashboard.

A row on screen is a picture of the past: the pid may since belong to another process.
So the pid must still belong to a process started at the same moment (``create_time``)
as the one shown; an unknown identity is refused. Pids 0, 1, negatives, pids above
``pid_max`` (some drivers report 2**32-1 for "no pid"), gputop and its parent are never
signalled; read-only mode refuses everything.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import signal
from collections.abc import Iterable
from dataclasses import dataclass

import psutil

from gputop.fmt import clean_text
from gputop.sources.procfs import pid_max

#: Signals the kill dialog offers, the default first.
SIGNALS: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT, signal.SIGKILL)

#: Half a clock tick: psutil's start time is in clock ticks since boot, so one process
#: always reads the same value and one started a tick later must not pass.
CREATE_TIME_TOLERANCE_S = 0.5 / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)


@dataclass(frozen=True)
class KillTarget:
    """What was on screen when the user asked to signal a process."""

    pid: int
    create_time: float | None  # epoch seconds; None = identity unknown -> refused
    user: str | None
    command: str | None
    gpu: int | None
    gpu_memory: int | None  # bytes


@dataclass(frozen=True)
class KillOutcome:
    """What a signal to one process did, in words for people."""

    pid: int
    ok: bool
    message: str  # in words, for people


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _owner(proc: psutil.Process | None, target: KillTarget) -> str:
    if proc is not None:
        with contextlib.suppress(psutil.Error, KeyError, OSError):
            return clean_text(proc.username(), 64) or "another user"
        with contextlib.suppress(psutil.Error, OSError):
            return _user_name(proc.uids().real)
    return target.user or "another user"


def refusal(target: KillTarget, sig: signal.Signals, *, readonly: bool = False) -> str | None:
    """Why ``target`` must not be signalled, in words, or None when the static checks
    pass (the live identity check is :func:`send_signal`'s)."""
    pid = target.pid
    if readonly:
        return f"read-only mode: pid {pid} not signalled"
    if sig not in SIGNALS:
        return f"{sig.name} is not offered; pid {pid} not signalled"
    if pid <= 0:
        return f"pid {pid} is not a single process; not signalled"
    if pid == 1:
        return "pid 1 is init; not signalled"
    limit = pid_max()
    if pid > limit:
        return f"pid {pid} is above the kernel's pid_max ({limit}); not signalled"
    if pid == os.getpid():
        return f"pid {pid} is gputop itself; not signalled"
    if pid == os.getppid():
        return f"pid {pid} is gputop's parent; not signalled"
    if target.create_time is None:
        return f"identity of pid {pid} unknown (not visible in this PID namespace?); not signalled"
    return None


def send_signal(target: KillTarget, sig: signal.Signals, *, readonly: bool = False) -> KillOutcome:
    """Send ``sig`` to ``target`` if it is still the same process; never raises."""
    pid = target.pid
    reason = refusal(target, sig, readonly=readonly)
    if reason is not None:
        return KillOutcome(pid, False, reason)
    assert target.create_time is not None
    proc: psutil.Process | None = None
    try:
        proc = psutil.Process(pid)
        started = proc.create_time()
        if abs(started - target.create_time) > CREATE_TIME_TOLERANCE_S:
            return KillOutcome(pid, False, f"pid {pid} is now a different process; not signalled")
        if proc.status() == psutil.STATUS_ZOMBIE:
            return KillOutcome(
                pid, False, f"pid {pid} already gone (a zombie waiting for its parent to reap it)"
            )
        # psutil checks once more that the pid was not reused before calling kill(2).
        proc.send_signal(sig)
    except psutil.NoSuchProcess:
        return KillOutcome(pid, False, f"pid {pid} already gone")
    except (psutil.AccessDenied, PermissionError):
        owner = _owner(proc, target)
        me = _user_name(os.geteuid())
        return KillOutcome(
            pid, False, f"permission denied: pid {pid} belongs to {owner} (you are {me})"
        )
    except OSError as exc:
        return KillOutcome(pid, False, f"pid {pid}: {exc.strerror or exc}; not signalled")
    return KillOutcome(pid, True, f"{sig.name} sent to pid {pid}")


def send_signals(
    targets: Iterable[KillTarget], sig: signal.Signals, *, readonly: bool = False
) -> tuple[KillOutcome, ...]:
    """Signal each target once (a pid listed on several GPUs is signalled once)."""
    first: dict[int, KillTarget] = {}
    for target in targets:
        first.setdefault(target.pid, target)
    return tuple(send_signal(t, sig, readonly=readonly) for t in first.values())


def summary(outcomes: Iterable[KillOutcome], sig: signal.Signals) -> str:
    """One line for a notification: 'SIGTERM: sent to 2 of 3; pid 7 already gone'."""
    items = tuple(outcomes)
    if not items:
        return f"{sig.name}: no process selected"
    if len(items) == 1:
        return items[0].message
    sent = sum(1 for o in items if o.ok)
    failures = "; ".join(o.message for o in items if not o.ok)
    line = f"{sig.name}: sent to {sent} of {len(items)}"
    return f"{line}; {failures}" if failures else line
