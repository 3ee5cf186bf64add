"""Many hosts' ``gputop --stream`` at once: one ``ssh`` child per host, one reader thread
for all (docs/fleet.md, "Over SSH"); every line is untrusted (:mod:`gputop.sources.remote`).
"""

from __future__ import annotations

import contextlib
import os
import random
import selectors
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gputop.fmt import clean_text
from gputop.sources.remote import (
    MAX_LINE_BYTES,
    FutureSchema,
    HostReport,
    LineError,
    parse_line,
    summarize,
)

#: A host is stale when its newest line is older than this many intervals.
STALE_INTERVALS = 3
#: Shown on the row of a host without gputop (no release on PyPI yet: README, "Quick start").
INSTALL_HINT = "install it there (pipx install . in a gputop checkout), or set --remote-command"
#: Backoff after failed attempts: 1, 2, 4 ... seconds, at most this.
MAX_BACKOFF_S = 60.0
#: The part of a child's stderr kept (its last line is the error shown).
STDERR_KEEP = 4096
#: At most this often the UI is told that something changed (seconds).
NOTIFY_EVERY_S = 0.25


def ssh_command(
    host: str,
    remote_command: str,
    interval: float,
    *,
    ssh_config: str | None = None,
    options: Sequence[str] = (),
) -> list[str]:
    """The system's ssh running ``remote_command --stream`` on ``host`` (one string:
    the remote shell parses it)."""
    argv = ["ssh", "-F", ssh_config] if ssh_config else ["ssh"]
    for opt in ("BatchMode=yes", "ServerAliveInterval=5", "ConnectTimeout=10"):
        argv += ["-o", opt]
    argv.append("-T")  # no pseudo-terminal: a byte stream, no echo, no terminal modes
    for opt in options:
        argv += ["-o", opt]
    # "--" ends ssh's options: a host name starting with "-" cannot become one.
    argv += ["--", host, f"{remote_command} --stream --interval {interval:g}"]
    return argv


def local_command(remote_command: str, interval: float) -> list[str]:
    """The argv that runs the stream on this machine (``--local``: demos, benchmarks)."""
    return ["/bin/sh", "-c", f"exec {remote_command} --stream --interval {interval:g}"]


def expand(template: str, host: str, n: int) -> str:
    """``{host}`` (shell-quoted) and ``{n}`` (its position) in a remote command."""
    return template.replace("{host}", shlex.quote(host)).replace("{n}", str(n))


@dataclass(frozen=True, slots=True)
class HostView:
    """What is known about one host right now (immutable; a new one per change)."""

    name: str  # as the user named it (ssh destination)
    report: HostReport | None = None  # the newest good line, summarized
    data: dict[str, Any] | None = None  # the newest good line, parsed (not yet checked)
    seq: int = 0  # good lines received so far
    received: float | None = None  # monotonic time of the newest good line
    connected: bool = False  # a child process is running
    failures: int = 0  # attempts in a row that ended without a good line
    error: str | None = None  # why the last attempt ended / the last line was refused
    problem: str | None = None  # "no-gputop", "schema", "bad-data": the host is marked
    retry_at: float | None = None  # monotonic time of the next attempt
    attempts: int = 0


#: A marked host's state word -> what its row shows (fresh lines clear "bad-data").
_PROBLEMS = {"no-gputop": "no gputop", "schema": "new schema", "bad-data": "bad data"}


def status(view: HostView, now: float, interval: float) -> tuple[str, str, str | None]:
    """(state word, what the row shows, detail) of a host at monotonic time ``now``."""
    age = None if view.received is None else max(0.0, now - view.received)
    fresh = age is not None and age <= STALE_INTERVALS * interval
    problem = view.problem or ""
    if problem in _PROBLEMS and not (problem == "bad-data" and fresh):
        return problem, _PROBLEMS[problem], view.error
    if view.connected and fresh:
        return "live", "live", None
    if age is not None and (view.connected or view.failures == 0):
        return "stale", f"stale {age:.0f}s", view.error
    if view.connected or (view.failures == 0 and view.attempts == 0):
        return "connecting", "connecting", None
    return "unreachable", "unreachable", view.error or "connection failed"


@dataclass(eq=False)
class _Conn:
    """One running child (worker thread only)."""

    proc: subprocess.Popen[bytes]
    err: int  # stderr's fd (the other is stdout's)
    started: float  # monotonic
    fds: set[int]  # stdout's and stderr's, while not at their end
    buf: bytearray = field(default_factory=bytearray)
    errbuf: bytearray = field(default_factory=bytearray)
    skipping: bool = False  # inside an over-long line: drop bytes until its newline
    good: int = 0  # good lines on this connection


