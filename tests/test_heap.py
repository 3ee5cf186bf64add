"""Issue 32 §5: the dashboard sets glibc's malloc to one arena before its first thread,
only where the C library is glibc, and a failure there is never fatal."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from gputop import cli, heap

ROOT = Path(__file__).resolve().parent.parent


def test_glibc_is_told_from_what_the_c_library_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "confstr", lambda name: "glibc 2.36")
    assert heap.glibc()
    for says in ("musl 1.2", "", None):
        monkeypatch.setattr(os, "confstr", lambda name, says=says: says)
        assert not heap.glibc(), says

    def unknown(name: str) -> str:
        raise ValueError("unrecognized configuration name")  # musl, macOS

    monkeypatch.setattr(os, "confstr", unknown)
    assert not heap.glibc()


def test_another_libc_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[Any] = []
    monkeypatch.setattr(heap, "glibc", lambda: False)
    monkeypatch.setattr(ctypes, "CDLL", lambda *a, **k: opened.append(a))
    assert heap.one_arena() is False
    assert opened == []  # not even the C library was opened


@pytest.mark.parametrize("error", [OSError, AttributeError, TypeError])
def test_a_failing_mallopt_is_never_fatal(monkeypatch: pytest.MonkeyPatch, error: type) -> None:
    monkeypatch.setattr(heap, "glibc", lambda: True)

    def failing(*args: Any, **kwargs: Any) -> Any:
        raise error("no")

    monkeypatch.setattr(ctypes, "CDLL", failing)
    assert heap.one_arena() is False


def test_glibc_takes_the_setting() -> None:
    if not heap.glibc():
        pytest.skip("the C library is not glibc")
    # in a child: the setting is for a whole process
    code = "from gputop import heap; print(heap.one_arena())"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "True"


def test_the_dashboard_sets_it_before_its_first_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    monkeypatch.setattr(heap, "one_arena", lambda: events.append("one arena") or True)
    monkeypatch.setattr(cli.encoding, "has_terminal", lambda: True)

    class Recorded:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def start(self) -> None:
            events.append("thread")

    def dashboard(*args: Any, **kwargs: Any) -> int:
        events.append("dashboard")
        return 0

    monkeypatch.setattr(threading, "Thread", Recorded)
    monkeypatch.setattr(cli, "_dashboard", dashboard)
    assert cli.main(["--demo"]) == 0
    assert events.index("one arena") == 0 and "dashboard" in events
