"""Pids that no process has, for "a process of another PID namespace".

They must be below ``pid_max`` (gputop drops a pid above it: it cannot be a real process)
and not be given to a new process while a test runs. The kernel hands pids out upwards
from the last one given and wraps at ``pid_max``, so the pids just below the newest one
are the last it will reach again: they are taken from there, downwards.
"""

from __future__ import annotations

import os
import subprocess

from gputop.actions import pid_max

_RESERVED = 301  # the kernel wraps to 300, never lower


def free_pids(n: int) -> list[int]:
    """``n`` distinct pids without a process, just below the newest pid, highest first."""
    newest = subprocess.Popen(["true"])
    newest.wait()
    top = pid_max()
    pid = newest.pid - 1
    out: list[int] = []
    for _ in range(top):
        if pid < _RESERVED:
            pid = top - 1
        if not os.path.exists(f"/proc/{pid}"):
            out.append(pid)
            if len(out) == n:
                return out
        pid -= 1
    raise AssertionError("no free pid")


def free_pid() -> int:
    return free_pids(1)[0]
