"""How fast each way a session ends ends gputop (issue 9): seconds from the event to the
process being gone (its pidfd readable), for ``gputop --demo``.

Not a timed test: a script that prints a table. Run from the repository root:

    python bench/bench_exit.py [--runs 10]

- ``q``: the key written to the pty, to exit;
- ``tmux kill-pane``: gputop as the pane's process, from the kill-pane command returning;
- ``pty master closed``: an SSH drop without tmux;
- ``frozen link + SIGTERM``: nobody reads the pty any more (output stopped flowing),
  then SIGTERM.
Median and max of ``--runs`` runs each.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.lifecycle_harness import (
    Gone,
    PtyGputop,
    gputop_command,
    pty_gputop,
    tmux_pane,
    wait_pid_file,
)


def on_pty(act: Callable[[PtyGputop], float], *args: str) -> float:
    """``act`` makes the event happen and returns when it did."""
    with pty_gputop("--demo", *args, width=200, height=60) as g:
        g.wait_text("COMMAND")
        t0 = act(g)
        assert g.wait_gone(10) is not None
        return time.monotonic() - t0


def quit_key(g: PtyGputop) -> float:
    g.send(b"q")
    return time.monotonic()


def master_closed(g: PtyGputop) -> float:
    g.close_master()
    return time.monotonic()


def frozen_sigterm(g: PtyGputop) -> float:
    g.stop_reading()
    g.wait_frozen()
    os.kill(g.proc.pid, signal.SIGTERM)
    return time.monotonic()


def kill_pane() -> float:
    with tempfile.TemporaryDirectory() as tmp:
        pid_file = Path(tmp) / "pid"
        with tmux_pane(Path(tmp), gputop_command(pid_file, "--demo")) as pane:
            gone = Gone(wait_pid_file(pid_file))
            try:
                pane.wait_text("COMMAND")
                pane.tmux("kill-pane", "-t", "t")
                t0 = time.monotonic()
                assert gone.wait(10)
                return time.monotonic() - t0
            finally:
                gone.kill()
                gone.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    runs = parser.parse_args().runs
    cases: list[tuple[str, Callable[[], float]]] = [
        ("q", lambda: on_pty(quit_key)),
        ("tmux kill-pane", kill_pane),
        ("pty master closed", lambda: on_pty(master_closed)),
        ("frozen link + SIGTERM", lambda: on_pty(frozen_sigterm, "--interval", "0.1")),
    ]
    print(f"{'event':24} {'median s':>9} {'max s':>7}  ({runs} runs)")
    for name, case in cases:
        times = [case() for _ in range(runs)]
        print(f"{name:24} {statistics.median(times):9.3f} {max(times):7.3f}")


if __name__ == "__main__":
    main()
