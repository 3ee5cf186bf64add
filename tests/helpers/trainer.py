"""A stand-in for a training process, for tests/analysis/test_verdict_real.py.

Usage: python trainer.py MODE N_BURNERS FILE

  workers   N_BURNERS forked workers spin on the CPU, one more worker reads FILE again
            and again; the main process sleeps (a starved GPU, busy DataLoader workers).
  main      the main process spins; every worker sleeps (the reader reads FILE once).

Prints "ready PID..." (the workers' pids, the reader last) once every worker runs, then
runs until killed. Workers exit when their parent goes; everything exits after 60 s.
"""

from __future__ import annotations

import os
import sys
import time

DEADLINE = time.monotonic() + 60.0


def _spin_once() -> None:
    x = 0
    for i in range(20_000):
        x += i * i


def _alive(parent: int) -> bool:
    return os.getppid() == parent and time.monotonic() < DEADLINE


def _burn(parent: int) -> None:
    while _alive(parent):
        _spin_once()


def _sleep(parent: int) -> None:
    while _alive(parent):
        time.sleep(0.05)


def _read(parent: int, path: str, loop: bool) -> None:
    # The first pass drops the file from the page cache so that it is read from storage.
    with open(path, "rb", buffering=0) as f:
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        while _alive(parent):
            f.seek(0)
            while f.read(1 << 20):
                pass
            if not loop:
                break
    _sleep(parent)


def _fork(target: str, parent: int, path: str, mode: str) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            if target == "burn":
                _burn(parent)
            elif target == "read":
                _read(parent, path, loop=mode == "workers")
            else:
                _sleep(parent)
        finally:
            os._exit(0)
    return pid


def main() -> None:
    mode, n, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    me = os.getpid()
    kind = "burn" if mode == "workers" else "sleep"
    pids = [_fork(kind, me, path, mode) for _ in range(n)]
    pids.append(_fork("read", me, path, mode))
    sys.stdout.write(" ".join(["ready", *map(str, pids)]) + "\n")
    sys.stdout.flush()
    if mode == "main":
        while time.monotonic() < DEADLINE:
            _spin_once()
    else:
        while time.monotonic() < DEADLINE:
            time.sleep(0.05)


if __name__ == "__main__":
    main()
