"""A real ``gputop export`` on 127.0.0.1 under bounded hostile clients, with a real scrape
(urllib) alongside: clients that pipeline ``GET /metrics`` and never read, oversized and
malformed requests, resets (SO_LINGER 0) and half-closed connections. The scrape is
answered while they are connected, and stderr holds no traceback (issue 29, class 7).

Synchronisation is on events, never on sleeps: a hostile client is "settled" once the
server answered or closed it, and the exporter is done with every hostile connection once
its process holds no more sockets than before they came (a connection's thread reports
an error before it closes the socket).
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gputop.exporter.server import MAX_CONNECTIONS
from tests.helpers.exporter import Exporter, exporter

pytestmark = pytest.mark.timeout(180)

#: Clients that pipeline and never read: more than the connection cap.
PIPELINERS = MAX_CONNECTIONS + 16
#: Requests each of them pipelines (a few KiB of requests, megabytes of answers).
PIPELINED = 200
REQUEST = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"

HOSTILE_REQUESTS: dict[str, bytes] = {
    "oversized header": REQUEST[:-2] + b"X-Big: " + b"a" * 70_000 + b"\r\n\r\n",
    "too many headers": REQUEST[:-2] + b"X: y\r\n" * 150 + b"\r\n",
    "request line past 64 KiB": b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n",
    "TLS hello": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
    "binary": b"\x00\xff\xfe\r\n\r\n",
    "HTTP/2 preface": b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    "unknown method": b"BREW /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
    "bad version": b"GET /metrics HTTP/9.9\r\n\r\n",
    "half a request": b"GET /metrics HTTP/1.1\r\nHost: x\r\n",
    "pipelined burst": REQUEST * 50,
}


def _wait_until(check: Callable[[], bool], what: str, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def _sockets(pid: int) -> int:
    """Sockets the process holds open (its listener and its connections)."""
    n = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            n += os.readlink(fd).startswith("socket:")
    return n


def _reset(s: socket.socket) -> None:
    """Close with an RST (SO_LINGER 0), as a client that crashed or was killed."""
    with contextlib.suppress(OSError):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def _settled(s: socket.socket) -> bool:
    """The server answered this client (bytes wait for it) or closed it."""
    try:
        s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return False
    except OSError:
        return True  # reset
    return True  # a byte, or the end of the stream


def _non_reader(port: int, data: bytes) -> socket.socket:
    """Connected with a small receive window, ``data`` sent, and never a byte read."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(30)
    s.connect(("127.0.0.1", port))
    s.sendall(data)
    s.setblocking(False)  # so that _settled only looks (with a timeout it would wait)
    return s


def _only_the_serving_line(exp: Exporter) -> None:
    err = exp.stderr()
    assert "Traceback" not in err, err[-3000:]
    assert len(err.splitlines()) == 1, err[-3000:]  # "serving http://..."


def test_pipelining_clients_that_never_read_do_not_starve_a_real_scrape() -> None:
    """Today the cap closes the real scrape, the one connection that is idle, while the
    pipeliners hold every other place in a blocked write."""
    with exporter(["--demo"]) as exp:
        pid = exp.proc.pid
        base = _sockets(pid)
        hostile: list[socket.socket] = []
        try:
            for _ in range(PIPELINERS):
                hostile.append(_non_reader(exp.port, REQUEST * PIPELINED))
            _wait_until(lambda: all(_settled(s) for s in hostile), "hostile clients answered")
            for _ in range(3):  # while they are connected; a failure raises here
                assert "gputop_gpu_utilization" in exp.scrape(timeout=10)
        finally:
            for s in hostile:
                _reset(s)
        _wait_until(lambda: _sockets(pid) <= base, "every hostile connection closed")
        assert "gputop_gpu_utilization" in exp.scrape(timeout=10)
        _only_the_serving_line(exp)


def _hostile_wave(port: int, data: bytes, how: str) -> None:
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        with contextlib.suppress(OSError):  # the server may answer and close midway
            s.sendall(data)
            if how == "half-close":
                s.shutdown(socket.SHUT_WR)  # half-open: sent all, reads no more
            elif how == "read a little":
                s.setblocking(False)  # (with a timeout, Python would wait for a byte)
                s.recv(10)  # what is there yet, if anything
    finally:
        _reset(s)


@pytest.mark.parametrize("how", ["reset", "half-close", "read a little"])
def test_oversized_malformed_and_reset_requests_print_no_traceback(how: str) -> None:
    """Today 3 oversized headers print 105 lines of tracebacks; resets print them too."""
    with exporter(["--demo"]) as exp:
        pid = exp.proc.pid
        base = _sockets(pid)
        for _ in range(3):
            for data in HOSTILE_REQUESTS.values():
                _hostile_wave(exp.port, data, how)
        assert "gputop_gpu_utilization" in exp.scrape(timeout=10)
        _wait_until(lambda: _sockets(pid) <= base, "every hostile connection closed")
        _only_the_serving_line(exp)
