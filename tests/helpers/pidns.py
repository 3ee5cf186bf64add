"""What gputop truthfully says about a pid NVML lists but /proc lacks, on this machine."""

from __future__ import annotations

import os

INIT_PID_NS_INODE = 0xEFFFFFFC  # PROC_PID_INIT_INO


def in_driver_pid_namespace() -> bool:
    """Detected here, not through gputop (tests/conftest.py pins gputop's answer for
    in-process tests)."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino == INIT_PID_NS_INODE
    except OSError:
        return False
