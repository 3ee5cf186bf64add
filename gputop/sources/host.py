"""psutil and /proc -> ``HostSample`` and per-process rows (``ProcessInfo``).

Rates are counter deltas between two calls (the first gives None, never 0); a value that
cannot be read is None and why is in ``HostReader.last_errors``. Process state is kept per
(pid, start time), so a reused pid never inherits another process's history.
"""

from __future__ import annotations

import functools
import operator
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import psutil

from gputop.fmt import clean_text
from gputop.model import (
    HostSample,
    IoRate,
    MemoryStat,
    NetRate,
    ProcessInfo,
    SwapStat,
    reuse_equal,
)
from gputop.sources import procfs
from gputop.sources.procfs import CPU_FIELDS, PROC_ROOT, CpuTimes, scan_processes
from gputop.sources.procfs import Stat as _Stat

T = TypeVar("T")

SYS_BLOCK = "/sys/block"
SYS_CPU = "/sys/devices/system/cpu"

# Whole-disk names, used only when /sys/block cannot be read.
_WHOLE_DISK = re.compile(r"^(?:[shv]d[a-z]+|xvd[a-z]+|nvme\d+n\d+|mmcblk\d+)$")


#: The pass over every process (the tree) runs at most this often, and at once when NVML
#: lists a pid it has not seen: a new dataloader worker shows within this delay.
RESCAN_SECONDS = 3.0

#: When the pass over every process is due, and the pids allocated since the last pass
#: (``/proc/loadavg`` names the newest) are fewer than the processes it found, only those
#: are read, the same tree for a fraction of the reads: a process can join a tree only as
#: a new pid (a fork), as an orphan adopted by an ancestor it was already below. At most
#: this many are added so between two whole passes (exited ones are not removed by it).
NEW_PIDS_ADDED = 8

#: A changed row takes these from the last row when equal: the history holds one copy.
SHARED_STRINGS = ("user", "name", "command", "status")

#: A process's real uid (its USER, from ``/proc/PID/status``) and its command line
#: (``/proc/PID/cmdline``) are read when it is first seen, then again at most this often:
#: a uid changes only through ``setuid`` and the like, a command line only with an exec
#: or when the process writes over its own (setproctitle), and no file gputop reads says
#: when. An exec or a new name (``comm``) reads the command line at once; a user change or
#: a rewritten title of a running process shows within this delay.
PROCESS_RECHECK_SECONDS = 5.0


def _rate(delta: float | None, dt: float | None) -> float | None:
    if delta is None or dt is None or dt <= 0 or delta < 0:
        return None
    return delta / dt


def _counter_rates(
    old: Mapping[str, tuple[int, int]] | None,
    new: Mapping[str, tuple[int, int]] | None,
    dt: float | None,
) -> tuple[float | None, ...]:
    """Per-second rates of both counters summed over the keys in both readings; None where
    any went backwards."""
    if old is None or new is None:
        return None, None
    both = [(old[key], values) for key, values in new.items() if key in old]
    return tuple(
        None if any(b[i] < a[i] for a, b in both) else _rate(sum(b[i] - a[i] for a, b in both), dt)
        for i in (0, 1)
    )


@functools.lru_cache(maxsize=8)
def _cpu_layout(names: tuple[str, ...]) -> tuple[int | None, ...]:
    """Where idle, iowait, guest and guest_nice are in CPU times with these field names."""
    fields = ("idle", "iowait", "guest", "guest_nice")
    return tuple(names.index(n) if n in names else None for n in fields)


def _cpu_percents(
    old: CpuTimes, new: CpuTimes, names: tuple[str, ...]
) -> tuple[float | None, float | None]:
    """(busy %, iowait %), psutil's ``cpu_percent`` formula: "user" and "nice" already
    include guest time, so guest and guest_nice leave the total."""
    idle, iowait, guest, guest_nice = _cpu_layout(names)
    d = [max(0.0, v - o) for v, o in zip(new, old, strict=True)]
    total = sum(d) - (0.0 if guest is None else d[guest])
    total -= 0.0 if guest_nice is None else d[guest_nice]
    if total <= 0:
        return None, None
    busy = total - (0.0 if idle is None else d[idle]) - (0.0 if iowait is None else d[iowait])
    busy_percent = min(100.0, max(0.0, 100.0 * busy / total))
    if iowait is None:
        return busy_percent, None
    return busy_percent, min(100.0, max(0.0, 100.0 * d[iowait] / total))


