"""Races of the test harness itself, forced into their bad interleaving (a flaky test is
a bug: these were seen once each under load), and what a failed wait reports."""

from __future__ import annotations

import os
import select
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests import lifecycle_harness
from tests.lifecycle_harness import PtyGputop, Tmux, need
from tests.tmux_pane import TmuxPane, zombie_status

#: Bounds against a hang only; nothing here asserts a duration.
BOUND_S = 30.0
#: How long the reader lets the closer run first. The old close took no time; a longer
#: wait only makes the old code's failure surer, never the fixed code's pass less sure.
CLOSER_HEAD_START_S = 2.0


def _identity(fd: int) -> tuple[int, int, int] | None:
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_rdev)


def test_the_pty_is_closed_only_once_its_reader_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    """test_readme's ``gputop --stream --count 3`` printed 2 lines: a dashboard check's
    ``close_master`` closed the pty under its live reader thread, another check's pipe got
    the same descriptor number, and the reader read a line off that pipe. Here the reader
    is held between taking the descriptor and using it while ``close_master`` runs, and
    then a pipe is opened as another thread would: the descriptor the reader holds must
    still be the pty."""
    real_select = lifecycle_harness.select.select
    started = threading.Event()
    held: list[PtyGputop] = []
    found: list[str] = []
    closers: list[threading.Thread] = []

    def select(r: list[int], w: list[int], x: list[int], timeout: float) -> Any:
        if closers or not started.wait(BOUND_S):
            return real_select(r, w, x, timeout)
        (fd,) = r
        before = _identity(fd)
        closer = threading.Thread(target=held[0].close_master)
        closers.append(closer)
        closer.start()
        closer.join(CLOSER_HEAD_START_S)
        other = os.pipe()  # another thread's subprocess.run, at the worst moment
        try:
            if _identity(fd) != before:
                found.append(f"descriptor {fd} was closed under the reader (pipe: {other})")
        finally:
            for end in other:
                os.close(end)
        return [], [], []

    monkeypatch.setattr(lifecycle_harness, "select", SimpleNamespace(select=select))
    p = PtyGputop("--version")
    held.append(p)
    started.set()
    try:
        p._thread.join(BOUND_S)
        assert closers, "the reader never polled"
        closers[0].join(BOUND_S)
        assert not closers[0].is_alive()
        assert not p._thread.is_alive()
        assert not found, found
        assert p.master is None
    finally:
        p.kill()


# --- a wait that fails says why: the pane gone, or how its process ended ------------------


def _ended(pane: TmuxPane) -> str:
    deadline = time.monotonic() + BOUND_S
    while (how := pane.ended()) is None:
        assert time.monotonic() < deadline, f"the pane's process never ended: {pane.screen()}"
        time.sleep(0.05)
    return how


def test_a_failed_wait_says_how_the_panes_process_ended(tmp_path: Path) -> None:
    """A lifecycle test's wait for the jobs view once failed on an empty capture: gputop
    had exited (a traceback), and its pane, session and server had gone with it. The
    lifecycle panes are kept now: a failed wait says how the process ended and shows the
    end of what it left."""
    need("tmux")
    pane = Tmux(tmp_path, "printf 'first\\nlast words\\n'; exit 3")
    try:
        assert _ended(pane) == "exit status 3"
        with pytest.raises(AssertionError) as failed:
            pane.wait_text("Jobs ·", timeout=0)
        message = str(failed.value)
        assert "the pane's process ended (exit status 3)" in message
        assert "lines:\nfirst\nlast words\n" in message, message
    finally:
        pane.close()


def test_a_failed_wait_on_a_pane_gone_says_so() -> None:
    """A pane not kept goes with its process, and its server with it: not "shows: ''"."""
    need("tmux")
    pane = TmuxPane("sleep 1; exit 3")
    try:
        deadline = time.monotonic() + BOUND_S
        while not pane.describe("").startswith("the pane is gone"):
            assert time.monotonic() < deadline, f"the pane is still there: {pane.screen()}"
            time.sleep(0.05)
        with pytest.raises(AssertionError, match=r"never.*; the pane is gone \(tmux: "):
            pane.wait_text("never", timeout=0)
    finally:
        pane.close()


@pytest.mark.parametrize(
    ("command", "how"), [("exit 5", "exit status 5"), ("kill -9 $$", "signal 9")]
)
def test_a_zombies_status_is_read_from_proc(command: str, how: str) -> None:
    """Where tmux took the pane for dead without reaping its process, the status is read
    from the zombie's /proc stat."""
    child = subprocess.Popen(["sh", "-c", command])
    try:
        fd = os.pidfd_open(child.pid)  # readable once it exited; nothing reaps it meanwhile
        try:
            assert select.select([fd], [], [], BOUND_S)[0]
        finally:
            os.close(fd)
        assert zombie_status(child.pid) == how
    finally:
        child.wait(BOUND_S)
    assert zombie_status(child.pid) == ""  # reaped: nothing left to read
