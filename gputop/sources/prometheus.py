"""The fleet from Prometheus (docs/fleet.md, "Over Prometheus"): one instant query per
interval, grouped by host; each host becomes a ``--stream``-shaped snapshot dict."""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, replace
from typing import Any

from gputop.fmt import clean_text
from gputop.model import (
    GPU_METRIC,
    GPU_METRICS,
    LIMITS,
    SCHEMA_VERSION,
    GpuSample,
    Snapshot,
    within,
)
from gputop.sources.remote import LineError, parse_line, summarize, text_of
from gputop.sources.streams import MAX_BACKOFF_S, HostView, HostViews

#: An answer above this many bytes is refused.
MAX_ANSWER_BYTES = 32 * 2**20
#: A whole request (connect, headers, body) ends by then: a server that trickles is cut off.
HTTP_TIMEOUT_S = 10.0
#: A bad series is said in its host's ``errors``, at most this many per host and answer.
MAX_ERRORS_PER_HOST = 16
#: At most this many hosts are listed (an answer's further hosts are skipped and counted;
#: hosts gone from Prometheus make room first).
MAX_HOSTS = 4096
#: A sample's value longer than this is not a number Prometheus wrote.
MAX_NUMBER_CHARS = 64
#: An error answer's body is read this far for Prometheus's own ``error`` text.
ERROR_BODY_BYTES = 65536


def _gauge(field: str) -> str:
    """The exporter's gauge of a metric of the table (its one home)."""
    name = GPU_METRIC[field].export
    assert name is not None, field
    return name


UTILIZATION, MEMORY_USED, MEMORY_TOTAL = map(
    _gauge, ("utilization.gpu", "memory.used", "memory.total")
)
#: The parts of a GPU read whole from the exporter's gauges: every exported row of the
#: table under them (what is inside utilization: GPM activity, NVLink).
INSIDE_PARTS = ("activity", "nvlink")
#: The exporter's unit -> the factor back to the model's (the inverse of the exporter's
#: conversions; tests/fleet/test_fleet_prometheus_inside.py checks they agree).
FROM_EXPORTED: dict[tuple[str, str], float] = {("%", "0-1"): 100.0}
#: (gauge, its row's label value or None) -> (part, key, factor) of each such row.
INSIDE: dict[tuple[str, str | None], tuple[str, str, float]] = {
    (m.export, m.export_label[1] if m.export_label else None): (
        head,
        tail,
        1.0 if m.unit == m.export_unit else FROM_EXPORTED[m.unit, m.export_unit],
    )
    for m in GPU_METRICS
    if m.export is not None
    for head, _, tail in [m.field.partition(".")]
    if head in INSIDE_PARTS
}
#: A gauge of INSIDE shared by several rows -> the label that tells them apart.
INSIDE_LABEL: dict[str, str] = {
    str(m.export): m.export_label[0]
    for m in GPU_METRICS
    if m.export and m.export_label and m.field.partition(".")[0] in INSIDE_PARTS
}
GPUTOP_METRICS = (
    "gputop_gpu_info",
    UTILIZATION,
    MEMORY_USED,
    MEMORY_TOTAL,
    "gputop_gpu_lost",
    "gputop_gpu_verdict",
    "gputop_last_sample_timestamp_seconds",
    *dict.fromkeys(name for name, _ in INSIDE),
)
DCGM_METRICS = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE")
SELECTOR = '{__name__=~"' + "|".join(("up", *GPUTOP_METRICS, *DCGM_METRICS)) + '"}'
MIB = 2**20
#: The label that names a series' host.
HOST_LABEL = "instance"
#: A GPU label: ASCII digits only (``str.isdigit`` takes "²", which ``int`` refuses), no
#: more of them than the model's largest GPU index has.
_GPU_INDEX = LIMITS[GpuSample, "index"]
_GPU_LABEL = re.compile(f"[0-9]{{1,{len(str(int(_GPU_INDEX[1])))}}}", re.ASCII)
INSIDE_NAMES = frozenset(name for name, _ in INSIDE)
#: The metric names the screen reads (a series of any other name is skipped and counted).
KNOWN_METRICS = frozenset(("up", *GPUTOP_METRICS, *DCGM_METRICS))


