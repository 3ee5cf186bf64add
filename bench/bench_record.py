"""Costs of ``gputop record`` and ``gputop replay`` on the demo fleet (8 GPUs, 35 host
processes) at a 1 s interval. Not a timed test: a script that prints figures. Run from
the repository root:

    python bench/bench_record.py [--real 60] [--hours 24] [--keep DIR] [--starts 5]

1. Disk: one hour of the demo (3,600 snapshots on its virtual clock, a block flushed
   every 60 s, as ``gputop record`` does) written by the Recorder; bytes per hour,
   side by side with plain JSON lines and zstandard-compressed JSON lines.
2. Recorder CPU and RSS over that simulated hour, in this process: CPU time of
   (demo tick + Recorder.add) per second of recorded time, RSS every 10 minutes. The
   demo's clock is simulated, the work per snapshot is the real work.
3. Recorder CPU for real: ``gputop record --demo`` for ``--real`` seconds of wall time
   (``--real 3600 --hours 0``: the real hour, sampled every 5 minutes),
   CPU (utime + stime from /proc) of the process after a 10 s warm-up, RSS at the start
   and the end of that window. Includes the sampler thread and the demo's simulation.
4. Replay of a ``--hours`` recording (made once, kept in ``--keep``): opening it (the
   block index), the first frame's data (the snapshot, its 10 minutes of history,
   decoded, and its diagnosis), 1-hour jumps as the dashboard makes them (the player's
   ``goto``, no thread): "frame at the cursor" = until the snapshot at the new cursor is
   handed to the dashboard (its block decoded), "verdicts ready" = until the 10-minute
   look-back is decoded and judged (the diagnosis the dashboard then shows), and RSS
   while jumping across the whole recording. With the cyclic GC set as the dashboard
   runs it (``gputop.gcpolicy``; ``--default-gc``: Python's defaults).
5. ``gputop replay DIR`` on that recording for real, from process start in a pty
   (120x40) until the header with REPLAY is on the terminal (Python start-up, imports,
   Textual start-up, opening the recording, the first frame painted), ``--starts``
   times.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import pty
import resource
import select
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import zstandard  # noqa: E402

from gputop import gcpolicy  # noqa: E402
from gputop.analysis.thresholds import DEFAULT  # noqa: E402
from gputop.diagnosis import lookback_seconds  # noqa: E402
from gputop.model import Snapshot  # noqa: E402
from gputop.pipeline import Feed  # noqa: E402
from gputop.record.player import Player  # noqa: E402
from gputop.record.store import Recorder, Recording  # noqa: E402
from gputop.sources.demo import DEMO_EPOCH, DemoSource  # noqa: E402

HOUR = 3600


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def disk_and_cpu(tmp: Path) -> None:
    out = tmp / "hour"
    src = DemoSource(0, start_time=DEMO_EPOCH, step=1.0)
    # As `gputop record` writes: the first sample alone, at once, then the hour's segment.
    rec = Recorder(out, interval=1.0, retain=None, max_size=None, first_alone=True)
    jsonl = 0
    zc = zstandard.ZstdCompressor(level=3).compressobj()
    zbytes = 0
    rss = [rss_mib()]
    cpu = 0.0
    for i in range(HOUR):
        c0 = time.process_time()
        snap = src.snapshot()
        rec.add(snap)
        cpu += time.process_time() - c0
        line = (json.dumps(snap.to_dict(), separators=(",", ":")) + "\n").encode()
        jsonl += len(line)
        zbytes += len(zc.compress(line))
        if (i + 1) % 600 == 0:
            rss.append(rss_mib())
    c0 = time.process_time()
    rec.close()
    cpu += time.process_time() - c0
    zbytes += len(zc.flush())
    size = sum(p.stat().st_size for p in out.glob("*.rec"))
    print("== 1. disk, one hour of the demo fleet at 1 s")
    print(f"  gputop record            {size / 1e6:6.2f} MB/hour ({size / 2**20:.2f} MiB)")
    print(f"  JSON lines               {jsonl / 1e6:6.1f} MB/hour")
    print(f"  JSON lines + zstd -3     {zbytes / 1e6:6.2f} MB/hour")
    print("== 2. recorder over the simulated hour (this process)")
    print(
        f"  CPU {cpu:.1f} s for 3,600 snapshots: {cpu / HOUR * 100:.3f} % of a core at 1 s "
        f"(demo tick + flatten + encode + zstd + write)"
    )
    print("  RSS every 10 min (MiB): " + " ".join(f"{r:.1f}" for r in rss))


def real_run(tmp: Path, seconds: float) -> None:
    out = tmp / "real"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputop", "record", "--demo", "--dir", str(out)],
        env=env,
        stderr=subprocess.DEVNULL,
    )
    tick = os.sysconf("SC_CLK_TCK")

    def sample() -> tuple[float, float]:
        with open(f"/proc/{proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{proc.pid}/statm") as f:
            rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
        return (int(fields[11]) + int(fields[12])) / tick, rss

    every = min(300.0, max(seconds / 6, 1.0))
    series: list[tuple[float, float, float]] = []  # (seconds since warm-up, CPU s, RSS MiB)
    try:
        time.sleep(10)
        cpu0, rss0 = sample()
        t0 = time.monotonic()
        series.append((0.0, 0.0, rss0))
        while (left := seconds - (time.monotonic() - t0)) > 0:
            time.sleep(min(every, left))
            cpu, rss = sample()
            series.append((time.monotonic() - t0, cpu - cpu0, rss))
        cpu1, rss1 = sample()
        wall = time.monotonic() - t0
    finally:
        proc.terminate()
        proc.wait(30)
    print(f"== 3. gputop record --demo for real, {wall:.0f} s after a 10 s warm-up")
    print(
        f"  CPU {cpu1 - cpu0:.2f} s: {(cpu1 - cpu0) / wall * 100:.2f} % of a core; "
        f"RSS {rss0:.1f} -> {rss1:.1f} MiB"
    )
    if len(series) > 2:
        print("  every ~" + f"{every:.0f} s: minute, CPU so far (% of a core), RSS (MiB)")
        for at, cpu, rss in series[1:]:
            print(f"    {at / 60:6.1f} min  {cpu / at * 100:5.2f} %  {rss:6.1f} MiB")


def make_long(directory: Path, hours: float) -> None:
    if any(directory.glob("*.rec")):
        return
    print(f"(recording {hours:g} hours of the demo into {directory}: a few minutes, once)")
    src = DemoSource(0, start_time=DEMO_EPOCH, step=1.0)
    rec = Recorder(directory, interval=1.0, retain=None, max_size=None)
    for _ in range(int(hours * HOUR)):
        rec.add(src.snapshot())
    rec.close()


def replay(directory: Path, hours: float) -> None:
    lookback = lookback_seconds(DEFAULT)
    rss0 = rss_mib()
    t0 = time.perf_counter()
    rec = Recording(directory)
    opened = time.perf_counter() - t0
    player = Player(rec, lookback=lookback)
    feed = Feed()
    player.tick_now()
    shown = time.perf_counter() - t0
    feed.frame(player.load(player.position).history)
    first = time.perf_counter() - t0
    size = sum(p.stat().st_size for p in directory.glob("*.rec"))
    print(f"== 4. replay of {hours:g} hours ({len(rec):,} snapshots, {size / 1e6:.1f} MB)")
    print(f"  open (index of {len(rec.blocks):,} blocks)     {opened * 1000:7.0f} ms")
    print(f"  first frame's data: the newest snapshot             {shown * 1000:7.0f} ms")
    print(
        f"  ... and its {lookback:.0f} s of history decoded and judged (+ the window after) "
        f"{first * 1000:7.0f} ms"
    )
    frames: list[float] = []
    ready: list[float] = []
    marks: dict[str, float] = {}

    def handed(snap: Snapshot) -> None:
        # The dashboard's callback (ReplayApp._from_sampler_thread): a complete frame is
        # judged here, on the player's thread.
        frame = player.frame()
        assert frame is not None
        now = time.perf_counter()
        marks.setdefault("frame", now)
        if frame.complete and "ready" not in marks:
            feed.frame(frame.history)
            marks["ready"] = time.perf_counter()

    player.on_snapshot = handed
    rss = [rss_mib()]
    pos = len(rec) - 1
    while True:
        here = rec[pos].time
        target = rec.position(here - HOUR)
        if target == 0 or target >= pos:
            break
        rec._cache.clear()  # as if the hour before were never visited (position() decodes)
        marks.clear()
        t = time.perf_counter()
        player.goto(here - HOUR)
        frames.append(marks["frame"] - t)
        ready.append(marks["ready"] - t)
        rss.append(rss_mib())
        pos = player.position
    if frames:
        print(
            f"  1-hour jumps ({len(frames)}), frame at the cursor: median "
            f"{statistics.median(frames) * 1000:.0f} ms, max {max(frames) * 1000:.0f} ms"
        )
        print(
            f"  1-hour jumps, verdicts ready ({lookback:.0f} s of history decoded + diagnosis): "
            f"median {statistics.median(ready) * 1000:.0f} ms, max {max(ready) * 1000:.0f} ms"
        )
    print(
        f"  RSS: before opening {rss0:.0f} MiB, after each jump (MiB): "
        + " ".join(f"{r:.0f}" for r in rss)
    )


def first_frame_in_a_pty(directory: Path, runs: int) -> None:
    """``gputop replay DIR`` from process start until REPLAY is on the terminal."""
    times: list[float] = []
    env = dict(os.environ, PYTHONPATH=str(ROOT), TERM="xterm-256color", COLUMNS="120")
    env.pop("NO_COLOR", None)
    for _ in range(runs):
        t0 = time.perf_counter()
        pid, fd = pty.fork()
        if pid == 0:  # the child: the terminal's side
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
            os.execve(
                sys.executable, [sys.executable, "-m", "gputop", "replay", str(directory)], env
            )
        seen = b""
        found = None
        try:
            while time.perf_counter() - t0 < 30:
                ready, _, _ = select.select([fd], [], [], 0.5)
                if not ready:
                    continue
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                seen = seen[-64:] + chunk
                if b"REPLAY" in seen:
                    found = time.perf_counter() - t0
                    break
        finally:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                if select.select([fd], [], [], 0.05)[0]:
                    with contextlib.suppress(OSError):
                        os.read(fd, 65536)  # drain: the app restores the terminal on exit
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
            else:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            os.close(fd)
        if found is None:
            raise SystemExit("gputop replay never drew its REPLAY header")
        times.append(found)
        time.sleep(0.5)
    print(
        f"== 5. gputop replay DIR in a pty (120x40), process start to REPLAY on screen, {runs} runs"
    )
    print(
        f"  median {statistics.median(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms "
        f"(each: " + " ".join(f"{t * 1000:.0f}" for t in times) + ")"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--real", type=float, default=60, help="seconds of the real run (0: skip)")
    p.add_argument(
        "--hours", type=float, default=24, help="hours of the replayed recording (0: skip)"
    )
    p.add_argument("--keep", type=Path, help="where the long recording is kept between runs")
    p.add_argument("--starts", type=int, default=5, help="runs of section 5 (0: skip)")
    p.add_argument("--default-gc", action="store_true", help="section 4 with Python's GC defaults")
    p.add_argument(
        "--only-replay", action="store_true", help="sections 4 and 5 only (no recording costs)"
    )
    args = p.parse_args()
    resource.setrlimit(resource.RLIMIT_NOFILE, resource.getrlimit(resource.RLIMIT_NOFILE))
    with tempfile.TemporaryDirectory(prefix="gputop-bench-record-") as tmp:
        if not args.only_replay:
            disk_and_cpu(Path(tmp))
            if args.real > 0:
                real_run(Path(tmp), args.real)
        if args.hours > 0:
            long_dir = args.keep or Path(tmp) / "long"
            long_dir.mkdir(parents=True, exist_ok=True)
            make_long(long_dir, args.hours)
            with contextlib.nullcontext() if args.default_gc else gcpolicy.tuned():
                replay(long_dir, args.hours)
            if args.starts > 0:
                first_frame_in_a_pty(long_dir, args.starts)


if __name__ == "__main__":
    main()
