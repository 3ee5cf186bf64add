"""The dashboard's hold on the terminal: every way a session ends, ends the process.

What each ending does is in docs/troubleshooting.md. :class:`GpuTopDriver` works around
Textual's ``LinuxDriver`` where it is at fault (each place is marked ``Textual:``).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import select
import selectors
import signal
import sys
import termios
import threading
import time
from codecs import getincrementaldecoder
from collections.abc import Callable, Iterator
from queue import Full
from types import FrameType
from typing import TYPE_CHECKING, Any

from textual import constants
from textual._parser import ParseError
from textual._xterm_parser import XTermParser
from textual.drivers.linux_driver import LinuxDriver

from gputop import gcpolicy
from gputop.encoding import encode_for, is_utf_encoding

if TYPE_CHECKING:
    from textual.app import App

#: Once shutdown begins, the process is gone this many seconds later at the latest.
GRACE_S = 1.0
#: Once shutdown begins, output the terminal does not take within this long is dropped.
DRAIN_S = 0.3
#: Grace after a quit key (the terminal is there: an orderly restore matters more).
QUIT_GRACE_S = 3.0
#: How often the input thread ticks Textual's parser while an escape sequence may be
#: pending (Textual's own period, at which it ticks always).
INPUT_TICK_S = 0.1
#: Exit status when the terminal went away (as after SIGHUP).
EXIT_TERMINAL_LOST = 128 + signal.SIGHUP

ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


#: Set once a dashboard with the watchdog armed has returned (see :func:`ended`).
_ENDED: list[Ending] = []


def ended() -> Ending | None:
    """The ending of the dashboard that ran in this process, once it returned."""
    return _ENDED[-1] if _ENDED else None


class Ending:
    """Shutdown state shared by the app, its driver, the signal handlers and the CLI.
    ``on_timeout`` callbacks run on the watchdog thread just before it ends the process."""

    def __init__(self, *, watchdog: bool = False, grace: float = GRACE_S) -> None:
        self.begun = threading.Event()
        self.status: int | None = None
        self.terminal_lost = False
        self.began_at: float | None = None  # monotonic
        self.watchdog = watchdog
        self.grace = grace
        self.on_timeout: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def begin(
        self, status: int, *, terminal_lost: bool = False, grace: float | None = None
    ) -> bool:
        """Shutdown begins with ``status`` (the first caller's wins); returns whether this
        call began it. Safe from a signal handler: ``_lock`` is only tried."""
        if terminal_lost:
            self.terminal_lost = True
        if not self._lock.acquire(blocking=False):
            return False  # another thread is beginning it right now
        try:
            if self.begun.is_set():
                return False
            self.status = status
            if grace is not None:
                self.grace = grace
            self.began_at = time.monotonic()
            self.begun.set()
            if self.watchdog:
                name = "gputop-exit-watchdog"
                threading.Thread(target=self._watch, name=name, daemon=True).start()
            return True
        finally:
            self._lock.release()

    def finished(self) -> None:
        """The dashboard returned (the process is on its way out)."""
        _ENDED.append(self)

    def _watch(self) -> None:
        time.sleep(self.grace)
        for callback in self.on_timeout:
            with contextlib.suppress(Exception):
                callback()
        os._exit(self.status if self.status is not None else 1)


class TerminalOut:
    """A file for Textual's writer thread that never raises and never blocks for good.
    Textual: its writer thread dies on the first failed write, then ``close()`` blocks."""

    def __init__(
        self, fd: int, ending: Ending, lost: Callable[[], None], encoding: str | None = None
    ) -> None:
        self._fd = fd
        # What the terminal's encoding lacks is drawn with ASCII look-alikes.
        self._encoding = None if is_utf_encoding(encoding) else encoding
        self._ending = ending
        self._lost = lost
        self.dead = False

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return True

    def flush(self) -> None:
        return

    def write(self, text: str) -> int:
        if self.dead or not text:
            return 0
        data = text.encode("utf-8") if self._encoding is None else encode_for(text, self._encoding)
        view = memoryview(data)
        while view:
            if not self._wait_writable():
                return 0
            try:
                # Small slices: a tty's write blocks until all of it is taken.
                done = os.write(self._fd, view[:4096])
            except (InterruptedError, BlockingIOError):
                continue
            except OSError:
                self._gone()
                return 0
            view = view[done:]
        return len(text)

    def _wait_writable(self) -> bool:
        while True:
            ending = self._ending
            if ending.begun.is_set():
                began = ending.began_at or time.monotonic()
                if time.monotonic() - began > DRAIN_S:
                    self.dead = True  # frozen link: nothing more reaches the user
                    return False
            try:
                _, ready, failed = select.select([], [self._fd], [self._fd], 0.1)
            except InterruptedError:
                continue
            except (OSError, ValueError):
                self._gone()
                return False
            if ready or failed:
                return True

    def _gone(self) -> None:
        self.dead = True
        self._lost()


class WakingEvent(threading.Event):
    """An event that also wakes a thread waiting on file descriptors (the input thread's
    exit event): while :meth:`waker` is open, setting it makes the pipe it gives readable."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._wake: int | None = None  # the open waker's write end

    def set(self) -> None:
        super().set()
        with self._lock:
            if self._wake is not None:
                with contextlib.suppress(OSError):  # full: it is readable already
                    os.write(self._wake, b"\0")

    @contextlib.contextmanager
    def waker(self) -> Iterator[int]:
        """The read end of a pipe that is readable once the event is set, for the block."""
        read, write = os.pipe()  # not inherited (PEP 446)
        os.set_blocking(write, False)  # a set() never waits on it
        with self._lock:
            self._wake = write
        try:
            if self.is_set():
                os.write(write, b"\0")
            yield read
        finally:
            with self._lock:  # no set() writes to a number the next open file may reuse
                self._wake = None
                os.close(write)
            os.close(read)


class GpuTopDriver(LinuxDriver):
    """Textual's Linux driver, made to let go of a terminal that went away."""

    exit_event: WakingEvent

    def __init__(self, app: App[Any], **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        ending = getattr(app, "ending", None)
        self.ending: Ending = ending if isinstance(ending, Ending) else Ending()
        stderr = sys.__stderr__
        fd = stderr.fileno() if stderr is not None else 2
        encoding = getattr(stderr, "encoding", None)
        self._out = TerminalOut(fd, self.ending, self._terminal_lost, encoding)
        self._file = self._out  # type: ignore[assignment]  # Textual: sys.__stderr__
        self._suspended = False
        self._app_attrs: list[Any] | None = None
        self.ending.on_timeout.append(self.restore_now)
        self.exit_event = WakingEvent()  # Textual's is a plain Event (run_input_thread)
        # Textual's handlers (installed by LinuxDriver.__init__) are replaced.
        signal.signal(signal.SIGTSTP, self._on_sigtstp)
        signal.signal(signal.SIGCONT, self._on_sigcont)

    def _get_terminal_size(self) -> tuple[int, int]:
        """The terminal's own size. Textual: ``shutil.get_terminal_size`` lets a stale
        ``COLUMNS``/``LINES`` in the environment win over the window's real size."""
        for fd in (self._out.fileno(), self.fileno):
            try:
                size = os.get_terminal_size(fd)
            except (OSError, ValueError):
                continue
            if size.columns > 0 and size.lines > 0:
                return size.columns, size.lines
        return super()._get_terminal_size()

    def _terminal_lost(self) -> None:
        """Any thread: the terminal hung up (EIO, EOF)."""
        if self.ending.begin(EXIT_TERMINAL_LOST, terminal_lost=True):
            self._call_soon(lambda: self._app.exit(return_code=EXIT_TERMINAL_LOST))

    def _call_soon(self, callback: Callable[..., object], *args: object) -> None:
        loop = self._loop  # Driver's: the app's event loop
        if loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(callback, *args)

    def start_application_mode(self) -> None:
        if self.ending.begun.is_set():
            return
        super().start_application_mode()  # type: ignore[no-untyped-call]
        try:
            self._app_attrs = termios.tcgetattr(self.fileno)
        except termios.error:
            self._app_attrs = None

    def write(self, data: str) -> None:
        """Textual: ``Queue.put`` blocks the event loop while the writer is stuck; once
        shutdown has begun, output that finds the queue full is dropped."""
        writer = self._writer_thread
        assert writer is not None, "Driver must be in application mode"
        queue = writer._queue  # Textual's WriterThread queue (30 slots)
        while True:
            ending = self.ending.begun.is_set() or self._out.dead
            try:
                queue.put(data, block=not ending, timeout=0.1)
                return
            except Full:
                if ending:
                    return

    def close(self) -> None:
        """Textual: ``WriterThread.stop`` joins for ever when the writer is stuck; once
        shutdown has begun the writer gets :data:`DRAIN_S`, then is left behind."""
        writer = self._writer_thread
        if writer is None or not self.ending.begun.is_set():
            super().close()
            return
        with contextlib.suppress(Full):
            writer._queue.put_nowait(None)
        writer.join(DRAIN_S)

    def restore_now(self) -> None:
        """Last resort (the watchdog's, any thread): put back the tty modes and leave the
        alternate screen if the terminal takes it at once; never waits."""
        if self.attrs_before is not None:
            with contextlib.suppress(termios.error, OSError):
                termios.tcsetattr(self.fileno, termios.TCSANOW, self.attrs_before)
        if self._out.dead:
            return
        with contextlib.suppress(OSError, ValueError):
            fd = self._out.fileno()
            if select.select([], [fd], [], 0)[1]:
                os.write(fd, b"\x1b[<u\x1b[?1000l\x1b[?1003l\x1b[?1006l\x1b[?1049l\x1b[?25h")

    def run_input_thread(self) -> None:
        """Textual's input loop, ending on a terminal that hung up (EOF or EIO) with
        :data:`EXIT_TERMINAL_LOST` instead of spinning on it or dying with a traceback.
        Textual: it wakes every :data:`INPUT_TICK_S` to tick the parser, which only ends an
        escape sequence cut short (a lone Esc) once ``ESCDELAY`` has passed; here the
        thread ticks only while one can be pending, and otherwise sleeps until input
        comes or the exit event is set (which writes to its pipe)."""
        fileno = self.fileno
        selector = selectors.SelectSelector()
        selector.register(fileno, selectors.EVENT_READ)
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")(errors="replace").decode
        # after the last read, a tick falls past any timeout that read can have set
        ticking = constants.ESCAPE_DELAY + INPUT_TICK_S
        read_at: float | None = None  # when input was last read (None: nothing pending)
        try:
            with self.exit_event.waker() as wake:
                selector.register(wake, selectors.EVENT_READ)
                while not self.exit_event.is_set():
                    if read_at is not None and time.monotonic() - read_at > ticking:
                        read_at = None
                    ready = selector.select(None if read_at is None else INPUT_TICK_S)
                    if any(key.fd == fileno for key, _ in ready):
                        try:
                            data = os.read(fileno, 4096)
                        except InterruptedError:
                            continue
                        except OSError as exc:
                            if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                                continue
                            data = b""
                        if not data:
                            self._terminal_lost()
                            return
                        read_at = time.monotonic()
                        for event in parser.feed(decode(data)):
                            self.process_message(event)
                    for event in parser.tick():
                        self.process_message(event)
        finally:
            selector.close()
            with contextlib.suppress(EOFError, ParseError):
                list(parser.feed(""))  # the parser's end

    def _on_sigtstp(self, signum: int, frame: FrameType | None) -> None:
        """Suspend on the event loop (Textual: in the handler, wherever the main thread was)."""
        self._call_soon(self._suspend)

    def _suspend(self) -> None:
        if self.ending.begun.is_set() or self._suspended:
            return
        self._suspended = True
        self.suspend_application_mode()  # the terminal as it was, the writer stopped
        self._must_signal_resume = True
        os.kill(os.getpid(), signal.SIGSTOP)

    def _on_sigcont(self, signum: int, frame: FrameType | None) -> None:
        """Textual: every SIGCONT restarts application mode; here only what we suspended."""
        self._call_soon(self._resume)

    def _resume(self) -> None:
        if self.ending.begun.is_set():
            return
        if self._suspended:
            self._suspended = False
            # Entering the alternate screen clears it: repaint all.
            self.resume_application_mode()
            self._app.refresh(repaint=True, layout=True)
            return
        # A stray SIGCONT: the shell may have put its own tty modes back; set ours.
        if self._app_attrs is not None:
            with contextlib.suppress(termios.error):
                termios.tcsetattr(self.fileno, termios.TCSANOW, self._app_attrs)
        self.write("\x1b[?1049h\x1b[?25l")  # alternate screen, cursor hidden
        self._enable_mouse_support()
        self._app.refresh(repaint=True, layout=True)


def install_signal_handlers(app: App[Any], ending: Ending) -> Callable[[], None]:
    """SIGTERM, SIGHUP and SIGINT begin the ending at once (plain handlers: the loop may
    be blocked in a write), then ask the app to exit. Returns the undo."""
    loop = asyncio.get_running_loop()
    old: dict[int, Any] = {}

    def handler(signum: int, frame: FrameType | None) -> None:
        status = 128 + signum
        ending.begin(status)
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(lambda: app.exit(return_code=ending.status or status))

    for sig in ENDING_SIGNALS:
        with contextlib.suppress(ValueError, OSError):  # not the main thread
            old[sig] = signal.signal(sig, handler)

    def restore() -> None:
        for sig, previous in old.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(sig, previous)

    return restore


@contextlib.contextmanager
def owning_terminal() -> Iterator[None]:
    """Around ``app.run()``: gputop's log records are dropped (they would scribble over
    the screen) and the GC is tuned (:mod:`gputop.gcpolicy`)."""
    logger = logging.getLogger("gputop")
    quiet = logging.NullHandler()
    logger.addHandler(quiet)
    propagate, logger.propagate = logger.propagate, False
    try:
        with gcpolicy.tuned():
            yield
    finally:
        logger.removeHandler(quiet)
        logger.propagate = propagate