class HostViews:
    """What the fleet screen reads, and what its sources (:class:`StreamSet`, and
    :class:`gputop.sources.prometheus.PrometheusFleet`) share: the hosts' views under a
    lock, and one worker thread (``_run``) that tells ``on_change()`` when they changed."""

    thread_name = "gputop-fleet"

    def __init__(self, interval: float) -> None:
        self.interval = float(interval)
        self.on_change: Callable[[], None] | None = None  # set by the fleet screen
        self.hosts: tuple[str, ...] = ()
        self._lock = threading.Lock()
        self._views: dict[str, HostView] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def views(self) -> tuple[HostView, ...]:
        with self._lock:
            return tuple(self._views[h] for h in self.hosts)

    def view(self, name: str) -> HostView:
        with self._lock:
            return self._views.get(name) or HostView(name)

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("already started")
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def retry_now(self) -> None:
        raise NotImplementedError

    def close(self, timeout: float = 3.0) -> None:
        """Stop the worker thread, waiting at most ``timeout`` seconds for it."""
        self._stop.set()
        self._wake()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _wake(self) -> None:
        """Cut short the worker's wait (``_stop`` ends a wait on it)."""

    def _run(self) -> None:
        raise NotImplementedError

    def _call_back(self) -> None:
        callback = self.on_change
        if callback is not None:
            with contextlib.suppress(Exception):
                callback()


