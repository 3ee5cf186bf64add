"""Standard output's failures, in one place for every command (README, "exit codes").

:class:`Guard` stands in for ``sys.stdout``: any OSError of a write or a flush (a full
device, EIO, a closed descriptor) is remembered and raised as :class:`OutputFailed`,
which :func:`gputop.cli.entry` turns into one line and exit 1; a reader gone (EPIPE, as
after ``| head``) ends quietly with 0. Remembered because argparse swallows an OSError
of ``--help`` and exits 0 all the same. After a failure the descriptor points at
/dev/null, so the flush at interpreter exit has nowhere to fail (Python's docs on
SIGPIPE recommend this).
"""

from __future__ import annotations

import contextlib
import errno
import os
from typing import Any, TextIO

from gputop.argtypes import EXIT_FAILURE, EXIT_OK


class OutputFailed(OSError):
    """Writing or flushing standard output failed (``errno`` says why)."""


class Guard:
    """``sys.stdout`` with its write errors caught (``out`` None: it was closed at start).
    Everything else is the wrapped stream's."""

    def __init__(self, out: TextIO | None) -> None:
        self.out = out
        self.failure: OSError | None = None

    def write(self, text: str) -> int:
        if self.out is None:
            raise self._failed(OSError(errno.EBADF, "standard output is closed"))
        try:
            return self.out.write(text)
        except OSError as exc:
            raise self._failed(exc) from None

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self.out is None or self.failure is not None:
            return  # nothing can be written any more: quiet at exit
        try:
            self.out.flush()
        except OSError as exc:
            raise self._failed(exc) from None

    @property
    def encoding(self) -> str:
        return getattr(self.out, "encoding", None) or "utf-8"  # closed: what is written fails

    def __getattr__(self, name: str) -> Any:
        if self.out is None:
            raise AttributeError(name)
        return getattr(self.out, name)

    def _failed(self, exc: OSError) -> OutputFailed:
        if self.failure is None:
            self.failure = exc
            if self.out is not None:
                silence(self.out)
        return OutputFailed(exc.errno, exc.strerror)


def silence(out: TextIO) -> None:
    """Point ``out``'s descriptor at /dev/null: what is still buffered goes nowhere."""
    try:
        fd = out.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
    except (AttributeError, OSError, ValueError):
        return
    with contextlib.suppress(OSError):
        os.dup2(devnull, fd)
    os.close(devnull)


def is_reader_gone(exc: OSError) -> bool:
    """EPIPE: the reader went away (``| head``), which ends output quietly."""
    return exc.errno == errno.EPIPE


def message(exc: OSError, *, closed_at_start: bool) -> str:
    """The one line said on stderr for a failure that is not a reader gone."""
    if closed_at_start:
        return "standard output is closed; nothing written"
    why = exc.strerror or (errno.errorcode.get(exc.errno or 0) if exc.errno else None) or exc
    return f"cannot write to standard output: {why}"


def report(guard: Guard, prog: str, *, stderr: TextIO | None) -> int:
    """The exit status for ``guard``'s failure, after its one line on ``stderr``."""
    failure = guard.failure
    assert failure is not None
    if is_reader_gone(failure):
        return EXIT_OK
    if stderr is not None:
        with contextlib.suppress(OSError, ValueError):
            print(f"{prog}: {message(failure, closed_at_start=guard.out is None)}", file=stderr)
            stderr.flush()
    return EXIT_FAILURE
