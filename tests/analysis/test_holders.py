"""scan_holders: a fake /proc tree for the matching, the real /proc for the scan."""

from __future__ import annotations

import os
import pwd
import tempfile
from pathlib import Path
from typing import Any, cast

import pytest

from gputop.model import UnlistedHolder
from gputop.sources.holders import scan_holders
from tests.helpers import spawn
from tests.helpers.nobody import as_nobody


def _fake_process(
    root: Path,
    pid: int | str,
    links: list[str],
    comm: bytes = b"python\n",
    cmdline: bytes = b"python\0train.py\0",
    uid: int = 0,
) -> Path:
    d = root / str(pid)
    (d / "fd").mkdir(parents=True)
    for i, target in enumerate(links):
        os.symlink(target, d / "fd" / str(i))  # targets need not exist
    (d / "comm").write_bytes(comm)
    (d / "cmdline").write_bytes(cmdline)
    (d / "status").write_text(f"Name:\tx\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n")
    return d


@pytest.fixture
def fake_proc(tmp_path: Path) -> Path:
    root = tmp_path / "proc"
    root.mkdir()
    _fake_process(
        root,
        100,
        [
            "/dev/null",
            "/dev/nvidia0",
            "/dev/nvidiactl",
            "/dev/nvidia-uvm",
            "/dev/nvidia-uvm-tools",
            "/dev/nvidia-modeset",
            "/dev/nvidia-caps/nvidia-cap1",
            "/dev/nvidia12",
            "/dev/nvidia0",  # twice: one row
            "socket:[12345]",
            "/dev/nvidia1x",
            "/dev/nvidia",
            "/tmp/dev/nvidia3",
        ],
        cmdline=b"python\0train.py\0--lr\x001e-3\0",
    )
    _fake_process(root, 200, ["/dev/nvidia1"])  # listed by NVML
    _fake_process(
        root,
        300,
        ["/dev/nvidia1", "anon_inode:[eventfd]"],
        comm=b"evil\x1b[2Jname\n",
        cmdline=b"run\0\x1b]0;title\x07--x\0\x1b[31mred\0",
        uid=4_000_000,  # no such user
    )
    _fake_process(root, 400, ["/dev/nvidiactl", "pipe:[1]"])  # control device only
    zombie = _fake_process(root, 500, ["/dev/nvidia0"], cmdline=b"")  # no command line
    (zombie / "status").unlink()
    (root / "600").mkdir()  # exited: no fd directory any more
    _fake_process(root, "self", ["/dev/nvidia0"])  # not a pid directory
    return root


def test_fake_tree_matching(fake_proc: Path) -> None:
    holders = scan_holders({0: 0, 1: 1}, listed_pids=[200], proc_root=str(fake_proc)).holders
    assert [(h.pid, h.minor_number, h.gpu) for h in holders] == [
        (100, 0, 0),
        (100, 12, None),  # no GPU with minor 12: said so, not dropped
        (300, 1, 1),
        (500, 0, 0),
    ]
    first = holders[0]
    assert first == UnlistedHolder(
        pid=100,
        gpu=0,
        minor_number=0,
        user="root",
        name="python",
        command="python train.py --lr 1e-3",
    )
    evil = holders[2]
    assert evil.name == "evilname"
    assert evil.command == "run --x red"
    assert evil.user == "4000000"  # a uid without a name, as ps shows it
    zombie = holders[3]
    assert zombie.command is None and zombie.user is None and zombie.name == "python"


def test_fake_tree_listed_pids_are_excluded(fake_proc: Path) -> None:
    holders = scan_holders({0: 0, 1: 1}, [100, 200, 300, 500], str(fake_proc)).holders
    assert holders == ()
    scan = scan_holders({}, [200], str(fake_proc))
    assert scan.processes == 5  # 100, 300, 400, 500 and 600 (gone: no fd directory)
    assert scan.denied == 0
    assert {h.gpu for h in scan.holders} == {None}  # no GPU known at all


def test_missing_proc_root_gives_nothing(tmp_path: Path) -> None:
    assert scan_holders({0: 0}, [], str(tmp_path / "nope")).holders == ()


def _scan_as_nobody(proc_root: str, device_dir: str = "/dev") -> dict[str, int]:
    """Run scan_holders as nobody (``as_nobody``)."""

    def scan() -> dict[str, int]:
        s = scan_holders({0: 0}, [], proc_root, device_dir)
        return {"holders": len(s.holders), "denied": s.denied, "processes": s.processes}

    return cast("dict[str, int]", as_nobody(scan))


needs_root = pytest.mark.requires_root("needs root to drop to nobody")


