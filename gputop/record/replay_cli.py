"""``gputop replay [DIR|FILE]``: the dashboard on a recording, or ``--once`` / a
``--from/--to`` range printed, judged exactly as live (docs/recording.md). Damage is said
on stderr, one line per segment, and what could be read is shown."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from gputop.analysis.thresholds import DEFAULT, Thresholds
from gputop.argtypes import EXIT_USAGE, Parser, ascii_number, cut_echoes
from gputop.config import ConfigError, load_config, with_overrides
from gputop.diagnosis import lookback_seconds
from gputop.pipeline import Feed
from gputop.record.store import Recording, RecordingError, default_dir
from gputop.record.when import parse_time


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="gputop replay",
        description="Show a recording made by `gputop record` (the dashboard, or printed).",
        epilog=(
            "TIME: '2026-11-30 03:00', '03:00' (the last one past), '2h ago', "
            "'yesterday 23:10', 'now', '@EPOCH'. exit codes: 0 ok, 1 unexpected failure, "
            "2 bad argument or not a readable recording"
        ),
    )
    p.add_argument(
        "path",
        nargs="?",
        type=Path,
        metavar="DIR|FILE",
        help=f"a recording directory or one segment file (default {default_dir()})",
    )
    p.add_argument("--at", metavar="TIME", help="start at (or print) this moment")
    p.add_argument("--once", action="store_true", help="print the snapshot at TIME and exit")
    p.add_argument("--json", action="store_true", help="JSON instead of text (implies --once)")
    p.add_argument("--from", dest="start", metavar="T1", help="with --to: print a range")
    p.add_argument("--to", dest="end", metavar="T2", help="end of the range (default: newest)")
    p.add_argument(
        "--speed",
        type=ascii_number,
        metavar="X",
        help="dashboard: 1 to 600 (default 1)",
    )
    p.add_argument("--config", metavar="PATH", help="settings file (thresholds, theme)")
    return p


def _time(parser: argparse.ArgumentParser, text: str, what: str) -> float:
    try:
        return parse_time(text, time.time())
    except ValueError as exc:
        parser.error(f"{what}: {exc}")


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = with_overrides(load_config(args.config))
    except ConfigError as exc:
        parser.error(str(exc))
    if args.speed is not None and not 1 <= args.speed <= 600:
        parser.error("--speed: from 1 to 600")
    ranged = args.start is not None or args.end is not None
    if ranged and (args.at is not None or args.once):
        parser.error("--from/--to and --at/--once exclude each other")
    if args.speed is not None and (ranged or args.once or args.json):
        parser.error("--speed goes with the dashboard, not with --once, --json or --from/--to")
    path: Path = args.path if args.path is not None else default_dir()
    # Not a readable recording, when opened or when read: one line, exit 2 (the path it
    # quotes cut like every echo of the input).
    try:
        recording = Recording(path)
        for line in recording.problems:
            print(f"gputop replay: {cut_echoes(line, [str(path)])}", file=sys.stderr)
        at = None if args.at is None else _time(parser, args.at, "--at")
        if ranged:
            if args.start is None:
                parser.error("--to needs --from")
            t1 = _time(parser, args.start, "--from")
            t2 = recording.end if args.end is None else _time(parser, args.end, "--to")
            if args.end is not None and t1 > t2:
                parser.error(f"--from {args.start!r} is after --to {args.end!r}")
            return print_range(recording, t1, t2, config.thresholds)
        if args.once or args.json:
            return print_once(recording, at, config.thresholds, as_json=args.json)
        from gputop.encoding import has_terminal
        from gputop.record.player import Player

        if not has_terminal():
            parser.error("not a terminal: use --once, --json or --from/--to")
        from gputop.ui.replay import run_replay

        pos = len(recording) - 1 if at is None else recording.position(at)
        player = Player(recording, pos, lookback=lookback_seconds(config.thresholds))
        player.speed = 1.0 if args.speed is None else args.speed
        result: int = run_replay(player, thresholds=config.thresholds, theme=config.theme)
        return result
    except RecordingError as exc:
        print(f"gputop replay: {cut_echoes(str(exc), [str(path)])}", file=sys.stderr)
        return EXIT_USAGE


def print_once(
    recording: Recording, at: float | None, thresholds: Thresholds = DEFAULT, *, as_json: bool
) -> int:
    from gputop.present import render_json
    from gputop.textout import render_text

    pos = len(recording) - 1 if at is None else recording.position(at)
    snap = recording[pos]
    if at is not None and at < snap.time:
        print(
            f"gputop replay: the recording starts later, at {_stamp(recording.start)}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    history = recording.window(pos, lookback_seconds(thresholds))
    assert history is not None  # not cancellable
    diagnosis = Feed(thresholds).frame(history).diagnosis
    if as_json:
        out = render_json(snap, diagnosis)
    else:
        out = render_text(snap, total_gpus=len(snap.gpus), diagnosis=diagnosis)
    sys.stdout.write(out if out.endswith("\n") else out + "\n")
    sys.stdout.flush()
    return 0


def print_range(recording: Recording, t1: float, t2: float, thresholds: Thresholds) -> int:
    """JSON lines, one per snapshot with ``t1 <= time <= t2``, judged as live."""
    from gputop.present import to_json_dict

    span = f"between {_stamp(t1)} and {_stamp(t2)}" if t1 <= t2 else f"after {_stamp(t1)}"
    if t2 < recording.start or t1 > recording.end:
        print(
            f"gputop replay: nothing recorded {span} (the recording covers "
            f"{_stamp(recording.start)} to {_stamp(recording.end)})",
            file=sys.stderr,
        )
        return EXIT_USAGE
    feed = Feed(thresholds)
    out = sys.stdout
    written = 0
    for snap in recording.between(t1 - lookback_seconds(thresholds), t2):
        d = feed.push(snap, judge_jobs=snap.time >= t1).diagnosis
        if snap.time < t1:
            continue
        out.write(json.dumps(to_json_dict(snap, d), separators=(",", ":"), allow_nan=False) + "\n")
        out.flush()
        written += 1
    if not written:  # a gap in the recording: not an error
        print(f"gputop replay: no samples {span}", file=sys.stderr)
    return 0


def _stamp(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