class PrometheusError(ValueError):
    """Prometheus could not be asked, or answered something unusable (one line)."""


def check_url(url: str) -> str:
    """A Prometheus base URL (http or https, with a host); the trailing slash dropped."""
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise PrometheusError(f"--prometheus: not an http(s) URL: {clean_text(url, 80)!r}")
    return url.strip().rstrip("/")


def query(
    base: str, path: str, params: dict[str, str], *, timeout: float = HTTP_TIMEOUT_S
) -> list[Any]:
    """GET ``base + path`` and return ``data.result`` (a vector or a matrix) as it came:
    every item is :func:`build_hosts`'s to check.
    Raises PrometheusError (one line) for anything that is not such an answer."""
    url = f"{base}{path}?{urllib.parse.urlencode(params)}"
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    late = PrometheusError(f"Prometheus did not answer within {timeout:g}s")
    with _Deadline(timeout) as deadline:  # (also over an error answer's body)
        opener = _opener(deadline)
        try:
            with opener.open(request, timeout=timeout) as response:
                kind = response.headers.get_content_type()
                body = _read(response, MAX_ANSWER_BYTES)
        except urllib.error.HTTPError as exc:
            said = _http_error(exc)
            raise late if deadline.expired.is_set() else PrometheusError(said) from None
        except PrometheusError:
            raise
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", None) or exc
            if deadline.expired.is_set() or isinstance(reason, TimeoutError):
                raise late from None
            why = clean_text(str(reason), 200)
            raise PrometheusError(f"cannot reach Prometheus: {why}") from None
        if deadline.expired.is_set():  # (what came before the cut is not the answer)
            raise late
    data = _json(body)
    if not isinstance(data, dict) or data.get("status") not in ("success", "error"):
        raise PrometheusError(_not_prometheus(kind, body, data))
    if data["status"] != "success":
        why = data.get("error")
        raise PrometheusError(f"Prometheus query failed: {text_of(why, 200) or 'no reason given'}")
    inner = data.get("data")
    result = inner.get("result") if isinstance(inner, dict) else None
    if not isinstance(result, list):
        raise PrometheusError("not a Prometheus API answer (no data.result list)")
    return result


def _read(response: Any, limit: int) -> bytes:
    """At most ``limit`` bytes of the body (PrometheusError beyond)."""
    chunks: list[bytes] = []
    size = 0
    while chunk := response.read1(65536):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise PrometheusError(f"Prometheus answer over {limit} bytes")
    return b"".join(chunks)


class _Deadline:
    """Ends a request when its time is up, whatever the server does: the timeout given to
    ``urlopen`` bounds each wait, not the request, so a server that sends its headers or
    body a byte at a time would hold the poller for ever. At the deadline the request's
    sockets are shut, which ends every wait on them at once."""

    def __init__(self, seconds: float) -> None:
        self.expired = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._timer.cancel()

    def watch(self, sock: socket.socket) -> None:
        """Shut ``sock`` at the deadline (at once when it has passed)."""
        with self._lock:
            self._sockets.append(sock)
            late = self.expired.is_set()
        if late:
            _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired.set()
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    # The plain socket's shutdown, also for TLS: ssl's own drops its state under a reader
    # in another thread; this ends the reader's wait (an EOF, an OSError) and nothing else.
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _WatchedHTTP(http.client.HTTPConnection):
    """A connection whose socket its request's deadline shuts."""

    deadline: _Deadline | None = None

    def connect(self) -> None:
        super().connect()
        if self.deadline is not None and self.sock is not None:
            self.deadline.watch(self.sock)


class _WatchedHTTPS(_WatchedHTTP, http.client.HTTPSConnection):
    pass


