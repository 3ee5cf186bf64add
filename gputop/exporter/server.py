"""The exporter: sampler -> diagnosis -> a Collector, served over HTTP. A tick only diagnoses
and counts; a scrape never calls NVML, and the families and the encoded body are built once
per tick (docs/exporter.md, "How it works")."""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import queue
import socket
import struct
import sys
import termios
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
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


#: Connections open at once; past it the worst offender among the others is closed
#: (the most answer bytes its client left unread, then the longest stuck or idle), never
#: the newcomer, so slow, stuck or non-reading clients cannot pile up threads or starve
#: a real scrape (which is answered in milliseconds).
MAX_CONNECTIONS = 64
#: Seconds a connection may wait for its request: per read, and in all when a new
#: connection comes.
REQUEST_SECONDS = 10.0
#: Seconds one answer may take to write in all; a client that does not read it by then
#: is dropped, with whatever it pipelined behind it.
WRITE_SECONDS = 10.0
#: Requests answered on one kept-alive connection; the last says "Connection: close".
#: Bounds what one pipelining client gets from one connection.
MAX_REQUESTS_PER_CONNECTION = 100

_IDLE, _ANSWERING, _WRITING = 0, 1, 2
#: Linux's ioctl for the bytes sent that the peer has not acknowledged (not read).
_OUTQ: int | None = getattr(termios, "TIOCOUTQ", None)


def _unread(sock: Any) -> int:
    """Bytes of our answers still queued to ``sock``'s peer (0 when unknown)."""
    if _OUTQ is None:
        return 0  # pragma: no cover
    try:
        out = fcntl.ioctl(sock.fileno(), _OUTQ, b"\0\0\0\0")
    except (OSError, ValueError):
        return 0
    return int(struct.unpack("i", out)[0])


@dataclass
class _Conn:
    """One open connection: what its thread does now, since when, and how many requests
    it has read."""

    state: int
    since: float
    requests: int = 0


class _Server(ThreadingHTTPServer):
    """A thread per connection, but one whose connection ended waits a while for the next
    (no thread start per scrape); with none idle, a new one starts."""

    daemon_threads = True
    request_queue_size = 128
    allow_reuse_address = True  # TIME_WAIT from a previous run does not block the port
    #: Idle handler threads kept, and how long each waits for a connection.
    keep_idle = 4
    idle_seconds = 60.0
    max_connections = MAX_CONNECTIONS
    request_seconds = REQUEST_SECONDS
    write_seconds = WRITE_SECONDS
    max_requests = MAX_REQUESTS_PER_CONNECTION

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
        self._open: dict[Any, _Conn] = {}  # every connection not yet closed
        #: Connections that failed for the client's fault (a reset, a broken pipe, a read
        #: or write past its deadline): never a traceback, only counted; and the kinds of
        #: unexpected error already said on stderr (each once).
        self.client_faults = 0
        self.evicted = 0
        self._said: set[str] = set()
        super().__init__(address, _Handler)

    def request_read(self, connection: Any) -> int | None:
        """A request was read: how many this connection has read, or None when it was
        closed meanwhile (for want of room, or too slow): then it gets no answer."""
        with self._pool_lock:
            conn = self._open.get(connection)
            if conn is None:
                return None
            conn.state, conn.since = _ANSWERING, time.monotonic()
            conn.requests += 1
            return conn.requests

    def moved(self, connection: Any, state: int) -> None:
        """The connection's thread begins writing (``_WRITING``) or waits for the next
        request (``_IDLE``)."""
        with self._pool_lock:
            conn = self._open.get(connection)
            if conn is not None:
                conn.state, conn.since = state, time.monotonic()

    def shutdown_request(self, request: Any) -> None:
        with self._pool_lock:
            self._open.pop(request, None)
        super().shutdown_request(request)

    def _offence(self, sock: Any, conn: _Conn, now: float) -> tuple[int, int, float]:
        """How badly a connection holds its place: the answer bytes its client left
        unread, then stuck in a write, then how long in that state (a connection being
        answered, for which gputop is at work, least)."""
        age = 0.0 if conn.state == _ANSWERING else now - conn.since
        return (_unread(sock), conn.state == _WRITING, age)

    def _evict(self, sock: Any) -> None:
        del self._open[sock]  # its thread sees the end of the stream, or its write fails
        self.evicted += 1
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)

    def process_request(self, request: Any, client_address: Any) -> None:
        now = time.monotonic()
        job = (request, client_address)
        with self._pool_lock:
            for sock, conn in list(self._open.items()):  # idle too long
                if conn.state == _IDLE and conn.since < now - self.request_seconds:
                    self._evict(sock)
            over = len(self._open) + 1 - self.max_connections
            if over > 0:  # the worst offenders make room, never the newcomer
                ranked = sorted(
                    self._open.items(),
                    key=lambda item: self._offence(item[0], item[1], now),
                    reverse=True,
                )
                for sock, _conn in ranked[:over]:
                    self._evict(sock)
            self._open[request] = _Conn(_IDLE, now)
            if self._idle:
                self._idle -= 1  # that thread is now promised this connection
                self._handoff.put(job)
                return
        threading.Thread(target=self._handle, args=(job,), name=HANDLER, daemon=True).start()

    def client_fault(self) -> None:
        with self._pool_lock:
            self.client_faults += 1

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection's handling raised: a client's fault (reset, timeout) is counted;
        anything else is one line on stderr per kind of error, never a traceback."""
        exc = sys.exc_info()[1]
        with self._pool_lock:
            if isinstance(exc, OSError):
                self.client_faults += 1
                return
            what = type(exc).__name__
            if what in self._said:
                return
            self._said.add(what)
        warn(f"a connection failed: {what}: {exc} (said once; later ones are not)")

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
    timeout = REQUEST_SECONDS  # a read that waits longer ends the connection
    _served = 0  # requests this connection has read, this one included
    _headers_buffer: list[bytes]

    def do_GET(self) -> None:
        served = self.server.request_read(self.connection)
        if served is None:
            self.close_connection = True  # what it read was cut off: no answer
            return
        self._served = served
        try:
            self._get()
        finally:
            self.server.moved(self.connection, _IDLE)

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
        if self._served >= self.server.max_requests:
            self.send_header("Connection", "close")  # and close_connection is set
        # The head and the body in one write, under one deadline for the whole answer.
        payload = b"".join(self._headers_buffer) + b"\r\n"
        self._headers_buffer = []
        if self.command != "HEAD":
            payload += data
        self.server.moved(self.connection, _WRITING)
        try:
            self.connection.settimeout(self.server.write_seconds)
            self.wfile.write(payload)
            self.connection.settimeout(self.timeout)
        except OSError:  # gone, reset, or not reading: nothing more for this client
            self.close_connection = True
            self.server.client_fault()

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
