"""The dashboard's input thread (``GpuTopDriver.run_input_thread``) sleeps while nothing
is typed: Textual's loop wakes every 0.1 s to tick its parser (what that cost at idle:
bench/README.md §5); here it ticks only while an escape sequence may be pending.

The loop runs on a pipe in place of the terminal, with a selector that records each wait.
"""

from __future__ import annotations

import os
import queue
import selectors
import threading
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from textual import events

from gputop.ui.terminal import GpuTopDriver, WakingEvent

WAIT_S = 5.0  # an upper bound for the thread to get somewhere, never a measured time


class RecordingSelector(selectors.SelectSelector):
    """Puts each ``select`` call's timeout on ``waits`` as the call is made."""

    waits: ClassVar[queue.Queue[float | None]] = queue.Queue()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        RecordingSelector.waits.put(timeout)
        return super().select(timeout)


class PipeDriver(GpuTopDriver):
    """Only what ``run_input_thread`` reads of a driver, on a pipe: no app, no terminal."""

    def __init__(self, fd: int) -> None:  # no super(): it would take the terminal
        self.fileno = fd
        self._debug = False
        self.exit_event = WakingEvent()
        self.got: queue.Queue[Any] = queue.Queue()

    def process_message(self, message: Any) -> None:
        self.got.put(message)

    def _terminal_lost(self) -> None:
        self.got.put("lost")


@pytest.fixture
def driver(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[PipeDriver, int]]:
    monkeypatch.setattr(selectors, "SelectSelector", RecordingSelector)
    RecordingSelector.waits = queue.Queue()
    read, write = os.pipe()
    fds_before = set(os.listdir("/proc/self/fd"))
    d = PipeDriver(read)
    thread = threading.Thread(target=d.run_input_thread, daemon=True)
    thread.start()
    try:
        yield d, write
    finally:
        d.exit_event.set()
        thread.join(WAIT_S)
        assert not thread.is_alive(), "the exit event did not end the input thread"
        os.close(write)
        os.close(read)
    # the wake-up pipe is closed with the thread (listdir's own fd comes and goes)
    assert set(os.listdir("/proc/self/fd")) <= fds_before | {str(read), str(write)}


def next_wait() -> float | None:
    return RecordingSelector.waits.get(timeout=WAIT_S)


def test_idle_input_thread_waits_without_a_timeout(driver: tuple[PipeDriver, int]) -> None:
    assert next_wait() is None  # Textual's loop: 0.1, and again every 0.1 s


def test_a_lone_escape_is_still_the_escape_key(driver: tuple[PipeDriver, int]) -> None:
    d, write = driver
    assert next_wait() is None
    os.write(write, b"\x1b")  # the parser waits ESCDELAY for more, then says Esc
    key = d.got.get(timeout=WAIT_S)
    assert isinstance(key, events.Key) and key.key == "escape"
    # after it the thread ticks a while (a sequence may still be pending), then sleeps
    while (timeout := next_wait()) is not None:
        assert timeout > 0
    assert d.got.empty()


def test_keys_come_at_once_and_the_thread_sleeps_again(driver: tuple[PipeDriver, int]) -> None:
    d, write = driver
    assert next_wait() is None
    os.write(write, b"q")
    key = d.got.get(timeout=WAIT_S)
    assert isinstance(key, events.Key) and key.key == "q"
    while next_wait() is not None:
        pass


def test_setting_the_exit_event_wakes_a_sleeping_thread() -> None:
    event = WakingEvent()
    with event.waker() as wake:
        sel = selectors.SelectSelector()
        sel.register(wake, selectors.EVENT_READ)
        assert sel.select(0) == []
        threading.Thread(target=event.set).start()
        assert sel.select(WAIT_S)  # readable once set
        sel.close()
    with event.waker() as wake:  # set before the waker opened: readable at once
        sel = selectors.SelectSelector()
        sel.register(wake, selectors.EVENT_READ)
        assert sel.select(0)
        sel.close()
    event.set()  # no waker open: nothing to write to
