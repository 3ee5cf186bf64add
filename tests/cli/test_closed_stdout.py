"""A closed stdout (``>&-``) or any other failure to write it (a full device, ``>
/dev/full``) is one line on stderr and exit 1; a reader gone (a pipe with no reader, as
after ``| head``) ends quietly with 0 (README, exit codes). Never a traceback. Each
against the real command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_cli import ROOT
from tests.record.test_record import demo, record

CLOSED = "gputop: standard output is closed; nothing written\n"


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rec")
    record(out, demo(30))
    return out


def _commands(recording: Path) -> dict[str, list[str]]:
    return {
        "once": ["--demo", "--once"],
        "json": ["--demo", "--json"],
        "stream": ["--demo", "--stream", "--interval", "0.1"],
        "replay once json": ["replay", str(recording), "--once", "--json"],
        "replay once": ["replay", str(recording), "--once"],
        "replay range": ["replay", str(recording), "--from", "@0"],
    }


NAMES = ["once", "json", "stream", "replay once json", "replay once", "replay range"]
FULL = "gputop: cannot write to standard output: No space left on device\n"
HELP = [["--help"], ["--version"], *([c, "-h"] for c in ("record", "replay", "export", "fleet"))]


def _run(args: list[str], stdout: int | None) -> subprocess.CompletedProcess[str]:
    """``stdout``: a descriptor, or None for a closed one (``>&-``)."""
    return subprocess.run(
        [sys.executable, "-m", "gputop", *args],
        stdout=subprocess.DEVNULL if stdout is None else stdout,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=60,
        close_fds=True,
        # Runs in the child after its streams are set up: fd 1 closed there only.
        preexec_fn=(lambda: os.close(1)) if stdout is None else None,
    )


@pytest.mark.parametrize("name", NAMES)
def test_a_closed_stdout_is_one_line_and_exit_1(recording: Path, name: str) -> None:
    r = _run(_commands(recording)[name], None)
    assert (r.returncode, r.stderr) == (1, CLOSED)


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["record", "--help"]])
def test_help_to_a_closed_stdout_is_lost_and_said(args: list[str]) -> None:
    """argparse swallows the write's error and exits 0: the help was lost all the same."""
    r = _run(args, None)
    assert (r.returncode, r.stderr) == (1, CLOSED)


@pytest.mark.parametrize("name", NAMES)
def test_a_pipe_without_reader_ends_quietly(recording: Path, name: str) -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first write: EPIPE, every time
    try:
        r = _run(_commands(recording)[name], write)
    finally:
        os.close(write)
    assert (r.returncode, r.stderr) == (0, "")


def test_closed_stdout_and_stderr_is_exit_1_and_nothing_else() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "gputop", "--demo", "--json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=60,
        preexec_fn=lambda: (os.close(1), os.close(2)),
    )
    assert r.returncode == 1


@pytest.mark.parametrize("name", NAMES)
def test_a_full_device_is_one_line_and_exit_1(recording: Path, name: str) -> None:
    """``> /dev/full``: every write (or its flush) fails with ENOSPC."""
    with open("/dev/full", "w") as full:
        r = _run(_commands(recording)[name], full.fileno())
    assert (r.returncode, r.stderr) == (1, FULL)


@pytest.mark.parametrize("args", HELP)
def test_help_into_a_full_device_is_one_line_and_exit_1(args: list[str]) -> None:
    """The help is still buffered when argparse exits: the flush on the way out fails."""
    with open("/dev/full", "w") as full:
        r = _run(args, full.fileno())
    assert (r.returncode, r.stderr) == (1, FULL)


def test_an_output_that_refuses_writes_is_one_line_and_exit_1(tmp_path: Path) -> None:
    """A descriptor opened read-only fails every write with EBADF: one line, exit 1,
    whatever the error."""
    target = tmp_path / "out"
    target.write_text("")
    fd = os.open(target, os.O_RDONLY)
    try:
        r = _run(["--demo", "--stream", "--interval", "0.1", "--count", "3"], fd)
    finally:
        os.close(fd)
    assert (r.returncode, r.stderr) == (
        1,
        "gputop: cannot write to standard output: Bad file descriptor\n",
    )


@pytest.mark.parametrize("name", ["json", "stream", "replay range"])
def test_a_terminal_gone_is_one_line_and_exit_1(recording: Path, name: str) -> None:
    """stdout a pty whose master side is closed (the terminal went away): every write
    fails with EIO."""
    master, slave = os.openpty()
    os.close(master)
    try:
        r = _run(_commands(recording)[name], slave)
    finally:
        os.close(slave)
    assert (r.returncode, r.stderr) == (
        1,
        "gputop: cannot write to standard output: Input/output error\n",
    )
