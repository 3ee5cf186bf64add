"""``gputop export``: a Prometheus exporter with verdicts and jobs (docs/exporter.md)."""

from __future__ import annotations

import argparse
import errno
import signal
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gputop import argtypes, gcpolicy
from gputop.argtypes import EXIT_OK, EXIT_USAGE, Parser, ascii_whole, is_ascii_digits
from gputop.sources.base import DEMO_NODES

if TYPE_CHECKING:
    from gputop.sources.base import Source


def parse_listen(text: str) -> tuple[str, int]:
    """'127.0.0.1:9867', ':9867' (all interfaces), '[::1]:9867', '9867' (loopback): (host, port)"""
    from gputop.exporter.server import DEFAULT_HOST

    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = DEFAULT_HOST, text
    elif host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise argparse.ArgumentTypeError(f"{text!r}: write an IPv6 address as [ADDR]:PORT")
    elif host == "":
        host = "0.0.0.0"
    if not is_ascii_digits(port_text) or not 0 <= int(port_text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r}: expected HOST:PORT with a port 0-65535")
    return host, int(port_text)


def _positive_int(text: str) -> int:
    if not is_ascii_digits(text) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a whole number of at least 1 expected")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    from gputop.exporter.metrics import DEFAULT_MAX_JOBS
    from gputop.exporter.server import DEFAULT_HOST, DEFAULT_PORT

    p = Parser(
        prog="gputop export",
        description=(
            "Serve GPU metrics, jobs and verdicts to Prometheus at /metrics. Binds "
            f"{DEFAULT_HOST}:{DEFAULT_PORT} unless told otherwise; put it behind a reverse "
            "proxy for TLS or remote access (see docs/exporter.md)."
        ),
        epilog="exit codes: 0 stopped by SIGTERM/SIGINT, 1 unexpected failure, "
        "2 bad argument or the port is taken",
    )
    p.add_argument(
        "--listen",
        type=parse_listen,
        default=(DEFAULT_HOST, DEFAULT_PORT),
        metavar="HOST:PORT",
        help=f"address to serve on (default {DEFAULT_HOST}:{DEFAULT_PORT}; :PORT = all "
        "interfaces, port 0 = any free port)",
    )
    p.add_argument(
        "--interval", type=argtypes.interval, metavar="SECONDS", help="seconds between samples (1)"
    )
    p.add_argument(
        "--jobs",
        action="store_true",
        help="add per-job and per-owner series (user, command, gpus; namespace, pod, container,"
        " slurm_job; no pids), and the probe's CUDA memory per process (pid, device)",
    )
    p.add_argument(
        "--max-jobs",
        type=_positive_int,
        metavar="N",
        help=f"with --jobs: the top N jobs by GPU memory (default {DEFAULT_MAX_JOBS})",
    )
    p.add_argument("--demo", action="store_true", help="export a simulated 8-GPU server")
    p.add_argument("--seed", type=ascii_whole, help="random seed of the demo (with --demo)")
    p.add_argument(
        "--demo-node",
        choices=DEMO_NODES,
        help="the demo's server (with --demo), as for the dashboard: h200-probe's jobs run "
        "gputop's probe (the data-wait and allocator series)",
    )
    p.add_argument(
        "--gpus",
        type=argtypes.gpus,
        metavar="LIST",
        help="export only these GPUs (indices or UUIDs)",
    )
    p.add_argument(
        "--window",
        type=argtypes.window,
        metavar="SECONDS",
        help="seconds of history verdicts judge",
    )
    p.add_argument(
        "--threshold", action="append", metavar="NAME=VALUE", help="verdict threshold override"
    )
    p.add_argument("--config", metavar="PATH", help="settings file (as for the dashboard)")
    return p


def make_source(args: argparse.Namespace) -> Source:
    """The demo, or the live host without the CPU frequency (no metric carries it, and
    reading it is costly on a many-core server)."""
    from gputop import sampler

    if args.demo and args.demo_node is not None:
        import time

        from gputop.sources.demo import DemoSource

        return DemoSource(args.seed or 0, clock=time.time, node=args.demo_node)
    return sampler.make_source(args.demo, args.seed, cpu_freq=False)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.seed is not None and not args.demo:
        parser.error("--seed needs --demo")
    if args.demo_node is not None and not args.demo:
        parser.error("--demo-node needs --demo")
    if args.max_jobs is not None and not args.jobs:
        parser.error("--max-jobs needs --jobs")

    from gputop.config import ConfigError, load_config, with_overrides
    from gputop.exporter.metrics import DEFAULT_MAX_JOBS
    from gputop.exporter.server import ExportState, serve, warn
    from gputop.model import Snapshot
    from gputop.sampler import Sampler

    try:
        config = with_overrides(
            load_config(args.config),
            interval=args.interval,
            window=args.window,
            thresholds=args.threshold or (),
        )
    except ConfigError as exc:
        parser.error(str(exc))

    state = ExportState(
        config.thresholds,
        interval=config.interval,
        with_jobs=args.jobs,
        max_jobs=DEFAULT_MAX_JOBS if args.max_jobs is None else args.max_jobs,
    )
    host, port = args.listen
    try:
        server = serve((host, port), state)
    except OSError as exc:
        why = "address already in use" if exc.errno == errno.EADDRINUSE else exc.strerror
        print(f"gputop export: cannot listen on {host}:{port}: {why or exc}", file=sys.stderr)
        return EXIT_USAGE

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda _signum, _frame: stop.set())

    source = make_source(args)
    # The state's feed keeps the history the verdicts need.
    sampler = Sampler(source, interval=config.interval, history=1)
    bound_host, bound_port = str(server.server_address[0]), int(server.server_address[1])
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    try:
        first = sampler.tick_now()
        if args.gpus is not None and first.driver.available:
            from gputop.present import resolve_gpu_selection

            try:
                state.selection = resolve_gpu_selection(args.gpus, first.gpus)
            except ValueError as exc:
                print(f"gputop export: error: {exc}", file=sys.stderr)
                return EXIT_USAGE
        announced: list[str | None] = [None]

        def on_snapshot(snap: Snapshot) -> None:
            why = None if snap.driver.available else (snap.driver.error or "unknown reason")
            if why != announced[0]:
                if why is not None:
                    warn(
                        f"NVIDIA driver not available: {why} Serving the host-only "
                        "self-health series (gputop_driver_available 0)."
                    )
                elif announced[0] is not None:
                    warn("NVIDIA driver available again")
                announced[0] = why
            state.on_snapshot(snap)

        on_snapshot(first)
        sampler.on_snapshot = on_snapshot
        gcpolicy.tune()  # as the dashboard: the history is immutable and bounded
        sampler.start()
        warn(
            f"serving http://{shown}:{bound_port}/metrics "
            f"(source: {first.source}, every {config.interval:g} s"
            f"{', with jobs' if args.jobs else ''})"
        )
        while not stop.wait(3600):
            pass
        return EXIT_OK
    finally:
        server.shutdown()
        server.server_close()
        sampler.stop()
