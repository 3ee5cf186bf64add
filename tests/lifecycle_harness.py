"""Harness for the lifecycle tests: the real ``python -m gputop`` in a tmux pane (a private
tmux server each) or on a pty this process holds, and waiting for a process to be gone.

Waits are on events: a process is gone when its pidfd becomes readable (it exited; a
zombie counts: nobody may reap it once its tmux server is gone), a screen when
``capture-pane`` shows the text. Every tmux server and gputop started is killed on the
way out, even when the test fails.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import shlex
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from tests.tmux_pane import TmuxPane

ROOT = Path(__file__).resolve().parent.parent

#: A process must be gone within this long after its terminal went away (or a signal
#: came). It only catches a hang (gputop left running: forever, or for the 10 minutes of
#: a hung NVML call): generous, as a loaded 2-core machine is many times slower than an
#: idle one. An idle machine takes well under a second.
GONE_S = 10.0

#: How long closing the pty waits for its reader thread, which notices within one of
#: its 0.1 s polls: only a bound against a hang, generous for a loaded machine.
READER_JOIN_S = 30.0


def need(tool: str) -> None:
    """Skip without ``tool``; in CI (CI=true) a missing tool fails the test instead."""
    from tests.conftest import require_tool

    require_tool(tool)


def env_for_gputop(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {
        "HOME": os.environ.get("HOME", "/tmp"),
        "PATH": "/usr/bin:/bin",
        "TERM": "tmux-256color",
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(ROOT),
        "TEXTUAL_ANIMATIONS": "none",
        "XDG_CONFIG_HOME": os.environ.get("XDG_CONFIG_HOME", "/nonexistent"),
    }
    env.update(extra or {})
    return env


class Gone:
    """Waits for a process (not necessarily our child) to exit, on its pidfd."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.fd = os.pidfd_open(pid)

    def wait(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout))
        return bool(ready)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(self.fd, signal.SIGKILL)


def thread_names(pid: int) -> list[str]:
    out = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                out.append(Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip())
    return out


class Tmux(TmuxPane):
    """A private tmux server with one session ``t`` running ``command``. A pane whose
    process ended by itself is kept: a wait that fails says how gputop ended and shows
    what it left (a traceback), where the pane would otherwise be gone with its words."""

    def __init__(self, tmp: Path, command: str, width: int = 120, height: int = 40) -> None:
        super().__init__(command, width=width, height=height, prefix="gputop-life", keep_dead=True)
        self.tmp = tmp


@contextlib.contextmanager
def tmux_pane(tmp: Path, command: str, width: int = 120, height: int = 40) -> Iterator[Tmux]:
    need("tmux")
    pane = Tmux(tmp, command, width, height)
    try:
        yield pane
    finally:
        pane.close()


def gputop_command(pid_file: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """A shell line that writes its pid and becomes ``python -m gputop ARGS``."""
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env_for_gputop(env).items())
    return "cd {root} && exec env -i {exports} sh -c {inner}".format(
        root=shlex.quote(str(ROOT)),
        exports=exports,
        inner=shlex.quote(
            f"echo $$ > {shlex.quote(str(pid_file))}; exec {shlex.quote(sys.executable)} "
            "-m gputop " + " ".join(shlex.quote(a) for a in args)
        ),
    )


def wait_pid_file(path: Path, timeout: float = 15.0) -> int:
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.read_text().strip().isdigit():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.05)
    return int(path.read_text())


class PtyGputop:
    """``python -m gputop ARGS`` on a pty whose master this process holds: the pty is its
    controlling terminal (it is a session leader), so closing the master is a hang-up as
    when an SSH connection drops. A thread reads the master (a terminal showing it) until
    :meth:`stop_reading` (a frozen link) or :meth:`close_master`."""

    def __init__(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        width: int = 120,
        height: int = 40,
    ) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))
        self.master: int | None = master
        self.output = bytearray()
        self._reading = threading.Event()
        self._reading.set()
        self._lock = threading.Lock()

        def become_ctty() -> None:
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gputop", *args],
                stdin=slave,
                stdout=slave,
                stderr=slave,
                cwd=ROOT,
                env=env_for_gputop(env),
                start_new_session=True,
                preexec_fn=become_ctty,
            )
        finally:
            os.close(slave)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            master = self.master
            if master is None:
                return
            if not self._reading.wait(0.1):
                continue
            try:
                ready, _, _ = select.select([master], [], [], 0.1)
                if not ready:
                    continue
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            with self._lock:
                self.output += data

    def text(self) -> str:
        with self._lock:
            return self.output.decode("utf-8", "replace")

    def wait_text(self, text: str, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.text():
            if self.proc.poll() is not None:
                raise AssertionError(f"gputop exited ({self.proc.returncode}):\n{self.text()}")
            assert time.monotonic() < deadline, f"no {text!r} in:\n{self.text()[-2000:]}"
            time.sleep(0.05)

    def send(self, data: bytes) -> None:
        assert self.master is not None
        os.write(self.master, data)

    def stop_reading(self) -> None:
        self._reading.clear()

    def wait_frozen(self, timeout: float = 20.0) -> int:
        """Wait until gputop's output stopped flowing into the pty (nobody reads it): the
        bytes waiting on the master stop growing. Returns how many are waiting."""
        assert self.master is not None
        deadline = time.monotonic() + timeout
        last, since = -1, time.monotonic()
        while True:
            waiting = struct.unpack("i", fcntl.ioctl(self.master, termios.FIONREAD, b"\0" * 4))[0]
            now = time.monotonic()
            if waiting != last:
                last, since = waiting, now
            elif waiting > 0 and now - since > 1.0:
                return waiting
            assert now < deadline, f"output never stopped flowing ({waiting} bytes waiting)"
            assert self.proc.poll() is None, f"gputop exited ({self.proc.returncode})"
            time.sleep(0.05)

    def close_master(self) -> None:
        """Close the pty's master once the reader thread is gone. Closed under a live
        reader, its number can be reused at once by another thread's pipe (the tests run
        commands on several threads): the reader then read that pipe, and a ``--stream``
        check lost a line to it."""
        master, self.master = self.master, None
        if master is None:
            return
        self._thread.join(READER_JOIN_S)
        if self._thread.is_alive():  # never seen; a leaked descriptor beats a stolen one
            return
        os.close(master)

    def wait_gone(self, timeout: float) -> int | None:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.close_master()


@contextlib.contextmanager
def pty_gputop(*args: str, **kwargs: object) -> Iterator[PtyGputop]:
    p = PtyGputop(*args, **kwargs)  # type: ignore[arg-type]
    try:
        yield p
    finally:
        p.kill()
