"""Command line: parse arguments, pick the source, run the dashboard or print once.

Textual and a subcommand's module (``gputop NAME ...``) are imported only when used.
"""

# ruff: noqa: E402 - the dataclasses' code cache starts before gputop's other imports

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

from gputop import codecache

# Before the rest of gputop: importing it makes most of its dataclasses (every command
# imports this module first; the dashboard stops it after its first frame, the others
# at their end).
codecache.start()

from gputop import __version__, argtypes, encoding, gcpolicy, heap, output
from gputop.analysis.thresholds import DEFAULT, Thresholds
from gputop.argtypes import (
    EXIT_FAILURE,
    EXIT_OK,
    MAX_INTERVAL,
    MIN_INTERVAL,
    Parser,
    ascii_whole,
    shorten,
)
from gputop.argtypes import EXIT_USAGE as EXIT_USAGE  # the exit codes are all here
from gputop.config import (
    Config,
    ConfigError,
    check_theme,
    check_window,
    load_config,
    names_window,
    with_overrides,
)
from gputop.encoding import for_encoding, is_utf_encoding
from gputop.model import Snapshot
from gputop.sampler import Sampler, make_source
from gputop.sources.base import DEMO_NODES, Source

if TYPE_CHECKING:
    from gputop.pipeline import Feed

#: Seconds between ``--once``'s (and the first ``--stream`` line's) two readings: rates
#: need two, and the run should stay well under a second.
ONCE_WINDOW_S = 0.1

#: How long the way out waits for a running tick (twice: the thread, then the source).
STOP_TIMEOUT_S = 0.25

#: ``gputop NAME ...`` -> the module whose ``main`` runs it.
SUBCOMMANDS: dict[str, str] = {
    "export": "gputop.exporter",
    "fleet": "gputop.fleet",
    "record": "gputop.record.record_cli",
    "replay": "gputop.record.replay_cli",
    "run": "gputop.probe.launch",
}


def _count(text: str) -> int:
    value = ascii_whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{shorten(text)}: at least 1 expected")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="gputop",
        description=(
            "Live terminal dashboard for NVIDIA GPU servers: is your training bound by the "
            "data pipeline or by the GPU?"
        ),
        epilog=(
            f"subcommands: {', '.join(sorted(SUBCOMMANDS))} (gputop NAME --help for each). "
            "exit codes: 0 ok, 1 unexpected failure, 2 bad argument, "
            "3 no NVIDIA driver or library (--once still prints the host part)"
        ),
    )
    p.add_argument("--once", action="store_true", help="print one snapshot as text and exit")
    p.add_argument(
        "--json", action="store_true", help="print one snapshot as JSON and exit (implies --once)"
    )
    p.add_argument(
        "--record",
        nargs="?",
        const="",
        metavar="DIR",
        help=(
            "dashboard: also record what it samples, as `gputop record` does (default DIR "
            "$XDG_STATE_HOME/gputop); a failure is shown in the header"
        ),
    )
    p.add_argument(
        "--stream",
        action="store_true",
        help=(
            "print JSON lines, one snapshot with its jobs and verdicts per line, every "
            "--interval seconds, until stopped or --count lines"
        ),
    )
    p.add_argument("--count", type=_count, metavar="N", help="with --stream: stop after N lines")
    p.add_argument(
        "--gpus",
        type=argtypes.gpus,
        metavar="LIST",
        help="show only these GPUs: indices or UUIDs, comma separated (e.g. 0,2)",
    )
    p.add_argument(
        "--interval",
        type=argtypes.interval,
        metavar="SECONDS",
        help=f"seconds between samples, {MIN_INTERVAL:g} to {MAX_INTERVAL:g} (default 1)",
    )
    p.add_argument(
        "--window",
        type=argtypes.window,
        metavar="SECONDS",
        help=f"seconds of history the verdicts judge (default {DEFAULT.window_seconds:g})",
    )
    p.add_argument(
        "--threshold",
        action="append",
        metavar="NAME=VALUE",
        help=(
            "change a verdict threshold, e.g. UTIL_HIGH=90 (repeatable); names: "
            + ", ".join(n.upper() for n in Thresholds.names())
        ),
    )
    p.add_argument("--demo", action="store_true", help="show a simulated 8-GPU server")
    p.add_argument(
        "--seed", type=ascii_whole, help="random seed of the demo (with --demo; default 0)"
    )
    p.add_argument(
        "--demo-node",
        choices=DEMO_NODES,
        help="the demo's server (with --demo): h100 (default), or h200 with GPM and NVLink, "
        "whose jobs show the verdicts that see inside utilization",
    )
    p.add_argument(
        "--readonly", action="store_true", help="dashboard: never offer to signal processes"
    )
    p.add_argument("--theme", metavar="NAME", help="dashboard: a Textual theme, e.g. textual-light")
    p.add_argument(
        "--config",
        metavar="PATH",
        help="settings file (default $XDG_CONFIG_HOME/gputop/config.toml); flags override it",
    )
    p.add_argument("--version", action="version", version=f"gputop {__version__}")
    return p