def _is_physical_disk(name: str, sys_block: str) -> bool:
    # dm, md, loop, zram have no ``device`` link: their I/O shows on the disks beneath
    if os.path.isdir(sys_block):
        return os.path.exists(os.path.join(sys_block, name.replace("/", "!"), "device"))
    return _WHOLE_DISK.match(name) is not None


@dataclass(slots=True)
class _Tracked:
    """One process's last reading, kept for its rates at the next tick."""

    pid: int
    proc: psutil.Process | None = None  # only where there is no Linux /proc
    time: float | None = None  # monotonic time of the last read
    cpu_seconds: float | None = None  # user + system at the last read
    io: tuple[int, int] | None = None  # read_bytes, write_bytes at the last read
    row: ProcessInfo | None = None  # the row given out last time (shared when unchanged)
    # what was made of the last raw command line and comm: cleaned again only on change
    raw_cmdline: bytes | None = None
    comm: str | None = None
    command: str | None = None
    name: str | None = None
    # the named variables of its environment, read with each new command line (an exec)
    environment: tuple[tuple[str, str], ...] | None = None
    # when the command line was last read (monotonic; None: never), and the exec sign then
    cmdline_at: float | None = None
    exec_sign: tuple[bytes, ...] = ()
    # the real uid as last read, and when (monotonic)
    uid: int | None = None
    uid_at: float = 0.0


def _row(
    tracked: _Tracked,
    now: float,
    alive: bool,
    cpu_seconds: float | None,
    io: tuple[int, int] | None,
    known: dict[str, Any],
) -> ProcessInfo:
    """One row from either reader: ``known`` names ProcessInfo fields. While alive the
    rates are since the last read, which this one becomes; an exited process reads as dead."""
    cpu_percent = read_rate = write_rate = None
    if alive:
        dt = None if tracked.time is None else now - tracked.time
        if cpu_seconds is not None and tracked.cpu_seconds is not None:
            r = _rate(cpu_seconds - tracked.cpu_seconds, dt)
            cpu_percent = None if r is None else 100.0 * r
        if io is not None and tracked.io is not None:
            read_rate = _rate(io[0] - tracked.io[0], dt)
            write_rate = _rate(io[1] - tracked.io[1], dt)
        tracked.time, tracked.cpu_seconds, tracked.io = now, cpu_seconds, io
    else:
        known["status"] = psutil.STATUS_DEAD
    return ProcessInfo(
        pid=tracked.pid,
        visible=True,
        cpu_percent=cpu_percent,
        read_bytes_per_s=read_rate,
        write_bytes_per_s=write_rate,
        **known,
    )


#: The psutil path's reads, in order: (what, where in the row, how).
_PSUTIL_READS: tuple[tuple[str, str, Callable[[psutil.Process], Any]], ...] = (
    ("status", "status", lambda p: p.status()),
    ("name", "name", lambda p: clean_text(p.name())),
    ("ppid", "ppid", lambda p: p.ppid()),
    ("cpu_times", "cpu_seconds", lambda p: (t := p.cpu_times()).user + t.system),
    ("memory_info", "rss", lambda p: p.memory_info().rss),
    ("num_threads", "num_threads", lambda p: p.num_threads()),
    ("uids", "user", lambda p: procfs.user_name(p.uids().real)),
    ("cmdline", "command", lambda p: clean_text(" ".join(p.cmdline()))),
    ("io_counters", "io", lambda p: ((c := p.io_counters()).read_bytes, c.write_bytes)),
    ("create_time", "create_time", lambda p: p.create_time()),  # cached: its identity
)


class _Gone(Exception):
    """The process exited while its row was being read."""


