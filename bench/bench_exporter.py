"""What the Prometheus exporter costs, side by side with nvitop-exporter, on the fake
libnvidia-ml.so.1 (8 GPUs x 16 processes, 1 s interval, PCIe calls sleeping 20 ms like
real hardware).

Not a timed test: a script that prints a table. Run from the repository root:

    python bench/bench_exporter.py [--seconds 30] [--gpus 8] [--procs 16]

Needs ``pip install -e '.[bench]'`` (nvitop-exporter). Each exporter is a fresh process
on the same scenario file; its CPU is read from /proc/PID/stat (user + system, all
threads), its memory from /proc/PID/status. Phases, for each exporter:

1. idle: ``--seconds`` without a scrape -> CPU as % of one core (sampling + diagnosis);
2. scraped once a second (what a Prometheus with ``scrape_interval: 1s`` does): the CPU
   above idle divided by the scrapes -> ms of CPU per scrape; wall latency per scrape;
3. a burst of 100 scrapes back to back (several dashboards, retries) -> CPU per scrape;
4. slow NVML: every NVML call on GPU 0 made to take 3 s; 20 scrapes -> wall latency.
   gputop answers from the last sample; an exporter that reads NVML while scraping, or
   waits for its collector, does not.

RSS is VmRSS at the end, peak is VmHWM.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests import fakenvml  # noqa: E402
from tests.helpers.exporter import free_port  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
PCIE_SLEEP_MS = 20


@dataclass
class Row:
    name: str
    idle_pct: float  # % of one core, no scrapes
    scraped_pct: float  # % of one core, scraped once a second
    per_scrape_ms: float  # CPU ms per scrape above idle, 1/s
    burst_ms: float  # CPU ms per scrape in a burst of 100
    latency_ms: float  # median wall per scrape, 1/s
    latency_max_ms: float
    slow_max_ms: float | None  # max wall per scrape while NVML is stuck
    rss_mib: float
    peak_mib: float
    body_kib: float
    series: int


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def mem_mib(pid: int) -> tuple[float, float]:
    text = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"VmRSS:\s+(\d+)", text).group(1))  # type: ignore[union-attr]
    hwm = int(re.search(r"VmHWM:\s+(\d+)", text).group(1))  # type: ignore[union-attr]
    return rss / 1024, hwm / 1024


def scrape(url: str, timeout: float = 30.0) -> tuple[float, bytes]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        body: bytes = resp.read()
    return time.perf_counter() - start, body


def wait_serving(url: str, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exporter exited {proc.returncode}")
        with contextlib.suppress(OSError):
            _, body = scrape(url, timeout=5)
            if b"gpu" in body:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not serve GPU metrics in {timeout} s")


def measure(
    name: str, argv: list[str], port: int, env: dict[str, str], scenario: Path, seconds: float
) -> Row:
    url = f"http://127.0.0.1:{port}/metrics"
    base = fakenvml.many_gpus(ARGS.gpus, ARGS.procs, pcie_sleep_ms=PCIE_SLEEP_MS)
    base.write(scenario)
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_serving(url, proc)
        time.sleep(3)  # past start-up
        # 1. idle
        c0, t0 = cpu_seconds(proc.pid), time.monotonic()
        time.sleep(seconds)
        idle = (cpu_seconds(proc.pid) - c0) / (time.monotonic() - t0)
        # 2. once a second
        lat: list[float] = []
        c0, t0 = cpu_seconds(proc.pid), time.monotonic()
        body = b""
        while time.monotonic() - t0 < seconds:
            wall, body = scrape(url)
            lat.append(wall)
            time.sleep(max(0.0, 1.0 - wall))
        elapsed = time.monotonic() - t0
        used = cpu_seconds(proc.pid) - c0
        scraped = used / elapsed
        per_scrape = max(0.0, used - idle * elapsed) / len(lat)
        # 3. a burst of 100
        c0, t0 = cpu_seconds(proc.pid), time.monotonic()
        for _ in range(100):
            scrape(url)
        burst_elapsed = time.monotonic() - t0
        burst = max(0.0, cpu_seconds(proc.pid) - c0 - idle * burst_elapsed) / 100
        rss, peak = mem_mib(proc.pid)
        # 4. NVML stuck: every call on GPU 0 takes 3 s
        base.gpus[0].sleeps_ms = {"*": 3000}
        base.write(scenario)
        slow: list[float] = []
        for _ in range(20):
            try:
                wall, _ = scrape(url, timeout=30)
            except OSError:
                wall = float("inf")
            slow.append(wall)
            time.sleep(0.25)
        series = sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))
        return Row(
            name,
            100 * idle,
            100 * scraped,
            1000 * per_scrape,
            1000 * burst,
            1000 * statistics.median(lat),
            1000 * max(lat),
            1000 * max(slow),
            rss,
            peak,
            len(body) / 1024,
            series,
        )
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def table(rows: list[Row]) -> str:
    head = (
        "| exporter | idle CPU | CPU scraped 1/s | CPU per scrape | per scrape, burst of 100 "
        "| scrape wall (median / max) | scrape wall, NVML stuck 3 s/call | RSS (peak) "
        "| scrape size |\n|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for r in rows:
        slow = "n/a" if r.slow_max_ms is None else f"{r.slow_max_ms:.1f} ms max"
        lines.append(
            f"| {r.name} | {r.idle_pct:.2f} % | {r.scraped_pct:.2f} % | {r.per_scrape_ms:.2f} ms "
            f"| {r.burst_ms:.2f} ms | {r.latency_ms:.1f} / {r.latency_max_ms:.1f} ms | {slow} "
            f"| {r.rss_mib:.1f} MiB ({r.peak_mib:.1f}) | {r.body_kib:.0f} KiB, {r.series} series |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each phase")
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--procs", type=int, default=16, help="processes per GPU")
    parser.add_argument("--skip-nvitop", action="store_true")
    global ARGS
    ARGS = parser.parse_args()
    fakenvml.build()
    rows = []
    with tempfile.TemporaryDirectory(prefix="gputop-bench-export-") as tmp:
        scenario = Path(tmp) / "scenario.txt"
        fakenvml.many_gpus(ARGS.gpus, ARGS.procs).write(scenario)
        env = fakenvml.subprocess_env(scenario)
        env["PYTHONPATH"] = str(ROOT)
        py = sys.executable
        for name, extra in (("gputop export --jobs", ["--jobs"]), ("gputop export", [])):
            port = free_port()
            argv = [py, "-m", "gputop", "export", "--listen", f"127.0.0.1:{port}", *extra]
            rows.append(measure(name, argv, port, env, scenario, ARGS.seconds))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
        if not ARGS.skip_nvitop:
            exe = shutil.which("nvitop-exporter") or str(Path(py).with_name("nvitop-exporter"))
            if not Path(exe).exists():
                print("nvitop-exporter not installed: pip install -e '.[bench]'")
            else:
                port = free_port()
                argv = [exe, "--bind-address", "127.0.0.1", "--port", str(port)]
                argv += ["--interval", "1.0"]
                rows.append(measure("nvitop-exporter 1.7", argv, port, env, scenario, ARGS.seconds))
    print()
    print(
        f"{ARGS.gpus} GPUs x {ARGS.procs} processes, 1 s interval, {ARGS.seconds:g} s per phase, "
        f"fake NVML (PCIe calls {PCIE_SLEEP_MS} ms); CPU in % of one core."
    )
    print(table(rows))
    return 0


ARGS: argparse.Namespace

if __name__ == "__main__":
    sys.exit(main())