def _output_never_fails() -> None:
    """Where stdout cannot take UTF-8, escape what it lacks instead of raising (JSON
    stays valid); the text output is made ASCII-friendly first (:func:`for_encoding`)."""
    out = sys.stdout
    if out is None or is_utf_encoding(getattr(out, "encoding", None)):
        return
    with contextlib.suppress(AttributeError, ValueError):
        out.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]


def entry() -> int:
    """The ``gputop`` command: :func:`main`, then, after a dashboard, straight out (no
    slow teardown of the UI; a thread stuck in a hung NVML call cannot hold the process).
    A failure of stdout is one line and exit 1; a reader gone (``| head``) ends quietly
    (:mod:`gputop.output`, the one home of both)."""
    guard = output.Guard(sys.stdout)
    sys.stdout = cast(TextIO, guard)
    try:
        try:
            status = main()
        except SystemExit:
            if guard.failure is None:
                guard.flush()  # argparse's --help and --version: still buffered
            if guard.failure is None:
                raise  # an exit that lost nothing (argparse's usage errors go to stderr)
        else:
            if guard.failure is None:
                guard.flush()
    except output.OutputFailed:
        pass
    if guard.failure is not None:
        return output.report(guard, "gputop", stderr=sys.stderr)
    codecache.stop()  # a dashboard's ending below skips the exit handlers
    terminal = sys.modules.get("gputop.ui.terminal")  # imported only by a dashboard
    if terminal is not None and terminal.ended() is not None:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a None stream included
                stream.flush()
        os._exit(status)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _output_never_fails()
    if argv and argv[0] in SUBCOMMANDS:
        gcpolicy.release()  # only the dashboard's start holds the collector
        status: int = importlib.import_module(SUBCOMMANDS[argv[0]]).main(argv[1:])
        return status
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.seed is not None and not args.demo:
        parser.error("--seed needs --demo")
    if args.demo_node is not None and not args.demo:
        parser.error("--demo-node needs --demo")
    if args.stream and args.once:
        parser.error("--stream and --once exclude each other")
    if args.count is not None and not args.stream:
        parser.error("--count needs --stream")
    if args.record is not None and (args.stream or args.once or args.json):
        parser.error("--record goes with the dashboard (`gputop record` records on its own)")
    stream = bool(args.stream)
    once = bool(args.once or args.json) and not stream  # --stream --json: still a stream
    try:  # the config file with the flags that were given on top
        file = load_config(args.config)
        config = with_overrides(
            file,
            readonly=True if args.readonly else None,
            interval=args.interval,
            window=args.window,
            thresholds=args.threshold or (),
            theme=args.theme,
        )
        explicit = (
            args.window is not None
            or file.thresholds.window_seconds != DEFAULT.window_seconds
            or names_window(t.split("=")[0] for t in args.threshold or ())
        )
        config = check_window(config, explicit=explicit)
        check_theme(config)
    except ConfigError as exc:
        parser.error(str(exc))
    args.thresholds = config.thresholds
    if not once and not stream:
        if not encoding.has_terminal():
            parser.error("not a terminal: use --once, --json or --stream")
        heap.one_arena()  # before the dashboard's first thread (heap's module doc)
    else:
        gcpolicy.release()  # only the dashboard's start holds the collector

    source: Source
    if args.demo and once:
        from gputop.sources.demo import DemoSource

        # The simulation's clock advances by the window instead of waiting for it.
        source = DemoSource(
            args.seed or 0,
            start_time=time.time(),
            step=ONCE_WINDOW_S,
            node=args.demo_node,
        )
    elif args.demo and args.demo_node is not None:
        from gputop.sources.demo import DemoSource

        source = DemoSource(args.seed or 0, clock=time.time, node=args.demo_node)
    else:
        source = make_source(args.demo, args.seed)

    # Each consumer's feed keeps the history; the sampler keeps the first pair only.
    sampler = Sampler(source, interval=config.interval, history=2)
    try:
        if stream:
            from gputop.stream import run

            try:
                return run(
                    sampler,
                    thresholds=args.thresholds,
                    count=args.count,
                    select=functools.partial(_selection, args, parser),
                    first_window=ONCE_WINDOW_S,
                )
            except KeyboardInterrupt:  # Ctrl-C: the usual way to stop a stream; no traceback
                return argtypes.EXIT_INTERRUPTED
        if once:
            return _once(sampler, args, parser)
        selection = _selection(args, parser, sampler.tick_now(processes=False))
        del parser  # a dashboard runs for days: nothing of the parser is kept meanwhile
        return _dashboard(sampler, args, selection, config)
    finally:
        # A hung source call must not hold the process: a stale tick is not waited for.
        sampler.stop(timeout=0.0 if sampler.stale else STOP_TIMEOUT_S)


