"""Probe files written by hand, by the contract (gputop.probefile), for the reader's tests:
what a well-behaved probe writes, and anything else a test wants instead."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import gputop.probefile as probefile
from gputop.sources import procfs


def start_ticks(pid: int) -> int:
    st = procfs.read_stat(pid)
    assert st is not None, f"process {pid} is gone"
    return st.starttime


def contents(pid: int, /, **changes: Any) -> dict[str, Any]:
    """A valid file's object for the live process ``pid``; ``changes`` replace fields (a
    value of ``...`` removes one)."""
    out: dict[str, Any] = {
        probefile.MARK: probefile.VERSION,
        "pid": pid,
        "start_ticks": start_ticks(pid),
        "time": time.time(),
        "window_seconds": 20.0,
        "steps": 64,
        "data_wait_ratio": 0.42,
        "step_seconds": 0.31,
        "batches_per_second": 3.2,
        "memory": [{"device": 0, "allocated": 1 << 30, "reserved": 3 << 30, "peak": 2 << 30}],
    }
    out.update(changes)
    return {k: v for k, v in out.items() if v is not ...}


def make_dir(path: Path, mode: int = 0o700) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, mode)
    return path


def write(directory: Path, pid: int, data: bytes | str | dict[str, Any] | None = None) -> Path:
    """``directory``'s file of ``pid`` (mode 0600, replaced atomically as the probe does):
    ``data`` as given, or a valid file's object for the live process."""
    if data is None:
        data = contents(pid)
    if isinstance(data, dict):
        data = json.dumps(data)
    if isinstance(data, str):
        data = data.encode()
    path = directory / probefile.file_name(pid)
    tmp = directory / f".{probefile.file_name(pid)}.tmp"
    tmp.write_bytes(data)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return path
