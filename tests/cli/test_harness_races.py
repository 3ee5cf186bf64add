"""Races of the test harness itself, forced into their bad interleaving (a flaky test is
a bug: these were seen once each under load)."""

from __future__ import annotations

import os
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from tests import lifecycle_harness
from tests.lifecycle_harness import PtyGputop

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
