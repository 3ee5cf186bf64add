"""The benches' first-frame waiter (bench/bench_ui.py ``wait_first_frame``): in tmux's
control mode it names the output block that put the marker on screen, and takes that
block's arrival as the first frame; where control mode is not available it polls.

No timing is asserted: the frame's time is checked to be the named block's arrival.
A tiny program writes N lines, then the marker in three pieces, each write after a key
from the test, which sends the key once the control client has received the write
before: each write arrives as a block of its own, and the marker shows only with the
last piece (no block holds it whole).
"""

from __future__ import annotations

import shlex
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from bench import bench_ui
from tests.conftest import missing

pytestmark = pytest.mark.requires_tool("tmux")

N = 5
PIECES = (b"8", b"0 G", b"iB")  # the marker, 80 GiB, in three writes

WRITES = (*(b"line %d\r\n" % k for k in range(N)), *PIECES)

#: Writes the first at once (its terminal raw by then), each other one after a key.
TINY = f"""
import os, sys, tty
fd = sys.stdin.fileno()
tty.setraw(fd)
for k, text in enumerate({WRITES!r}):
    if k:
        os.read(fd, 1)
    os.write(1, text)
os.read(fd, 1)
"""


@pytest.fixture
def tmux_server() -> Iterator[None]:
    try:
        yield
    finally:
        bench_ui.tmux("kill-server", check=False)


def start_tiny(waiter: str) -> bench_ui.Pane:
    command = f"{shlex.quote(sys.executable)} -c {shlex.quote(TINY)}"
    return bench_ui.start_pane("tiny", command, {}, (80, 24), waiter=waiter)


def test_control_mode_names_the_block_that_showed_the_marker(tmux_server: None) -> None:
    if not bench_ui.control_mode_available():
        missing("tmux older than 3.2 (no ordered control mode; the fallback is tested below)")
    pane = start_tiny("control")
    client = pane.client
    assert client is not None
    failed: list[BaseException] = []

    def drive() -> None:  # the next write once the client has the one before
        try:
            total = 0
            for k, text in enumerate(WRITES):
                if k:
                    bench_ui.tmux("send-keys", "-t", pane.session, "x")
                total += len(text)
                client.wait_bytes(total, 20.0)
        except BaseException as exc:
            failed.append(exc)

    driver = threading.Thread(target=drive)
    driver.start()
    try:
        bench_ui.wait_first_frame(pane)
    finally:
        driver.join(30)
        bench_ui.tmux("kill-session", "-t", pane.session, check=False)
    assert not failed and not driver.is_alive()
    assert pane.note == "" and pane.client is None  # found, and the client detached
    i = pane.frame_block
    assert i is not None
    data = [b.data for b in pane.blocks]
    # The block that carried the marker's last piece, and no block before it did.
    assert PIECES[-1] in data[i]
    assert not any(PIECES[-1] in d for d in data[:i])
    # Each write its own block, in order: the marker's block is the last write's.
    assert data[: len(WRITES)] == list(WRITES)
    assert i == len(WRITES) - 1
    # The first frame is that block's arrival, from the pane's start.
    assert pane.first_frame_s == pane.blocks[i].at - pane.started
    # The replay names it again from the first block on (screens are a function of bytes).
    assert bench_ui.find_marker_block(pane.blocks, 0, (80, 24)) == i


def test_falls_back_to_polling_without_control_mode(
    tmux_server: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bench_ui, "WAITER", "control")
    monkeypatch.setattr(bench_ui, "control_mode_available", lambda: False)
    assert bench_ui.set_waiter("control") == "poll"
    pane = start_tiny("control")
    assert pane.client is None
    # Once the first write shows (its terminal raw: setraw drops what was typed before),
    # every other write's key at once: the program takes one per write.
    deadline = time.monotonic() + 30.0
    while "line 0" not in bench_ui.tmux("capture-pane", "-p", "-t", pane.session):
        assert time.monotonic() < deadline, "the program did not start"
        time.sleep(0.05)
    bench_ui.tmux("send-keys", "-t", pane.session, "x" * (len(WRITES) - 1))
    try:
        bench_ui.wait_first_frame(pane)
    finally:
        bench_ui.tmux("kill-session", "-t", pane.session, check=False)
    assert pane.note == ""
    assert pane.first_frame_s is not None and pane.frame_block is None


def _tmux_escape(data: bytes) -> bytes:
    """How tmux writes a pane's bytes in ``%output``: below 32 and the backslash octal."""
    return b"".join(b"\\%03o" % c if c < 32 or c == 0x5C else bytes([c]) for c in data)


@seed(32)  # fixed: a failure reproduces (hypothesis prints the example)
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_output_escapes_undone(data: bytes) -> None:
    assert bench_ui.decode_output(_tmux_escape(data)) == data