class StreamSet(HostViews):
    """One stream per host; the reader thread owns everything but :meth:`views`, and calls
    ``on_change()`` at most every ``NOTIFY_EVERY_S``. ``command(name, n)``: host's argv."""

    thread_name = "gputop-streams"

    def __init__(
        self,
        hosts: Sequence[str],
        command: Callable[[str, int], list[str]],
        *,
        interval: float = 2.0,
        first_line_timeout: float = 30.0,
    ) -> None:
        if not hosts:
            raise ValueError("no hosts")
        super().__init__(interval)
        self.hosts = tuple(hosts)
        self.first_line_timeout = first_line_timeout
        self._command = command
        self._rng = random.Random()
        self._views = {h: HostView(h) for h in self.hosts}
        self._conns: dict[str, _Conn] = {}
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._dirty = False
        self._last_notify = 0.0

    def retry_now(self) -> None:
        """Try every host not connected at once, whatever its backoff."""
        with self._lock:
            now = time.monotonic()
            for h, v in self._views.items():
                if not v.connected:
                    self._views[h] = replace(v, retry_at=now)
        self._wake()

    def close(self, timeout: float = 3.0) -> None:
        """Stop the reader and end every child's process group (TERM, then KILL)."""
        super().close(timeout)
        # The thread ended (or hangs, which it should not): end the children from here.
        conns = list(self._conns.values())
        self._conns.clear()
        _end_groups([c.proc for c in conns])
        with contextlib.suppress(OSError):
            self._sel.close()
        _close([fd for c in conns for fd in c.fds] + [self._wake_r, self._wake_w])

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    def _set(self, name: str, **changes: Any) -> None:
        with self._lock:
            self._views[name] = replace(self._views[name], **changes)
        self._dirty = True

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                self._start_due(now)
                self._check_hung(now)
                timeout = self._next_timeout(now)
                for key, _ in self._sel.select(timeout):
                    if key.data is None:
                        with contextlib.suppress(OSError):
                            os.read(self._wake_r, 4096)
                        continue
                    self._readable(key.fd, *key.data)
                self._notify()
        except Exception as exc:  # a bug here must not leave children running unseen
            for h in self.hosts:
                self._set(h, error=f"reader failed: {exc}")
            self._notify(force=True)

    def _next_timeout(self, now: float) -> float:
        wait = 1.0  # stale ages and hang checks are re-evaluated at least every second
        with self._lock:
            for v in self._views.values():
                if v.retry_at is not None and not v.connected:
                    wait = min(wait, max(0.0, v.retry_at - now))
        if self._dirty:
            wait = min(wait, max(0.0, self._last_notify + NOTIFY_EVERY_S - now))
        return wait

    def _notify(self, force: bool = False) -> None:
        if not self._dirty:
            return
        now = time.monotonic()
        if not force and now - self._last_notify < NOTIFY_EVERY_S:
            return
        self._dirty = False
        self._last_notify = now
        self._call_back()

    def _start_due(self, now: float) -> None:
        for n, name in enumerate(self.hosts):
            retry_at = self._views[name].retry_at
            if name not in self._conns and (retry_at is None or retry_at <= now):
                self._connect(name, n, now)

    def _connect(self, name: str, n: int, now: float) -> None:
        argv = self._command(name, n)
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own process group: killed whole on close
                close_fds=True,
            )
        except OSError as exc:
            failures = self._views[name].failures + 1
            self._set(
                name,
                connected=False,
                failures=failures,
                error=f"cannot run {argv[0]}: {exc.strerror or exc}",
                retry_at=now + self._backoff(failures),
                attempts=self._views[name].attempts + 1,
            )
            return
        assert proc.stdout is not None and proc.stderr is not None
        # The reader owns copies of the fds from here, the file objects are closed.
        out, err = os.dup(proc.stdout.fileno()), os.dup(proc.stderr.fileno())
        proc.stdout.close()
        proc.stderr.close()
        proc.stdout = proc.stderr = None
        conn = self._conns[name] = _Conn(proc, err, now, {out, err})
        for fd in (out, err):
            os.set_blocking(fd, False)
            self._sel.register(fd, selectors.EVENT_READ, (name, conn))
        self._set(name, connected=True, retry_at=None, attempts=self._views[name].attempts + 1)

    def _check_hung(self, now: float) -> None:
        """End a connection with no good line after ``first_line_timeout`` (a hang)."""
        for name, conn in list(self._conns.items()):
            if conn.good == 0 and now - conn.started > self.first_line_timeout:
                self._end(name, conn, f"no data in {self.first_line_timeout:.0f}s: timed out")

    def _readable(self, fd: int, name: str, conn: _Conn) -> None:
        if self._conns.get(name) is not conn:  # ended earlier in this select's batch
            return
        try:
            chunk = os.read(fd, 1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            conn.fds.discard(fd)
            self._unregister(fd)
        elif fd == conn.err:
            conn.errbuf += chunk
            del conn.errbuf[:-STDERR_KEEP]
        else:
            self._feed(name, conn, chunk)
        if not conn.fds:
            self._end(name, conn, None)

    def _unregister(self, fd: int) -> None:
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._sel.unregister(fd)
        _close([fd])

    def _feed(self, name: str, conn: _Conn, chunk: bytes) -> None:
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                if not conn.skipping:
                    conn.buf += chunk[start:]
                    if len(conn.buf) > MAX_LINE_BYTES:
                        conn.buf.clear()
                        conn.skipping = True
                        self._bad(name, f"a line over {MAX_LINE_BYTES} bytes: dropped")
                return
            if conn.skipping:  # (its buffer was cleared when it began)
                conn.skipping = False
            else:
                conn.buf += chunk[start:nl]
                line = bytes(conn.buf)
                conn.buf.clear()
                if line.strip():
                    self._line(name, conn, line)
            start = nl + 1

    def _line(self, name: str, conn: _Conn, line: bytes) -> None:
        try:
            data = parse_line(line)
            report = summarize(data)
        except FutureSchema as exc:
            self._set(name, problem="schema", error=str(exc))
            return
        except LineError as exc:
            self._bad(name, str(exc))
            return
        except Exception as exc:  # a bug in summarize: this host only
            self._bad(name, f"unreadable line: {type(exc).__name__}")
            return
        conn.good += 1
        self._set(
            name,
            report=report,
            data=data,
            seq=self._views[name].seq + 1,
            received=time.monotonic(),
            failures=0,
            problem=None,
            error=None,
        )

    def _bad(self, name: str, why: str) -> None:
        self._set(name, problem="bad-data", error=clean_text(why, 200))

    def _end(self, name: str, conn: _Conn, why: str | None) -> None:
        """The connection is over (EOF, or ended here): reap it, schedule the next try."""
        self._conns.pop(name, None)
        for fd in conn.fds:
            self._unregister(fd)
        if why is not None or conn.proc.poll() is None:
            _end_groups([conn.proc])
        code = conn.proc.returncode
        _signal_group(conn.proc, signal.SIGKILL)  # anything it left in its group
        last = _last_line(conn.errbuf)
        view = self._views[name]
        problem = view.problem if view.problem == "schema" else None
        error = why or last or f"stream ended (exit status {code})"
        if code == 127 or (last and "command not found" in last.lower()):
            problem = "no-gputop"
            error = f"gputop not found ({last or 'exit 127'}); {INSTALL_HINT}"
        if conn.good and problem is None:
            failures, delay = 0, 1.0  # it delivered: a drop, try again soon
        else:
            failures = view.failures + 1
            delay = MAX_BACKOFF_S if problem else self._backoff(failures)
        self._set(
            name,
            connected=False,
            failures=failures,
            error=clean_text(error, 300),
            problem=problem or (view.problem if view.problem == "bad-data" else None),
            retry_at=time.monotonic() + delay,
        )

    def _backoff(self, failures: int) -> float:
        base = min(MAX_BACKOFF_S, 2.0 ** max(0, failures - 1))
        return base * self._rng.uniform(0.8, 1.2)


def _last_line(buf: bytes | bytearray) -> str | None:
    for raw in reversed(bytes(buf).splitlines()):
        text = clean_text(raw, 300)
        if text and text.strip():
            return text.strip()
    return None


def _end_groups(procs: list[subprocess.Popen[bytes]]) -> None:
    """TERM each child's process group, wait a second for them all, then KILL and reap."""
    for proc in procs:
        _signal_group(proc, signal.SIGTERM)
    deadline = time.monotonic() + 1.0
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(max(0.0, deadline - time.monotonic()))
    for proc in procs:
        _signal_group(proc, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(2.0)


def _close(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)
