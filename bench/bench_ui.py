#!/usr/bin/env python3
"""What the dashboard costs to watch: gputop against nvitop on the same fake 8-GPU node.

    python bench/bench_ui.py [--seconds 30] [--rounds 3] [--tools gputop,nvitop] [--size 200x50]
                             [--every 30] [--hopper]

The tools run side by side, each in its own detached tmux pane of the given size, at a
1 s interval, against the fake ``libnvidia-ml.so.1`` (tests/fakenvml) describing 8 GPUs
with 2 compute processes each. The 16 processes are real (``sleep`` children of this
script), so both tools also do their per-process host work.

A round starts the tools one after the other (each one's first frame is timed while the
ones before it run), waits 2 s, then measures all of them over the same window, so that
the machine's load from anything else falls on every tool alike. The start order
alternates between rounds. Medians over the rounds are printed last.

Reported per tool:
- first frame: seconds from starting the pane until GPU data (the 80 GiB total) is on screen:
  the arrival of the output block that put it there (``wait_first_frame``: tmux's control
  mode, each block replayed to find the one; where control mode is not available,
  ``tmux capture-pane`` polled every 20 ms, up to ~0.03 s late);
- CPU: user+system time of the tool's process (all its threads) over the window, as % of
  one core (clock-tick resolution: 1/(100 x seconds), 0.03 % for 30 s);
- RSS at the end of the window and the peak RSS (VmHWM).

Both tools load byte code compiled beforehand into a private cache, as an installed
package would (see ``warm_bytecode``).

Needs tmux, gcc (to build the fake) and nvitop (``pip install nvitop``). Prints figures;
it is not a test. The machine's other load shows as noise: run several rounds.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakenvml import (  # noqa: E402
    PROFILES,
    FakeGpu,
    FakeProcess,
    FakeSample,
    GiB,
    Scenario,
    subprocess_env,
)

# The fake GPUs' total memory (80 GiB) as either tool may print it: on screen = data arrived.
# (nvitop hides GPU names in its compact layout, so the name is not a usable marker.)
DATA_MARKER = re.compile(r"\b80(?:\.0+)?\s?GiB|\b81920\s?MiB")
SETTLE_S = 2.0
POLL_S = 0.02
#: How the first frame is found (``wait_first_frame``): "control" (tmux's control mode, the
#: block that put the marker on screen; "poll" where tmux lacks it) or "poll" (a capture
#: every ``POLL_S``). The benches' ``--waiter`` sets it.
WAITERS = ("control", "poll")
WAITER = "control"
#: The first tmux whose control mode sends a command's reply after the output of every
#: byte the server read before it ran the command (3.2 queues both in one order).
CONTROL_MODE_SINCE = (3, 2)
SOCKET = f"gputop-bench-{os.getpid()}"  # a private tmux server, killed at the end


@dataclass
class Result:
    tool: str
    first_frame_s: float | None
    cpu_percent: float | None
    rss_mib: float | None
    peak_rss_mib: float | None
    note: str = ""


def _clock_ticks() -> int:
    return os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` (all its threads) from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is the state (field 3); utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / _clock_ticks()


def memory_mib(pid: int) -> tuple[float | None, float | None]:
    """(VmRSS, VmHWM) in MiB."""
    rss = hwm = None
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) / 1024
    return rss, hwm


#: A function and the same function timed.
Timer = Callable[[str, Callable[..., Any]], Callable[..., Any]]


def thread_timer(spent: dict[str, float]) -> Timer:
    """``timed(name, fn)``: ``fn`` wrapped so that each call adds the calling thread's CPU
    time to ``spent[name]`` (the tick-part benches wrap a source's parts with it)."""

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*a: Any, **k: Any) -> Any:
            t0 = time.thread_time()
            try:
                return fn(*a, **k)
            finally:
                spent[name] = spent.get(name, 0.0) + time.thread_time() - t0

        return wrapper

    return timed


def tmux(*args: str, check: bool = True) -> str:
    out = subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True, check=check)
    return out.stdout