class _Watching(urllib.request.AbstractHTTPHandler):
    """An HTTP(S) handler whose connections a :class:`_Deadline` watches."""

    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def do_open(self, http_class: Any, req: Any, **http_conn_args: Any) -> Any:
        tls = isinstance(http_class, type) and issubclass(http_class, http.client.HTTPSConnection)
        kind = _WatchedHTTPS if tls else _WatchedHTTP

        def watched(*args: Any, **kwargs: Any) -> http.client.HTTPConnection:
            conn = kind(*args, **kwargs)
            conn.deadline = self.deadline
            return conn

        return super().do_open(watched, req, **http_conn_args)


def _opener(deadline: _Deadline) -> urllib.request.OpenerDirector:
    """``build_opener``'s handlers for HTTP(S) only: a redirect elsewhere (``ftp:``, which
    urllib would follow) is refused as an unknown URL type."""
    opener = urllib.request.OpenerDirector()
    for handler in (
        urllib.request.ProxyHandler(),
        _Http(deadline),
        _Https(deadline),
        urllib.request.HTTPDefaultErrorHandler(),
        urllib.request.HTTPRedirectHandler(),
        urllib.request.HTTPErrorProcessor(),
        urllib.request.UnknownHandler(),
    ):
        opener.add_handler(handler)
    return opener


class _Http(_Watching, urllib.request.HTTPHandler):
    pass


class _Https(_Watching, urllib.request.HTTPSHandler):
    pass


def _json(body: bytes) -> Any:
    """The body as JSON, or None when it is not (also nested deeper than Python recurses)."""
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def _not_prometheus(kind: str, body: bytes, data: Any) -> str:
    """Why an answer is not Prometheus's: its content type, or what its JSON lacks."""
    if data is None:
        what = "no JSON" if kind in ("application/json", "text/json") else kind
        return f"not a Prometheus API answer ({clean_text(what, 60)}: {_preview(body)})"
    return "not a Prometheus API answer (JSON without a Prometheus status)"


def _preview(body: bytes) -> str:
    return repr(clean_text(body[:60].decode("utf-8", "replace"), 60) or "")


def _http_error(exc: urllib.error.HTTPError) -> str:
    """One line for an HTTP error answer: Prometheus's own ``error`` when it sent one."""
    kind = exc.headers.get_content_type() if exc.headers is not None else "no content type"
    body = b""
    with contextlib.suppress(Exception):
        body = _read(exc, ERROR_BODY_BYTES)
    data = _json(body)
    why = text_of(data.get("error"), 200) if isinstance(data, dict) else None
    if why is not None:
        return f"Prometheus answered HTTP {exc.code}: {why}"
    reason = text_of(exc.reason, 80) or ""
    return f"not a Prometheus API answer (HTTP {exc.code} {reason}, {clean_text(kind, 60)})"


def _value(sample: Any) -> tuple[float, float] | None:
    """(time, value) of a ``[ts, "v"]`` pair with a time in the model's range and a finite
    value, or None."""
    if not isinstance(sample, list) or len(sample) != 2:
        return None
    ts, v = sample
    if not isinstance(ts, int | float) or isinstance(ts, bool) or not isinstance(v, str):
        return None
    try:
        ts, v = float(ts), float(v) if len(v) <= MAX_NUMBER_CHARS else math.nan
    except (TypeError, ValueError, OverflowError):
        return None
    return (ts, v) if math.isfinite(v) and within(ts, *LIMITS[Snapshot, "time"]) else None


def gpu_index(label: Any) -> int | None:
    """A ``gpu`` label's GPU index: ASCII digits within the model's range, else None."""
    if not isinstance(label, str) or _GPU_LABEL.fullmatch(label) is None:
        return None
    index = int(label)
    return index if within(index, *_GPU_INDEX) else None


def _finite(x: float) -> float | None:
    """``x``, or None where arithmetic on a huge value overflowed (the model's checks
    then judge the range)."""
    return x if math.isfinite(x) else None


