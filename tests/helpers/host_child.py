"""Child programs for tests/sources/test_host_source.py and tests/analysis/test_holders.py.

Usage: python host_child.py MODE [ARGS...]; each mode prints "ready" (and pids) on one
line when set up, then runs until killed (the tests always kill and reap it).

  burn                 spin on one core
  read FILE            read FILE again and again, dropping it from the page cache first
  tree N               fork N sleeping workers, the first of which forks a sleeping child;
                       prints "ready PID..." with the workers' and grandchild's pids
  sleep ARG...         just sleep (argv is for the test to inspect)
  open PATH...         open every PATH and sleep holding them
"""

from __future__ import annotations

import os
import sys
import time


def _ready(*pids: int) -> None:
    sys.stdout.write(" ".join(["ready", *map(str, pids)]) + "\n")
    sys.stdout.flush()


def _sleep_forever() -> None:
    while True:
        time.sleep(60)


def _fork_sleeper(grandchild: bool = False) -> tuple[int, int | None]:
    """Fork a sleeping worker; with grandchild, it forks one more. Returns pids."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        gc = 0
        if grandchild:
            gc = os.fork()
            if gc == 0:
                os.close(w)
                _sleep_forever()
        os.write(w, str(gc).encode())
        os.close(w)
        _sleep_forever()
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 64)
        if not chunk:
            break
        data += chunk
    os.close(r)
    gc_pid = int(data or b"0")
    return pid, gc_pid or None


def main() -> None:
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "burn":
        _ready()
        while True:
            pass
    elif mode == "read":
        path = args[0]
        _ready()
        buf = bytearray(1 << 20)
        while True:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                while os.readv(fd, [buf]):
                    pass
            finally:
                os.close(fd)
    elif mode == "tree":
        n = int(args[0])
        pids: list[int] = []
        first, gc = _fork_sleeper(grandchild=True)
        pids.append(first)
        for _ in range(n - 1):
            pids.append(_fork_sleeper()[0])
        _ready(*pids, *([gc] if gc else []))
        _sleep_forever()
    elif mode == "sleep":
        _ready()
        _sleep_forever()
    elif mode == "open":
        held = [open(p, "rb") for p in args]  # noqa: SIM115 - held open on purpose
        _ready(len(held))
        _sleep_forever()
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
