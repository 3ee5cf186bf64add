"""Argument types and exit codes shared by ``gputop`` and every subcommand.

A bad argument is one line on stderr and exit 2 (:class:`Parser`). Numbers are read from
ASCII only: ``float()``, ``int()`` and ``str.isdigit()`` also take fullwidth digits.
Imports nothing of gputop.
"""

from __future__ import annotations

import argparse
import math
from typing import NoReturn

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_NO_DRIVER = 3  # --once and --stream without a driver (the host part still shown)
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports it


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def ascii_number(text: str) -> float:
    if not text.strip().isascii():
        raise argparse.ArgumentTypeError(f"not a number (ASCII digits): {text[:20]!r}")
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text[:20]!r}") from None


def is_ascii_digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


def ascii_whole(text: str) -> int:
    """int() of ASCII digits (an optional leading minus), at most 20 characters."""
    if not is_ascii_digits(text.removeprefix("-")) or len(text) > 20:
        raise argparse.ArgumentTypeError(f"not a whole number (ASCII digits): {text[:20]!r}")
    return int(text)


#: Bounds of ``--interval`` (and of the config file's ``interval``).
MIN_INTERVAL = 0.1
MAX_INTERVAL = 60.0


def interval(text: str) -> float:
    value = ascii_number(text)
    if not MIN_INTERVAL <= value <= MAX_INTERVAL:
        raise argparse.ArgumentTypeError(
            f"{text} is out of range: seconds from {MIN_INTERVAL:g} to {MAX_INTERVAL:g}"
        )
    return value


def window(text: str) -> float:
    value = ascii_number(text)
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"{text}: seconds above 0 expected")
    return value


#: A node has far fewer than 10,000 GPUs.
MAX_GPU_INDEX_DIGITS = 4


def gpus(text: str) -> tuple[str, ...]:
    """``--gpus``: '0, 2,GPU-ab..' -> ('0', '2', 'GPU-ab..'), resolved against a snapshot
    later (:func:`gputop.present.resolve_gpu_selection`)."""

    def short(t: str) -> str:
        return t if len(t) <= 20 else t[:20] + "..."

    tokens = tuple(t.strip() for t in text.split(","))
    if not tokens or any(not t for t in tokens):
        raise argparse.ArgumentTypeError(
            f"expected indices or UUIDs separated by commas, got {short(text)!r}"
        )
    for t in tokens:
        if not t.isascii() or not t.isprintable():  # "３" is a digit to str.isdigit()
            raise argparse.ArgumentTypeError(f"{short(t)!r} is not an index or a UUID (ASCII only)")
        if t.isdigit() and len(t) > MAX_GPU_INDEX_DIGITS:
            raise argparse.ArgumentTypeError(f"GPU index {short(t)} is too large")
    return tokens