@needs_root
def test_unreadable_fd_directories_are_skipped_and_counted() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        root = Path(tmp) / "proc"
        root.mkdir()
        root.chmod(0o755)
        for pid in (10, 11):
            d = _fake_process(root, pid, ["/dev/nvidia0"])
            d.chmod(0o755)
            for f in d.iterdir():
                f.chmod(0o755 if f.is_dir() else 0o644)
        (root / "11" / "fd").chmod(0o700)  # root's: unreadable for nobody
        as_nobody = _scan_as_nobody(str(root))
    assert as_nobody == {"holders": 1, "denied": 1, "processes": 2}


@needs_root
def test_real_proc_as_unprivileged_user_does_not_fail() -> None:
    result = _scan_as_nobody("/proc")
    assert result["denied"] > 0  # root's processes: fd directories not readable
    assert result["holders"] == 0


def test_real_proc_finds_a_child_holding_a_device(tmp_path: Path) -> None:
    """The real scan, with a device directory the test can create files in."""
    for name in ("nvidia3", "nvidiactl", "nvidia-uvm"):
        (tmp_path / name).write_bytes(b"")
    paths = [str(tmp_path / n) for n in ("nvidia3", "nvidiactl", "nvidia-uvm")]
    with spawn.running("open", *paths) as child:
        scan = scan_holders({3: 1}, [], "/proc", device_dir=str(tmp_path))
        mine = [h for h in scan.holders if h.pid == child.pid]
        assert len(mine) == 1  # nvidiactl and nvidia-uvm are not GPUs
        held = mine[0]
        assert (held.gpu, held.minor_number) == (1, 3)
        assert held.user == pwd.getpwuid(os.geteuid()).pw_name
        assert held.name is not None and held.name.startswith("python")
        assert held.command is not None and "host_child.py open" in held.command
        listed = scan_holders({3: 1}, [child.pid], "/proc", device_dir=str(tmp_path))
        assert all(h.pid != child.pid for h in listed.holders)
        # The scan does not report the calling process itself.
        assert all(h.pid != os.getpid() for h in scan.holders)
    assert scan.processes > 1 and scan.fds > 0


def test_real_proc_scan_reads_each_fd_once_and_nothing_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Work counted, not timed (bench/bench_scale.py times it): the scan lists /proc once,
    each process's fd directory once, reads each fd link once, and opens no file of a
    process that holds no GPU (no /dev/nvidia* here: none does)."""
    from gputop.sources import holders as holders_mod

    counts = {"listdir": 0, "readlink": 0, "read": 0}

    def counting(name: str, real: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return real(*args, **kwargs)

        return call

    monkeypatch.setattr(holders_mod.os, "listdir", counting("listdir", os.listdir))
    monkeypatch.setattr(holders_mod.os, "readlink", counting("readlink", os.readlink))
    monkeypatch.setattr(holders_mod, "_read", counting("read", holders_mod._read))
    scan = scan_holders({0: 0}, [], device_dir="/nonexistent-dev")
    monkeypatch.undo()
    assert scan.processes > 1 and scan.fds > 0
    assert scan.holders == ()
    assert counts["listdir"] <= 1 + scan.processes  # /proc, then each fd directory
    assert counts["readlink"] == scan.fds
    assert counts["read"] == 0


def test_a_holders_command_line_reads_as_every_process_does(tmp_path: Path) -> None:
    """One reading of a command line (procfs: its limit, a title rewritten with spaces,
    a cut one, bytes that are not UTF-8, NUL padding): the holder's command is the
    process table's for the same bytes."""
    from gputop.fmt import clean_text
    from gputop.sources import procfs

    root = tmp_path / "proc"
    root.mkdir()
    lines = {
        601: b"python\0train.py\0",
        602: b"torchrun: worker 3 of 8",  # setproctitle: spaces, no NUL
        603: b"python\0" + b"x" * (procfs.CMDLINE_READ_LIMIT * 2) + b"\0--tail\0",  # cut
        604: b"python\0caf\xe9.py\0",  # not UTF-8
        605: b"nginx: worker process\0\0\0\0",  # a title padded with NULs
    }
    for pid, cmdline in lines.items():
        _fake_process(root, pid, ["/dev/nvidia0"], cmdline=cmdline)
    holders = {h.pid: h for h in scan_holders({0: 0}, [], str(root)).holders}
    for pid in lines:
        argv = procfs.split_cmdline(procfs.read_cmdline(pid, str(root)))
        assert holders[pid].command == clean_text(" ".join(argv))
    assert holders[602].command == "torchrun: worker 3 of 8"
    assert "--tail" not in (holders[603].command or "")
