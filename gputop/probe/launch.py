"""``gputop run -- CMD ...``: run a command with the probe in every Python process of it.

It sets ``GPUTOP_PROBE=1`` and puts gputop.probe.boot first on ``PYTHONPATH`` (its
``sitecustomize`` starts the probe, then runs any other sitecustomize), then replaces
itself with the command (``os.execvp``): the exit status and the signals are the
command's own. Exit 2: no command; 127: the command is not found, 126: it cannot be run
(as a shell says).

Standard library only, like the rest of gputop.probe (``python -m gputop.probe`` uses
:func:`child_environ` too).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from gputop import probefile

#: Where ``sitecustomize`` lives (a package of gputop's, so it ships with it).
BOOT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "boot")

EXIT_USAGE = 2
EXIT_CANNOT_RUN = 126
EXIT_NOT_FOUND = 127


def child_environ(environ: dict[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: this process's) for a probed command."""
    env = dict(os.environ if environ is None else environ)
    env[probefile.ENABLE_ENV] = "1"
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != BOOT_DIR]
    env["PYTHONPATH"] = os.pathsep.join([BOOT_DIR, *rest])
    return env


def build_parser() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(
        prog="gputop run",
        usage="gputop run [-h] -- CMD [ARG ...]",
        description=(
            "Run CMD with gputop's probe in each of its Python processes (torchrun's ranks "
            "included): how long each training step waits for data (see docs/probe.md)."
        ),
        epilog=(
            "exit: the command's own status; 2 no command, 126 it cannot be run, "
            "127 it is not found"
        ),
    )


def main(argv: Sequence[str]) -> int:
    args = list(argv)
    if args and args[0] in ("-h", "--help"):
        build_parser().print_help()
        return 0
    if args and args[0] == "--":
        args = args[1:]
    if not args:
        sys.stderr.write("gputop run: error: no command given (gputop run -- CMD [ARG ...])\n")
        return EXIT_USAGE
    if args[0].startswith("-"):
        sys.stderr.write(
            f"gputop run: error: unknown option {args[0][:40]!r} (the command goes after --)\n"
        )
        return EXIT_USAGE
    env = child_environ()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    try:
        os.execvpe(args[0], args, env)
    except FileNotFoundError:
        sys.stderr.write(f"gputop run: {args[0][:200]!r}: command not found\n")
        return EXIT_NOT_FOUND
    except OSError as exc:
        sys.stderr.write(f"gputop run: {args[0][:200]!r}: cannot run: {exc.strerror}\n")
        return EXIT_CANNOT_RUN
    return EXIT_CANNOT_RUN  # not reached: execvpe returns only by raising
