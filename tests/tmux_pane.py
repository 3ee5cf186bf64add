"""One tmux pane on a private tmux server: how the tests drive gputop for real.

Each pane has its own server (``tmux -L <prefix>-<pid>-<n> -f /dev/null``, one session
``t``), so tests never touch a user's tmux or each other's. Keys go in with
``send-keys``, one at a time, each a pause after the one before it (Esc followed at
once by a key reads as Alt+key); what the terminal shows comes back with
``capture-pane``. Waits are on what the screen shows, with bounds that only catch a
hang. ``close()`` kills the server (and with it whatever still runs in the pane) and
removes its socket file, which tmux leaves behind.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

_count = itertools.count()

#: Seconds one tmux command may take (a loaded 2-core machine is slow, never this slow).
TMUX_TIMEOUT_S = 20.0
#: The pause between two keys.
KEY_PAUSE_S = 0.15


def shell_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a plain shell pane: ``home``, a minimal PATH, a UTF-8 tmux
    terminal, ``extra``, and the prompt the tests wait for."""
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "TERM": "tmux-256color", "LANG": "C.UTF-8"}
    return {**env, **extra, "PS1": "PROMPT$ "}


def plain_shell(env: Mapping[str, str]) -> str:
    """A command for a pane: bash with no rc files and exactly ``env`` (``PS1`` in it
    makes a prompt to wait for)."""
    return (
        "env -i "
        + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        + " bash --norc --noprofile"
    )


class TmuxPane:
    """A detached session running ``command`` in a ``width`` x ``height`` pane."""

    def __init__(
        self, command: str, *, width: int = 120, height: int = 40, prefix: str = "gputop-test"
    ) -> None:
        self.socket = f"{prefix}-{os.getpid()}-{next(_count)}"
        self._last_key = -math.inf
        self.tmux("new-session", "-d", "-s", "t", "-x", str(width), "-y", str(height), command)
        self.socket_path = Path(self.tmux("display-message", "-p", "#{socket_path}").strip())

    def tmux(self, *args: str, check: bool = True) -> str:
        r = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            timeout=TMUX_TIMEOUT_S,
            check=check,
        )
        return r.stdout

    def send_line(self, line: str) -> None:
        """Type ``line`` literally, then Enter."""
        self.tmux("send-keys", "-t", "t", "-l", line)
        self.tmux("send-keys", "-t", "t", "Enter")

    def keys(self, *keys: str, pause: float = KEY_PAUSE_S) -> None:
        """Each of ``keys`` (tmux key names), at least ``pause`` seconds after the key
        before it, also one sent by an earlier call (a wait in between may be short)."""
        for key in keys:
            wait = self._last_key + pause - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            self.tmux("send-keys", "-t", "t", key)
            self._last_key = time.monotonic()

    def screen(self) -> str:
        """What the pane shows now ("" once it is gone)."""
        return self.tmux("capture-pane", "-p", "-t", "t", check=False)

    def scrollback(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "t", "-S", "-", "-E", "-", check=False)

    def flag(self, name: str) -> str:
        """A tmux format variable of the pane, e.g. ``alternate_on``."""
        return self.tmux("display-message", "-p", "-t", "t", f"#{{{name}}}", check=False).strip()

    def wait_for(
        self, ok: Callable[[str], bool], what: str, timeout: float = 15.0, poll: float = 0.05
    ) -> str:
        deadline = time.monotonic() + timeout
        while True:
            shown = self.screen()
            if ok(shown):
                return shown
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; the pane shows:\n{shown}")
            time.sleep(poll)

    def wait_text(self, *texts: str, absent: tuple[str, ...] = (), timeout: float = 15.0) -> str:
        return self.wait_for(
            lambda s: all(t in s for t in texts) and not any(t in s for t in absent),
            what=f"{texts} without {absent}",
            timeout=timeout,
        )

    def close(self) -> None:
        self.tmux("kill-server", check=False)
        self.socket_path.unlink(missing_ok=True)


def probe_in_pane(
    probe: str,
    out: Path,
    args: Sequence[str],
    env: Mapping[str, str],
    cwd: Path,
    *,
    closer: str,
    what: str,
) -> Any:
    """Run ``python -c probe out *args`` in a 120x40 pane, from ``cwd`` with ``env``
    exported, until the probe has written ``out`` whole (its JSON ends with ``closer``);
    the pane is closed then, and the JSON returned. A probe that never writes fails,
    saying ``what`` did not come and what the pane shows."""
    q = shlex.quote
    exports = "".join(f"export {k}={q(v)}; " for k, v in env.items())
    run = " ".join(map(q, [sys.executable, "-c", probe, str(out), *args]))
    pane = TmuxPane("sh -c " + q(f"{exports}cd {q(str(cwd))}; exec {run}"), width=120, height=40)
    try:
        deadline = time.monotonic() + 60
        while not out.exists() or not out.read_text().endswith(closer):
            assert time.monotonic() < deadline, f"no {what}; the pane shows:\n{pane.screen()}"
            time.sleep(0.05)
    finally:
        pane.close()
    return json.loads(out.read_text())
