"""Start ``gputop export`` and a real Prometheus for tests, and always stop them.

- :func:`exporter` runs ``python -m gputop export --listen 127.0.0.1:0 ...`` (any free
  port), waits for its "serving http://HOST:PORT/metrics" line on stderr and yields an
  :class:`Exporter`. On the way out it is sent SIGTERM, then SIGKILL if it lingers.
- :func:`prometheus` runs Debian's ``prometheus`` on 127.0.0.1 (a free port, a temporary
  config and data dir, every target scraped each second) and yields a :class:`Prom` to
  query ``/api/v1/query``; it is stopped the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "contrib" / "grafana" / "gputop-dashboard.json"
SERVING = re.compile(r"serving (http://\S+)/metrics")


def _stop(proc: subprocess.Popen[Any], timeout: float = 10.0) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait(10)


@dataclass
class Exporter:
    proc: subprocess.Popen[bytes]
    url: str  # http://127.0.0.1:PORT
    stderr_path: Path

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def scrape(self, timeout: float = 10.0, headers: Mapping[str, str] | None = None) -> str:
        req = urllib.request.Request(self.url + "/metrics", headers=dict(headers or {}))
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body: bytes = resp.read()
            assert resp.status == 200
        return body.decode()

    def samples(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        return parse(self.scrape())

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


def parse(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Exposition text -> {(sample name, labels): value}."""
    out: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def series(
    samples: Mapping[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> dict[frozenset[tuple[str, str]], float]:
    """The samples of ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return {lab: v for (n, lab), v in samples.items() if n == name and want <= lab}


@contextlib.contextmanager
def exporter(
    args: Sequence[str],
    env: Mapping[str, str] | None = None,
    tmp: Path | None = None,
    timeout: float = 30.0,
) -> Iterator[Exporter]:
    """``gputop export --listen 127.0.0.1:0 ARGS``; yields once it serves."""
    base = dict(os.environ if env is None else env)
    base["PYTHONPATH"] = str(ROOT)
    err_dir = tmp or Path(os.environ.get("TMPDIR", "/tmp"))
    err_path = err_dir / f"gputop-export-{os.getpid()}-{time.monotonic_ns()}.stderr"
    err = err_path.open("wb")
    cmd = [sys.executable, "-m", "gputop", "export", "--listen", "127.0.0.1:0", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=base)
    err.close()
    try:
        deadline = time.monotonic() + timeout
        url = None
        while url is None:
            match = SERVING.search(err_path.read_text(errors="replace"))
            if match:
                url = match.group(1)
                break
            if proc.poll() is not None:
                raise AssertionError(
                    f"gputop export exited {proc.returncode}: {err_path.read_text()!r}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(f"gputop export did not start: {err_path.read_text()!r}")
            time.sleep(0.05)
        yield Exporter(proc, url, err_path)
    finally:
        _stop(proc)
        if tmp is None:
            with contextlib.suppress(OSError):
                err_path.unlink()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Prom:
    proc: subprocess.Popen[bytes]
    url: str
    log: Path

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query; the result vector ([] when nothing matches)."""
        q = urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{q}", timeout=10) as resp:
            data = json.load(resp)
        assert data["status"] == "success", data
        result: list[dict[str, Any]] = data["data"]["result"]
        return result

    def targets_up(self) -> bool:
        with urllib.request.urlopen(f"{self.url}/api/v1/targets", timeout=10) as resp:
            data = json.load(resp)
        active = data["data"]["activeTargets"]
        return bool(active) and all(t["health"] == "up" for t in active)

    def wait_for(self, expr: str, timeout: float = 30.0, empty: bool = False) -> list[Any]:
        """Poll ``expr`` until it returns something (or nothing, with ``empty``)."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(expr)
            if bool(result) != empty:
                return result
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{expr!r} still {'non-' if empty else ''}empty after {timeout} s: "
                    f"{result!r}\n--- prometheus log tail:\n{self.log.read_text()[-2000:]}"
                )
            time.sleep(0.25)


def prometheus_binary() -> str | None:
    return shutil.which("prometheus")


@contextlib.contextmanager
def prometheus(targets: Sequence[str], tmp: Path, timeout: float = 60.0) -> Iterator[Prom]:
    """A real Prometheus scraping ``targets`` (host:port) every second."""
    binary = prometheus_binary()
    assert binary is not None, "prometheus is not installed (.ci/run installs it)"
    port = free_port()
    config = tmp / "prometheus.yml"
    quoted = ", ".join(f"'{t}'" for t in targets)
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n"
        "scrape_configs:\n"
        "  - job_name: gputop\n"
        f"    static_configs:\n      - targets: [{quoted}]\n"
    )
    log = tmp / "prometheus.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tmp,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"prometheus exited {proc.returncode}: {log.read_text()}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{url}/-/ready", timeout=2) as resp,
            ):
                if resp.status == 200:
                    break
            if time.monotonic() > deadline:
                raise AssertionError(f"prometheus not ready: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        yield Prom(proc, url, log)
    finally:
        _stop(proc, timeout=20)


def dashboard_exprs(node: object) -> list[str]:
    """Every PromQL string in a Grafana dashboard (targets, variable queries)."""
    out: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "query", "definition") and isinstance(value, str):
                out.append(value)
            else:
                out.extend(dashboard_exprs(value))
    elif isinstance(node, list):
        for value in node:
            out.extend(dashboard_exprs(value))
    return out


def dashboard_queries(range_: str = "5m") -> list[str]:
    """The dashboard's panel queries with its variables filled in (every host and GPU)."""
    board = json.loads(DASHBOARD.read_text())
    return [
        e.replace("$instance", ".*").replace("$gpu", ".*").replace("$__range", range_)
        for e in dashboard_exprs(board)
        if not e.startswith("label_values(") and e != "prometheus"
    ]
