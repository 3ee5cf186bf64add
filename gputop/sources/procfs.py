"""Linux ``/proc/<pid>`` files read and parsed directly: the per-tick process hot path.

``HostReader`` reads every process of a GPU job once a tick. Through psutil that costs
about 95 us a process (five files, decorators, a pid-reuse check that reads ``stat``
again); read here it is about 25 us: ``stat`` once (shared with the tick's scan of all
processes), then ``status``, ``cmdline`` and ``io``. The values are the ones psutil
gives (same files, same formulas): psutil remains the fallback where there is no
Linux ``/proc``.

Every reader raises ``OSError`` as the kernel gives it: ``FileNotFoundError`` or
``ProcessLookupError`` when the process is gone, ``PermissionError`` where another
user's file is closed to us (``io``).
"""

from __future__ import annotations

import os
from typing import NamedTuple

PROC_ROOT = "/proc"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")

# The state letter of /proc/<pid>/stat, as psutil names it (psutil.STATUS_*).
STATUSES = {
    "R": "running",
    "S": "sleeping",
    "D": "disk-sleep",
    "T": "stopped",
    "t": "tracing-stop",
    "Z": "zombie",
    "X": "dead",
    "x": "dead",
    "K": "wake-kill",
    "W": "waking",
    "I": "idle",
    "P": "parked",
}


class Stat(NamedTuple):
    """What the scan of all processes keeps of one: its parent and identity, and the
    line itself, parsed further (``parse_stat_fields``) only for the processes shown."""

    ppid: int
    starttime: int  # clock ticks since boot: with the pid, the process identity
    raw: bytes = b""


class StatFields(NamedTuple):
    comm: str  # the kernel's name, at most 15 characters, undecoded bytes replaced
    status: str  # psutil's word for the state letter
    ppid: int
    cpu_seconds: float  # user + system
    num_threads: int
    starttime: int
    rss: int  # bytes


def read_file(path: str, size: int = 8192) -> bytes:
    """One read of a /proc file (os.open/os.read: about 30% cheaper than open())."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, size)
    finally:
        os.close(fd)


def parse_stat(data: bytes) -> Stat | None:
    """``pid (comm) state ppid ...``: the comm may contain ") " and spaces."""
    r = data.rfind(b")")
    fields = data[r + 2 :].split(None, 20)
    try:
        return Stat(int(fields[1]), int(fields[19]), data)
    except (IndexError, ValueError):
        return None


def parse_stat_fields(data: bytes) -> StatFields | None:
    left, r = data.find(b"("), data.rfind(b")")
    fields = data[r + 2 :].split(None, 22)
    if left < 0 or r < left:
        return None
    try:
        return StatFields(
            comm=data[left + 1 : r].decode("utf-8", "replace"),
            status=STATUSES.get(fields[0].decode("ascii", "replace"), "?"),
            ppid=int(fields[1]),
            cpu_seconds=(int(fields[11]) + int(fields[12])) / CLOCK_TICKS,
            num_threads=int(fields[17]),
            starttime=int(fields[19]),
            rss=int(fields[21]) * PAGE_SIZE,
        )
    except (IndexError, ValueError):
        return None


def read_stat(pid: int, proc_root: str = PROC_ROOT) -> Stat | None:
    """The stat line of one process, or None when it cannot be read (gone)."""
    try:
        data = read_file(f"{proc_root}/{pid}/stat", 4096)
    except OSError:
        return None
    return parse_stat(data)


def pid_exists(pid: int, proc_root: str = PROC_ROOT) -> bool:
    """Whether ``/proc/<pid>`` exists (no exception raised for a missing one: about half
    the cost of a failed ``read_stat``)."""
    return os.access(f"{proc_root}/{pid}", os.F_OK)


def scan_processes(proc_root: str = PROC_ROOT) -> dict[int, Stat]:
    """{pid: Stat} for every process in one pass over /proc/<pid>/stat.

    Raises OSError when ``proc_root`` cannot be listed (the caller falls back to psutil).
    """
    out: dict[int, Stat] = {}
    for name in os.listdir(proc_root):
        if not name.isdigit():
            continue
        st = read_stat(int(name), proc_root)
        if st is not None:
            out[int(name)] = st
    return out


def read_real_uid(pid: int, proc_root: str = PROC_ROOT) -> int | None:
    """The real uid (the first of the ``Uid:`` line of status, as psutil's ``uids``)."""
    data = read_file(f"{proc_root}/{pid}/status", 16384)
    at = data.find(b"\nUid:")
    if at < 0:
        return None
    try:
        return int(data[at + 5 :].split(None, 1)[0])
    except (IndexError, ValueError):
        return None


#: Bytes of a command line read at most: the table shows a few hundred characters and
#: keeps 4,096 (clean_text's limit); a 2 MB command line is neither read nor kept whole.
CMDLINE_READ_LIMIT = 8192


def read_cmdline(pid: int, proc_root: str = PROC_ROOT, limit: int = CMDLINE_READ_LIMIT) -> bytes:
    """The raw command line: arguments each ended by NUL (empty for a zombie or a
    kernel thread), its first ``limit`` bytes only. A cut NUL-separated command line
    still ends with NUL (its last argument is cut), so it splits as the whole would."""
    fd = os.open(f"{proc_root}/{pid}/cmdline", os.O_RDONLY)
    try:
        data = b""
        while len(data) < limit:
            chunk = os.read(fd, limit - len(data))
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    if len(data) >= limit and not data.endswith(b"\x00") and b"\x00" in data:
        data += b"\x00"
    return data


def split_cmdline(data: bytes) -> list[str]:
    """Arguments as psutil's ``cmdline()`` splits them: NUL-separated, or space-separated
    when a process rewrote its command line that way (setproctitle, Chrome)."""
    text = data.decode("utf-8", "surrogateescape")
    if not text:
        return []  # a zombie or a kernel thread
    sep = "\x00" if text.endswith("\x00") else " "
    if text.endswith(sep):
        text = text[:-1]
    argv = text.split(sep)
    if sep == "\x00" and len(argv) == 1 and " " in text:
        argv = text.split(" ")
    return argv


def read_io(pid: int, proc_root: str = PROC_ROOT) -> tuple[int, int] | None:
    """(read_bytes, write_bytes) from /proc/<pid>/io: what reached the block layer, as
    psutil's ``io_counters`` read_bytes/write_bytes. None when the fields are missing."""
    data = read_file(f"{proc_root}/{pid}/io", 4096)
    read = _io_field(data, b"\nread_bytes:")
    write = _io_field(data, b"\nwrite_bytes:")
    if read is None or write is None:
        return None
    return read, write


def _io_field(data: bytes, key: bytes) -> int | None:
    """The number after ``key`` (a line start, "\n" included) in /proc/<pid>/io."""
    if data.startswith(key[1:]):  # the first line
        start = len(key) - 1
    else:
        at = data.find(key)
        if at < 0:
            return None
        start = at + len(key)
    end = data.find(b"\n", start)
    return int(data[start:] if end < 0 else data[start:end])


def process_name(comm: str, argv: list[str]) -> str:
    """psutil's ``name()``: the kernel's 15-character comm, or the basename of the first
    argument when the comm was cut short and that basename starts with it."""
    if len(comm) >= 15 and argv:
        extended = os.path.basename(argv[0])
        if extended.startswith(comm):
            return extended
    return comm
