"""The probe's file: where a training process's probe (gputop.probe) publishes what it
measured, and what the file holds. The one home of that contract: the probe writes by it,
gputop's reader (gputop.sources.probes) reads by it.

Standard library only: the probe imports it inside the training process.

A file is JSON, one object, written whole and replaced atomically (mode 0600) in a
directory of its user's (mode 0700)::

    {"gputop_probe": 1, "pid": 4242, "start_ticks": 123456, "time": 1733350000.2,
     "window_seconds": 20.0, "steps": 64, "data_wait_ratio": 0.42,
     "step_seconds": 0.31, "batches_per_second": 3.2,
     "memory": [{"device": 0, "allocated": 1, "reserved": 2, "peak": 3}]}

``start_ticks`` is field 22 of ``/proc/<pid>/stat`` (clock ticks since boot): with the pid,
the process's identity, compared exactly (a pid reused by another process has another).
"""

from __future__ import annotations

import os
import re

#: The format's version: a reader ignores (and says) a file of another.
VERSION = 1
#: The key that carries :data:`VERSION`, and marks the object as a probe's.
MARK = "gputop_probe"
#: The probe writes at most this often (seconds).
PUBLISH_SECONDS = 1.0
#: The window its figures cover: the last WINDOW_SECONDS, at most WINDOW_STEPS steps.
WINDOW_SECONDS = 20.0
WINDOW_STEPS = 100
#: A file older than this (by its ``time``, against the reader's clock) is stale: the
#: probe stopped publishing (the loop stalled or ended), so its figures are not "now".
STALE_SECONDS = 10.0
#: A reader refuses a larger file unread: a real one is under 2 KiB.
MAX_BYTES = 64 * 1024
#: CUDA devices a file may list: the reader cuts (and says) more.
MAX_DEVICES = 64
#: The environment variable that turns the probe off (``0``) even where it is imported,
#: and that ``gputop run`` sets (``1``) for every Python process of the command.
ENABLE_ENV = "GPUTOP_PROBE"
#: Overrides the directory (tests, and users whose runtime dir is elsewhere); the reader
#: looks there too, for the processes of its own user.
DIR_ENV = "GPUTOP_PROBE_DIR"

#: The fields of a file, each with what it holds (docs/probe.md is made from this).
FIELDS: dict[str, str] = {
    MARK: f"the format's version ({VERSION})",
    "pid": "the training process's pid",
    "start_ticks": "its start time, field 22 of /proc/PID/stat (clock ticks since boot)",
    "time": "epoch seconds when it was written",
    "window_seconds": "seconds the figures below cover",
    "steps": "steps (batches taken) in the window",
    "data_wait_ratio": "share of step time spent waiting for the next batch, 0 to 1",
    "step_seconds": "mean time between consecutive batches",
    "batches_per_second": "batches taken per second over the window",
    "memory": "per CUDA device: allocated, reserved and peak (max allocated) bytes",
}

_NAME = re.compile(r"probe-([1-9][0-9]{0,9})\.json\Z")


def file_name(pid: int) -> str:
    """The file of the process ``pid``, in its user's directory."""
    return f"probe-{pid}.json"


def pid_of(name: str) -> int | None:
    """The pid a directory entry's name is the probe file of; None: not a probe's name."""
    found = _NAME.match(name)
    return int(found.group(1)) if found else None


def own_dir(environ: dict[str, str] | None = None, uid: int | None = None) -> str:
    """The directory this process's probe writes to: ``$GPUTOP_PROBE_DIR``, else
    ``$XDG_RUNTIME_DIR/gputop``, else ``/tmp/gputop-UID``."""
    env = os.environ if environ is None else environ
    if env.get(DIR_ENV):
        return env[DIR_ENV]
    if env.get("XDG_RUNTIME_DIR"):
        return os.path.join(env["XDG_RUNTIME_DIR"], "gputop")
    return f"/tmp/gputop-{os.getuid() if uid is None else uid}"


def dirs_of(uid: int) -> tuple[str, ...]:
    """Where a reader looks for the probes of user ``uid``'s processes: systemd's runtime
    directory for that user (``/run/user/UID``, what ``XDG_RUNTIME_DIR`` is set to at
    login) and the ``/tmp`` fallback."""
    return (f"/run/user/{uid}/gputop", f"/tmp/gputop-{uid}")
