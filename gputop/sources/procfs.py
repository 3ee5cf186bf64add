"""Linux ``/proc/<pid>`` files parsed directly, with psutil's formulas (psutil is the
fallback where there is no Linux ``/proc``). Readers raise ``OSError`` as the kernel
gives it: gone (``FileNotFoundError``/``ProcessLookupError``) or closed (``PermissionError``).
"""

from __future__ import annotations

import functools
import os
import pwd
from typing import NamedTuple

from gputop.fmt import clean_text
from gputop.model import ENVIRONMENT_NAMES, ENVIRONMENT_VALUE_MAX

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
    """``raw`` is parsed further (``parse_stat_fields``) only for the processes shown."""

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
    """One read of a /proc file (os.open/os.read: no file object)."""
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


#: Where in ``/proc/PID/stat`` (counted after the comm, from the state) the addresses of
#: the argument and environment strings are (arg_start, arg_end, env_start, env_end).
_EXEC_FIELDS = slice(45, 49)


def exec_sign(data: bytes) -> tuple[bytes, ...]:
    """The addresses of a process's argument and environment strings, from its stat line:
    an exec places them anew (a new stack, randomised), so a changed sign says the command
    line may have changed. Empty where the kernel shows none (before Linux 3.5) and zeros
    where it hides them (another user's process, unless root)."""
    r = data.rfind(b")")
    return tuple(data[r + 2 :].split()[_EXEC_FIELDS])


def read_stat(pid: int, proc_root: str = PROC_ROOT) -> Stat | None:
    try:
        return parse_stat(read_file(f"{proc_root}/{pid}/stat", 4096))
    except OSError:
        return None


def pid_exists(pid: int, proc_root: str = PROC_ROOT) -> bool:
    """Whether ``/proc/<pid>`` exists. ``kill(pid, 0)`` answers "no such process" for
    the real /proc; a process that is there is looked for in /proc itself (with
    ``hidepid`` another user's process is not)."""
    if proc_root == PROC_ROOT and 0 < pid <= 0x7FFFFFFF:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError:  # EPERM: it exists, someone else's
            pass
    return os.access(f"{proc_root}/{pid}", os.F_OK)


#: The kernel's own upper limit (PID_MAX_LIMIT): where pid_max cannot be read.
PID_MAX_LIMIT = 1 << 22


