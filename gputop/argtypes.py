"""Argument types and exit codes shared by ``gputop`` and every subcommand.

A bad argument is one line on stderr and exit 2 (:class:`Parser`). Numbers are read from
ASCII only: ``float()``, ``int()`` and ``str.isdigit()`` also take fullwidth digits.
Imports nothing of gputop.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_NO_DRIVER = 3  # --once and --stream without a driver (the host part still shown)
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports it


#: An error line that quotes what was given shows at most this many of its characters:
#: room for a real path or time, not for a pasted file.
ECHO_CHARS = 120
_CUT = "..."


def shorten(text: object) -> str:
    """``text`` as an error line shows it: one line (what is not printable escaped, as
    repr() does) of at most :data:`ECHO_CHARS` characters before escaping, the middle
    cut out when longer (the end of a path or a time says as much as its start)."""
    s = str(text)
    if len(s) > ECHO_CHARS:
        keep = ECHO_CHARS - len(_CUT)
        head = keep * 2 // 3
        s = s[:head] + _CUT + s[len(s) - (keep - head) :]
    return _printable(s)


def _printable(s: str) -> str:
    return s if s.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in s)


def echo(value: object) -> str:
    """``value`` as repr() shows it in an error line: a string quoted, cut by
    :func:`shorten` (any other value: its repr, cut)."""
    return f"'{shorten(value)}'" if isinstance(value, str) else shorten(repr(value))


#: A run of characters an error line cuts whatever quoted it (argparse's own messages).
_LONG_RUN = re.compile(rf"\S{{{2 * ECHO_CHARS + 1},}}")


class Parser(argparse.ArgumentParser):
    """One line on stderr and exit 2 for a bad argument; what the line quotes of the
    arguments (argparse's "unrecognized arguments", a type's message) is cut to
    :data:`ECHO_CHARS`."""

    given: Sequence[str] = ()

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self.given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {cut_echoes(message, self.given)}\n")


def cut_echoes(message: str, given: Sequence[str] = ()) -> str:
    """``message`` on one line, each long argument of ``given`` it quotes (whole, or
    its value after ``=``) and any other long run of non-spaces cut by :func:`shorten`."""
    long = {t for a in given for t in (a, a.partition("=")[2]) if len(t) > ECHO_CHARS}
    for t in sorted(long, key=len, reverse=True):
        message = message.replace(repr(t), echo(t)).replace(t, shorten(t))
    message = _LONG_RUN.sub(lambda m: shorten(m.group()), message)
    return _printable(" ".join(message.splitlines()))


def ascii_number(text: str) -> float:
    if not text.strip().isascii():
        raise argparse.ArgumentTypeError(f"not a number (ASCII digits): {echo(text)}")
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {echo(text)}") from None


def is_ascii_digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


def ascii_whole(text: str) -> int:
    """int() of ASCII digits (an optional leading minus), at most 20 characters."""
    if not is_ascii_digits(text.removeprefix("-")) or len(text) > 20:
        raise argparse.ArgumentTypeError(f"not a whole number (ASCII digits): {echo(text)}")
    return int(text)


#: Bounds of ``--interval`` (and of the config file's ``interval``).
MIN_INTERVAL = 0.1
MAX_INTERVAL = 60.0


def interval(text: str) -> float:
    value = ascii_number(text)
    if not MIN_INTERVAL <= value <= MAX_INTERVAL:
        raise argparse.ArgumentTypeError(
            f"{shorten(text)} is out of range: seconds from {MIN_INTERVAL:g} to {MAX_INTERVAL:g}"
        )
    return value


def window(text: str) -> float:
    value = ascii_number(text)
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"{shorten(text)}: seconds above 0 expected")
    return value


#: A node has far fewer than 10,000 GPUs.
MAX_GPU_INDEX_DIGITS = 4


def gpus(text: str) -> tuple[str, ...]:
    """``--gpus``: '0, 2,GPU-ab..' -> ('0', '2', 'GPU-ab..'), resolved against a snapshot
    later (:func:`gputop.present.resolve_gpu_selection`)."""

    tokens = tuple(t.strip() for t in text.split(","))
    if not tokens or any(not t for t in tokens):
        raise argparse.ArgumentTypeError(
            f"expected indices or UUIDs separated by commas, got {echo(text)}"
        )
    for t in tokens:
        if not t.isascii() or not t.isprintable():  # "３" is a digit to str.isdigit()
            raise argparse.ArgumentTypeError(f"{echo(t)} is not an index or a UUID (ASCII only)")
        if t.isdigit() and len(t) > MAX_GPU_INDEX_DIGITS:
            raise argparse.ArgumentTypeError(f"GPU index {shorten(t)} is too large")
    return tokens
