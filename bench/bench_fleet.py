#!/usr/bin/env python3
"""What ``gputop fleet`` costs: 32 hosts x 8 GPUs at 2 s, and one stream's remote cost.

    python bench/bench_fleet.py [--hosts 32] [--seconds 60] [--size 200x50] [--skip-remote]

1. **The fleet UI** (budget: <= 3 % of a core, RSS <= 80 MiB): ``gputop fleet --local``
   in a detached tmux pane of the given size, one stream per host replaying recorded
   lines (each host: 30 lines of ``gputop --demo --stream``, its own seed, replayed by
   ``cat`` every 2 s), so the machine is not also busy simulating 32 servers. CPU is the
   user+system time of the fleet process alone (its UI and reader threads; the replay
   children are not counted) over the window, as % of one core; RSS at the end.
2. **Key latency** (budget: <= 100 ms): headless, the fleet screen with the same 32 hosts
   x 8 GPUs at the given size; time from pressing ``s`` (re-sort) or Down until the
   app has handled it and drawn (``pilot.press`` + ``pilot.pause``), median and max.
3. **One stream's remote cost**: ``gputop --demo --stream --interval 2`` alone (what each
   host runs), CPU % and RSS over the window; then the same stream through a real
   OpenSSH server on 127.0.0.1 (tests/sshd.py): the per-connection sshd processes' CPU
   on top of it. (``--skip-remote`` leaves this part out.)

Prints figures; it is not a test. Needs tmux and, for part 3, sshd.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

from bench.bench_ui import cpu_seconds, memory_mib  # noqa: E402
from tests.builders import demo_host_lines  # noqa: E402
from tests.helpers.fleet import FakeFleet  # noqa: E402

INTERVAL = 2.0
SOCKET = f"gputop-bench-fleet-{os.getpid()}"


def tmux(*args: str, check: bool = True) -> str:
    out = subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True, check=check)
    return out.stdout


def record(tmp: Path, hosts: int, lines: int = 30) -> list[Path]:
    """Per host a directory of single-line files (cat replays them)."""
    dirs = []
    for n in range(hosts):
        d = tmp / f"host{n:02d}"
        d.mkdir()
        for i, data in enumerate(demo_host_lines(n, lines, start=1_800_000_000.0 + 977.0 * n)):
            (d / f"{i:03d}.json").write_text(json.dumps(data, separators=(",", ":")) + "\n")
        dirs.append(d)
    return dirs


def descendants_cpu(pid: int) -> float:
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
            ppid = int(stat.rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            total += cpu_seconds(int(entry)) + descendants_cpu(int(entry))
    return total


def fleet_ui(hosts: int, seconds: float, size: tuple[int, int]) -> None:
    with tempfile.TemporaryDirectory(prefix="gputop-bench-fleet-") as tmp_s:
        tmp = Path(tmp_s)
        record(tmp, hosts)
        replay = tmp / "replay.sh"
        replay.write_text(
            '#!/bin/sh\nwhile :; do for f in "$1"/*.json; do cat "$f"; sleep 2; done; done\n'
        )
        replay.chmod(0o755)
        names = [f"host{n:02d}" for n in range(hosts)]
        remote = f"{replay} {tmp}/{{host}}"
        cmd = [
            sys.executable, "-m", "gputop", "fleet", "--local", "--interval", "2",
            "--remote-command", remote, *names,
        ]  # fmt: skip
        w, h = size
        tmux(
            "-f", "/dev/null", "new-session", "-d", "-s", "fleet", "-x", str(w), "-y", str(h),
            "-c", str(ROOT), f"exec {shlex.join(cmd)}",
        )  # fmt: skip
        try:
            pid = int(tmux("list-panes", "-t", "fleet", "-F", "#{pane_pid}").split()[0])
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if tmux("capture-pane", "-p", "-t", "fleet").count("live") >= min(hosts, 20):
                    break
                time.sleep(0.2)
            time.sleep(4.0)  # settle: every host connected, first frames drawn
            cpu0, t0 = cpu_seconds(pid), time.monotonic()
            time.sleep(seconds)
            cpu1, t1 = cpu_seconds(pid), time.monotonic()
            rss, hwm = memory_mib(pid)
            screen = tmux("capture-pane", "-p", "-t", "fleet")
            live = sum(1 for line in screen.splitlines() if " live " in f" {line} ")
            print(
                f"fleet UI, {hosts} hosts x 8 GPUs at {INTERVAL:g} s, {w}x{h} tmux pane, "
                f"{seconds:.0f} s: CPU {100 * (cpu1 - cpu0) / (t1 - t0):.2f} % of a core, "
                f"RSS {rss:.0f} MiB (peak {hwm:.0f} MiB); rows live on screen: {live}"
            )
        finally:
            tmux("kill-server", check=False)


async def key_latency(hosts: int, size: tuple[int, int], presses: int = 30) -> None:
    """As bench/bench_ui_scale.py measures the dashboard: the key goes in as the terminal
    driver sends it; timed until the screen's state changed and the repaint is processed
    (``pilot.press`` would also wait for the whole process to go idle)."""
    from textual import events

    from gputop.ui.fleet import FleetApp

    names = [f"host{n:02d}" for n in range(hosts)]
    fleet = FakeFleet(names, interval=INTERVAL)
    for n, name in enumerate(names):
        fleet.feed(name, demo_host_lines(n, 6, start=1_800_000_000.0 + 977.0 * n)[-1])
    app = FleetApp(fleet)  # type: ignore[arg-type]
    out: dict[str, list[float]] = {"s": [], "down": []}
    redraws: list[float] = []
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        screen = app.fleet_screen
        original = screen.redraw

        def timed() -> None:
            t = time.perf_counter()
            original()
            redraws.append(time.perf_counter() - t)

        screen.redraw = timed  # type: ignore[method-assign]
        for _ in range(presses):
            for key in ("s", "down"):
                before = (screen.sort_key, screen.cursor, screen.frames)
                t0 = time.perf_counter()
                event = events.Key(key, "s" if key == "s" else None)
                event.set_sender(app)
                assert app._driver is not None
                app._driver.send_message(event)
                while (screen.sort_key, screen.cursor, screen.frames) == before:
                    await asyncio.sleep(0.002)
                await pilot._wait_for_screen()
                out[key].append(time.perf_counter() - t0)
    for key, values in out.items():
        print(
            f"key latency ({key!r}, {hosts} hosts x 8 GPUs, {size[0]}x{size[1]}, headless, "
            f"{len(values)} presses): median {statistics.median(values) * 1000:.0f} ms, "
            f"max {max(values) * 1000:.0f} ms"
        )
    print(
        f"fleet screen redraw ({hosts} hosts): median {statistics.median(redraws) * 1000:.1f} ms,"
        f" max {max(redraws) * 1000:.1f} ms"
    )


def _stream_cost(what: str, seconds: float, env: dict[str, str] | None = None) -> None:
    args = ["--demo"] if what == "demo" else []
    cmd = [sys.executable, "-m", "gputop", *args, "--stream", "--interval", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, cwd=ROOT, env=env)
    try:
        time.sleep(4.0)
        cpu0, t0 = cpu_seconds(proc.pid), time.monotonic()
        time.sleep(seconds)
        cpu1, t1 = cpu_seconds(proc.pid), time.monotonic()
        rss, _ = memory_mib(proc.pid)
        print(
            f"one stream, gputop --stream --interval 2 alone ({what}), {seconds:.0f} s: "
            f"CPU {100 * (cpu1 - cpu0) / (t1 - t0):.2f} % of a core, RSS {rss:.0f} MiB"
        )
    finally:
        proc.terminate()
        proc.wait()


def remote_cost(seconds: float) -> None:
    _stream_cost("demo", seconds)
    from bench.bench_ui import scenario_for
    from tests import fakenvml

    try:
        fakenvml.build()
    except fakenvml.FakeNvmlUnavailable as exc:
        print(f"(fake NVML stream: skipped, {exc})")
    else:
        children = [subprocess.Popen(["sleep", "3600"]) for _ in range(16)]
        try:
            with tempfile.TemporaryDirectory() as tmp:
                path = scenario_for([c.pid for c in children]).write(Path(tmp) / "s.txt")
                env = fakenvml.subprocess_env(path)
                _stream_cost("fake NVML, 8 GPUs x 2 processes", seconds, env)
        finally:
            for c in children:
                c.kill()
                c.wait()
    from tests import sshd

    if sshd.missing():
        print(f"(over ssh: skipped, {sshd.missing()})")
        return
    with tempfile.TemporaryDirectory(prefix="gputop-bench-ssh-") as tmp_s:
        lab = sshd.SshLab(Path(tmp_s))
        try:
            server = lab.server("host1")
            ssh = subprocess.Popen(
                [
                    "ssh", "-F", str(lab.ssh_config), "-o", "BatchMode=yes", "-T", "host1",
                    f"{lab.remote_command} --stream --interval 2",
                ],
                stdout=subprocess.DEVNULL,
            )  # fmt: skip
            time.sleep(6.0)
            assert server.proc is not None
            listener = server.proc.pid
            sshd0 = descendants_cpu(listener)
            remote = lab.remote_pids_running()
            g0 = sum(cpu_seconds(p) for p in remote)
            c0, t0 = cpu_seconds(ssh.pid), time.monotonic()
            time.sleep(seconds)
            t1 = time.monotonic()
            g1 = sum(cpu_seconds(p) for p in remote)
            sshd1 = descendants_cpu(listener)
            c1 = cpu_seconds(ssh.pid)
            span = t1 - t0
            print(
                f"one stream over ssh (OpenSSH on 127.0.0.1), {seconds:.0f} s: remote gputop "
                f"{100 * (g1 - g0) / span:.2f} %, remote sshd "
                f"{100 * (sshd1 - sshd0 - (g1 - g0)) / span:.2f} % of a core; "
                f"local ssh client {100 * (c1 - c0) / span:.2f} %"
            )
            ssh.terminate()
            ssh.wait()
        finally:
            lab.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    p.add_argument("--hosts", type=int, default=32)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--size", default="200x50")
    p.add_argument("--skip-remote", action="store_true")
    p.add_argument("--skip-ui", action="store_true", help="only the key latency and remote cost")
    args = p.parse_args()
    w, h = (int(x) for x in args.size.split("x"))
    if not args.skip_ui:
        fleet_ui(args.hosts, args.seconds, (w, h))
    asyncio.run(key_latency(args.hosts, (w, h)))
    if not args.skip_remote:
        remote_cost(args.seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
