"""End to end: the real ``python -m gputop --demo`` in a detached tmux pane.

Keys go in with ``send-keys``; what the terminal shows comes back with ``capture-pane``.
Each run ends with the exit status written by the shell after gputop returns, and with
the terminal checked: alternate screen left, no traceback anywhere in the scrollback.
(Textual draws on stderr, so stderr cannot be sent to a file: the scrollback is where a
traceback would land.) A private tmux server per test (``-L gputop-test-<pid>-<n>``).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shlex
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.tmux_pane import TmuxPane, plain_shell, shell_env

pytestmark = pytest.mark.requires_tool("tmux")

ROOT = Path(__file__).resolve().parents[2]
_count = itertools.count()


class Pane(TmuxPane):
    """One detached tmux session running a plain shell, on its own tmux server."""

    def __init__(self, tmp: Path, width: int = 120, height: int = 40) -> None:
        self.tmp = tmp
        self.status_file = tmp / "status"
        self.pid_file = tmp / "pid"
        env = shell_env(tmp, PYTHONPATH=str(ROOT))
        super().__init__(plain_shell(env), width=width, height=height)

    def start_gputop(self, *args: str) -> None:
        inner = "echo $$ > {pid}; exec {py} -m gputop --demo {args}".format(
            pid=shlex.quote(str(self.pid_file)),
            py=shlex.quote(sys.executable),
            args=" ".join(shlex.quote(a) for a in args),
        )
        line = (
            f"cd {shlex.quote(str(ROOT))} && sh -c {shlex.quote(inner)}; "
            f"echo EXIT=$? | tee {shlex.quote(str(self.status_file))}"
        )
        self.wait_for(lambda s: "PROMPT$" in s, what="the shell prompt")
        self.send_line(line)

    def alternate_on(self) -> bool:
        return self.flag("alternate_on") == "1"

    def gputop_pid(self) -> int:
        deadline = time.monotonic() + 5
        while not self.pid_file.exists() or not self.pid_file.read_text().strip():
            assert time.monotonic() < deadline, "gputop never started"
            time.sleep(0.05)
        return int(self.pid_file.read_text())

    def wait_exit(self, timeout: float = 8.0) -> str:
        """The ``EXIT=<status>`` line the shell wrote once gputop returned."""
        deadline = time.monotonic() + timeout
        while not self.status_file.exists() or "EXIT=" not in self.status_file.read_text():
            assert time.monotonic() < deadline, f"gputop did not exit:\n{self.screen()}"
            time.sleep(0.05)
        return self.status_file.read_text().strip()

    def close(self) -> None:
        if self.pid_file.exists() and self.pid_file.read_text().strip():
            pid = int(self.pid_file.read_text())
            with contextlib.suppress(ProcessLookupError):  # our own child, if still there
                os.kill(pid, signal.SIGKILL)
        super().close()


@pytest.fixture
def pane(tmp_path: Path) -> Iterator[Pane]:
    p = Pane(tmp_path)
    try:
        yield p
    finally:
        p.close()


def assert_terminal_restored(pane: Pane, status: str) -> None:
    def nonblank(screen: str) -> list[str]:
        return [line for line in screen.splitlines() if line.strip()]

    # The primary screen again: the command line, the status, a fresh prompt. No UI left.
    # Waits for the fresh prompt after the status: the first prompt line (before the
    # command ran) already holds "PROMPT$", so waiting for the two texts alone races it.
    shown = pane.wait_for(
        lambda s: (
            len(nonblank(s)) >= 2
            and nonblank(s)[-1].startswith("PROMPT$")
            and nonblank(s)[-2] == status
        ),
        what=f"{status!r} then a fresh prompt",
    )
    assert not pane.alternate_on()
    for leftover in ("H100", "COMMAND", "GPU-MEM", "Jobs"):
        assert leftover not in shown
    assert "Traceback" not in pane.scrollback()


def test_keys_resize_and_quit(pane: Pane) -> None:
    pane.start_gputop()
    pane.wait_text("H100 80GB HBM3", "COMMAND", "41201", "DEMO", "driver ")  # wide at 120x40
    assert pane.alternate_on()

    # 2: only GPU 2 and its processes.
    pane.keys("2")
    pane.wait_for(
        lambda s: (
            "GPU 2" in s.splitlines()[0]
            and "52840" in s
            and not any(p in s for p in ("41201", "70533", "80412"))
        ),
        what="only GPU 2's processes",
    )
    pane.keys("a")
    pane.wait_text("41201", "52840", "70533")

    # / filters by text; Enter keeps it, Esc clears it.
    # (Keys read in the same batch as "/" still go to the table: wait for the box first.)
    pane.keys("/")
    pane.wait_text("filter: command, user or pid")
    pane.keys("p", "p", "o", "Enter")
    pane.wait_for(
        lambda s: "filter ppo" in s.splitlines()[0] and "train_ppo" in s and "41201" not in s,
        what="the filter to leave only train_ppo",
    )
    pane.keys("Escape")
    pane.wait_text("41201", "train_ppo", absent=("filter ppo",))

    # j: the jobs tree, opened on the job of the process selected in the table (the
    # filter left the cursor on bob's PPO run), with its workers and its verdict.
    pane.keys("j")
    pane.wait_text("Jobs ·", "GPU 7 pid 80412", "worker pid 80430", "job 80412 · bob", "advice:")
    pane.keys("Escape")
    pane.wait_text("COMMAND", "41201", absent=("Jobs ·",))

    # ?: help lists j; Esc closes it.
    pane.keys("?")
    pane.wait_text("Keys", "Jobs", "Esc, ? or q closes this help")
    pane.keys("Escape")
    pane.wait_text("COMMAND", absent=("closes this help",))

    # Resizing: compact at 80x24, a message at 40x12, the wide layout again at 120x40.
    pane.tmux("resize-window", "-t", "t", "-x", "80", "-y", "24")
    pane.wait_text("drv ", "GPU-bnd", absent=("driver ",))
    pane.tmux("resize-window", "-t", "t", "-x", "40", "-y", "12")
    pane.wait_text("terminal too small")
    pane.tmux("resize-window", "-t", "t", "-x", "120", "-y", "40")
    pane.wait_text("driver ", "H100 80GB HBM3", "COMMAND", absent=("terminal too small",))

    pane.keys("q")
    assert pane.wait_exit() == "EXIT=0"
    assert_terminal_restored(pane, "EXIT=0")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_signals_end_it_cleanly(pane: Pane, sig: signal.Signals) -> None:
    pane.start_gputop()
    pane.wait_text("H100 80GB HBM3", "COMMAND")
    pid = pane.gputop_pid()
    os.kill(pid, sig)
    status = f"EXIT={128 + sig}"
    assert pane.wait_exit() == status
    assert_terminal_restored(pane, status)
