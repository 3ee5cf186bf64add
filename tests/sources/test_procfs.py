"""The direct /proc reader (gputop/sources/procfs.py) against psutil, which it replaces
on the per-tick path: same files, same values."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from gputop.model import ProcessInfo
from gputop.sources import procfs
from gputop.sources.host import HostReader
from tests.helpers import spawn


def _rows(reader: HostReader, pids: list[int]) -> dict[int, ProcessInfo]:
    return {r.pid: r for r in reader.read_processes(pids)}


def test_proc_rows_match_psutil_rows() -> None:
    """Both paths of HostReader, on the same real processes: the fields that do not move
    between two reads are equal, the ones that do are close."""
    with spawn.running("burn") as child:
        pids = [child.pid, os.getpid()]
        by_proc, by_psutil = HostReader(), HostReader()
        by_psutil._use_proc = False
        for reader in (by_proc, by_psutil):
            _rows(reader, pids)
        time.sleep(0.3)
        a, b = _rows(by_proc, pids), _rows(by_psutil, pids)
        create_times = {pid: psutil.Process(pid).create_time() for pid in pids}
    for pid in pids:
        x, y = a[pid], b[pid]
        for field in ("visible", "ppid", "user", "name", "command", "create_time"):
            assert getattr(x, field) == getattr(y, field), (pid, field)
        assert x.create_time is not None
        assert abs(x.create_time - create_times[pid]) < 0.005
        assert x.rss is not None and y.rss is not None and abs(x.rss - y.rss) < 16 << 20
        assert x.num_threads is not None and x.num_threads >= 1
        assert x.cpu_percent is not None and x.read_bytes_per_s is not None
    assert a[child.pid].cpu_percent is not None and a[child.pid].cpu_percent > 20  # burning


def test_long_name_is_extended_from_the_command_line(tmp_path: Path) -> None:
    """The kernel cuts comm at 15 characters; psutil's name() then takes argv[0]."""
    exe = tmp_path / "a-very-long-program-name"
    shutil.copy("/bin/sleep", exe)
    proc = subprocess.Popen([str(exe), "30"])
    try:
        row = _rows(HostReader(), [proc.pid])[proc.pid]
        assert row.name == "a-very-long-program-name" == psutil.Process(proc.pid).name()
        assert row.command == f"{exe} 30"
    finally:
        proc.kill()
        proc.wait()