@contextlib.contextmanager
def tmux_server() -> Iterator[None]:
    """The bench's private tmux server, kept up by a session that outlives the measured
    ones (it would otherwise exit with the last pane of one round), killed after."""
    tmux("new-session", "-d", "-s", "keep", "-x", "20", "-y", "5", "exec sleep 3600")
    try:
        yield
    finally:
        tmux("kill-server", check=False)


def rotated(names: list[str], r: int) -> list[str]:
    """Round ``r``'s order: each program in turn starts first."""
    k = r % len(names)
    return names[k:] + names[:k]


def scenario_for(pids: list[int], per_gpu: int = 2, driver: str = "r560") -> Scenario:
    """8 GPUs, ``per_gpu`` of ``pids`` on each, on a ``driver`` of the fake's profiles
    (the newest: PCIe from the byte counters, no PCIe thread). Their links carry nothing:
    a rate from counters that grow at each read varies with the tick's length, a
    throughput answer does not, and a value that changes costs every consumer a redraw;
    with no traffic both read 0 at every tick."""
    gpus = []
    for g in range(8):
        mine = pids[per_gpu * g : per_gpu * g + per_gpu]
        gpus.append(
            FakeGpu(
                util_gpu=(37 * g) % 101,
                memory_used=(8 + 8 * g) * GiB,
                processes=[
                    FakeProcess(pid, used_memory=(k % 4 + 2) * GiB) for k, pid in enumerate(mine)
                ],
                samples=[
                    FakeSample(pid, sm=20 + 10 * (k % 8), mem=5 + k % 8)
                    for k, pid in enumerate(mine)
                ],
                pcie_tx_kbps=0,
                pcie_rx_kbps=0,
            )
        )
    return PROFILES[driver].scenario(gpus=gpus)


@dataclass(frozen=True)
class Block:
    """One ``%output`` notification of a control-mode client: when it arrived (monotonic)
    and the bytes the pane's program wrote (tmux's octal escapes undone)."""

    at: float
    data: bytes


_OCTAL = re.compile(rb"\\([0-7]{3})")


def decode_output(escaped: bytes) -> bytes:
    """A ``%output`` line's data as the program wrote it (tmux escapes bytes below 32 and
    the backslash as ``\\ooo``)."""
    return _OCTAL.sub(lambda m: bytes([int(m[1], 8)]), escaped)


def control_mode_available() -> bool:
    """tmux's control mode keeps replies and output in one order (``CONTROL_MODE_SINCE``)."""
    try:
        version = subprocess.run(["tmux", "-V"], capture_output=True, text=True).stdout
    except OSError:
        return False
    m = re.search(r"(\d+)\.(\d+)", version)
    return m is not None and (int(m[1]), int(m[2])) >= CONTROL_MODE_SINCE


