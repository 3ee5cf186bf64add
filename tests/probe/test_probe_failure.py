"""The probe under failure: a directory it must refuse (someone else's, a link, open to
others), one it cannot write (read-only, full). Each: one line on stderr, and the training
runs to its end with the same result."""

from __future__ import annotations

import contextlib
import os
import pwd
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import require_tool
from tests.probe.harness import environ, items_sum, probe_lines, run_trainer


def check_refused(proc: subprocess.CompletedProcess[str], out: dict[str, object], why: str) -> None:
    lines = probe_lines(proc.stderr)
    assert len(lines) == 1, proc.stderr
    assert "disabled" in lines[0] and why in lines[0], lines
    assert "Traceback" not in proc.stderr
    assert out["result"] == items_sum()
    assert out["patched"] is False  # disabled: torch's own __next__ is back
    assert "gputop-probe" not in out["threads"]


@pytest.mark.timeout(300)
def test_a_directory_that_is_a_link_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "probes"
    link.symlink_to(real)
    proc, out = run_trainer(tmp_path, env=environ(link))
    check_refused(proc, out, "symbolic link")
    assert os.listdir(real) == []


@pytest.mark.timeout(300)
def test_a_directory_open_to_others_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "probes"
    d.mkdir()
    d.chmod(0o777)
    proc, out = run_trainer(tmp_path, env=environ(d))
    check_refused(proc, out, "open to group or others")
    assert os.listdir(d) == []


@pytest.mark.requires_root
@pytest.mark.timeout(300)
def test_a_directory_someone_else_made_first_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "probes"
    d.mkdir(mode=0o700)
    nobody = pwd.getpwnam("nobody")
    os.chown(d, nobody.pw_uid, nobody.pw_gid)
    proc, out = run_trainer(tmp_path, env=environ(d))
    check_refused(proc, out, f"belongs to uid {nobody.pw_uid}")
    assert os.listdir(d) == []


@contextlib.contextmanager
def tmpfs(where: Path, options: str) -> Iterator[Path]:
    """A small tmpfs mounted at ``where`` (0700), unmounted afterwards."""
    mount, umount = require_tool("mount"), require_tool("umount")
    where.mkdir(mode=0o700)
    subprocess.run([mount, "-t", "tmpfs", "-o", f"mode=0700,{options}", "tmpfs", str(where)],
                   check=True, capture_output=True, timeout=30)  # fmt: skip
    try:
        yield where
    finally:
        subprocess.run([umount, str(where)], check=True, capture_output=True, timeout=30)


@pytest.mark.requires_root
@pytest.mark.timeout(300)
def test_a_read_only_directory(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "probes", "ro,size=64k") as d:
        proc, out = run_trainer(tmp_path, env=environ(d))
        assert os.listdir(d) == []
    check_refused(proc, out, "cannot publish")


@pytest.mark.requires_root
@pytest.mark.timeout(300)
def test_a_full_disk(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "probes", "size=4k,nr_inodes=8") as d:
        with contextlib.suppress(OSError), (d / "filler").open("wb") as f:
            while True:  # until ENOSPC
                f.write(b"x" * 1024)
                f.flush()
        proc, out = run_trainer(tmp_path, env=environ(d))
        assert sorted(os.listdir(d)) == ["filler"]  # its temporary file gone too
    check_refused(proc, out, "cannot publish")
