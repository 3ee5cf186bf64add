"""The exporter: sampler -> diagnosis -> a Collector, served over HTTP. A tick only diagnoses
and counts; a scrape never calls NVML, and the families and the encoded body are built once
per tick (docs/exporter.md, "How it works")."""

from __future__ import annotations

import contextlib
import gzip
import queue
import socket
import sys
import threading
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client.core import Metric
from prometheus_client.exposition import choose_encoder, generate_latest, gzip_accepted
from prometheus_client.openmetrics.exposition import UNDERSCORES
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector, CollectorRegistry

from gputop.analysis.jobs import Job
from gputop.analysis.thresholds import DEFAULT, Thresholds
from gputop.exporter import metrics
from gputop.exporter.encode import OpenMetricsEncoder, TextEncoder
from gputop.model import Snapshot, Verdict
from gputop.pipeline import Feed, Frame
from gputop.present import filter_gpus

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9867
#: The name of the threads that serve connections.
HANDLER = "gputop-http-conn"
#: The fastest gzip level: much less CPU than the default for a few more bytes.
GZIP_LEVEL = 1
#: The OpenMetrics variant Prometheus asks for first (the cached encoder writes it).
_OPENMETRICS_1 = {"escaping": UNDERSCORES, "version": "1.0.0"}
#: The newest frame's snapshot, GPU verdicts, jobs and job verdicts: metrics.build's first.
_Latest = tuple[Snapshot | None, dict[int, Verdict], tuple[Job, ...], dict[str, Verdict]]


class ExportState(Collector):
    """What the sampler thread (``on_snapshot``) hands to the scrapes (``families``), and
    the registry's collector of it (never calls NVML)."""

    def __init__(
        self,
        thresholds: Thresholds = DEFAULT,
        *,
        interval: float = 1.0,
        with_jobs: bool = False,
        max_jobs: int = metrics.DEFAULT_MAX_JOBS,
    ) -> None:
        self.feed = Feed(thresholds, judge_jobs=with_jobs)
        self.feed.subscribers.append(self.on_frame)
        self.on_snapshot = self.feed.push  # the sampler's: each frame comes to on_frame
        self.interval = interval
        self.with_jobs = with_jobs
        self.max_jobs = max_jobs
        self.selection: frozenset[int] | None = None  # --gpus, set after the first tick
        self._lock = threading.Lock()
        self._latest: _Latest = (None, {}, (), {})
        self._totals = metrics.Totals()
        self.generation = 0
        self._built: list[Metric] | None = None  # the families of this generation

    def on_frame(self, frame: Frame) -> None:
        assert frame.diagnosis is not None  # a live feed's frames are always judged
        diagnosis = frame.diagnosis.only(self.selection)
        shown = filter_gpus(frame.snapshot, self.selection)
        latest = (shown, dict(diagnosis.gpus), diagnosis.jobs, dict(diagnosis.job_verdicts))
        with self._lock:
            self._totals.add(shown, diagnosis.gpus, max_step=2.0 * self.interval)
            self._latest = latest
            self.generation += 1
            self._built = None

    def families(self) -> list[Metric]:
        with self._lock:
            if self._built is None:
                self._built = metrics.build(
                    *self._latest, self._totals, with_jobs=self.with_jobs, max_jobs=self.max_jobs
                )
            return self._built

    def collect(self) -> Iterable[Metric]:  # only: no describe(), no build at registration
        return list(self.families())


def make_registry(state: ExportState) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(state)
    registry.register(ProcessCollector(registry=None))  # process_* of the exporter itself
    return registry


