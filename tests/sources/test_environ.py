"""A process's environment of interest (issue 32 §3, the process screen): only the
variables of ``ENVIRONMENT_NAMES`` are read, once per command line, bounded; another
user's environment stays closed (the kernel's rule), which reads as n/a, never as unset."""

from __future__ import annotations

import subprocess
import unicodedata
from pathlib import Path
from typing import cast

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from gputop.fmt import clean_text
from gputop.model import ENVIRONMENT_NAMES, ENVIRONMENT_VALUE_MAX
from gputop.sources import procfs
from gputop.sources.host import HostReader
from tests.helpers.fuzz import SEED
from tests.helpers.nobody import as_nobody

SECRET = "hunter2-not-for-gputop"


def _sleeper(**env: str) -> subprocess.Popen[bytes]:
    base = {"PATH": "/usr/bin:/bin", "API_TOKEN": SECRET}
    return subprocess.Popen(["sleep", "60"], env={**base, **env})


def test_only_the_named_variables_of_a_real_process_are_read() -> None:
    proc = _sleeper(CUDA_VISIBLE_DEVICES="2,3", RANK="1", LOCAL_RANK="")
    try:
        (row,) = [r for r in HostReader().read_processes([proc.pid]) if r.pid == proc.pid]
    finally:
        proc.kill()
        proc.wait()
    # In ENVIRONMENT_NAMES' order; an empty value (no GPU visible) is a value.
    assert row.environment == (("CUDA_VISIBLE_DEVICES", "2,3"), ("RANK", "1"), ("LOCAL_RANK", ""))
    assert SECRET not in repr(row)


def test_a_process_without_them_reads_as_none_set() -> None:
    proc = _sleeper()
    try:
        (row,) = [r for r in HostReader().read_processes([proc.pid]) if r.pid == proc.pid]
    finally:
        proc.kill()
        proc.wait()
    assert row.environment == ()


def _environments_as_nobody(root_pid: int) -> list[object]:
    """As nobody (``as_nobody``): the environments gputop's reader gives of root's
    ``root_pid`` and of a process nobody started."""

    def read() -> list[object]:
        own = _sleeper(CUDA_VISIBLE_DEVICES="5")
        try:
            rows = {r.pid: r for r in HostReader().read_processes([root_pid, own.pid])}
        finally:
            own.kill()
            own.wait()
        return [rows[root_pid].environment, rows[own.pid].environment]

    return cast("list[object]", as_nobody(read))


@pytest.mark.requires_root("needs root to drop to nobody")
def test_another_users_environment_is_not_read() -> None:
    """gputop's reader as nobody: root's process reads as None (n/a), its own as read."""
    proc = _sleeper(CUDA_VISIBLE_DEVICES="0")
    try:
        theirs, mine = _environments_as_nobody(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    assert theirs is None
    assert mine == [["CUDA_VISIBLE_DEVICES", "5"]]


def test_the_read_is_bounded_and_a_cut_entry_is_dropped(tmp_path: Path) -> None:
    pid_dir = tmp_path / "42"
    pid_dir.mkdir()
    filler = b"".join(b"X%d=%s\x00" % (i, b"y" * 100) for i in range(2000))  # ~200 KiB
    (pid_dir / "environ").write_bytes(
        b"RANK=3\x00" + filler + b"CUDA_VISIBLE_DEVICES=1\x00"
    )  # fmt: skip
    got = procfs.read_environ(42, proc_root=str(tmp_path))
    assert got == (("RANK", "3"),)  # the rest lies beyond the read limit
    assert procfs.parse_environ(b"RANK=1\x00WORLD_SIZE=8") == (("RANK", "1"),)
    assert procfs.parse_environ(b"RANK=1\x00RANK=2\x00") == (("RANK", "1"),)  # as getenv


@seed(SEED)
@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.binary(max_size=40),
            st.tuples(st.sampled_from(ENVIRONMENT_NAMES), st.binary(max_size=400)).map(
                lambda kv: kv[0].encode() + b"=" + kv[1]
            ),
        ),
        max_size=12,
    ),
    st.booleans(),
)
def test_any_environ_bytes_give_named_clean_bounded_values(entries: list[bytes], cut: bool) -> None:
    """Seeded: GPUTOP_FUZZ_SEED replays it."""
    data = b"\x00".join(entries) + (b"" if cut else b"\x00")
    got = procfs.parse_environ(data)
    names = [n for n, _ in got]
    assert names == [n for n in ENVIRONMENT_NAMES if n in names]  # the table's order, once
    for _, value in got:
        assert len(value) <= ENVIRONMENT_VALUE_MAX
        assert not any(unicodedata.category(c) == "Cc" for c in value)  # no ESC, no NUL
        assert clean_text(value, ENVIRONMENT_VALUE_MAX) == value  # as the sources clean text


def test_the_docs_name_every_variable_read() -> None:
    """The docs list the names by hand: they must follow ENVIRONMENT_NAMES."""
    docs = Path(__file__).resolve().parents[2] / "docs"
    for page in ("json.md", "dashboard.md"):
        text = (docs / page).read_text(encoding="utf-8")
        missing = [n for n in ENVIRONMENT_NAMES if f"`{n}`" not in text]
        assert not missing, f"docs/{page} does not name {missing}"