def _selection(
    args: argparse.Namespace, parser: argparse.ArgumentParser, snapshot: Snapshot
) -> frozenset[int] | None:
    """The --gpus choice as indices (an unknown GPU: exit 2); ignored without a driver."""
    if args.gpus is None or not snapshot.driver.available:
        return None
    from gputop.present import resolve_gpu_selection

    try:
        return resolve_gpu_selection(args.gpus, snapshot.gpus)
    except ValueError as exc:
        parser.error(str(exc))


def _once(sampler: Sampler, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    holder: list[Feed] = []

    def meanwhile() -> None:
        """Inside the window: the output code and the first reading's analysis."""
        importlib.import_module("gputop.textout")  # and gputop.present, which it imports
        from gputop.pipeline import Feed

        holder.append(Feed(args.thresholds))
        holder[0].push(sampler.history()[-1], judge_jobs=False)

    if args.demo:  # the demo's virtual clock advances by the window on its own
        sampler.tick_now()
        meanwhile()
        snap = sampler.tick_now()
    else:
        snap = sampler.tick_pair(ONCE_WINDOW_S, meanwhile=meanwhile)
    from gputop.present import filter_gpus, render_json
    from gputop.textout import render_text

    selection = _selection(args, parser, snap)
    shown = filter_gpus(snap, selection)
    diagnosis = holder[0].push(snap).diagnosis
    assert diagnosis is not None
    diagnosis = diagnosis.only(selection)
    if args.json:
        out = render_json(shown, diagnosis)
    else:
        out = render_text(shown, total_gpus=len(snap.gpus), diagnosis=diagnosis)
    out = for_encoding(out, sys.stdout.encoding)
    sys.stdout.write(out if out.endswith("\n") else out + "\n")
    sys.stdout.flush()
    if not snap.driver.available:
        why = snap.driver.error or "unknown reason"
        print(
            f"gputop: NVIDIA driver not available: {why} Showing the host part only.",
            file=sys.stderr,
        )
        return argtypes.EXIT_NO_DRIVER
    return EXIT_OK


def _dashboard(
    sampler: Sampler, args: argparse.Namespace, selection: frozenset[int] | None, config: Config
) -> int:
    """``selection``: --gpus, validated on the first snapshot (:func:`_selection`). The app
    starts the sampler; that snapshot's processes are read once the first frame is drawn
    (the sampler completes it)."""
    try:
        from gputop.ui.app import run_app
    except ImportError as exc:
        print(f"gputop: the dashboard is not available ({exc}); try --once", file=sys.stderr)
        return EXIT_FAILURE
    extra: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        if args.record is not None:  # a subscriber of the dashboard's frames
            from gputop.record.store import BackgroundRecorder, default_dir

            where = Path(args.record) if args.record else default_dir()
            take = BackgroundRecorder(where, interval=sampler.interval)
            stack.callback(take.close)
            extra = {"record_status": take.status, "subscribers": [lambda f: take(f.snapshot)]}
        return run_app(
            sampler,
            gpu_filter=selection,
            readonly=config.readonly,
            thresholds=config.thresholds,
            theme=config.theme,
            keys=dict(config.keys),
            watchdog=True,
            **extra,
        )
