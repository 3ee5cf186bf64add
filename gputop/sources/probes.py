"""The probes' files (gputop.probefile) read into the process rows: ``ProcessInfo.probe``.

A training process's probe is untrusted input (a plain user writes it). A file counts only
when every check holds, each said as a ``SampleError`` (source "probe") when it does not:

- its directory: a real directory (not a link), owned by the user or root, writable by no
  one else; opened once a tick (``O_NOFOLLOW``) and listed through that descriptor;
- the file: opened without following a link or blocking on a FIFO, a regular file with one
  link, owned by the process's uid or root, at most ``probefile.MAX_BYTES``;
- its contents: one JSON object of the format's version, whose pid is its name's and the
  process's, whose start time is the live process's (a reused pid has another), fresh,
  and whose values pass the model's check by type and by value (out of range: n/a).

The process's uid is its real uid (``/proc/PID/status``), as the host source reads it for
the user column: ``/proc/PID``'s owner is the effective uid, and root for a process that
is not dumpable. A parsed file is kept while its (device, inode, mtime, size) is the same.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import gputop.probefile as probefile
from gputop.fmt import clean_text
from gputop.model import (
    DriverInfo,
    Probe,
    ProcessInfo,
    SampleError,
    Snapshot,
    check_values,
    decoder,
    replace,
    said,
)
from gputop.sources import procfs

SOURCE = "probe"
#: A directory's entries listed a tick; past them, the shown processes' files are opened
#: by name (what a tick costs stays bounded however many files a user leaves there).
MAX_ENTRIES = 4096
#: Said (once a tick) where another user's directory cannot be listed.
OTHERS_CLOSED = "the probes of other users are not readable here (run as root to see them)"

_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: A link is refused (ELOOP), a FIFO opens without waiting for a writer.
_O_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_decode = decoder(Probe, checked=True)
_HUGE = 1e300


class Refused(Exception):
    """A probe file that does not count; the message says why, in words."""


@dataclass(frozen=True, slots=True)
class _Parsed:
    """A file's contents as read (kept while the file is unchanged)."""

    pid: Any
    start_ticks: Any
    probe: Probe | None  # None: refused (``why``)
    why: str | None = None
    said: tuple[str, ...] = ()  # the check by value's messages (fields shown as n/a)


def parse(data: bytes) -> _Parsed:
    """A file's bytes as a probe, its values checked; Refused when it is not one."""
    import json  # here: most dashboards never read a probe file, and json would stay loaded

    try:
        obj = json.loads(data)
    except (ValueError, RecursionError, UnicodeDecodeError):
        raise Refused("not JSON") from None
    if not isinstance(obj, dict):
        raise Refused("not a JSON object")
    version = obj.get(probefile.MARK)
    if type(version) is not int or version != probefile.VERSION:
        raise Refused(f"not of the probe format {probefile.VERSION} ({probefile.MARK!r})")
    when = obj.get("time")
    # compared, not converted (an int of hundreds of digits fits no float); NaN: not within
    if not (isinstance(when, int | float) and not isinstance(when, bool) and -_HUGE < when < _HUGE):
        raise Refused(f"its time {said(when)} is not a number of seconds")
    told: list[str] = []
    memory = obj.get("memory")
    if isinstance(memory, list) and len(memory) > probefile.MAX_DEVICES:
        told.append(f"more than {probefile.MAX_DEVICES} CUDA devices: the rest left out")
        obj = {**obj, "memory": memory[: probefile.MAX_DEVICES]}
    probe = _decode({k: obj[k] for k in _FIELDS if k in obj})
    if not isinstance(probe, Probe):
        raise Refused("not a probe's shape")
    # The model's check by type and by value (LIMITS), as for any other input.
    checked = check_values(
        Snapshot(time=0.0, hostname="", driver=_NO_DRIVER, processes=(_row(probe),)),
        SOURCE,
        "the probe",
    )
    told += [e.message.replace("reported processes.probe.", "reported ") for e in checked.errors]
    (row,) = checked.processes or (None,)
    made = None if row is None else row.probe
    if made is None:
        raise Refused("; ".join(told) or "not a probe")
    return _Parsed(obj.get("pid"), obj.get("start_ticks"), made, said=tuple(told))


#: The keys of a file the model reads (the others: the format's mark and the identity).
_FIELDS = tuple(f.name for f in dataclasses.fields(Probe))
_NO_DRIVER = DriverInfo(available=False)


def _row(probe: Probe) -> ProcessInfo:
    return ProcessInfo(pid=1, probe=probe)


def _is_theirs(st: os.stat_result, uid: int) -> bool:
    return st.st_uid in (uid, 0)


@dataclass(slots=True)
class _Dir:
    """A probe directory and the user whose processes write it."""

    path: str
    uid: int  # whose it is: its files are of that user's processes


