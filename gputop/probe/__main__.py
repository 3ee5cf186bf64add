"""``python -m gputop.probe [-m MODULE | SCRIPT] [ARG ...]``: run a training script (or
module) with the probe started, like ``python -m cProfile``. The processes it starts
(torchrun's ranks, spawned workers) get the probe too, as under ``gputop run``.

Exit 2: no script or module given, or it is not found; otherwise what the script does.
"""

from __future__ import annotations

import importlib.util
import os
import runpy
import sys

from gputop.probe import core, launch

USAGE = "usage: python -m gputop.probe [-m MODULE | SCRIPT] [ARG ...]"


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        stream = sys.stdout if argv else sys.stderr
        stream.write(USAGE + "\n")
        return 0 if argv else launch.EXIT_USAGE
    if core.enabled_by_env():
        os.environ.update(launch.child_environ())
        core.start()
    if argv[0] == "-m":
        if len(argv) < 2:
            sys.stderr.write("python -m gputop.probe: error: -m needs a module name\n")
            return launch.EXIT_USAGE
        sys.path.insert(0, os.getcwd())
        try:
            found = importlib.util.find_spec(argv[1]) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            sys.stderr.write(f"python -m gputop.probe: error: no module {argv[1][:200]!r}\n")
            return launch.EXIT_USAGE
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        return 0
    script = argv[0]
    if not os.path.exists(script):
        sys.stderr.write(f"python -m gputop.probe: error: {script[:200]!r}: no such file\n")
        return launch.EXIT_USAGE
    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