def test_changed_command_line_is_read_again() -> None:
    """A process that rewrites its command line (setproctitle) shows the new one."""
    code = "import sys, time\nsys.stdout.write('x\\n'); sys.stdout.flush(); time.sleep(30)\n"
    proc = subprocess.Popen([sys.executable, "-c", code, "first"], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"x\n"
        reader = HostReader()
        assert _rows(reader, [proc.pid])[proc.pid].command.endswith(" first")  # type: ignore[union-attr]
        # Seen as a new command line (the cache is keyed by the raw bytes).
        tracked = next(t for (pid, _), t in reader._tracked.items() if pid == proc.pid)
        tracked.raw_cmdline = b"stale\x00"
        assert _rows(reader, [proc.pid])[proc.pid].command.endswith(" first")  # type: ignore[union-attr]
    finally:
        proc.kill()
        proc.wait()


def test_io_closed_to_us_is_none_without_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another user's /proc/<pid>/io is closed (EACCES) unless root: n/a, not an error."""

    def closed(pid: int, proc_root: str = "/proc") -> tuple[int, int] | None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(procfs, "read_io", closed)
    reader = HostReader()
    _rows(reader, [os.getpid()])
    row = _rows(reader, [os.getpid()])[os.getpid()]
    assert row.read_bytes_per_s is None and row.write_bytes_per_s is None
    assert row.cpu_percent is not None and row.command is not None
    assert reader.last_errors == ()


def test_unexpected_read_error_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(pid: int, proc_root: str = "/proc") -> bytes:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(procfs, "read_cmdline", broken)
    reader = HostReader()
    row = _rows(reader, [os.getpid()])[os.getpid()]
    assert row.command is None and row.name is not None  # the name still comes from stat
    assert any("cmdline" in e and "Input/output error" in e for e in reader.last_errors)
    # a failed read is not carried forward: tried, and said, again on the next tick
    _rows(reader, [os.getpid()])
    assert any("cmdline" in e and "Input/output error" in e for e in reader.last_errors)


def test_parse_stat_fields_with_hostile_comm() -> None:
    data = (
        b"42 (a) b) c (x) R 7 1 1 0 -1 0 0 0 0 0 250 50 0 0 20 0 3 0 98765 0 12 "
        b"18446744073709551615 1 1 0 0 0\n"
    )
    f = procfs.parse_stat_fields(data)
    assert f is not None
    assert f.comm == "a) b) c (x"
    assert (f.status, f.ppid, f.num_threads, f.starttime) == ("running", 7, 3, 98765)
    assert f.cpu_seconds == 300 / procfs.CLOCK_TICKS
    assert f.rss == 12 * procfs.PAGE_SIZE
    assert procfs.parse_stat_fields(b"garbage") is None
    assert procfs.parse_stat_fields(b"1 (x) S 1 2") is None  # cut short


def test_status_letters_are_psutils() -> None:
    import psutil._pslinux as pslinux

    assert procfs.STATUSES == pslinux.PROC_STATUSES


@pytest.mark.parametrize(
    ("raw", "argv"),
    [
        (b"python\x00train.py\x00--lr\x000.1\x00", ["python", "train.py", "--lr", "0.1"]),
        (b"", []),  # a zombie or a kernel thread
        (b"worker: rank 3 ", ["worker:", "rank", "3"]),  # rewritten with spaces
        (b"worker: rank 3\x00", ["worker:", "rank", "3"]),  # spaces, then one NUL
        (b"a\x00\x00b\x00", ["a", "", "b"]),  # an empty argument stays
        (b"caf\xc3\xa9\x00\xff\x00", ["café", "\udcff"]),  # bad UTF-8 kept as psutil does
    ],
)
def test_split_cmdline_as_psutil(raw: bytes, argv: list[str]) -> None:
    assert procfs.split_cmdline(raw) == argv


def test_process_name() -> None:
    assert procfs.process_name("python3", ["/usr/bin/python3.11"]) == "python3"
    assert procfs.process_name("gnome-keyring-d", ["/usr/bin/gnome-keyring-daemon"]) == (
        "gnome-keyring-daemon"
    )
    assert procfs.process_name("gnome-keyring-d", ["/usr/bin/other"]) == "gnome-keyring-d"
    assert procfs.process_name("gnome-keyring-d", []) == "gnome-keyring-d"


def test_read_io_and_uid_of_this_process() -> None:
    io = procfs.read_io(os.getpid())
    assert io is not None and all(v >= 0 for v in io)
    assert procfs.read_real_uid(os.getpid()) == os.getuid()
    assert procfs.read_cmdline(os.getpid()).split(b"\x00")[0]
    with pytest.raises(FileNotFoundError):
        procfs.read_io(4_194_305)  # above the largest pid_max


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"rchar: 9\nwchar: 1\nsyscr: 2\nsyscw: 1\nread_bytes: 4096\nwrite_bytes: 512\n"
         b"cancelled_write_bytes: 0\n", (4096, 512)),
        (b"read_bytes: 5\nwrite_bytes: 6", (5, 6)),  # first line, no final newline
        (b"rchar: 1\nwrite_bytes: 3\nread_bytes: 9\n", (9, 3)),  # any order
        (b"rchar: 1\nread_bytes: 7\n", None),  # a field missing
        (b"rchar: 1\ncancelled_write_bytes: 8\nread_bytes: 1\n", None),  # not write_bytes
    ],
)  # fmt: skip
def test_read_io_parses_what_the_kernel_writes(
    tmp_path: Path, data: bytes, expected: tuple[int, int] | None
) -> None:
    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "io").write_bytes(data)
    assert procfs.read_io(42, str(tmp_path)) == expected


def test_newest_pid_tgid_and_whose_proc(tmp_path: Path) -> None:
    """What the pass over new pids rests on: loadavg's newest pid (garbage: None), a
    thread's tgid (its process's), and whether a /proc is this process's own."""
    assert procfs.proc_is_ours()  # the real /proc of the tests' namespace
    newest = procfs.newest_pid()
    assert newest is not None and newest > 0
    (tmp_path / "loadavg").write_text("0.01 0.02 0.03 1/99 4242\n")
    assert procfs.newest_pid(str(tmp_path)) == 4242
    for garbage in ("", "0.01 0.02 0.03 1/99\n", "0.01 0.02 0.03 1/99 x\n"):
        (tmp_path / "loadavg").write_text(garbage)
        assert procfs.newest_pid(str(tmp_path)) is None
    assert not procfs.proc_is_ours(str(tmp_path))  # no self link: not a /proc of ours
    assert procfs.read_tgid(os.getpid()) == os.getpid()
    started, stop = threading.Event(), threading.Event()
    tid: list[int] = []

    def run() -> None:
        tid.append(threading.get_native_id())
        started.set()
        stop.wait(30)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        assert started.wait(30)
        assert tid[0] != os.getpid() and procfs.read_tgid(tid[0]) == os.getpid()
    finally:
        stop.set()
        thread.join(30)
    assert procfs.read_tgid(procfs.PID_MAX_LIMIT + 1) is None  # no such task
