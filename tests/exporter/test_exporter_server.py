"""The exporter's HTTP server keeps a few idle handler threads for the next connection,
yet never makes a connection wait for a busy one; slow or stuck clients are closed, by
time and past a cap on open connections."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gputop.exporter.server import HANDLER, ExportState, _Handler, _Server, serve
from gputop.sources.demo import DemoSource
from tests.helpers.exporter import exporter


@contextmanager
def _serving() -> Iterator[_Server]:
    state = ExportState(with_jobs=True)
    state.on_snapshot(DemoSource(0, start_time=0.0, step=1.0).snapshot())
    server = serve(("127.0.0.1", 0), state)
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        _wait_until(lambda: not _handlers(), "every handler thread ends once closed")


def _scrape(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def _handlers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == HANDLER]


def _wait_until(check: object, what: str, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_scrapes_one_after_another_reuse_idle_handler_threads() -> None:
    with _serving() as server:
        port = int(server.server_address[1])
        started = 0
        for _ in range(30):
            known = set(_handlers())
            assert _scrape(port).startswith(b"HTTP/1.1 200")
            started += len(set(_handlers()) - known)
        # Each connection is served by an idle thread or a new one; never more are kept
        # than keep_idle, and one at a time they are mostly the same thread (30 scrapes
        # used to start 30).
        assert len(_handlers()) <= server.keep_idle
        assert started < 30


def test_a_connection_never_waits_for_a_busy_handler_thread() -> None:
    with _serving() as server:
        port = int(server.server_address[1])
        for _ in range(3):
            _scrape(port)  # some idle threads now
        # Slow clients: connected, request never sent; each holds a handler thread.
        slow = [socket.create_connection(("127.0.0.1", port)) for _ in range(12)]
        try:
            _wait_until(lambda: server._idle == 0, "the idle threads took the slow clients")
            for _ in range(5):  # still answered, by new threads (a hang fails on timeout)
                assert _scrape(port).startswith(b"HTTP/1.1 200")
        finally:
            for s in slow:
                s.close()


def test_idle_handler_threads_end_after_their_idle_time() -> None:
    with _serving() as server:
        server.idle_seconds = 0.05
        port = int(server.server_address[1])
        threads = [threading.Thread(target=_scrape, args=(port,)) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        _wait_until(lambda: not _handlers(), "idle threads end")
        assert server._idle == 0
        assert _scrape(port).startswith(b"HTTP/1.1 200")  # and a new one starts


# --- slow and stuck clients ---------------------------------------------------------------


def _half_request(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
    return s


def _closed_by_server(s: socket.socket) -> bool:
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    finally:
        s.setblocking(True)


def test_a_client_that_never_finishes_its_request_is_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _Handler.timeout == _Server.request_seconds <= 30  # set, and short
    monkeypatch.setattr(_Handler, "timeout", 0.2)
    with _serving() as server:
        s = _half_request(int(server.server_address[1]))
        with s:
            assert s.recv(1) == b""  # closed by the server (a hang fails on the timeout)


def test_slow_clients_past_the_cap_close_the_longest_idle_and_scrapes_go_on() -> None:
    """Against the real command: twice the cap of half-requests, and the process's threads
    stay near the cap; the oldest clients were closed, the newest are still served."""
    with exporter(["--demo"]) as exp:
        cap = _Server.max_connections
        slow = [_half_request(exp.port) for _ in range(2 * cap)]
        try:
            assert "gputop_gpu_utilization" in exp.scrape()
            _wait_until(lambda: _closed_by_server(slow[0]), "the oldest closed")
            assert all(_closed_by_server(s) for s in slow[:cap])
            assert not any(_closed_by_server(s) for s in slow[-cap // 2 :])
            status = Path(f"/proc/{exp.proc.pid}/status").read_text()
            threads = int(status.split("Threads:")[1].split()[0])
            assert threads <= cap + _Server.keep_idle + 8, threads
        finally:
            for s in slow:
                s.close()
        assert "Traceback" not in exp.stderr()