class ProbeReader:
    """Attaches ``ProcessInfo.probe`` to a tick's rows (:meth:`attach`); ``errors`` then
    holds what it refused. One thread only."""

    def __init__(
        self,
        *,
        proc_root: str = procfs.PROC_ROOT,
        dirs_of: Callable[[int], tuple[str, ...]] = probefile.dirs_of,
        own_dir: str | None = None,
        own_uid: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._proc = proc_root
        self._dirs_of = dirs_of
        self._own_uid = os.geteuid() if own_uid is None else own_uid
        self._own_dir = probefile.own_dir() if own_dir is None else own_dir
        self._clock = clock
        self._uids: dict[tuple[int, float | None, str | None], int | None] = {}
        self._parsed: dict[tuple[int, int, int, int, int], _Parsed] = {}
        # (pid, create_time) -> (the row given, the probe, the row made), of rows with a probe
        self._rows: dict[tuple[int, float | None], tuple[ProcessInfo, Probe | None, ProcessInfo]]
        self._rows = {}
        self.errors: tuple[SampleError, ...] = ()

    def attach(self, rows: Iterable[ProcessInfo]) -> tuple[ProcessInfo, ...]:
        rows = tuple(rows)
        errors: list[SampleError] = []
        try:
            probes = self._read(rows, errors)
        except Exception as exc:  # never let the tick fail
            text = clean_text(f"{type(exc).__name__}: {exc}", 300)
            errors.append(SampleError(SOURCE, f"reading the probes failed: {text}"))
            probes = {}
        self.errors = tuple(errors)
        known, self._rows = self._rows, {}
        if not probes and not known:  # no probe anywhere: the rows as given
            return rows
        out = []
        for row in rows:
            probe = probes.get(row.pid)
            if probe is None and row.probe is None:
                out.append(row)
                continue
            key = (row.pid, row.create_time)
            before = known.get(key)
            if before is not None and before[0] is row and before[1] is probe:
                done = before[2]
            else:
                done = replace(row, probe=probe)
            self._rows[key] = (row, probe, done)
            out.append(done)
        return tuple(out)

    # -- which directories ----------------------------------------------------------------

    def _uid(self, row: ProcessInfo) -> int | None:
        # The host source reads the real uid every tick for the row's user: a process
        # whose uid changed (setuid after start) has another user, and is read again.
        key = (row.pid, row.create_time, row.user)
        if key not in self._uids:
            try:
                self._uids[key] = procfs.read_real_uid(row.pid, self._proc)
            except (OSError, ValueError):
                self._uids[key] = None
        return self._uids[key]

    def _dirs(self, rows: tuple[ProcessInfo, ...]) -> tuple[list[_Dir], dict[int, int | None]]:
        uids: dict[int, int | None] = {}
        live = {}
        for row in rows:
            if row.visible and row.create_time is not None and row.status != "dead":
                uids[row.pid] = self._uid(row)
                live[(row.pid, row.create_time, row.user)] = True
        self._uids = {k: v for k, v in self._uids.items() if k in live}
        dirs: dict[str, _Dir] = {}
        users = sorted({u for u in uids.values() if u is not None})
        for uid in users:
            for path in self._dirs_of(uid):
                dirs.setdefault(path, _Dir(path, uid))
        # Last: where gputop's environment is another user's (sudo -E keeping
        # XDG_RUNTIME_DIR), that directory stays that user's.
        if self._own_uid in users and self._own_dir:
            dirs.setdefault(self._own_dir, _Dir(self._own_dir, self._own_uid))
        return list(dirs.values()), uids

    # -- reading --------------------------------------------------------------------------

    def _read(self, rows: tuple[ProcessInfo, ...], errors: list[SampleError]) -> dict[int, Probe]:
        dirs, uids = self._dirs(rows)
        found: dict[int, Probe] = {}
        closed = False
        seen: set[tuple[int, int, int, int, int]] = set()
        for d in dirs:
            try:
                fd = os.open(d.path, _O_DIR)
            except FileNotFoundError:
                continue  # no probe ran for that user: the common case, one syscall
            except PermissionError:
                # Said only where the directory is seen to exist: a user's runtime
                # directory (0700) hides whether it holds one, and every plain user's
                # gputop would otherwise say it each tick without any probe running.
                closed = closed or _exists(d.path)
                continue
            except OSError as exc:
                link = exc.errno in (errno.ENOTDIR, errno.ELOOP) and os.path.islink(d.path)
                why = "a symbolic link (never followed)" if link else _why_open(exc, "directory")
                errors.append(self._said(d.path, why))
                continue
            try:
                st = os.fstat(fd)
                if not _is_theirs(st, d.uid):
                    errors.append(self._said(d.path, f"a directory not owned by uid {d.uid}"))
                    continue
                if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                    errors.append(self._said(d.path, "a directory others can write to"))
                    continue
                try:
                    names = self._names(fd, d.uid, uids)
                except PermissionError:
                    closed = True
                    continue
                for name, pid in names:
                    if uids.get(pid) is None:
                        continue  # not a process shown (or its uid unknown)
                    path = os.path.join(d.path, name)
                    if uids[pid] != d.uid:
                        why = f"process {pid} is uid {uids[pid]}'s, the directory uid {d.uid}'s"
                        errors.append(self._said(path, why))
                        continue
                    try:
                        probe, values = self._file(fd, name, pid, seen)
                    except Refused as why:
                        errors.append(self._said(path, str(why)))
                        continue
                    except Exception as exc:  # a case not foreseen: that file only
                        errors.append(self._said(path, f"cannot be read ({type(exc).__name__})"))
                        continue
                    errors.extend(self._said(path, message, pid) for message in values)
                    if pid not in found or probe.time > found[pid].time:
                        found[pid] = probe
            finally:
                os.close(fd)
        self._parsed = {k: v for k, v in self._parsed.items() if k in seen}
        if closed:
            errors.append(SampleError(SOURCE, OTHERS_CLOSED))
        return found

    def _names(self, fd: int, uid: int, uids: dict[int, int | None]) -> list[tuple[str, int]]:
        """(name, pid) of the directory's probe files; past :data:`MAX_ENTRIES` entries
        (files of killed processes pile up, or a user fills it) the files of the shown
        processes of ``uid`` by name instead: the same files, at a bounded cost."""
        names = []
        with os.scandir(fd) as entries:
            for n, entry in enumerate(entries):
                if n >= MAX_ENTRIES:
                    return [(probefile.file_name(p), p) for p, u in uids.items() if u == uid]
                pid = probefile.pid_of(entry.name)
                if pid is not None:
                    names.append((entry.name, pid))
        return names

    def _file(
        self, dir_fd: int, name: str, pid: int, seen: set[Any]
    ) -> tuple[Probe, tuple[str, ...]]:
        """(the probe of file ``name``, what its check by value made n/a); Refused."""
        try:
            fd = os.open(name, _O_FILE, dir_fd=dir_fd)
        except OSError as exc:
            raise Refused(_why_open(exc, "file")) from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise Refused("not a regular file")
            if st.st_nlink != 1:
                raise Refused(f"a file of {st.st_nlink} links (a probe's has one)")
            uid = self._live_uid(pid)
            if not _is_theirs(st, uid):
                raise Refused(f"owned by uid {st.st_uid}, not by the process's uid {uid} or root")
            if st.st_size > probefile.MAX_BYTES:
                raise Refused(f"{st.st_size} bytes, over the {probefile.MAX_BYTES} byte limit")
            key = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size, st.st_uid)
            seen.add(key)
            parsed = self._parsed.get(key)
            if parsed is None:
                data = os.read(fd, probefile.MAX_BYTES + 1)
                if len(data) > probefile.MAX_BYTES:  # grew since fstat
                    raise Refused(f"over the {probefile.MAX_BYTES} byte limit")
                try:
                    parsed = parse(data)
                except Refused as why:
                    parsed = _Parsed(None, None, None, str(why))
                self._parsed[key] = parsed
        finally:
            os.close(fd)
        if parsed.probe is None:
            raise Refused(parsed.why or "not a probe")
        if type(parsed.pid) is not int or parsed.pid != pid:
            raise Refused(f"its pid {said(parsed.pid)} is not its name's {pid}")
        start = self._start_ticks(pid)
        if type(parsed.start_ticks) is not int or parsed.start_ticks != start:
            raise Refused(
                f"its start time {said(parsed.start_ticks)} is not process {pid}'s ({start}):"
                " another process had that pid"
            )
        now = self._clock()
        age = now - parsed.probe.time
        if age > probefile.STALE_SECONDS:
            raise Refused(f"stale: written {age:.0f} s ago (the probe stopped publishing)")
        if age < -probefile.STALE_SECONDS:
            raise Refused(f"its time is {-age:.0f} s in the future")
        return parsed.probe, parsed.said

    def _live_uid(self, pid: int) -> int:
        try:
            uid = procfs.read_real_uid(pid, self._proc)
        except (OSError, ValueError):
            uid = None
        if uid is None:
            raise Refused(f"process {pid} is gone or closed")
        return uid

    def _start_ticks(self, pid: int) -> int:
        st = procfs.read_stat(pid, self._proc)
        if st is None:
            raise Refused(f"process {pid} is gone or closed")
        return st.starttime

    def _said(self, path: str, why: str, pid: int | None = None) -> SampleError:
        where = clean_text(path, 300)
        if pid is not None:  # a value shown as n/a: the file counts
            return SampleError(SOURCE, f"probe file {where}: {why}", metric="probe")
        return SampleError(SOURCE, f"probe file {where} ignored: {why}", metric="probe")


def _exists(path: str) -> bool:
    try:
        os.lstat(path)
    except OSError:
        return False
    return True


def _why_open(exc: OSError, what: str) -> str:
    if exc.errno == errno.ELOOP:
        return "a symbolic link (never followed)"
    if exc.errno == errno.ENOTDIR:
        return "not a directory"
    return clean_text(f"cannot open the {what}: {exc.strerror or exc}", 200) or "cannot open"