def _whole(x: float) -> int | None:
    return int(x) if math.isfinite(x) else None


@dataclass(frozen=True, slots=True)
class Skipped:
    """A series that was not read: its host (when it names one), metric name and why."""

    host: str | None
    metric: str | None
    why: str


def build_hosts(
    series: list[Any], skipped: list[Skipped] | None = None
) -> tuple[dict[str, dict[str, Any]], dict[str, bool]]:
    """Group an instant vector by host: (host -> ``--json``-shaped dict, host -> up).

    A series of the wrong shape is skipped, the rest go on: it is appended to ``skipped``
    and said (at most ``MAX_ERRORS_PER_HOST`` of them) in its host's ``errors``."""
    hosts: dict[str, dict[int, dict[str, Any]]] = {}
    times: dict[str, float] = {}
    up: dict[str, bool] = {}
    sampled: dict[str, float] = {}
    dcgm: set[str] = set()
    errors: dict[str, list[dict[str, Any]]] = {}

    def skip(host: str | None, name: str | None, why: str) -> None:
        if skipped is not None:
            skipped.append(Skipped(host, name, why))
        if host is not None:
            said = errors.setdefault(host, [])
            if len(said) < MAX_ERRORS_PER_HOST:
                said.append({"source": "prometheus", "message": why, "metric": name})

    for s in series:
        metric = s.get("metric") if isinstance(s, dict) else None
        if not isinstance(metric, dict):
            skip(None, None, "a series without a metric object")
            continue
        name = text_of(metric.get("__name__"), 200)
        host = text_of(metric.get(HOST_LABEL), 200)
        if host is None or not host:
            skip(None, name, f"a series without an {HOST_LABEL} label")
            continue
        if name not in KNOWN_METRICS:
            skip(host, name, "a series of a metric that was not asked for")
            continue
        point = _value(s.get("value"))
        if point is None:
            skip(host, name, f"{name}: not a [time, value] pair of numbers")
            continue
        ts, v = point
        if name == "up":
            up[host] = up.get(host, False) or v == 1
            continue
        if name == "gputop_last_sample_timestamp_seconds":
            # The host's real age: an instant query's own timestamps are always "now".
            if within(v, *LIMITS[Snapshot, "time"]):
                sampled[host] = v
            else:
                skip(host, name, f"{name}: {v:.6g} is not a time")
            continue
        index = gpu_index(metric.get("gpu"))
        if index is None:
            label = text_of(metric.get("gpu"), 20)
            skip(host, name, f"{name}: gpu label {label!r} is not a GPU index")
            continue
        if host not in hosts and len(hosts) >= MAX_HOSTS:  # (``up`` of other targets: free)
            skip(None, name, f"over {MAX_HOSTS} hosts with GPUs in one answer")
            continue
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
            gpu["utilization"]["gpu"] = _finite(100.0 * v)
        elif name == MEMORY_USED:
            gpu["memory"]["used"] = _whole(v)
        elif name == MEMORY_TOTAL:
            gpu["memory"]["total"] = _whole(v)
        elif name == "gputop_gpu_lost":
            gpu["lost"] = v == 1
        elif name == "gputop_gpu_verdict" and v == 1:
            kind = text_of(metric.get("kind"), 200)
            if kind:
                severity = text_of(metric.get("severity"), 200) or "info"
                gpu["verdict"] = {"kind": kind, "label": kind, "severity": severity}
        elif name in INSIDE_NAMES:
            label = INSIDE_LABEL.get(name)
            which = None if label is None else text_of(metric.get(label), 20)
            row = INSIDE.get((name, which))
            if row is None:
                skip(host, name, f"{name}: {label} label {which!r} is not one the exporter writes")
                continue
            part, key, factor = row
            gpu.setdefault(part, {})[key] = _finite(factor * v)
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
                gpu["memory"]["used"] = _whole(used * MIB)
                if free is not None:
                    gpu["memory"]["total"] = _whole((used + free) * MIB)
        out[host] = {
            "schema": SCHEMA_VERSION,
            "time": sampled.get(host, times.get(host, 0.0)),
            "hostname": host,
            "driver": {"available": True},
            "source": "dcgm" if host in dcgm else "prometheus",
            "gpus": [gpus[i] for i in sorted(gpus)],
            "errors": errors.get(host, []),
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
    hosts are sorted by name and stay listed once seen.

    The poller never dies: a bad answer is ``error`` (one line, every row unreachable),
    a bad series is skipped and counted in ``skipped`` (``note`` says the first), and
    anything unforeseen while reading an answer is an error like a bad answer. It asks
    again every interval (with backoff while it fails); :meth:`retry_now` asks at once."""

    thread_name = "gputop-prometheus"

    def __init__(self, url: str, *, interval: float = 2.0, timeout: float = HTTP_TIMEOUT_S) -> None:
        self.url = check_url(url)
        super().__init__(interval)
        self.timeout = timeout
        self.error: str | None = None  # Prometheus itself failed: why (one line)
        self.note: str | None = None  # the last answer's skipped series: how many, why
        self.skipped = 0  # series skipped in the last good answer
        self.failures = 0
        self._kick = threading.Event()

    def retry_now(self) -> None:
        self.failures = 0
        self._kick.set()

    def _wake(self) -> None:
        self._kick.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self._kick.clear()
            self.poll()
            delay = self.interval
            if self.failures:
                delay = min(MAX_BACKOFF_S, self.interval * 2 ** min(self.failures, 6))
            self._kick.wait(max(0.0, started + delay - time.monotonic()))

    def poll(self) -> None:
        """One instant query; every host's view updated (also when Prometheus fails).
        Never raises: whatever the answer, the poller goes on."""
        try:
            self._poll()
        except Exception as exc:  # a bug's victim is this answer, never the poller
            self._failed(f"cannot read Prometheus's answer: {type(exc).__name__}: {exc}")
        self._call_back()

    def _poll(self) -> None:
        now_mono, now_wall = time.monotonic(), time.time()
        try:
            series = query(self.url, "/api/v1/query", {"query": SELECTOR}, timeout=self.timeout)
        except PrometheusError as exc:
            self._failed(str(exc))
            return
        skipped: list[Skipped] = []
        hosts, up = build_hosts(series, skipped)
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
            if len(self._views) > MAX_HOSTS:  # the longest gone make room
                gone = sorted(
                    (h for h in self._views if h not in hosts and h not in up),
                    key=lambda h: -self._views[h].failures,
                )
                for h in gone[: len(self._views) - MAX_HOSTS]:
                    del self._views[h]
            self.hosts = tuple(sorted(self._views))
        self.failures = 0
        self.error = None
        self.skipped = len(skipped)
        self.note = None
        if skipped:
            first = skipped[0]
            where = f" (host {first.host})" if first.host else ""
            self.note = f"{len(skipped)} series skipped; the first{where}: {first.why}"

    def _failed(self, why: str) -> None:
        """A bad answer: said once (``error``) and on every row; the hosts stay listed."""
        self.failures += 1
        self.error = clean_text(why, 300)
        with self._lock:
            for h, v in self._views.items():
                self._views[h] = replace(
                    v, connected=False, failures=self.failures, error=self.error
                )

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
            timeout=self.timeout,
        )
        by_time: dict[float, list[dict[str, Any]]] = {}
        for s in series:
            if not isinstance(s, dict) or not isinstance(s.get("metric"), dict):
                continue  # (build_hosts counts these in the live view)
            values = s.get("values")
            for sample in values[:100_000] if isinstance(values, list) else ():
                point = _value(sample)
                if point is not None:
                    by_time.setdefault(point[0], []).append(
                        {"metric": s["metric"], "value": list(sample)}
                    )
        built = (build_hosts(by_time[ts])[0] for ts in sorted(by_time))
        return [hosts[host] for hosts in built if host in hosts]
