"""``gputop fleet --prometheus`` against a real Prometheus (Debian's ``prometheus``,
installed by .ci/run) scraping the real ``gputop export --demo`` every second.

A second target serves dcgm-exporter's metric names (``DCGM_FI_DEV_GPU_UTIL``,
``DCGM_FI_DEV_FB_USED``/``FB_FREE``) from a static page: dcgm-exporter itself needs a
GPU, so its exposition text stands in for it; those hosts have no verdicts. Then the
exporter is stopped: Prometheus says ``up == 0`` and the host turns unreachable.
"""

from __future__ import annotations

import contextlib
import http.server
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gputop.sources.prometheus import PrometheusFleet
from gputop.sources.streams import status
from tests.helpers import exporter as helpers


def _dcgm_page() -> bytes:
    """dcgm-exporter's text for two A100s (its metric names, labels and units: MiB)."""
    values = {
        "DCGM_FI_DEV_GPU_UTIL": ("GPU utilization (in %).", (41, 0)),
        "DCGM_FI_DEV_FB_USED": ("Framebuffer memory used (in MiB).", (30720, 0)),
        "DCGM_FI_DEV_FB_FREE": ("Framebuffer memory free (in MiB).", (10240, 40960)),
    }
    lines = []
    for name, (help_, per_gpu) in values.items():
        lines += [f"# HELP {name} {help_}", f"# TYPE {name} gauge"]
        for gpu, value in enumerate(per_gpu):
            labels = (
                f'gpu="{gpu}",UUID="GPU-dcgm-{gpu}",device="nvidia{gpu}",'
                'modelName="NVIDIA A100-SXM4-40GB",Hostname="dcgm-node"'
            )
            lines.append(f"{name}{{{labels}}} {value}")
    return ("\n".join(lines) + "\n").encode()


DCGM_PAGE = _dcgm_page()


@contextlib.contextmanager
def dcgm_page() -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(DCGM_PAGE)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def wait_until(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def _target(url: str) -> str:
    return url.split("//", 1)[-1].split("/", 1)[0]


@pytest.mark.requires_tool("prometheus")
def test_fleet_reads_gputop_export_and_dcgm_through_prometheus(tmp_path: Path) -> None:
    with (
        helpers.exporter(["--demo", "--interval", "0.5"], tmp=tmp_path) as exp,
        dcgm_page() as dcgm,
    ):
        gputop_host = _target(exp.url)
        with helpers.prometheus([gputop_host, dcgm], tmp_path) as prom:
            prom.wait_for('DCGM_FI_DEV_GPU_UTIL and on() gputop_gpu_verdict{kind!="warming up"}')
            fleet = PrometheusFleet(prom.url, interval=1.0)
            fleet.poll()
            assert set(fleet.hosts) == {gputop_host, dcgm}
            now = time.monotonic()

            g = fleet.view(gputop_host)
            assert g.report is not None and len(g.report.gpus) == 8
            assert status(g, now, 15.0)[0] == "live"
            truth = {r["metric"]["gpu"]: r for r in prom.query("gputop_gpu_memory_used_bytes")}
            for cell in g.report.gpus:
                assert cell.verdict is not None  # gputop export carries the verdicts
                assert cell.mem_used == int(float(truth[str(cell.index)]["value"][1]))
            assert any(c.verdict and c.verdict.kind != "warming up" for c in g.report.gpus)

            d = fleet.view(dcgm)
            assert d.report is not None and d.report.source == "dcgm"
            zero, one = d.report.gpus
            assert zero.util == 41.0 and zero.mem_used == 30720 * 2**20
            assert zero.mem_total == 40960 * 2**20 and zero.verdict is None
            assert one.util == 0.0

            # query_range: one point per step since Prometheus began scraping.
            wait_until(lambda: len(fleet.history(gputop_host, seconds=60)) >= 3, "3 points")
            history = fleet.history(gputop_host, seconds=60)
            assert all(len(h["gpus"]) == 8 for h in history)

            exp.proc.terminate()  # the exporter goes away: Prometheus fails to scrape it
            exp.proc.wait(20)
            wait_until(lambda: prom.query(f'up{{instance="{gputop_host}"}} == 0') != [], "up 0")
            fleet.poll()
            state = status(fleet.view(gputop_host), time.monotonic(), 1.0)
            assert state[0] == "unreachable" and "up == 0" in (state[2] or "")
            assert status(fleet.view(dcgm), time.monotonic(), 15.0)[0] == "live"


def test_prometheus_itself_unreachable_is_said_on_every_row() -> None:
    from tests.sshd import free_port

    fleet = PrometheusFleet(f"http://127.0.0.1:{free_port()}", interval=1.0)
    fleet.poll()
    assert fleet.error is not None and "cannot reach Prometheus" in fleet.error
    assert fleet.failures == 1