class ControlClient:
    """A tmux control-mode client (``tmux -C``) that makes its session and is attached from
    the first byte the pane's program writes: every ``%output`` block of the pane is kept
    with its arrival time, and commands go in on its stdin, their replies in order with
    the output (a reply comes after the output of all the server had read before it ran
    the command)."""

    def __init__(self, new_session: list[str], timeout: float = 20.0) -> None:
        self.blocks: list[Block] = []
        self.received = 0  # bytes in the blocks
        self._replies: list[tuple[int, list[str]]] = []
        self._cond = threading.Condition()
        self._eof = False
        self.proc = subprocess.Popen(
            ["tmux", "-L", SOCKET, "-C", "new-session", *new_session],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._asked = 1  # the new-session on the command line has a reply too
        self._reply(0, timeout)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        reply: list[str] | None = None
        ends: tuple[bytes, bytes] = (b"", b"")  # the lines that end the reply being read
        for line in self.proc.stdout:
            at = time.monotonic()
            line = line.rstrip(b"\n")
            with self._cond:
                if reply is not None:
                    if line in ends:  # %end or %error with %begin's numbers: not a screen line
                        self._replies.append((len(self.blocks), reply))
                        reply = None
                        self._cond.notify_all()
                    else:
                        reply.append(line.decode("utf-8", "replace"))
                elif line.startswith(b"%begin "):
                    reply = []
                    numbers = line[len(b"%begin ") :]
                    ends = (b"%end " + numbers, b"%error " + numbers)
                elif line.startswith(b"%output "):
                    data = line.split(b" ", 2)[2] if line.count(b" ") >= 2 else b""
                    self.blocks.append(Block(at, decode_output(data)))
                    self.received += len(self.blocks[-1].data)
                    self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def _reply(self, n: int, timeout: float) -> tuple[int, list[str]]:
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._replies) > n or self._eof, timeout):
                raise TimeoutError("tmux control mode: no reply")
            if len(self._replies) <= n:
                raise RuntimeError("tmux control mode: the client ended")
            return self._replies[n]

    def command(self, line: str, timeout: float = 20.0) -> tuple[int, list[str]]:
        """Run one tmux command: (how many blocks had arrived before its reply, its lines)."""
        assert self.proc.stdin is not None
        n = self._asked
        self._asked += 1
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()
        return self._reply(n, timeout)

    @property
    def ended(self) -> bool:
        """The client's output has ended (it exited or was detached)."""
        with self._cond:
            return self._eof

    def wait_blocks(self, more_than: int, timeout: float) -> int:
        """Wait until more than ``more_than`` blocks arrived (or ``timeout``); how many."""
        with self._cond:
            self._cond.wait_for(lambda: len(self.blocks) > more_than or self._eof, timeout)
            return len(self.blocks)

    def wait_bytes(self, n: int, timeout: float) -> None:
        """Wait until the blocks hold ``n`` bytes in all."""
        with self._cond:
            if not self._cond.wait_for(lambda: self.received >= n or self._eof, timeout):
                raise TimeoutError("tmux control mode: the output did not come")

    def close(self) -> None:
        """Detach (the session stays) and end the client."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()  # a control client detaches when its stdin ends
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout=10)


@dataclass
class Pane:
    tool: str
    session: str
    pid: int
    started: float
    first_frame_s: float | None = None
    cpu0: float = 0.0
    note: str = ""
    #: The control-mode client while the first frame is awaited (None: polled).
    client: ControlClient | None = None
    size: tuple[int, int] = (200, 50)
    #: The index of the output block that put the marker on screen (control mode), and
    #: the blocks that had arrived by the capture that showed it.
    frame_block: int | None = None
    blocks: list[Block] = field(default_factory=list)


@contextlib.contextmanager
def fake_gpus_in_process(per_gpu: int) -> Iterator[list[int]]:
    """The fake 8 GPUs x ``per_gpu`` real ``sleep`` processes (``scenario_for``), with the
    fake NVML loaded in this process and its scenario set for it; yields the pids. The
    processes end and the scenario goes with the block."""
    from tests import fakenvml

    procs = [subprocess.Popen(["sleep", "3600"]) for _ in range(8 * per_gpu)]
    try:
        with tempfile.TemporaryDirectory(prefix="gputop-bench-") as d:
            pids = [p.pid for p in procs]
            path = scenario_for(pids, per_gpu).write(Path(d) / "s.txt")
            fakenvml.load_in_process()
            os.environ[fakenvml.SCENARIO_ENV] = str(path)
            yield pids
    finally:
        for p in procs:
            p.kill()
            p.wait()


def start_pane(
    tool: str,
    command: str,
    env: dict[str, str],
    size: tuple[int, int],
    cwd: Path = ROOT,
    waiter: str | None = None,
) -> Pane:
    """``cwd``: where the command runs; ``python -m gputop`` imports the gputop there
    before any on PYTHONPATH. ``waiter`` (default ``WAITER``): "control" starts the
    session from a control-mode client, attached before the program writes anything."""
    session = re.sub(r"[^\w-]", "_", f"{tool}-{os.getpid()}")  # no target syntax in it
    env_args: list[str] = []
    for key in ("LD_LIBRARY_PATH", "FAKE_NVML_SCENARIO", "PYTHONPATH", "PYTHONPYCACHEPREFIX"):
        if key in env:
            env_args += ["-e", f"{key}={env[key]}"]
    w, h = size
    new = ["-s", session, "-x", str(w), "-y", str(h), *env_args, "-c", str(cwd), f"exec {command}"]
    if (waiter or WAITER) == "control" and control_mode_available():
        started = time.monotonic()
        client = ControlClient(new)
        # keep a crash readable; the program runs already (the same moment as below)
        client.command(f"set-option -t {session} remain-on-exit on")
        pid = int(client.command(f"display-message -p -t {session} '#{{pane_pid}}'")[1][0])
        return Pane(tool, session, pid, started, client=client, size=size)
    started = time.monotonic()
    tmux(
        "new-session", "-d", *new,
        ";", "set-option", "-t", session, "remain-on-exit", "on",  # keep a crash readable
    )  # fmt: skip
    pid = int(tmux("list-panes", "-t", session, "-F", "#{pane_pid}").split()[0])
    return Pane(tool, session, pid, started, size=size)


def set_waiter(waiter: str) -> str:
    """Use ``waiter`` from now on; "control" falls back to "poll" (said on stderr) where
    tmux has no usable control mode. Returns the one in use."""
    global WAITER
    if waiter == "control" and not control_mode_available():
        print("tmux control mode not available: polling the pane", file=sys.stderr)
        waiter = "poll"
    WAITER = waiter
    return waiter


def wait_first_frame(pane: Pane, timeout: float = 60.0) -> None:
    """Wait until GPU data is on screen; sets ``first_frame_s`` (and, in control mode,
    ``frame_block``) or ``note``. In control mode the client detaches afterwards: the
    program then runs in a detached session as a polled one does."""
    if pane.client is None:
        _poll_first_frame(pane, timeout)
        return
    try:
        _control_first_frame(pane, pane.client, timeout)
    finally:
        pane.client.close()
        pane.client = None


def _poll_first_frame(pane: Pane, timeout: float) -> None:
    """Poll the pane every ``POLL_S`` until GPU data is on screen."""
    deadline = pane.started + timeout
    while time.monotonic() < deadline:
        screen = tmux("capture-pane", "-p", "-t", pane.session, check=False)
        if DATA_MARKER.search(screen):
            pane.first_frame_s = time.monotonic() - pane.started
            return
        if not Path(f"/proc/{pane.pid}").exists():
            pane.note = _exited(screen)
            return
        time.sleep(POLL_S)
    pane.note = f"no GPU memory total on screen within {timeout:.0f} s"


def _exited(screen: str) -> str:
    last = [line.strip() for line in screen.splitlines() if line.strip()][-4:]
    return "exited: " + " | ".join(last)


def _control_first_frame(pane: Pane, client: ControlClient, timeout: float) -> None:
    """Capture the pane (through the client: no process started) when output has arrived,
    at most once every ``POLL_S``; once a capture shows the marker, the blocks between the
    last capture without it and this one are replayed one by one on a fresh pane of the
    same size, and the first frame is the arrival of the block after which the replayed
    screen shows the marker. The captures only say when to stop looking."""
    deadline = pane.started + timeout
    seen = 0  # blocks before the last capture without the marker
    last = -POLL_S
    while time.monotonic() < deadline:
        got = client.wait_blocks(seen, max(0.0, min(0.2, deadline - time.monotonic())))
        if got > seen:
            time.sleep(max(0.0, last + POLL_S - time.monotonic()))
            last = time.monotonic()
            before, lines = client.command(f"capture-pane -p -t {pane.session}")
            screen = "\n".join(lines)
            if DATA_MARKER.search(screen):
                pane.blocks = client.blocks[:before]
                found = find_marker_block(pane.blocks, seen, pane.size)
                if found is None:
                    pane.note = "the replay did not show the marker"
                    return
                pane.frame_block = found
                pane.first_frame_s = client.blocks[found].at - pane.started
                return
            seen = before
        elif client.ended:
            pane.note = "the tmux control client ended"
            return
        if not Path(f"/proc/{pane.pid}").exists():
            pane.note = _exited(tmux("capture-pane", "-p", "-t", pane.session, check=False))
            return
    pane.note = f"no GPU memory total on screen within {timeout:.0f} s"


def find_marker_block(blocks: list[Block], first: int, size: tuple[int, int]) -> int | None:
    """The index of the block after which a pane of ``size`` fed ``blocks`` in order first
    shows ``DATA_MARKER`` (None if none does); the screens before block ``first`` are not
    captured (known without it). A fresh session runs ``cat`` of a FIFO on a raw,
    non-echoing terminal, so the pane gets exactly the bytes written to it; each block is
    written once the client has seen the one before come out, then the screen captured."""
    w, h = size
    with tempfile.TemporaryDirectory(prefix="gputop-bench-replay-") as d:
        fifo = Path(d) / "out"
        os.mkfifo(fifo)
        session = f"replay-{os.getpid()}"
        client = ControlClient(
            ["-s", session, "-x", str(w), "-y", str(h), f"stty raw -echo && exec cat {fifo}"]
        )
        try:
            with open(fifo, "wb", buffering=0) as out:  # returns once cat has it open
                written = 0
                for i, block in enumerate(blocks):
                    out.write(block.data)
                    written += len(block.data)
                    client.wait_bytes(written, 20.0)
                    if i < first:
                        continue
                    screen = "\n".join(client.command(f"capture-pane -p -t {session}")[1])
                    if DATA_MARKER.search(screen):
                        return i
            return None
        finally:
            tmux("kill-session", "-t", session, check=False)
            client.close()


def run_round(
    tools: list[str], commands: dict[str, str], env: dict[str, str], seconds: float,
    size: tuple[int, int], every: float = 0.0,
) -> list[Result]:  # fmt: skip
    panes: list[Pane] = []
    try:
        for tool in tools:
            pane = start_pane(tool, commands[tool], env, size)
            panes.append(pane)
            wait_first_frame(pane)
        time.sleep(SETTLE_S)
        live = [p for p in panes if not p.note]
        for p in live:
            p.cpu0 = cpu_seconds(p.pid)
        t0 = time.monotonic()
        if every > 0:  # interim figures: does either tool's cost drift as it runs?
            last = {p.tool: (cpu_seconds(p.pid), t0) for p in live}
            while time.monotonic() - t0 < seconds - 1e-3:
                time.sleep(min(every, seconds - (time.monotonic() - t0)))
                now = time.monotonic()
                parts = []
                for p in live:
                    c, (c0, s0) = cpu_seconds(p.pid), last[p.tool]
                    parts.append(f"{p.tool} {100.0 * (c - c0) / (now - s0):.2f} %")
                    last[p.tool] = (c, now)
                print(f"    {now - t0:5.0f} s: " + ", ".join(parts), flush=True)
        else:
            time.sleep(seconds)
        t1 = time.monotonic()
        results = []
        for p in panes:
            if p.note or not Path(f"/proc/{p.pid}").exists():
                results.append(
                    Result(p.tool, p.first_frame_s, None, None, None, p.note or "exited")
                )
                continue
            cpu = 100.0 * (cpu_seconds(p.pid) - p.cpu0) / (t1 - t0)
            rss, hwm = memory_mib(p.pid)
            if os.environ.get("BENCH_KEEP_SCREEN"):
                Path(f"/tmp/{p.session}.txt").write_text(
                    tmux("capture-pane", "-p", "-t", p.session, check=False)
                )
            results.append(Result(p.tool, p.first_frame_s, cpu, rss, hwm))
        return results
    finally:
        for p in panes:
            tmux("kill-session", "-t", p.session, check=False)


def warm_bytecode(env: dict[str, str], prefix: Path, nvitop: str, cwd: Path = ROOT) -> None:
    """Compile both tools' modules once into a private byte-code cache that the panes use.

    An installed package has its byte code compiled (pip does it); a checkout run with
    PYTHONDONTWRITEBYTECODE=1 would compile gputop's sources again at every start and
    count that in its first frame. Both tools get the same cache (``env -u`` in their
    commands drops PYTHONDONTWRITEBYTECODE).
    """
    env["PYTHONPYCACHEPREFIX"] = str(prefix)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    gputop_modules = "gputop.cli, gputop.sources.live, gputop.sources.nvml, gputop.ui.app"
    nvitop_python = Path(nvitop).resolve().parent / "python"
    for python, modules in (
        (sys.executable, gputop_modules),
        (str(nvitop_python) if nvitop_python.exists() else sys.executable, "nvitop.cli"),
    ):
        subprocess.run(
            [python, "-c", f"import {modules}"], env=env, cwd=cwd, check=False, capture_output=True
        )


def _f(v: float | None, spec: str) -> str:
    return "n/a" if v is None else format(v, spec)


def print_table(title: str, results: list[Result]) -> None:
    print(title)
    print(
        f"  {'tool':<8} {'first frame':>12} {'CPU % of a core':>16} {'RSS MiB':>9} {'peak MiB':>9}"
    )
    for r in results:
        print(
            f"  {r.tool:<8} {_f(r.first_frame_s, '.2f') + ' s':>12} {_f(r.cpu_percent, '.2f'):>16} "
            f"{_f(r.rss_mib, '.1f'):>9} {_f(r.peak_rss_mib, '.1f'):>9}  {r.note}"
        )


def medians(tool: str, results: list[Result]) -> Result:
    def med(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return statistics.median(known) if known else None

    mine = [r for r in results if r.tool == tool]
    return Result(
        tool,
        med([r.first_frame_s for r in mine]),
        med([r.cpu_percent for r in mine]),
        med([r.rss_mib for r in mine]),
        med([r.peak_rss_mib for r in mine]),
        f"median of {len(mine)}",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="measured window per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (medians are printed)")
    parser.add_argument("--tools", default="gputop,nvitop")
    parser.add_argument("--size", default="200x50", help="pane size, COLSxROWS")
    parser.add_argument(
        "--every", type=float, default=0.0, help="also print CPU %% every N s of the window"
    )
    parser.add_argument(
        "--hopper",
        action="store_true",
        help="the GPUs with GPM and 18 NVLink links each (SM, TC and NVL on screen)",
    )
    parser.add_argument(
        "--waiter", choices=WAITERS, default=WAITER, help="how the first frame is found"
    )
    args = parser.parse_args(argv)
    set_waiter(args.waiter)
    w, h = (int(v) for v in args.size.lower().split("x"))
    if shutil.which("tmux") is None:
        print("tmux not found", file=sys.stderr)
        return 2

    nvitop = shutil.which("nvitop") or str(Path(sys.executable).parent / "nvitop")
    commands = {
        "gputop": f"env -u PYTHONDONTWRITEBYTECODE {shlex.quote(sys.executable)} -m gputop"
        " --interval 1",
        "nvitop": f"env -u PYTHONDONTWRITEBYTECODE {shlex.quote(nvitop)} --interval 1",
    }
    tools = args.tools.split(",")
    unknown = [t for t in tools if t not in commands]
    if unknown:
        parser.error(f"unknown tool: {', '.join(unknown)}")
    children = [subprocess.Popen(["sleep", "3600"]) for _ in range(16)]
    all_results: list[Result] = []
    # A session that outlives the rounds: the private tmux server would otherwise exit
    # with the last pane of one round while the next round starts its first.
    tmux("new-session", "-d", "-s", "keep", "-x", "20", "-y", "5", "exec sleep 3600")
    try:
        with tempfile.TemporaryDirectory(prefix="gputop-bench-", ignore_cleanup_errors=True) as tmp:
            scenario = scenario_for([c.pid for c in children])
            if args.hopper:
                from bench.bench_sampler import as_hopper

                as_hopper(scenario)
            path = scenario.write(Path(tmp) / "scenario.txt")
            env = subprocess_env(path)
            env["PYTHONPATH"] = str(ROOT)
            warm_bytecode(env, Path(tmp) / "pycache", nvitop)
            print(
                f"{w}x{h} tmux panes side by side, 8 GPUs x 2 processes (fake NVML"
                f"{', Hopper: GPM and NVLink' if args.hopper else ''}), "
                f"interval 1 s, {args.seconds:.0f} s window, {os.cpu_count()} CPUs, "
                f"load average {os.getloadavg()[0]:.2f}"
            )
            for n in range(args.rounds):
                order = tools if n % 2 == 0 else tools[::-1]
                results = run_round(order, commands, env, args.seconds, (w, h), args.every)
                all_results += results
                print_table(f"round {n + 1} (started in this order):", results)
    finally:
        tmux("kill-server", check=False)
        for c in children:
            c.kill()
            c.wait()
    print_table("medians:", [medians(t, all_results) for t in tools])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