class _Server(ThreadingHTTPServer):
    """A thread per connection, but one whose connection ended waits a while for the next
    (no thread start per scrape); with none idle, a new one starts."""

    daemon_threads = True
    request_queue_size = 128
    allow_reuse_address = True  # TIME_WAIT from a previous run does not block the port
    #: Idle handler threads kept, and how long each waits for a connection.
    keep_idle = 4
    idle_seconds = 60.0
    #: Connections open at once; past it the one idle longest is closed, so slow or
    #: stuck clients cannot pile up threads (a scrape is answered in milliseconds).
    max_connections = 64
    #: Seconds a connection may wait for its request: per read, and in all when a new
    #: connection comes.
    request_seconds = 10.0

    def __init__(self, address: tuple[str, int], state: ExportState) -> None:
        if ":" in address[0]:  # IPv6 literal
            self.address_family = socket.AF_INET6
        self.state = state
        self.registry = make_registry(state)
        self._cache_lock = threading.Lock()
        self._cache: dict[tuple[str, bool], tuple[int, bytes]] = {}
        # The library's bytes, with the series prefixes cached between scrapes.
        self._text = TextEncoder()
        self._openmetrics = OpenMetricsEncoder()
        self._pool_lock = threading.Lock()
        self._idle = 0  # threads waiting on _handoff, each for one connection
        self._handoff: queue.SimpleQueue[tuple[Any, Any] | None] = queue.SimpleQueue()
        self._closed = False
        # Open connections, longest idle first: since when idle (None while answered).
        self._open: dict[Any, float | None] = {}
        super().__init__(address, _Handler)

    def active(self, connection: Any, answering: bool) -> bool:
        """A request was read (``answering``) or answered: the connection moves last.
        False when it was closed meanwhile (for want of room, or too slow)."""
        with self._pool_lock:
            if connection not in self._open:
                return False
            del self._open[connection]
            self._open[connection] = None if answering else time.monotonic()
            return True

    def shutdown_request(self, request: Any) -> None:
        with self._pool_lock:
            self._open.pop(request, None)
        super().shutdown_request(request)

    def process_request(self, request: Any, client_address: Any) -> None:
        now = time.monotonic()
        job = (request, client_address)
        with self._pool_lock:
            self._open[request] = now
            over = len(self._open) - self.max_connections
            for conn, since in list(self._open.items()):
                if since is not None and (over > 0 or since < now - self.request_seconds):
                    over -= 1
                    del self._open[conn]  # its thread sees the end of the stream and ends
                    with contextlib.suppress(OSError):
                        conn.shutdown(socket.SHUT_RDWR)
            if self._idle:
                self._idle -= 1  # that thread is now promised this connection
                self._handoff.put(job)
                return
        threading.Thread(target=self._handle, args=(job,), name=HANDLER, daemon=True).start()

    def _handle(self, job: tuple[Any, Any] | None) -> None:
        while job is not None:
            self.process_request_thread(*job)  # handles, then closes the connection
            with self._pool_lock:
                if self._closed or self._idle >= self.keep_idle:
                    return
                self._idle += 1
            try:
                job = self._handoff.get(timeout=self.idle_seconds)
            except queue.Empty:
                with self._pool_lock:  # a connection handed over meanwhile is ours
                    try:
                        job = self._handoff.get_nowait()
                    except queue.Empty:
                        self._idle -= 1
                        return

    def server_close(self) -> None:
        super().server_close()
        with self._pool_lock:
            self._closed = True
            for _ in range(self._idle):
                self._handoff.put(None)
            self._idle = 0

    def body(self, accept: str, gzipped: bool) -> tuple[bytes, str]:
        encoder, content_type = choose_encoder(accept)
        key = (content_type, gzipped)
        generation = self.state.generation
        with self._cache_lock:
            hit = self._cache.get(key)
            if hit is not None and hit[0] == generation:
                return hit[1], content_type
            if encoder is generate_latest:
                data = self._text(self.registry)
            elif (
                getattr(encoder, "func", None) is openmetrics_latest
                and getattr(encoder, "keywords", None) == _OPENMETRICS_1
            ):
                data = self._openmetrics(self.registry)
            else:  # another escaping or version: the library's own encoder
                data = encoder(self.registry)
            if gzipped:
                data = gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0)
            self._cache[key] = (generation, data)
            return data, content_type


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    timeout = _Server.request_seconds  # a read or a write that waits longer ends it

    def do_GET(self) -> None:
        if not self.server.active(self.connection, True):
            self.close_connection = True  # what it read was cut off: no answer
            return
        try:
            self._get()
        finally:
            self.server.active(self.connection, False)

    def _get(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/":
            page = (
                b"<html><head><title>gputop exporter</title></head><body>"
                b'<h1>gputop exporter</h1><p><a href="/metrics">Metrics</a></p></body></html>'
            )
            self._send(200, page, "text/html; charset=utf-8")
            return
        if path != "/metrics":
            self._send(404, b"not found: try /metrics\n", "text/plain; charset=utf-8")
            return
        gzipped = gzip_accepted(self.headers.get("Accept-Encoding", ""))
        try:
            data, content_type = self.server.body(self.headers.get("Accept", ""), gzipped)
        except Exception as exc:  # never take the server down for one scrape
            self._send(500, f"gputop: {type(exc).__name__}: {exc}\n".encode(), "text/plain")
            return
        self._send(200, data, content_type, gzipped)

    def _send(self, code: int, data: bytes, content_type: str, gzipped: bool = False) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        if gzipped:
            self.send_header("Content-Encoding", "gzip")
        with contextlib.suppress(OSError):  # the client went away, or was too slow
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

    do_HEAD = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per scrape on stderr would drown what matters


def serve(address: tuple[str, int], state: ExportState) -> _Server:
    """Bind (raises OSError when the port is taken) and serve on a daemon thread."""
    server = _Server(address, state)
    thread = threading.Thread(target=server.serve_forever, name="gputop-http", daemon=True)
    thread.start()
    return server


def warn(message: str) -> None:
    print(f"gputop export: {message}", file=sys.stderr, flush=True)
