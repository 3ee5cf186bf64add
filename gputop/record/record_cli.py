"""``gputop record``: sample and write to a recording until SIGINT/SIGTERM/SIGHUP (what
waits is flushed). Exit 0 stopped, 1 writing failed (one line), 2 bad argument or the
directory is another recorder's."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from gputop import argtypes
from gputop.argtypes import (
    EXIT_USAGE,
    Parser,
    ascii_number,
    ascii_whole,
    cut_echoes,
    shorten,
)
from gputop.config import MAX_INTERVAL, MIN_INTERVAL, ConfigError, load_config, with_overrides
from gputop.model import Snapshot
from gputop.record.store import (
    MAX_FLUSH_SECONDS,
    MIN_MAX_SIZE,
    DirectoryBusy,
    Recorder,
    RecordWriteError,
    default_dir,
    parse_duration,
    parse_size,
)
from gputop.sampler import Sampler, make_source

DEFAULT_RETAIN = "7d"
DEFAULT_MAX_SIZE = "1G"


def _typed(parse: Callable[[str], object]) -> Callable[[str], object]:
    def convert(text: str) -> object:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


def _max_size(text: str) -> int:
    try:
        value = parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value < MIN_MAX_SIZE:
        raise argparse.ArgumentTypeError(
            f"{shorten(text)}: at least {_size(MIN_MAX_SIZE)} (a size below that keeps nothing)"
        )
    return value


def _flush(text: str) -> float:
    value = ascii_number(text)
    if not 0 < value <= MAX_FLUSH_SECONDS:
        raise argparse.ArgumentTypeError(f"{text}: seconds above 0, at most {MAX_FLUSH_SECONDS:g}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="gputop record",
        description=(
            "Record snapshots (GPUs, processes, host) to segment files until stopped; "
            "`gputop replay` shows them again."
        ),
        epilog=(
            "exit codes: 0 stopped, 1 writing failed, 2 bad argument or another recorder "
            "is writing to DIR"
        ),
    )
    p.add_argument(
        "--dir",
        type=Path,
        metavar="DIR",
        help=f"where to write (default $XDG_STATE_HOME/gputop, here {default_dir()})",
    )
    p.add_argument(
        "--interval",
        type=argtypes.interval,
        metavar="SECONDS",
        help=f"seconds between samples, {MIN_INTERVAL:g} to {MAX_INTERVAL:g} (default: the "
        "config file's interval, else 1)",
    )
    p.add_argument(
        "--retain",
        type=_typed(parse_duration),
        default=parse_duration(DEFAULT_RETAIN),
        metavar="AGE",
        help=f"delete segments older than this, e.g. 12h, 7d (default {DEFAULT_RETAIN})",
    )
    p.add_argument(
        "--max-size",
        type=_max_size,
        default=parse_size(DEFAULT_MAX_SIZE),
        metavar="SIZE",
        help=f"delete the oldest segments above this total, e.g. 500M, 2G (default "
        f"{DEFAULT_MAX_SIZE}, at least {_size(MIN_MAX_SIZE)})",
    )
    p.add_argument(
        "--flush",
        type=_flush,
        default=MAX_FLUSH_SECONDS,
        metavar="SECONDS",
        help=f"write to disk at least this often; a crash loses at most this much "
        f"(default and most {MAX_FLUSH_SECONDS:g})",
    )
    p.add_argument("--demo", action="store_true", help="record the simulated 8-GPU server")
    p.add_argument(
        "--config",
        metavar="PATH",
        help="settings file, as for the dashboard (its interval; default "
        "$XDG_CONFIG_HOME/gputop/config.toml)",
    )
    p.add_argument(
        "--seed", type=ascii_whole, help="random seed of the demo (with --demo; default 0)"
    )
    return p


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.seed is not None and not args.demo:
        parser.error("--seed needs --demo")
    try:  # the config file, under the flags, as the dashboard and `export` read it
        config = with_overrides(load_config(args.config), interval=args.interval)
    except ConfigError as exc:
        parser.error(str(exc))
    interval = config.interval
    directory: Path = args.dir if args.dir is not None else default_dir()
    try:
        recorder = Recorder(
            directory,
            interval=interval,
            retain=args.retain,
            max_size=args.max_size,
            flush_seconds=args.flush,
            first_alone=True,  # a replay right after the start sees the recording
        )
    except RecordWriteError as exc:
        print(f"gputop record: {cut_echoes(str(exc), [str(directory)])}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, DirectoryBusy) else 1

    source = make_source(args.demo, args.seed)
    stop = threading.Event()
    failure: list[str] = []

    def on_snapshot(snapshot: Snapshot) -> None:  # the sampler's thread
        if stop.is_set():
            return
        try:
            recorder.add(snapshot)
        except RecordWriteError as exc:
            failure.append(str(exc))
            stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda _signum, _frame: stop.set())

    # The recorder keeps no history of its own: two snapshots are enough for the sampler.
    sampler = Sampler(source, interval=interval, history=2, on_snapshot=on_snapshot)
    print(
        f"gputop record: recording to {shorten(directory)} every {interval:g}s "
        f"(kept {_age(args.retain)}, at most {_size(args.max_size)})",
        file=sys.stderr,
        flush=True,
    )
    sampler.start()
    try:
        while not stop.wait(3600):
            pass
    finally:
        sampler.on_snapshot = None
        sampler.stop()
    if not failure:
        try:
            recorder.close()
        except RecordWriteError as exc:
            failure.append(str(exc))
    if failure:
        print(f"gputop record: {cut_echoes(failure[0], [str(directory)])}", file=sys.stderr)
        return 1
    print(f"gputop record: {wrote(recorder, directory)}", file=sys.stderr, flush=True)
    return 0


def wrote(recorder: Recorder, directory: Path) -> str:
    """What a recorder wrote, in one line (said when it stops)."""
    first, last = recorder.first_written, recorder.last_written
    if first is None or last is None:
        return f"stopped before the first sample: nothing written to {shorten(directory)}"
    segments, blocks = recorder.segments_written, recorder.blocks_written
    size = recorder.bytes_written
    unit, scale = next((u, s) for u, s in (*_UNITS, ("", 1)) if size >= s)
    amount = f"{size} bytes" if scale == 1 else f"{size / scale:.1f} {unit.upper()}iB"
    return (
        f"wrote {segments} segment{'s' * (segments != 1)}, {blocks} block"
        f"{'s' * (blocks != 1)}, {amount} ({_clock(first)} to {_clock(last)}) in "
        f"{shorten(directory)}"
    )


def _clock(t: float) -> str:
    """Local time, as `gputop replay --at` reads it."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


_UNITS = (("T", 2**40), ("G", 2**30), ("M", 2**20), ("k", 2**10))


def _size(n: int) -> str:
    for unit, size in _UNITS:
        if n >= size:
            return f"{n / size:g}{unit}"
    return f"{n}B"