#: PROC_PID_INIT_INO (linux/proc_ns.h)
INIT_PID_NS_INODE = 0xEFFFFFFC
PID_NAMESPACE_ENV = "GPUTOP_PID_NAMESPACE"


def shares_driver_pid_namespace(path: str = "/proc/self/ns/pid") -> bool | None:
    """Whether gputop sees the driver's pids (the initial PID namespace): then a listed
    pid that /proc lacks has exited. None: unknown. ``GPUTOP_PID_NAMESPACE=host|other``
    overrides the detection."""
    override = os.environ.get(PID_NAMESPACE_ENV, "").strip().lower()
    if override in ("host", "other"):
        return override == "host"
    try:
        return os.stat(path).st_ino == INIT_PID_NS_INODE
    except OSError:
        return None


def _exited_row(pid: int, ppid: int | None = None) -> ProcessInfo:
    return ProcessInfo(pid=pid, visible=True, ppid=ppid, status=psutil.STATUS_DEAD)


def _without_lines(scan: dict[int, _Stat]) -> dict[int, _Stat]:
    """``scan`` as kept between ticks: each process's parent and identity, not its line."""
    return {pid: _Stat(st.ppid, st.starttime) for pid, st in scan.items()}


class HostReader:
    """Host-wide and per-process sampling with state between calls; one thread only."""

    def __init__(
        self,
        *,
        rescan_seconds: float = RESCAN_SECONDS,
        shared_pid_namespace: bool | None = None,
        proc_root: str = PROC_ROOT,
        sys_cpu: str = SYS_CPU,
        cpu_freq: bool = True,
        recheck_seconds: float = PROCESS_RECHECK_SECONDS,
    ) -> None:
        """``cpu_freq=False``: ``cpu_freq_mhz`` is None, for a consumer that does not show
        it: /proc/cpuinfo is the costliest host file (some kernels interrupt every CPU).
        ``rescan_seconds=0``: a whole pass over every process on every call, never the
        new pids alone; ``recheck_seconds=0``: every status and cmdline file read every call."""
        self._read_freq = cpu_freq
        self._recheck = recheck_seconds
        self._rescan_seconds = rescan_seconds
        self._pid_max = procfs.pid_max()
        self.shared_pid_namespace = (
            shares_driver_pid_namespace() if shared_pid_namespace is None else shared_pid_namespace
        )
        self._last_scan: dict[int, _Stat] | None = None  # the last pass over all of /proc
        self._last_scan_at = 0.0
        # the newest pid allocated before that pass (None: not known), and pids added since
        self._cursor: int | None = None
        self._added = 0
        # /proc/loadavg's newest pid is of this PID namespace: of /proc's only when /proc is
        self._newest_pids = proc_root == PROC_ROOT and procfs.proc_is_ours(PROC_ROOT)
        self._children: tuple[dict[int, _Stat], dict[int, list[int]]] | None = None
        self._host_time: float | None = None
        self._proc = proc_root
        self._sys_cpu = sys_cpu
        # CPU times (all CPUs, per CPU) at the last call, and their field names.
        self._cpu: tuple[tuple[str, ...], CpuTimes, list[CpuTimes]] | None = None
        self._cpu_count: int | None = None
        self._cpu_cores: int | None = None  # per-CPU lines when cpu_count was asked
        self._cpufreq_sysfs: bool | None = None  # psutil's test, made once
        self._disk: dict[str, tuple[int, int]] | None = None
        self._net: dict[str, tuple[int, int]] | None = None
        self._physical: dict[str, bool] = {}
        self._tracked: dict[tuple[int, int], _Tracked] = {}
        self._gone: set[int] = set()  # given pids seen here before that have exited
        self._invisible: dict[int, ProcessInfo] = {}  # last tick's rows of invisible pids
        self._exited: dict[int, ProcessInfo] = {}  # ...and of given pids that have exited
        self.last_errors: tuple[str, ...] = ()
        self._errors: list[str] = []
        self._use_proc = True
        self._boot: tuple[float, float] | None = None  # (monotonic when read, boot time)

    # -- host ----------------------------------------------------------------------------

    def _try(self, what: str, fn: Callable[[], T]) -> T | None:
        try:
            return fn()
        except Exception as exc:
            self._errors.append(f"{what}: {type(exc).__name__}: {exc}")
            return None

    def read_host(self) -> HostSample:
        self._errors = []
        now = time.monotonic()
        dt = None if self._host_time is None else now - self._host_time
        self._host_time = now

        cpu_percent: float | None = None
        iowait: float | None = None
        per_core: tuple[float, ...] = ()
        cpu = self._try("cpu_times", self._cpu_times)
        if cpu is not None and self._cpu is not None and cpu[0] == self._cpu[0]:
            names, (_, total, cores), (_, last_total, last_cores) = cpu[0], cpu, self._cpu
            cpu_percent, iowait = _cpu_percents(last_total, total, names)
            values = [
                _cpu_percents(a, b, names)[0] for a, b in zip(last_cores, cores, strict=False)
            ]
            # A core with no elapsed ticks, or CPUs come or gone: no per-core list.
            if len(cores) == len(last_cores) and None not in values:
                per_core = tuple(v for v in values if v is not None)
        self._cpu = cpu
        cpu_count = self._try("cpu_count", lambda: self._count_cpus(cpu))

        freq_mhz = self._try("cpu_freq", self._cpu_freq_mhz) if self._read_freq else None
        if freq_mhz is not None and not freq_mhz > 0:
            freq_mhz = None
        load = self._try("load_average", os.getloadavg)
        memory, swap = self._memory()

        disks = self._try("disk_io_counters", self._disk_counters)
        nics = self._try("net_io_counters", self._net_counters)
        disk_rate = IoRate(*_counter_rates(self._disk, disks, dt))
        net_rate = NetRate(*_counter_rates(self._net, nics, dt))
        self._disk, self._net = disks, nics

        self.last_errors = tuple(self._errors)
        return HostSample(
            cpu_percent=cpu_percent,
            cpu_per_core=per_core,
            cpu_count=cpu_count,
            cpu_freq_mhz=freq_mhz,
            iowait_percent=iowait,
            load_average=None if load is None else (load[0], load[1], load[2]),
            memory=memory,
            swap=swap,
            disk=disk_rate,
            net=net_rate,
            rate_seconds=dt,
        )

    def _read_proc(self, name: str, parse: Callable[[bytes], T | None]) -> T | None:
        """``/proc/name`` parsed; None when it cannot be read or parsed."""
        try:
            data = procfs.read_all(f"{self._proc}/{name}")
        except OSError:
            return None
        return parse(data)

    def _cpu_times(self) -> tuple[tuple[str, ...], CpuTimes, list[CpuTimes]]:
        """(field names, all CPUs, per CPU)."""
        parsed = self._read_proc("stat", procfs.parse_cpu_times)
        if parsed is not None:
            total, cores = parsed
            return CPU_FIELDS[: len(total)], total, cores
        times = psutil.cpu_times()
        cores = [tuple(c) for c in psutil.cpu_times(percpu=True)]
        return tuple(times._fields), tuple(times), cores

    def _count_cpus(
        self, cpu: tuple[tuple[str, ...], CpuTimes, list[CpuTimes]] | None
    ) -> int | None:
        """psutil's ``cpu_count()``, asked again when /proc/stat's CPUs change (hotplug)."""
        cores = None if cpu is None else len(cpu[2])
        if self._cpu_count is None or cores is None or cores != self._cpu_cores:
            self._cpu_count = psutil.cpu_count()
            self._cpu_cores = cores
        return self._cpu_count

    def _cpu_freq_mhz(self) -> float | None:
        """psutil's ``cpu_freq().current``, from /proc/cpuinfo where psutil reads it there."""
        if self._cpufreq_sysfs is None:  # psutil makes the same test once, on import
            self._cpufreq_sysfs = os.path.exists(f"{self._sys_cpu}/cpufreq/policy0") or (
                os.path.exists(f"{self._sys_cpu}/cpu0/cpufreq")
            )
        freqs = self._read_proc("cpuinfo", procfs.parse_cpuinfo_mhz)
        if freqs is not None and self._cpufreq_sysfs:
            try:
                names = os.listdir(f"{self._sys_cpu}/cpufreq")
            except OSError:
                names = []
            policies = sum(1 for n in names if n.startswith("policy") and n[6:7].isdigit())
            # One policy per CPU: psutil takes cpuinfo's value, truncated to kHz; else it
            # reads each policy's scaling_cur_freq: asked of psutil itself.
            freqs = [int(f * 1000) / 1000 for f in freqs] if policies == len(freqs) else None
        if freqs is None:
            freq = psutil.cpu_freq()
            return None if freq is None else float(freq.current)
        # psutil's own sum, in order (not sum(): compensated since Python 3.12)
        return functools.reduce(operator.add, freqs, 0.0) / len(freqs) if freqs else None

    def _memory(self) -> tuple[MemoryStat, SwapStat]:
        mem = self._read_proc("meminfo", procfs.parse_meminfo)
        vm = mem if mem is not None else self._try("virtual_memory", psutil.virtual_memory)
        memory = MemoryStat() if vm is None else MemoryStat(vm.total, vm.used, vm.available)
        if mem is None or mem.swap_total is None:
            sw = self._try("swap_memory", psutil.swap_memory)
            return memory, SwapStat() if sw is None else SwapStat(total=sw.total, used=sw.used)
        return memory, SwapStat(total=mem.swap_total, used=mem.swap_used)

    def _disk_counters(self) -> dict[str, tuple[int, int]]:
        raw = self._read_proc("diskstats", procfs.parse_diskstats)
        if raw is None:
            raw = {
                name: (c.read_bytes, c.write_bytes)
                for name, c in psutil.disk_io_counters(perdisk=True, nowrap=False).items()
            }
        known = self._physical  # removed devices (hotplug) are forgotten
        self._physical = {
            n: known[n] if n in known else _is_physical_disk(n, SYS_BLOCK) for n in raw
        }
        return {name: counters for name, counters in raw.items() if self._physical[name]}

    def _net_counters(self) -> dict[str, tuple[int, int]]:
        raw = self._read_proc("net/dev", procfs.parse_net_dev)
        if raw is None:
            raw = {
                name: (c.bytes_recv, c.bytes_sent)
                for name, c in psutil.net_io_counters(pernic=True, nowrap=False).items()
            }
        raw.pop("lo", None)
        return raw

    # -- processes -----------------------------------------------------------------------

    def _scan(self) -> dict[int, _Stat]:
        if self._use_proc:
            try:
                return scan_processes(PROC_ROOT)
            except OSError:
                self._use_proc = False
        out: dict[int, _Stat] = {}  # without a Linux /proc: identity from psutil's create_time
        for p in psutil.process_iter(["pid", "ppid", "create_time"]):
            ppid, ctime = p.info.get("ppid"), p.info.get("create_time")
            if ppid is not None:
                out[p.info["pid"]] = _Stat(ppid, round((ctime or 0.0) * 100))
        return out

    def _tree_scan(
        self, given: list[int]
    ) -> tuple[dict[int, _Stat], bool, dict[int, _Stat | None]]:
        """(pid -> stat of every process, whether that pass is fresh, the given pids
        probed meanwhile): the last pass while it is recent and knows every given pid. A
        given pid that had exited (NVML may keep listing it) is probed alone: still gone,
        it needs no pass; back (reused), the tree is read now."""
        now = time.monotonic()
        last = self._last_scan
        probed: dict[int, _Stat | None] = {}

        def still_gone(pid: int) -> bool:
            if pid in self._gone and pid not in probed:  # (pids in _gone are > 0)
                probed[pid] = procfs.read_stat(pid) if procfs.pid_exists(pid) else None
            return pid <= 0 or (pid in self._gone and probed[pid] is None)

        if self._use_proc and all(still_gone(pid) for pid in given):
            return {}, False, probed  # an exited process has no tree
        if (
            last is not None
            and self._use_proc
            and all(pid in last or pid in self._invisible or still_gone(pid) for pid in given)
        ):
            if now - self._last_scan_at < self._rescan_seconds:
                return last, False, probed
            newer = self._newer(len(last)) if self._rescan_seconds > 0 else None
            if newer is not None:  # the last pass and the processes started since
                self._last_scan_at = now
                if newer:
                    last = self._last_scan = {**last, **_without_lines(newer)}
                return last, False, probed
        cursor = procfs.newest_pid() if self._newest_pids else None  # before: see _newer
        scan = self._scan()
        # This tick parses the shown processes' lines from the pass; a later tick reads
        # their stat again, so the pass is kept without the lines of every process.
        self._last_scan, self._last_scan_at = _without_lines(scan), now
        self._cursor, self._added = cursor, 0
        return scan, True, {}

    def _newer(self, known: int) -> dict[int, _Stat] | None:
        """pid -> stat of each process started since the last pass, from the pids
        allocated since (read before the pass: one that started during it is among
        them); None where a whole pass is needed: the pids wrapped, more were allocated
        than ``known`` processes, or the ones added would pass ``NEW_PIDS_ADDED``."""
        cursor = self._cursor
        newest = procfs.newest_pid() if cursor is not None else None
        if cursor is None or newest is None or not 0 <= newest - cursor <= known:
            return None
        newer: dict[int, _Stat] = {}
        for pid in range(cursor + 1, newest + 1):
            st = procfs.read_stat(pid)
            # a thread's /proc/TID answers too, but is no process of the tree
            if st is not None and procfs.read_tgid(pid) == pid:
                newer[pid] = st
        if self._added + len(newer) > NEW_PIDS_ADDED:
            return None
        self._cursor, self._added = newest, self._added + len(newer)
        return newer

    def _stat(self, pid: int) -> _Stat | None:
        if self._use_proc:
            return procfs.read_stat(pid)
        try:
            p = psutil.Process(pid)
            return _Stat(p.ppid(), round(p.create_time() * 100))
        except psutil.Error:
            return None

    def read_processes(
        self, pids: Iterable[int], *, ancestors: bool = False
    ) -> tuple[ProcessInfo, ...]:
        """Rows for every given pid (in order), then their descendants; with ``ancestors``
        also each given pid's ancestors below pid 1 (a torchrun launcher roots the job).
        A given pid seen here before and now missing has exited (status "dead")."""
        self._errors = []
        rows: list[ProcessInfo] = []
        try:
            self._read_processes(list(pids), rows, ancestors)
        except Exception as exc:  # never let the tick fail
            self._errors.append(f"processes: {type(exc).__name__}: {exc}")
        self.last_errors = tuple(self._errors)
        return tuple(rows)

    def _read_processes(self, given: list[int], rows: list[ProcessInfo], ancestors: bool) -> None:
        scan, fresh, probed = self._tree_scan(given)
        if self._children is not None and self._children[0] is scan:
            children = self._children[1]  # the same pass as last call: the same map
        else:
            children = {}
            for pid, pst in scan.items():
                children.setdefault(pst.ppid, []).append(pid)
            self._children = (scan, children)

        queue = list(dict.fromkeys(given))  # each once, in order
        order = [(pid, True) for pid in queue]  # (pid, given?)
        seen = set(queue)
        while queue:
            parent = queue.pop()
            if parent <= 0:  # pid 0 is the kernel's, never a real parent to follow
                continue
            for child in children.get(parent, ()):
                if child not in seen:
                    seen.add(child)
                    order.append((child, False))
                    queue.append(child)
        if ancestors:
            for pid in given:
                parent = scan[pid].ppid if pid in scan else 0
                while parent > 1 and parent not in seen and parent in scan:
                    seen.add(parent)
                    order.append((parent, False))
                    parent = scan[parent].ppid

        # Pids seen in this namespace before: when missing now, they exited.
        seen_before: set[int] | None = None  # made only when a given pid is missing
        gone: set[int] = set()
        exited: dict[int, ProcessInfo] = {}
        invisible: dict[int, ProcessInfo] = {}
        keep: dict[tuple[int, int], _Tracked] = {}
        for pid, is_given in order:
            st: _Stat | None = scan.get(pid) if pid > 0 else None
            if st is not None and not fresh:
                now_st = procfs.read_stat(pid)  # this tick's own, the tree being older
                if now_st is None or now_st.starttime != st.starttime:
                    self._last_scan = None  # exited or reused: the next call rescans
                st = now_st
            if st is None and is_given and pid > 0:
                # started after the scan? (a pid probed by _tree_scan is not read twice)
                st = probed[pid] if pid in probed else self._stat(pid)
            if st is None:
                if not is_given:
                    continue
                if seen_before is None:
                    seen_before = {p for p, _ in self._tracked} | self._gone
                # Seen here before, or this is the driver's own PID namespace and a pid some
                # process could have: it exited (a process cannot leave its namespace).
                if pid in seen_before or (self.shared_pid_namespace and 0 < pid <= self._pid_max):
                    gone.add(pid)
                    # the same row each tick
                    row = exited[pid] = self._exited.get(pid) or _exited_row(pid)
                else:  # a pid this PID namespace does not have (or unknown)
                    row = self._invisible.get(pid) or ProcessInfo(pid=pid, visible=False)
                    invisible[pid] = row
                rows.append(row)
                continue
            key = (pid, st.starttime)
            tracked = self._tracked.get(key) or keep.get(key)
            if tracked is None and st.raw:
                tracked = _Tracked(pid)  # read from /proc (see _read_one_proc)
            elif tracked is None:
                try:
                    tracked = _Tracked(pid, psutil.Process(pid))
                except psutil.NoSuchProcess:
                    if is_given:  # in this namespace's /proc a moment ago: it exited
                        gone.add(pid)
                        rows.append(_exited_row(pid, st.ppid))
                    continue
                except Exception as exc:
                    self._errors.append(f"process {pid}: {type(exc).__name__}: {exc}")
                    if is_given:
                        rows.append(ProcessInfo(pid=pid, ppid=st.ppid))
                    continue
            read = self._read_one_proc if tracked.proc is None else self._read_one
            row, alive = read(tracked, st)
            tracked.row = row = reuse_equal(row, tracked.row, SHARED_STRINGS)
            if alive:
                keep[key] = tracked
            elif is_given:
                gone.add(pid)
            if alive or is_given:
                rows.append(row)
        self._tracked = keep
        self._gone = gone  # only while still asked for: bounded by the pids given
        self._exited = exited
        self._invisible = invisible

    def _boot_time(self) -> float:
        """psutil's boot time, read again every minute (a clock step moves it): create
        times must match psutil's for the identity check before a kill."""
        now = time.monotonic()
        if self._boot is None or now - self._boot[0] >= 60.0:
            self._boot = (now, psutil.boot_time())
        return self._boot[1]

    def _read_one_proc(self, tracked: _Tracked, st: _Stat) -> tuple[ProcessInfo, bool]:
        """(row from /proc, still alive); ``st`` comes from the scan."""
        pid = tracked.pid
        now = time.monotonic()
        fields = procfs.parse_stat_fields(st.raw)
        if fields is None:
            self._errors.append(f"process {pid} stat: cannot be parsed")
            return ProcessInfo(pid=pid, ppid=st.ppid), True
        alive = True
        user: str | None = None
        io: tuple[int, int] | None = None
        try:
            uid = self._real_uid(tracked, now)
            if uid is not None:
                user = procfs.user_name(uid)
            sign = (fields.comm.encode(), *procfs.exec_sign(st.raw))
            if (
                tracked.cmdline_at is None
                or not now - tracked.cmdline_at < self._recheck
                or sign != tracked.exec_sign
            ):
                tracked.cmdline_at, tracked.exec_sign = now, sign
                self._command_line(tracked, fields.comm)
            io = self._proc_field(pid, "io", lambda: procfs.read_io(pid))
        except _Gone:
            alive = False
        known = {
            "ppid": fields.ppid,
            "user": user,
            "name": tracked.name if tracked.name is not None else clean_text(fields.comm),
            "command": tracked.command if alive else None,
            "status": fields.status,
            "rss": fields.rss,
            "create_time": fields.starttime / procfs.CLOCK_TICKS + self._boot_time(),
            "num_threads": fields.num_threads,
            "environment": tracked.environment if alive else None,
        }
        return _row(tracked, now, alive, fields.cpu_seconds, io, known), alive

    def _command_line(self, tracked: _Tracked, comm: str) -> None:
        """Read the command line; cleaned again (and the environment read) only when it or
        the comm changed. Raises ``_Gone``."""
        pid = tracked.pid
        raw = self._proc_field(pid, "cmdline", lambda: procfs.read_cmdline(pid))
        if raw is None:  # closed or failed: read again next tick (an error said each tick)
            tracked.raw_cmdline = tracked.command = tracked.comm = tracked.name = None
            tracked.environment = tracked.cmdline_at = None
        elif raw != tracked.raw_cmdline or comm != tracked.comm:
            argv = procfs.split_cmdline(raw)
            tracked.raw_cmdline, tracked.comm = raw, comm
            tracked.command = clean_text(" ".join(argv)) if argv else None
            tracked.name = clean_text(procfs.process_name(comm, argv))
            tracked.environment = self._environment(pid) if argv else None

    def _real_uid(self, tracked: _Tracked, now: float) -> int | None:
        """The real uid, read again when ``recheck_seconds`` have passed since it was
        read (or it could not be); raises ``_Gone``."""
        if tracked.uid is None or not now - tracked.uid_at < self._recheck:
            pid = tracked.pid
            tracked.uid = self._proc_field(pid, "status", lambda: procfs.read_real_uid(pid))
            tracked.uid_at = now
        return tracked.uid

    def _environment(self, pid: int) -> tuple[tuple[str, str], ...] | None:
        """The named variables of ``pid``'s environment; read once per command line, not
        per tick (an environment changes with an exec). A zombie's (or a process ending
        now) is None: whether it is gone, the reads after this one tell."""
        try:
            return self._proc_field(pid, "environ", lambda: procfs.read_environ(pid))
        except _Gone:
            return None

    def _proc_field(self, pid: int, what: str, read: Callable[[], T]) -> T | None:
        """None when closed to us or unreadable (an error unless a permission); raises
        ``_Gone`` when the process no longer exists."""
        try:
            return read()
        except (FileNotFoundError, ProcessLookupError):
            raise _Gone from None
        except PermissionError:
            return None
        except (OSError, ValueError) as exc:
            self._errors.append(f"process {pid} {what}: {type(exc).__name__}: {exc}")
            return None

    def _read_one(self, tracked: _Tracked, st: _Stat) -> tuple[ProcessInfo, bool]:
        """(row through psutil where there is no Linux /proc, still alive)."""
        p = tracked.proc
        assert p is not None
        got: dict[str, Any] = {}
        alive = True

        def field(name: str, read: Callable[[psutil.Process], Any]) -> Any:
            try:
                return read(p)
            except (psutil.ZombieProcess, psutil.AccessDenied):  # before NoSuchProcess
                return None
            except psutil.NoSuchProcess:
                raise
            except Exception as exc:
                self._errors.append(f"process {p.pid} {name}: {type(exc).__name__}: {exc}")
                return None

        now = time.monotonic()
        try:
            with p.oneshot():
                for what, key, read in _PSUTIL_READS:
                    got[key] = field(what, read)
        except psutil.NoSuchProcess:
            alive = False
        cpu_seconds, io = got.pop("cpu_seconds", None), got.pop("io", None)
        if got.get("ppid") is None:
            got["ppid"] = st.ppid
        return _row(tracked, now, alive, cpu_seconds, io, got), alive

    def close(self) -> None:
        """Nothing to release: the reader holds no files or threads between calls."""
