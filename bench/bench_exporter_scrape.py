"""CPU of one uncached scrape of ``gputop export``, measured inside the exporter's process
(8 GPUs x 16 processes on the fake libnvidia-ml.so.1, as bench_exporter.py).

``bench_exporter.py`` gets the CPU per scrape by subtraction (CPU while scraped once a
second minus the idle CPU of the phase before): on a shared machine, and while the
history still fills up (the diagnosis grows with it), that difference is noisy by about
+-1 ms. Here each round takes a fresh tick (so the scrape cannot come from the per-tick
cache), then scrapes once over a real socket, and counts the process CPU of the scrape
minus the client's own thread: the server thread, HTTP parsing, building the families,
encoding, gzip. Median of ``--rounds`` scrapes, for the plain text format (a client
without an Accept header) and for what Prometheus asks for (OpenMetrics, gzip).

The fake library's values do not move from tick to tick, and the encoders reuse a
series' line while its value is unchanged; on real GPUs utilization, power, PCIe and the
verdict counters move every second. So a third figure is the worst case: Prometheus's
format with every value changed since the last scrape (each series' remembered value is
made NaN before the scrape, which never equals anything: every line is written afresh).
Each client connects once per scrape (Connection: close; Prometheus itself keeps its
connection open, which saves the new connection and its handler thread).

With ``--hopper`` the GPUs are H100s with GPM and NVLink (tests/fakenvml ``hopper``):
the scrape then carries the activity and NVLink families too (each tick waits GPM's
100 ms between samples first, in wall time, which the CPU figures do not count).

    python bench/bench_exporter_scrape.py [--rounds 40] [--gpus 8] [--procs 16] [--hopper]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
    "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)


def child(rounds: int, jobs: bool, hopper: bool = False) -> None:
    import socket
    import statistics
    import time

    from gputop.exporter.server import ExportState, serve
    from gputop.sampler import Sampler
    from gputop.sources.host import HostReader
    from gputop.sources.live import LiveSource

    state = ExportState(interval=1.0, with_jobs=jobs)
    source = LiveSource(host=HostReader(cpu_freq=False))  # as gputop export makes it
    sampler = Sampler(source, interval=1.0, history=1)  # as gputop export
    server = serve(("127.0.0.1", 0), state)
    port = int(server.server_address[1])

    def get(accept: str, gz: bool) -> None:
        with socket.create_connection(("127.0.0.1", port)) as s:
            head = f"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAccept: {accept}\r\n"
            s.sendall((head + ("Accept-Encoding: gzip\r\n" if gz else "") + "\r\n").encode())
            while s.recv(65536):
                pass

    def tick() -> None:
        if hopper:
            time.sleep(0.11)  # GPM needs 100 ms between its two samples
        state.on_snapshot(sampler.tick_now())

    for _ in range(3):
        tick()
        get("", False)

    def every_value_new() -> None:
        nan = float("nan")
        for encoder in (server._text, server._openmetrics):
            lines = encoder._lines
            for key, (_, line, prefix) in lines.items():
                lines[key] = (nan, line, prefix)

    out = []
    for name, accept, gz, new in (
        ("text", "", False, False),
        ("Prometheus (OpenMetrics, gzip)", PROMETHEUS_ACCEPT, True, False),
        ("Prometheus, every value new", PROMETHEUS_ACCEPT, True, True),
    ):
        per = []
        for _ in range(rounds):
            tick()
            if new:
                every_value_new()
            p0, c0 = time.process_time(), time.thread_time()
            get(accept, gz)
            c1, p1 = time.thread_time(), time.process_time()
            per.append((p1 - p0) - (c1 - c0))
        out.append(f"{name}: {1000 * statistics.median(per):.2f} ms")
    text, _ = server.body("", False)
    om, _ = server.body(PROMETHEUS_ACCEPT, False)
    om_gz, _ = server.body(PROMETHEUS_ACCEPT, True)
    sizes = f"{len(text)} B text, {len(om)} B OpenMetrics, {len(om_gz)} B gzipped"
    server.shutdown()
    server.server_close()
    print(
        f"gputop export{' --jobs' if jobs else ''}{' (hopper)' if hopper else ''}: "
        "CPU per uncached scrape, median: " + ", ".join(out) + f" ({sizes})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--procs", type=int, default=16)
    parser.add_argument("--hopper", action="store_true", help="H100s with GPM and NVLink")
    parser.add_argument("--child", choices=("plain", "jobs"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.rounds, args.child == "jobs", args.hopper)
        return 0
    from tests import fakenvml

    fakenvml.build()
    with tempfile.TemporaryDirectory(prefix="gputop-bench-scrape-") as tmp:
        scenario = Path(tmp) / "scenario.txt"
        made = fakenvml.many_gpus(args.gpus, args.procs, pcie_sleep_ms=0)
        if args.hopper:
            for i, gpu in enumerate(made.gpus):
                inside = fakenvml.hopper(i, len(made.gpus))
                for part in ("name", "gpm", "gpm_metrics", "nvlink_version", "nvlinks"):
                    setattr(gpu, part, getattr(inside, part))
                gpu.nvlink_kib_step = inside.nvlink_kib_step
        made.write(scenario)
        env = fakenvml.subprocess_env(scenario)
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        for kind in ("jobs", "plain"):
            argv = [sys.executable, __file__, "--child", kind, "--rounds", str(args.rounds)]
            argv += ["--hopper"] if args.hopper else []
            subprocess.run(argv, env=env, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
