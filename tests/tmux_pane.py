"""One tmux pane on a private tmux server: how the tests drive gputop for real.

Each pane has its own server (``tmux -L <prefix>-<pid>-<n> -f /dev/null``, one session
``t``), so tests never touch a user's tmux or each other's. Keys go in with
``send-keys``, one at a time, each a pause after the one before it (Esc followed at
once by a key reads as Alt+key); what the terminal shows comes back with
``capture-pane``. Waits are on what the screen shows, with bounds that only catch a
hang; one that fails says whether the pane was there, and, for a pane kept after its
process ended (``keep_dead``), how it ended and what it left (a traceback). ``close()``
kills the server (and with it whatever still runs in the pane) and removes its socket
file, which tmux leaves behind.
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
#: The lines of a kept dead pane that a failed wait reports (a traceback ends there).
DEAD_LINES = 60


def zombie_status(pid: int) -> str:
    """How the process ``pid`` ended, read from its /proc stat while it is a zombie (its
    exit_code field, a wait status); "" where that is not there to read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = stat.rpartition(")")[2].split()  # the command name may hold anything
    # fields[0] is the stat's third field (the state); exit_code is its 52nd.
    if len(fields) < 50 or fields[0] != "Z" or not fields[49].isdigit():
        return ""
    code = int(fields[49])
    if os.WIFEXITED(code):
        return f"exit status {os.WEXITSTATUS(code)}"
    return f"signal {os.WTERMSIG(code)}" if os.WIFSIGNALED(code) else ""


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
    """A detached session running ``command`` in a ``width`` x ``height`` pane.
    ``keep_dead``: the pane stays once its process has ended by itself (tmux's
    ``remain-on-exit``), with its last screen, until the test kills it or its server;
    without it the pane, its session and its server go with the process."""

    def __init__(
        self,
        command: str,
        *,
        width: int = 120,
        height: int = 40,
        prefix: str = "gputop-test",
        keep_dead: bool = False,
    ) -> None:
        self.socket = f"{prefix}-{os.getpid()}-{next(_count)}"
        self._last_key = -math.inf
        # Set before the session exists: a command that ends at once is kept too.
        keep = ("start-server", ";", "set-option", "-g", "remain-on-exit", "on", ";")
        new = ("new-session", "-d", "-s", "t", "-x", str(width), "-y", str(height), command)
        self.tmux(*(keep if keep_dead else ()), *new)
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

    def ended(self) -> str | None:
        """How the pane's process ended ("exit status 1", "signal 9"), "" where that is
        not known; None while it runs (a pane not kept is gone once it ended)."""
        for _ in range(2):  # again if tmux reaped the zombie between the two reads
            flags = "#{pane_dead}|#{pane_dead_status}|#{pane_dead_signal}|#{pane_pid}"
            shown = self.tmux("display-message", "-p", "-t", "t", flags, check=False)
            dead, status, sig, pid = [*shown.strip().split("|"), "", "", ""][:4]
            if dead != "1":
                return None
            if status.isdigit():
                return f"exit status {status}"
            if sig.isdigit():
                return f"signal {sig}"
            # tmux (3.3a) can take the pane for dead on its terminal's end of file and
            # not reap the process: its status is then still in the zombie's /proc stat.
            how = zombie_status(int(pid)) if pid.isdigit() else ""
            if how:
                return how
        return ""

    def describe(self, shown: str) -> str:
        """What a failed wait reports: the pane gone (a pane not kept goes with its
        process, and its server with it), its process ended (how, and the end of what it
        left), or what it shows (``shown``, the last capture)."""
        capture = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", "capture-pane", "-p", "-t", "t"],
            capture_output=True,
            text=True,
            timeout=TMUX_TIMEOUT_S,
        )
        if capture.returncode != 0:
            return f"the pane is gone (tmux: {capture.stderr.strip()})"
        how = self.ended()
        if how is None:
            return f"the pane shows:\n{shown}"
        left = [line for line in self.scrollback().splitlines() if line.strip()][-DEAD_LINES:]
        return f"the pane's process ended ({how or 'status unknown'}); its last lines:\n" + (
            "\n".join(left)
        )

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
                raise AssertionError(f"timed out waiting for {what}; {self.describe(shown)}")
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
