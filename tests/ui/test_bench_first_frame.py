"""The benches' first-frame waiter (bench/bench_ui.py ``wait_first_frame``): in tmux's
control mode it names the output block that put the marker on screen, and takes that
block's arrival as the first frame; where control mode is not available it polls.

No timing is asserted: the frame's time is checked to be the named block's arrival.
A tiny program writes N lines, then the marker in three pieces; after each write it asks
the terminal for the cursor position (``ESC [6n``) and waits for tmux's answer, which
tmux sends only once it has read and parsed everything before: each write reaches tmux
on its own, and the marker shows only with the last piece (no block holds it whole).
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterator

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from bench import bench_ui

pytestmark = pytest.mark.requires_tool("tmux")

N = 5
PIECES = (b"8", b"0 G", b"iB")  # the marker, 80 GiB, in three writes

TINY = f"""
import os, sys, tty
fd = sys.stdin.fileno()
tty.setraw(fd)
def write(text):
    os.write(1, text + b"\\x1b[6n")
    reply = b""
    while not reply.endswith(b"R"):
        reply += os.read(fd, 32)
for k in range({N}):
    write(b"line %d\\r\\n" % k)
for piece in {PIECES!r}:
    write(piece)
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
        pytest.skip("tmux older than 3.2: the polling fallback is tested below")
    pane = start_tiny("control")
    assert pane.client is not None
    try:
        bench_ui.wait_first_frame(pane)
    finally:
        bench_ui.tmux("kill-session", "-t", pane.session, check=False)
    assert pane.note == "" and pane.client is None  # found, and the client detached
    i = pane.frame_block
    assert i is not None
    data = [b.data for b in pane.blocks]
    # The block that carried the marker's last piece, and no block before it did.
    assert PIECES[-1] in data[i]
    assert not any(PIECES[-1] in d for d in data[:i])
    # Every other write came before it (each its own block: tmux answered each one).
    assert all(b"line %d" % k in b"".join(data[:i]) for k in range(N))
    assert i == N + len(PIECES) - 1
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
