"""Processes that hold a GPU device file open but that NVML does not list.

Scans ``/proc/<pid>/fd/*`` for links to ``/dev/nvidia<N>`` (N digits only: ``nvidiactl``,
``nvidia-uvm``, ``nvidia-modeset`` and ``nvidia-caps/*`` are shared control devices and
say nothing about which GPU is held). Such a process may be a job in another PID
namespace, a process that has not created a CUDA context yet, a stuck one that lost its
context, or a daemon (``nvidia-persistenced`` holds every GPU open by design).

Cost: one ``readlink`` per open file descriptor of every process not already listed, so it
grows with the host (``HolderScan.seconds`` and ``HolderScan.fds`` give the live figure).
Run it on a slower cadence than the main tick: every ``RECOMMENDED_INTERVAL_S`` seconds.

``/proc/<pid>/fd`` of another user's process cannot be read without privileges (root or
CAP_SYS_PTRACE): those processes are skipped and counted in ``HolderScan.denied`` so the
UI can say the list may be incomplete. The calling process itself (NVML keeps the device
files open in gputop) is never reported when scanning the real ``/proc``.
"""

from __future__ import annotations

import functools
import os
import re
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from gputop.fmt import clean_text
from gputop.model import UnlistedHolder
from gputop.sources import procfs

#: A sampler should run the scan at most this often (seconds); see the module docstring.
RECOMMENDED_INTERVAL_S = 5.0

_CMDLINE_READ_LIMIT = 16384


@dataclass(frozen=True, slots=True)
class HolderScan:
    holders: tuple[UnlistedHolder, ...]
    processes: int  # pid directories looked at (listed pids excluded)
    fds: int  # descriptors read with readlink
    denied: int  # processes whose fd directory could not be read (permission)
    seconds: float  # wall time of the scan


def _device_pattern(device_dir: str) -> re.Pattern[str]:
    return re.compile("^" + re.escape(device_dir.rstrip("/")) + r"/nvidia(\d+)$")


def _read(path: str, limit: int = 4096) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read(limit)
    except OSError:
        return None


#: Holders are few and their users fewer: a name lookup (NSS: LDAP, sssd) once per uid.
_user_name = functools.lru_cache(maxsize=256)(procfs.user_name)


def _held_minors(root: int, pid: str, pattern: re.Pattern[str]) -> tuple[set[int], int | None]:
    """(minor numbers of the /dev/nvidia<N> files ``pid`` holds open, descriptors read),
    None for the count where its fd directory is closed to us. Each link is read
    relative to the open fd directory (``readlinkat``): the kernel walks one name, not
    the whole ``/proc/<pid>/fd/<n>`` path, for every descriptor."""
    try:
        fd_dir = os.open(f"{pid}/fd", os.O_RDONLY | os.O_DIRECTORY, dir_fd=root)
    except PermissionError:
        return set(), None
    except OSError:  # exited, or not a process directory
        return set(), 0
    minors: set[int] = set()
    try:
        fds = os.listdir(fd_dir)
        for fd in fds:
            try:
                target = os.readlink(fd, dir_fd=fd_dir)
            except OSError:  # closed meanwhile
                continue
            m = pattern.match(target)
            if m is not None:
                minors.add(int(m.group(1)))
    except PermissionError:
        return minors, None
    except OSError:
        return minors, 0
    finally:
        os.close(fd_dir)
    return minors, len(fds)


def scan_holders(
    minor_to_gpu: Mapping[int, int],
    listed_pids: Collection[int],
    proc_root: str = "/proc",
    device_dir: str = "/dev",
) -> HolderScan:
    """``find_unlisted_holders`` with the cost of the scan. Never raises.

    ``device_dir`` lets a test match ``<dir>/nvidia<N>`` files it can create.
    One ``UnlistedHolder`` per (process, minor number) pair, sorted by pid then minor.
    """
    start = time.perf_counter()
    pattern = _device_pattern(device_dir)
    listed = set(listed_pids)
    if proc_root == "/proc":
        listed.add(os.getpid())
    holders: list[UnlistedHolder] = []
    n_procs = n_fds = n_denied = 0
    try:
        root = os.open(proc_root, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        root = -1
    try:
        try:
            names = os.listdir(root) if root >= 0 else []
        except OSError:
            names = []
        for name in names:
            if not name.isdigit():
                continue
            pid = int(name)
            if pid in listed:
                continue
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
            raw_cmd = _read(f"{base}/cmdline", _CMDLINE_READ_LIMIT)
            try:
                uid = procfs.read_real_uid(pid, proc_root)
            except OSError:
                uid = None
            command = None
            if raw_cmd:  # empty for kernel threads and zombies: not available
                command = clean_text(b" ".join(raw_cmd.rstrip(b"\0").split(b"\0")))
            for minor in sorted(minors):
                holders.append(
                    UnlistedHolder(
                        pid=pid,
                        gpu=minor_to_gpu.get(minor),
                        minor_number=minor,
                        user=None if uid is None else _user_name(uid),
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
        seconds=time.perf_counter() - start,
    )


def find_unlisted_holders(
    minor_to_gpu: Mapping[int, int],
    listed_pids: Collection[int],
    proc_root: str = "/proc",
) -> tuple[UnlistedHolder, ...]:
    """Processes holding ``/dev/nvidia<N>`` open that are not in ``listed_pids``.

    ``gpu`` is ``minor_to_gpu.get(N)``: None when no GPU has that minor number.
    Unreadable fd directories (permission) are skipped; see ``scan_holders`` for counts.
    """
    return scan_holders(minor_to_gpu, listed_pids, proc_root).holders
