"""The fleet from Prometheus (docs/fleet.md, "Over Prometheus"): one instant query per
interval, grouped by host; each host becomes a ``--stream``-shaped snapshot dict."""

from __future__ import annotations

import contextlib
import json
import math
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import replace
from typing import Any

from gputop.fmt import clean_text
from gputop.model import GPU_METRIC, SCHEMA_VERSION
from gputop.sources.remote import LineError, parse_line, summarize, text_of
from gputop.sources.streams import MAX_BACKOFF_S, HostView, HostViews

#: An answer above this many bytes is refused.
MAX_ANSWER_BYTES = 32 * 2**20
HTTP_TIMEOUT_S = 10.0


def _gauge(field: str) -> str:
    """The exporter's gauge of a metric of the table (its one home)."""
    name = GPU_METRIC[field].export
    assert name is not None, field
    return name


UTILIZATION, MEMORY_USED, MEMORY_TOTAL = map(
    _gauge, ("utilization.gpu", "memory.used", "memory.total")
)
GPUTOP_METRICS = (
    "gputop_gpu_info",
    UTILIZATION,
    MEMORY_USED,
    MEMORY_TOTAL,
    "gputop_gpu_lost",
    "gputop_gpu_verdict",
    "gputop_last_sample_timestamp_seconds",
)
DCGM_METRICS = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE")
SELECTOR = '{__name__=~"' + "|".join(("up", *GPUTOP_METRICS, *DCGM_METRICS)) + '"}'
MIB = 2**20
#: The label that names a series' host.
HOST_LABEL = "instance"


class PrometheusError(ValueError):
    """Prometheus could not be asked, or answered something unusable (one line)."""


def check_url(url: str) -> str:
    """A Prometheus base URL (http or https, with a host); the trailing slash dropped."""
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise PrometheusError(f"--prometheus: not an http(s) URL: {clean_text(url, 80)!r}")
    return url.strip().rstrip("/")


def query(base: str, path: str, params: dict[str, str]) -> list[dict[str, Any]]:
    """GET ``base + path`` and return ``data.result`` (a vector or a matrix)."""
    url = f"{base}{path}?{urllib.parse.urlencode(params)}"
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
            body = response.read(MAX_ANSWER_BYTES + 1)
    except urllib.error.HTTPError as exc:
        detail = ""
        with contextlib.suppress(Exception):
            detail = json.loads(exc.read(65536)).get("error", "")
        raise PrometheusError(
            f"Prometheus answered HTTP {exc.code}: {clean_text(str(detail or exc.reason), 200)}"
        ) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise PrometheusError(f"cannot reach Prometheus: {clean_text(str(reason), 200)}") from None
    if len(body) > MAX_ANSWER_BYTES:
        raise PrometheusError(f"Prometheus answer over {MAX_ANSWER_BYTES} bytes")
    try:
        data = json.loads(body)
    except ValueError:
        raise PrometheusError("Prometheus answered something that is not JSON") from None
    if not isinstance(data, dict) or data.get("status") != "success":
        why = data.get("error") if isinstance(data, dict) else None
        raise PrometheusError(f"Prometheus query failed: {clean_text(str(why), 200)}")
    inner = data.get("data")
    result = inner.get("result") if isinstance(inner, dict) else None
    if not isinstance(result, list):
        raise PrometheusError("Prometheus answer has no result list")
    return [r for r in result if isinstance(r, dict) and isinstance(r.get("metric"), dict)]


def _value(sample: Any) -> tuple[float, float] | None:
    """(time, value) of a ``[ts, "v"]`` pair, or None."""
    if not isinstance(sample, list) or len(sample) != 2:
        return None
    try:
        ts, v = float(sample[0]), float(sample[1])
    except (TypeError, ValueError):
        return None
    return (ts, v) if math.isfinite(v) else None


def build_hosts(series: list[dict[str, Any]]) -> tuple[dict[str, dict[str, Any]], dict[str, bool]]:
    """Group an instant vector by host: (host -> ``--json``-shaped dict, host -> up)."""
    hosts: dict[str, dict[int, dict[str, Any]]] = {}
    times: dict[str, float] = {}
    up: dict[str, bool] = {}
    sampled: dict[str, float] = {}
    dcgm: set[str] = set()
    for s in series:
        metric = s["metric"]
        name = metric.get("__name__")
        host = text_of(metric.get(HOST_LABEL), 200)
        point = _value(s.get("value"))
        if host is None or point is None or not isinstance(name, str):
            continue
        ts, v = point
        if name == "up":
            up[host] = up.get(host, False) or v == 1
            continue
        if name == "gputop_last_sample_timestamp_seconds":
            # The host's real age: an instant query's own timestamps are always "now".
            sampled[host] = v
            continue
        gpu_label = text_of(metric.get("gpu"), 200)
        if gpu_label is None or not gpu_label.isdigit():
            continue
        index = int(gpu_label)
        times[host] = max(times.get(host, 0.0), ts)
        gpu = hosts.setdefault(host, {}).setdefault(
            index, {"index": index, "memory": {}, "utilization": {}, "lost": False}
        )
        if name.startswith("DCGM_"):
            dcgm.add(host)
        if name == "gputop_gpu_info":
            gpu["name"] = text_of(metric.get("name"), 200)
            gpu["uuid"] = text_of(metric.get("uuid"), 200)
        elif name == UTILIZATION:
            gpu["utilization"]["gpu"] = 100.0 * v
        elif name == MEMORY_USED:
            gpu["memory"]["used"] = int(v)
        elif name == MEMORY_TOTAL:
            gpu["memory"]["total"] = int(v)
        elif name == "gputop_gpu_lost":
            gpu["lost"] = v == 1
        elif name == "gputop_gpu_verdict" and v == 1:
            kind = text_of(metric.get("kind"), 200)
            if kind:
                severity = text_of(metric.get("severity"), 200) or "info"
                gpu["verdict"] = {"kind": kind, "label": kind, "severity": severity}
        elif name == "DCGM_FI_DEV_GPU_UTIL":
            gpu["utilization"]["gpu"] = v
            gpu.setdefault("name", text_of(metric.get("modelName"), 200))
            gpu.setdefault("uuid", text_of(metric.get("UUID"), 200))
        elif name == "DCGM_FI_DEV_FB_USED":
            gpu["_fb_used"] = v
        elif name == "DCGM_FI_DEV_FB_FREE":
            gpu["_fb_free"] = v
    out: dict[str, dict[str, Any]] = {}
    for host, gpus in hosts.items():
        for gpu in gpus.values():
            used, free = gpu.pop("_fb_used", None), gpu.pop("_fb_free", None)
            if used is not None:
                gpu["memory"]["used"] = int(used * MIB)
                if free is not None:
                    gpu["memory"]["total"] = int((used + free) * MIB)
        out[host] = {
            "schema": SCHEMA_VERSION,
            "time": sampled.get(host, times.get(host, 0.0)),
            "hostname": host,
            "driver": {"available": True},
            "source": "dcgm" if host in dcgm else "prometheus",
            "gpus": [gpus[i] for i in sorted(gpus)],
        }
    return out, up