def pid_max() -> int:
    try:
        with open("/proc/sys/kernel/pid_max", encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return PID_MAX_LIMIT


def scan_processes(proc_root: str = PROC_ROOT) -> dict[int, Stat]:
    """Raises OSError when ``proc_root`` cannot be listed (the caller falls back to psutil)."""
    return {
        int(name): st
        for name in os.listdir(proc_root)
        if name.isdigit() and (st := read_stat(int(name), proc_root)) is not None
    }


#: The most bytes of ``/proc/PID/status`` read, by each reader of it: far above what the
#: kernel writes there, a bound all the same.
STATUS_READ_LIMIT = 16384


def read_real_uid(pid: int, proc_root: str = PROC_ROOT) -> int | None:
    return _line_number(read_file(f"{proc_root}/{pid}/status", STATUS_READ_LIMIT), b"Uid:")


def read_tgid(pid: int, proc_root: str = PROC_ROOT) -> int | None:
    """The process (thread group) of task ``pid``: ``pid`` itself for a process, its
    process's for a thread; None when gone or unreadable."""
    try:
        return _line_number(read_file(f"{proc_root}/{pid}/status", STATUS_READ_LIMIT), b"Tgid:")
    except OSError:
        return None


def newest_pid(proc_root: str = PROC_ROOT) -> int | None:
    """The pid last allocated in this PID namespace (a process's or a thread's), from
    ``loadavg``; pids are allocated upwards, then wrap. None when it cannot be read."""
    try:
        return int(read_file(f"{proc_root}/loadavg", 256).split()[4])
    except (OSError, ValueError, IndexError):
        return None


def proc_is_ours(proc_root: str = PROC_ROOT) -> bool:
    """Whether ``proc_root`` shows this process's PID namespace (``self`` is our pid) and
    its own ``loadavg`` (not another file mounted over it, as LXCFS does in containers:
    its newest pid is not the kernel's)."""
    try:
        same_device = os.stat(f"{proc_root}/loadavg").st_dev == os.stat(proc_root).st_dev
        return same_device and os.readlink(f"{proc_root}/self") == str(os.getpid())
    except OSError:
        return False


@functools.lru_cache(maxsize=256)  # a lookup through NSS (LDAP, sssd) can be slow
def user_name(uid: int) -> str | None:
    """The uid itself where it has no name (as ps shows it), None when the lookup fails."""
    try:
        return clean_text(pwd.getpwuid(uid).pw_name)
    except KeyError:
        return str(uid)
    except Exception:
        return None


def read_at_most(path: str, limit: int) -> bytes:
    """The first ``limit`` bytes of a /proc file (read in as many calls as it takes: the
    kernel hands these files out a page at a time)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        data = b""
        while len(data) < limit:
            chunk = os.read(fd, limit - len(data))
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    return data


#: More than clean_text keeps: a 2 MB command line is never read whole.
CMDLINE_READ_LIMIT = 8192


def read_cmdline(pid: int, proc_root: str = PROC_ROOT, limit: int = CMDLINE_READ_LIMIT) -> bytes:
    """The first ``limit`` bytes; a cut NUL-separated one still ends with NUL, so it
    splits as the whole would."""
    data = read_at_most(f"{proc_root}/{pid}/cmdline", limit)
    if len(data) >= limit and not data.endswith(b"\x00") and b"\x00" in data:
        data += b"\x00"
    return data


#: The most bytes of a process's environment read, by every reader of it (the process
#: screen's variables, a Slurm step's claims): a launcher (torchrun, slurmstepd) adds its
#: variables to the environment it inherited, often after it, so the limit is far above an
#: ordinary environment; it still bounds what one process can make gputop read.
ENVIRON_READ_LIMIT = 128 * 1024


def read_environ(
    pid: int,
    names: tuple[str, ...] = ENVIRONMENT_NAMES,
    proc_root: str = PROC_ROOT,
    limit: int = ENVIRON_READ_LIMIT,
) -> tuple[tuple[str, str], ...]:
    """(name, value) of ``names`` set in the process's environment, in ``names``' order,
    each value cleaned and cut; nothing else of it is kept. The one reader of
    ``/proc/PID/environ``: the host source and the owners read through it. The kernel
    lets only the process's owner (and root) open the file: ``PermissionError``
    otherwise."""
    return parse_environ(read_at_most(f"{proc_root}/{pid}/environ", limit), names)


def parse_environ(
    data: bytes, names: tuple[str, ...] = ENVIRONMENT_NAMES
) -> tuple[tuple[str, str], ...]:
    """NUL-separated ``NAME=value`` entries -> (name, value) of ``names``; the first of
    a name counts (as getenv); a cut last entry is not trusted."""
    wanted = {n.encode(): n for n in names}
    found: dict[str, str] = {}
    entries = data.split(b"\x00")
    if data and not data.endswith(b"\x00"):
        entries = entries[:-1]  # cut at the read limit: its value may be partial
    for entry in entries:
        key, eq, value = entry.partition(b"=")
        name = wanted.get(key)
        if not eq or name is None or name in found:
            continue
        text = clean_text(value.decode("utf-8", "replace"), ENVIRONMENT_VALUE_MAX)
        found[name] = "" if text is None else text
    return tuple((n, found[n]) for n in names if n in found)


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
    """(read_bytes, write_bytes), as psutil's ``io_counters``; None when missing."""
    data = read_file(f"{proc_root}/{pid}/io", 4096)
    read = _line_number(data, b"read_bytes:")
    write = _line_number(data, b"write_bytes:")
    return None if read is None or write is None else (read, write)


def process_name(comm: str, argv: list[str]) -> str:
    """psutil's ``name()``: the kernel's 15-character comm, or the basename of the first
    argument when the comm was cut short and that basename starts with it."""
    if len(comm) >= 15 and argv:
        extended = os.path.basename(argv[0])
        if extended.startswith(comm):
            return extended
    return comm


# --- host-wide files (HostReader.read_host): None for a shape psutil must read instead


def read_all(path: str) -> bytes:
    """A whole /proc file (a big host's /proc/stat is more than one read)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = [os.read(fd, 65536)]
        while chunks[-1]:
            chunks.append(os.read(fd, 65536))
    finally:
        os.close(fd)
    return chunks[0] if len(chunks) == 2 else b"".join(chunks)


#: /proc/stat's CPU time columns, in order (psutil's ``cpu_times`` fields on Linux).
CPU_FIELDS = (
    "user",
    "nice",
    "system",
    "idle",
    "iowait",
    "irq",
    "softirq",
    "steal",
    "guest",
    "guest_nice",
)

CpuTimes = tuple[float, ...]


def parse_cpu_times(data: bytes) -> tuple[CpuTimes, list[CpuTimes]] | None:
    """(all CPUs, one tuple per CPU): seconds in ``CPU_FIELDS`` order, as many columns
    as the first line has (older kernels lack the last ones), as psutil gives them."""
    end = data.find(b"\n")
    first = data[: None if end < 0 else end].split()
    n = min(len(first) - 1, len(CPU_FIELDS))
    if n < 7 or first[0] != b"cpu":
        return None
    ticks = CLOCK_TICKS
    try:
        total = tuple([float(x) / ticks for x in first[1 : n + 1]])
        cores: list[CpuTimes] = []
        at = data.find(b"\ncpu")
        while at >= 0:  # every later line that starts with "cpu" (cpu0, cpu1, ...)
            eol = data.find(b"\n", at + 1)
            values = data[at + 1 : None if eol < 0 else eol].split()
            core = tuple([float(x) / ticks for x in values[1 : n + 1]])
            if len(core) != n:
                return None
            cores.append(core)
            at = data.find(b"\ncpu", at + 1)
    except ValueError:
        return None
    return total, cores


def _line_number(data: bytes, key: bytes) -> int | None:
    """The first number after ``key`` at the start of a line (``key: 123 kB``)."""
    if data.startswith(key):
        start = len(key)
    else:
        at = data.find(b"\n" + key)
        if at < 0:
            return None
        start = at + 1 + len(key)
    end = data.find(b"\n", start)
    try:
        return int(data[start : None if end < 0 else end].split()[0])
    except (IndexError, ValueError):
        return None


class Meminfo(NamedTuple):
    """What psutil's ``virtual_memory()`` and ``swap_memory()`` give gputop, in bytes."""

    total: int
    available: int
    used: int  # total - available, as psutil
    swap_total: int | None  # None: no Swap lines (psutil then asks sysinfo(2))
    swap_used: int | None  # swap total - swap free, as psutil


def parse_meminfo(data: bytes) -> Meminfo | None:
    """None where psutil would estimate the available memory itself (no or a 0
    ``MemAvailable``) or where MemTotal or MemFree are missing."""
    total = _line_number(data, b"MemTotal:")
    free = _line_number(data, b"MemFree:")
    available = _line_number(data, b"MemAvailable:")
    if total is None or free is None or not available:
        return None
    total, free, available = total * 1024, free * 1024, available * 1024
    if available < 0:
        available = 0
    elif available > total:  # a container's distorted view: psutil takes MemFree
        available = free
    swap_total = _line_number(data, b"SwapTotal:")
    swap_free = _line_number(data, b"SwapFree:")
    if swap_total is None or swap_free is None:
        swap_total = swap_used = None
    else:
        swap_total, swap_used = swap_total * 1024, (swap_total - swap_free) * 1024
    return Meminfo(total, available, total - available, swap_total, swap_used)


def parse_net_dev(data: bytes) -> dict[str, tuple[int, int]] | None:
    """{interface: (bytes received, bytes sent)}, as psutil's ``net_io_counters``."""
    out: dict[str, tuple[int, int]] = {}
    for line in data.split(b"\n")[2:]:
        if not line:
            continue
        colon = line.rfind(b":")
        fields = line[colon + 1 :].split()
        if colon <= 0 or len(fields) != 16:
            return None
        try:
            out[os.fsdecode(line[:colon].strip())] = (int(fields[0]), int(fields[8]))
        except ValueError:
            return None
    return out


#: The unit of /proc/diskstats' sector counts, whatever the disk's own sector size.
SECTOR_SIZE = 512
#: Fields in a line (18: 18 or more) -> columns of the name, the sectors read and written.
_DISKSTATS_COLUMNS = {15: (3, 5, 9), 14: (2, 5, 9), 18: (2, 5, 9), 7: (2, 4, 6)}


def parse_diskstats(data: bytes) -> dict[str, tuple[int, int]] | None:
    """{device: (bytes read, bytes written)}, from the three line shapes psutil reads."""
    out: dict[str, tuple[int, int]] = {}
    for line in data.split(b"\n"):
        fields = line.split()
        if not fields:
            continue
        columns = _DISKSTATS_COLUMNS.get(min(len(fields), 18))
        if columns is None:
            return None
        name, read, written = columns
        try:
            sectors = (int(fields[read]), int(fields[written]))
        except ValueError:
            return None
        out[os.fsdecode(fields[name])] = (sectors[0] * SECTOR_SIZE, sectors[1] * SECTOR_SIZE)
    return out


def parse_cpuinfo_mhz(data: bytes) -> list[float] | None:
    """Every "cpu MHz" line's value (any case), as psutil reads them (none on most
    non-x86 machines)."""
    lower = data.lower()
    out: list[float] = []
    at = 0 if lower.startswith(b"cpu mhz") else lower.find(b"\ncpu mhz")
    while at >= 0:
        eol = data.find(b"\n", at + 1)
        line = data[at : None if eol < 0 else eol]
        colon = line.find(b":")
        if colon < 0:
            return None
        try:
            out.append(float(line[colon + 1 :]))
        except ValueError:
            return None
        at = lower.find(b"\ncpu mhz", at + 1)
    return out
