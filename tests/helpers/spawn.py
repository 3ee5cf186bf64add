"""Start tests/helpers/host_child.py in its own process group and always clean it up."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

CHILD = str(Path(__file__).with_name("host_child.py"))


class Child:
    def __init__(self, proc: subprocess.Popen[bytes], pids: list[int]) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.extra = pids  # pids printed after "ready" (workers, ...)

    def kill(self) -> None:
        """Kill the whole process group we started, then reap the direct child."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def start(mode: str, *args: str, timeout: float = 10.0) -> Child:
    proc = subprocess.Popen(
        [sys.executable, CHILD, mode, *args],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    line = proc.stdout.readline().decode() if ready else ""
    if not line.startswith("ready"):
        Child(proc, []).kill()
        raise RuntimeError(f"child {mode} did not start: {line!r}")
    return Child(proc, [int(x) for x in line.split()[1:]])


@contextlib.contextmanager
def running(mode: str, *args: str) -> Iterator[Child]:
    child = start(mode, *args)
    try:
        yield child
    finally:
        child.kill()
