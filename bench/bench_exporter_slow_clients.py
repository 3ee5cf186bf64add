"""``gputop export --demo`` under slow clients: the RSS and threads of the exporter process
while ``--clients`` connections each send half a request and then nothing (a slowloris),
and whether a scrape is still answered meanwhile.

Phases: idle (after a few scrapes, settled), then every slow client connected and held
for ``--hold`` seconds (RSS and threads sampled each 0.5 s: the peak is reported), then
all closed. The exporter closes a connection that waits more than its request timeout,
and past its cap the one idle longest: the peak RSS should stay within 5 MiB of idle.

    python bench/bench_exporter_slow_clients.py [--clients 1000] [--hold 15]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import resource
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent
SERVING = re.compile(r"serving (http://\S+)/metrics")


def _status(pid: int) -> tuple[float, int]:
    """(RSS in MiB, threads) of ``pid``."""
    text = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"VmRSS:\s+(\d+)", text).group(1)) / 1024  # type: ignore[union-attr]
    threads = int(re.search(r"Threads:\s+(\d+)", text).group(1))  # type: ignore[union-attr]
    return rss, threads


def _scrape(url: str) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        r.read()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--hold", type=float, default=15.0, help="seconds the clients stay")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, args.clients + 256)), hard))

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "gputop", "export", "--demo", "--listen", "127.0.0.1:0"]
    with tempfile.TemporaryFile("w+") as err:  # read at the end: a full pipe would block
        proc = subprocess.Popen(cmd, stderr=err, text=True, env=env, cwd=ROOT)
        try:
            deadline = time.monotonic() + 30
            while not (match := SERVING.search(_read(err))):
                assert time.monotonic() < deadline and proc.poll() is None, _read(err)
                time.sleep(0.05)
            url = match.group(1)
            host, port = url.rsplit("/", 1)[1].rsplit(":", 1)
            for _ in range(5):
                _scrape(url)
                time.sleep(1.0)
            idle_rss, idle_threads = _status(proc.pid)

            clients: list[socket.socket] = []
            for _ in range(args.clients):
                s = socket.create_connection((host, int(port)), timeout=30)
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
                clients.append(s)
            peak_rss, peak_threads = _status(proc.pid)
            scrape_s = _scrape(url)
            end = time.monotonic() + args.hold
            while time.monotonic() < end:
                rss, threads = _status(proc.pid)
                peak_rss, peak_threads = max(peak_rss, rss), max(peak_threads, threads)
                time.sleep(0.5)
            closed = 0
            for s in clients:  # how many the exporter closed: a read sees the end at once
                s.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    closed += s.recv(1) == b""
            for s in clients:
                s.close()
            time.sleep(2.0)
            after_rss, after_threads = _status(proc.pid)
        finally:
            proc.terminate()
            proc.wait(30)
        said = _read(err).splitlines()[1:]
    print(f"slow clients:            {args.clients} (held {args.hold:g} s)")
    print(f"RSS idle / peak / after: {idle_rss:.1f} / {peak_rss:.1f} / {after_rss:.1f} MiB")
    print(f"peak - idle:             {peak_rss - idle_rss:+.1f} MiB")
    print(f"threads idle / peak / after: {idle_threads} / {peak_threads} / {after_threads}")
    print(f"a scrape meanwhile:      {scrape_s * 1000:.0f} ms")
    print(f"closed by the exporter before the clients left: {closed}")
    print(f"lines on stderr after the first: {len(said)}")


def _read(f: IO[str]) -> str:
    f.seek(0)
    return f.read()


if __name__ == "__main__":
    main()
