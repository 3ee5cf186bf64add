"""Processes that hold a ``/dev/nvidia<N>`` open but that NVML does not list (docs/json.md).

Control devices (``nvidiactl``, ``nvidia-uvm``) say nothing about which GPU is held. A closed
``/proc/<pid>/fd`` counts in ``HolderScan.denied``; gputop itself is never reported.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from gputop.fmt import clean_text
from gputop.model import UnlistedHolder
from gputop.sources import procfs

#: The scan's period in the live source (longer where it is costly: HOLDER_SCAN_COST_FACTOR):
#: an unlisted holder shows, and one that let go leaves, within this delay. A holder worth
#: a verdict has held the GPU for minutes (IDLE_HOLDER_SECONDS); the scan reads every
#: process's descriptors, the costliest of the idle tick's parts at this period.
RECOMMENDED_INTERVAL_S = 10.0


@dataclass(frozen=True, slots=True)
class HolderScan:
    """One scan of /proc for /dev/nvidia* holders, and what it looked at."""

    holders: tuple[UnlistedHolder, ...]
    processes: int  # pid directories looked at (listed pids excluded)
    fds: int  # descriptors read with readlink
    denied: int  # processes whose fd directory could not be read (permission)


def _read(path: str, limit: int = 4096) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read(limit)
    except OSError:
        return None


def _held_minors(root: int, pid: str, pattern: re.Pattern[str]) -> tuple[set[int], int | None]:
    """(minor numbers of the /dev/nvidia<N> files ``pid`` holds open, descriptors read),
    None for the count where its fd directory is closed to us. ``readlinkat``: the kernel
    walks one name per descriptor, not the whole path."""
    minors: set[int] = set()
    fd_dir = -1
    try:
        fd_dir = os.open(f"{pid}/fd", os.O_RDONLY | os.O_DIRECTORY, dir_fd=root)
        fds = os.listdir(fd_dir)
        for fd in fds:
            try:
                target = os.readlink(fd, dir_fd=fd_dir)
            except OSError:  # closed meanwhile
                continue
            if (m := pattern.match(target)) is not None:
                minors.add(int(m.group(1)))
    except PermissionError:
        return minors, None
    except OSError:  # exited, or not a process directory
        return minors, 0
    finally:
        if fd_dir >= 0:
            os.close(fd_dir)
    return minors, len(fds)


def scan_holders(
    minor_to_gpu: Mapping[int, int],
    listed_pids: Collection[int],
    proc_root: str = "/proc",
    device_dir: str = "/dev",
) -> HolderScan:
    """The holders, one per (process, minor number), sorted (``gpu`` None where no GPU has
    that minor), and the cost of the scan. Never raises.
    ``device_dir``: for a test's own ``<dir>/nvidia<N>`` files."""
    pattern = re.compile("^" + re.escape(device_dir.rstrip("/")) + r"/nvidia(\d+)$")
    listed = set(listed_pids)
    if proc_root == "/proc":
        listed.add(os.getpid())
    holders: list[UnlistedHolder] = []
    n_procs = n_fds = n_denied = 0
    root = -1
    try:
        root = os.open(proc_root, os.O_RDONLY | os.O_DIRECTORY)
        names = os.listdir(root)
    except OSError:  # no such directory, or not one we may list
        names = []
    try:
        for name in names:
            if not name.isdigit() or int(name) in listed:
                continue
            pid = int(name)
            n_procs += 1
            minors, fds = _held_minors(root, name, pattern)
            if fds is None:  # its fd directory is closed to us
                n_denied += 1
                continue
            n_fds += fds
            if not minors:
                continue
            base = f"{proc_root}/{name}"
            comm = _read(f"{base}/comm")
            try:  # read and split as every process's command line is (procfs)
                argv = procfs.split_cmdline(procfs.read_cmdline(pid, proc_root))
            except OSError:
                argv = []
            try:
                uid = procfs.read_real_uid(pid, proc_root)
            except OSError:
                uid = None
            # empty for kernel threads and zombies: not available
            command = clean_text(" ".join(argv)) if argv else None
            for minor in sorted(minors):
                holders.append(
                    UnlistedHolder(
                        pid=pid,
                        gpu=minor_to_gpu.get(minor),
                        minor_number=minor,
                        user=None if uid is None else procfs.user_name(uid),
                        name=None if comm is None else clean_text(comm.rstrip(b"\n")),
                        command=command,
                    )
                )
    finally:
        if root >= 0:
            os.close(root)
    holders.sort(key=lambda h: (h.pid, h.minor_number))
    return HolderScan(
        holders=tuple(holders),
        processes=n_procs,
        fds=n_fds,
        denied=n_denied,
    )
