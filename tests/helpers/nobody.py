"""Run a function as the unprivileged user nobody, in a forked child of the test (root's
tests of what a plain user's gputop can and cannot do)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

#: nobody's uid and gid.
NOBODY = 65534


def as_nobody(run: Callable[[], object]) -> object:
    """``run()`` in a forked child that dropped root for nobody (as anyone else the child
    is already unprivileged and keeps its user); returns what it returned, through JSON.
    The child never returns into pytest; a failure in it fails the caller's test."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the forked child
        code = 1
        try:
            os.close(read_fd)
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            os.write(write_fd, json.dumps(run()).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    result: object = json.loads(data)
    return result