def _scraped(old: HostView, ok: bool) -> HostView:
    """``old`` after one more scrape, as Prometheus's ``up`` says it went."""
    return replace(
        old,
        connected=ok,
        failures=0 if ok else old.failures + 1,
        error=None if ok else "Prometheus cannot scrape it (up == 0)",
        attempts=old.attempts + 1,
    )


class PrometheusFleet(HostViews):
    """The fleet's hosts from Prometheus (a :class:`~gputop.sources.streams.HostViews`);
    hosts are sorted by name and stay listed once seen."""

    thread_name = "gputop-prometheus"

    def __init__(self, url: str, *, interval: float = 2.0) -> None:
        self.url = check_url(url)
        super().__init__(interval)
        self.error: str | None = None  # Prometheus itself failed: why
        self.failures = 0

    def retry_now(self) -> None:
        self.failures = 0

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.poll()
            delay = self.interval
            if self.failures:
                delay = min(MAX_BACKOFF_S, self.interval * 2 ** min(self.failures, 6))
            self._stop.wait(max(0.0, started + delay - time.monotonic()))

    def poll(self) -> None:
        """One instant query; every host's view updated (also when Prometheus fails)."""
        now_mono, now_wall = time.monotonic(), time.time()
        try:
            series = query(self.url, "/api/v1/query", {"query": SELECTOR})
        except PrometheusError as exc:
            self.failures += 1
            self.error = str(exc)
            with self._lock:
                for h, v in self._views.items():
                    self._views[h] = replace(
                        v, connected=False, failures=self.failures, error=self.error
                    )
            self._call_back()
            return
        self.failures = 0
        self.error = None
        hosts, up = build_hosts(series)
        with self._lock:
            for host, data in hosts.items():
                old = self._views.get(host) or HostView(host)
                try:
                    report = summarize(parse_line(json.dumps(data)))
                except LineError as exc:
                    self._views[host] = replace(old, problem="bad-data", error=str(exc))
                    continue
                age = max(0.0, now_wall - float(data["time"]))
                fresh = old.report is None or report.time != old.report.time
                self._views[host] = replace(
                    _scraped(old, up.get(host, True)),
                    report=report,
                    data=data,
                    seq=old.seq + 1 if fresh else old.seq,
                    received=now_mono - age,
                    problem=None,
                )
            # (a target in ``up`` without GPU metrics is not a GPU host: never added)
            for host, old in self._views.items():
                if host in up and host not in hosts:
                    self._views[host] = _scraped(old, up[host])
                elif host not in hosts and host not in up:
                    self._views[host] = replace(
                        old,
                        connected=False,
                        failures=old.failures + 1,
                        error="no longer in Prometheus",
                    )
            self.hosts = tuple(sorted(self._views))
        self._call_back()

    def history(self, host: str, seconds: float = 600.0) -> list[dict[str, Any]]:
        """The host's recent snapshot dicts, oldest first, one per interval."""
        end = time.time()
        quoted = host.replace("\\", "\\\\").replace('"', '\\"')
        names = "|".join(n for n in (*GPUTOP_METRICS, *DCGM_METRICS) if n != "gputop_gpu_info")
        selector = f'{{__name__=~"{names}",{HOST_LABEL}="{quoted}"}}'
        series = query(
            self.url,
            "/api/v1/query_range",
            {
                "query": selector,
                "start": f"{end - seconds:.3f}",
                "end": f"{end:.3f}",
                "step": f"{max(1.0, self.interval):g}",
            },
        )
        by_time: dict[float, list[dict[str, Any]]] = {}
        for s in series:
            values = s.get("values")
            for sample in values[:100_000] if isinstance(values, list) else ():
                point = _value(sample)
                if point is not None:
                    by_time.setdefault(point[0], []).append(
                        {"metric": s["metric"], "value": list(sample)}
                    )
        built = (build_hosts(by_time[ts])[0] for ts in sorted(by_time))
        return [hosts[host] for hosts in built if host in hosts]
