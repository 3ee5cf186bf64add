"""``gputop fleet --prometheus`` never dies silently (issue 29, class 8).

A real HTTP server on 127.0.0.1 plays a hostile Prometheus: GPU labels ``int`` refuses or
``isdigit`` wrongly takes, JSON nested past Python's recursion limit, text, HTTP errors,
answers without Prometheus's shape, a huge answer, a server that never answers and one
that trickles. A bad series is that series' problem (skipped, counted, in its host's
``errors``); a bad answer is one line (``error``, and on screen); the poller survives
both, asks again on its interval, and R asks at once. Then the good answer comes back
and the good hosts are shown. The fuzz test mutates a good answer's shape and types
(seeded: GPUTOP_FUZZ_SEED=<seed> replays it; the seed is printed with any failure).
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import ssl
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from gputop.sources import prometheus as prom
from gputop.sources.prometheus import PrometheusFleet
from gputop.sources.remote import parse_line, summarize
from gputop.sources.streams import status
from gputop.ui.fleet import FleetApp
from gputop.ui.lines import PartsLines
from tests.helpers import exporter as helpers

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

GOOD = "good:9867"
JSON = "application/json"
#: Any wait for the poller ends by then (a failure, never a hang of the suite).
WAIT_S = 30.0


@dataclass(frozen=True)
class Answer:
    """What the server answers: a status, a content type and a body; or it hangs (says
    nothing), or trickles (a byte at a time, never the whole body or header)."""

    code: int = 200
    kind: str = JSON
    body: bytes = b""
    hang: bool = False
    trickle: bool = False
    trickle_headers: bool = False
    location: str | None = None


def series(name: str, value: str, **labels: Any) -> dict[str, Any]:
    return {"metric": {"__name__": name, "instance": GOOD, **labels}, "value": [time.time(), value]}


def good_series() -> list[dict[str, Any]]:
    """A live host with two GPUs, as ``gputop export`` scraped by Prometheus gives it."""
    out = [series("up", "1"), series("gputop_last_sample_timestamp_seconds", f"{time.time()}")]
    for gpu in ("0", "1"):
        out += [
            series("gputop_gpu_utilization_ratio", "0.5", gpu=gpu),
            series("gputop_gpu_memory_used_bytes", str(2**30), gpu=gpu),
            series("gputop_gpu_memory_total_bytes", str(2**34), gpu=gpu),
        ]
    return out


def vector(result: Any) -> Answer:
    doc = {"status": "success", "data": {"resultType": "vector", "result": result}}
    return Answer(body=json.dumps(doc).encode())


def good(*extra: dict[str, Any]) -> Callable[[], Answer]:
    return lambda: vector([*good_series(), *extra])


class HostilePrometheus:
    """``http.server`` on 127.0.0.1 in a thread; ``answer()`` is what the next request gets."""

    def __init__(self) -> None:
        self.answer: Callable[[], Answer] = good()
        self.requests = 0
        self.released = threading.Event()  # ends every hang and trickle
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.requests += 1
                answer = owner.answer()
                if answer.hang:
                    owner.released.wait(WAIT_S)
                    return
                if answer.trickle_headers:
                    self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                    self.trickle()
                    return
                self.send_response(answer.code)
                self.send_header("Content-Type", answer.kind)
                if answer.location is not None:
                    self.send_header("Location", answer.location)
                self.send_header("Content-Length", str(len(answer.body) or 1 << 20))
                self.end_headers()
                if not answer.trickle:
                    self.wfile.write(answer.body)
                    return
                self.trickle()

            def trickle(self) -> None:
                """A byte every 50 ms (each well within the client's timeout), until released."""
                deadline = time.monotonic() + WAIT_S
                with contextlib.suppress(OSError):  # the client hangs up: its deadline
                    while not owner.released.wait(0.05) and time.monotonic() < deadline:
                        self.wfile.write(b"x")
                        self.wfile.flush()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def set(self, answer: Answer | Callable[[], Answer]) -> None:
        self.answer = answer if callable(answer) else (lambda: answer)


@contextlib.contextmanager
def hostile_prometheus() -> Iterator[HostilePrometheus]:
    p = HostilePrometheus()
    thread = threading.Thread(target=p.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield p
    finally:
        p.released.set()
        p.server.shutdown()
        p.server.server_close()


def wait_until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {WAIT_S:.0f}s waiting for {what}")
        time.sleep(0.05)


def assert_good_host_live(fleet: PrometheusFleet) -> None:
    view = fleet.view(GOOD)
    assert view.report is not None and [c.index for c in view.report.gpus] == [0, 1]
    assert status(view, time.monotonic(), fleet.interval)[0] == "live", view


# --- a bad series is that series' problem -------------------------------------------------

BAD_LABELS = [
    "²",  # isdigit() takes it; int() refuses it (the poller died)
    "٣",  # isdecimal() and int() take it: GPU 3 it is not
    "1" * 7,  # digits past the model's largest GPU index
    "65537",
    "-1",
    " 1",
    "1.0",
    "",
    7,  # not a string
    None,
]


@pytest.mark.parametrize("label", BAD_LABELS, ids=repr)
def test_a_bad_gpu_label_is_that_series_problem(label: object) -> None:
    with hostile_prometheus() as p:
        p.set(good(series("gputop_gpu_utilization_ratio", "0.9", gpu=label)))
        fleet = PrometheusFleet(p.url, interval=15.0)
        fleet.poll()
        assert fleet.error is None
        assert fleet.hosts == (GOOD,)
        assert_good_host_live(fleet)
        assert fleet.skipped == 1
        assert fleet.note is not None and "is not a GPU index" in fleet.note
        data = fleet.view(GOOD).data
        assert data is not None
        (said,) = data["errors"]
        assert said["source"] == "prometheus" and "is not a GPU index" in said["message"]


def test_bad_samples_are_skipped_and_counted() -> None:
    bad = [
        5,
        {"metric": 3, "value": [1.0, "1"]},
        {"metric": {"__name__": "up"}, "value": [1.0, "1"]},  # no instance
        series("gputop_gpu_utilization_ratio", "NaN", gpu="0"),
        series("gputop_gpu_utilization_ratio", "1" * 100, gpu="0"),
        series("gputop_gpu_memory_used_bytes", "1e999", gpu="0"),
        {"metric": {"__name__": "up", "instance": GOOD}, "value": [float("inf"), "1"]},
        {"metric": {"__name__": "up", "instance": GOOD}, "value": [True, "1"]},
        {"metric": {"__name__": "up", "instance": GOOD}, "value": ["1", 1]},
        {"metric": {"__name__": "up", "instance": GOOD}, "value": [1.0]},
        series("gputop_last_sample_timestamp_seconds", "-5"),
        series("node_cpu_seconds_total", "1", gpu="0"),  # not asked for
    ]
    with hostile_prometheus() as p:
        p.set(lambda: vector([*bad, *good_series()]))
        fleet = PrometheusFleet(p.url, interval=15.0)
        fleet.poll()
        assert fleet.error is None and fleet.skipped == len(bad)
        assert_good_host_live(fleet)
        report = fleet.view(GOOD).report
        assert report is not None and report.gpus[0].util == 50.0  # the bad ones did not win


# --- a bad answer is one line; the poller recovers ----------------------------------------

BAD_ANSWERS = {
    "nested JSON": (Answer(body=b"[" * 200_000), "not a Prometheus API answer"),
    "nested in data": (
        Answer(body=b'{"status":"success","data":' + b"[" * 200_000 + b"}"),
        "not a Prometheus API answer",
    ),
    "text": (Answer(kind="text/plain", body=b"up 1\n"), "not a Prometheus API answer (text/plain"),
    "HTML 500": (
        Answer(500, "text/html", b"<h1>Internal error</h1>"),
        "not a Prometheus API answer (HTTP 500",
    ),
    "JSON 400": (
        Answer(400, body=b'{"status":"error","errorType":"bad_data","error":"parse error"}'),
        "Prometheus answered HTTP 400: parse error",
    ),
    "status error": (
        Answer(body=b'{"status":"error","error":["not","text"]}'),
        "Prometheus query failed: no reason given",
    ),
    "no status": (Answer(body=b'{"data":{"result":[]}}'), "not a Prometheus API answer"),
    "a list": (Answer(body=b"[1, 2]"), "not a Prometheus API answer"),
    "result not a list": (
        Answer(body=b'{"status":"success","data":{"result":5}}'),
        "no data.result list",
    ),
    "huge": (Answer(body=b" " * 4096 + b"{}"), "answer over 1024 bytes"),
    "redirect to ftp": (
        Answer(302, "text/plain", b"moved", location="ftp://127.0.0.1:1/api"),
        "cannot reach Prometheus: unknown url type: ftp",
    ),
    "hangs": (Answer(hang=True), "Prometheus did not answer within 1s"),
    "trickles its body": (Answer(trickle=True), "Prometheus did not answer within 1s"),
    "trickles its headers": (Answer(trickle_headers=True), "Prometheus did not answer within 1s"),
}


@pytest.mark.parametrize("case", list(BAD_ANSWERS))
def test_a_bad_answer_is_one_line_and_the_next_good_one_is_read(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer, said = BAD_ANSWERS[case]
    # (a short timeout for the server that never answers; the default for the rest)
    timeout = {"timeout": 1.0} if answer.hang or answer.trickle or answer.trickle_headers else {}
    with hostile_prometheus() as p:
        fleet = PrometheusFleet(p.url, interval=15.0, **timeout)
        fleet.poll()
        assert_good_host_live(fleet)
        p.set(answer)
        if case == "huge":
            monkeypatch.setattr(prom, "MAX_ANSWER_BYTES", 1024)
        fleet.poll()  # never raises
        monkeypatch.undo()
        p.released.set()  # (a hanging handler ends)
        assert fleet.error is not None and said in fleet.error, fleet.error
        assert "\n" not in fleet.error and len(fleet.error) <= 300
        state, _, detail = status(fleet.view(GOOD), time.monotonic(), fleet.interval)
        assert state == "unreachable" and detail == fleet.error
        p.released.clear()
        p.set(good())
        fleet.poll()
        assert fleet.error is None
        assert_good_host_live(fleet)


def test_the_poller_thread_survives_bad_answers_and_retries_on_its_own() -> None:
    with hostile_prometheus() as p:
        p.set(Answer(body=b"[" * 200_000))
        fleet = PrometheusFleet(p.url, interval=0.05)
        fleet.start()
        try:
            wait_until(lambda: p.requests >= 3, "the poller to ask three times")
            assert fleet.error is not None and "not a Prometheus API answer" in fleet.error
            p.set(good(series("gputop_gpu_utilization_ratio", "0.9", gpu="²")))
            wait_until(lambda: GOOD in fleet.hosts, "the good host after the bad answers")
            wait_until(lambda: fleet.skipped == 1, "the bad series counted")
            assert fleet.error is None
        finally:
            fleet.close()


def test_unreachable_prometheus_is_one_line() -> None:
    fleet = PrometheusFleet(f"http://127.0.0.1:{helpers.free_port()}", interval=15.0)
    fleet.poll()
    assert fleet.error is not None and fleet.error.startswith("cannot reach Prometheus: ")
    assert "\n" not in fleet.error


# --- on screen ----------------------------------------------------------------------------


def screen_text(app: FleetApp, widget: str) -> str:
    return app.fleet_screen.query_one(widget, PartsLines).text


async def until(pause: Callable[[], Awaitable[None]], check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {WAIT_S:.0f}s waiting for {what}")
        await pause()


async def test_the_screen_says_a_bad_answer_in_one_line_and_R_asks_again() -> None:
    with hostile_prometheus() as p:
        p.set(Answer(404, "text/plain", b"not found: try /metrics\n"))
        fleet = PrometheusFleet(p.url, interval=3600.0)  # only R asks again
        app = FleetApp(fleet, via=f"prometheus {p.url}")
        # the app starts the poller and run_fleet closes it; here the test does
        with contextlib.closing(fleet):
            async with app.run_test(size=(120, 30)) as pilot:

                async def pause() -> None:
                    await pilot.pause(0.05)

                await until(pause, lambda: "404" in screen_text(app, "#fleet-source"), "the error")
                line = screen_text(app, "#fleet-source")
                assert line == (
                    f"prometheus {p.url}: not a Prometheus API answer "
                    "(HTTP 404 Not Found, text/plain)"
                )
                hosts = screen_text(app, "#fleet-hosts")
                assert "no host matches" not in hosts and "R asks again" in hosts

                p.set(good(series("gputop_gpu_utilization_ratio", "0.9", gpu="²")))
                await pilot.press("R")
                await until(
                    pause, lambda: GOOD in screen_text(app, "#fleet-hosts"), "the good host"
                )
                assert "live" in screen_text(app, "#fleet-hosts")
                line = screen_text(app, "#fleet-source")
                assert "1 series skipped" in line and "'²' is not a GPU index" in line
                assert "hosts 1: live 1" in screen_text(app, "#fleet-summary")


async def test_no_hosts_yet_is_not_a_filter_that_matches_none() -> None:
    with hostile_prometheus() as p:
        p.set(Answer(hang=True))
        fleet = PrometheusFleet(p.url, interval=3600.0)
        app = FleetApp(fleet, via=f"prometheus {p.url}")
        # the app starts the poller and run_fleet closes it; here the test does
        with contextlib.closing(fleet):
            async with app.run_test(size=(120, 30)) as pilot:
                await pilot.pause()
                assert (
                    screen_text(app, "#fleet-hosts") == "no hosts yet: waiting for the first answer"
                )
                assert screen_text(app, "#fleet-source") == ""
                p.released.set()


def test_a_real_gputop_export_url_is_not_prometheus(tmp_path: Path) -> None:
    with helpers.exporter(["--demo", "--interval", "0.5"], tmp=tmp_path) as exp:
        for url in (exp.url, exp.url + "/metrics"):
            fleet = PrometheusFleet(url, interval=15.0)
            fleet.poll()
            assert fleet.error == (
                "not a Prometheus API answer (HTTP 404 Not Found, text/plain)"
            ), fleet.error
            assert fleet.hosts == ()


# --- fuzz: a good answer's shape and types mutated ----------------------------------------

HOSTILE_STRINGS = ["²", "٣", "NaN", "-Inf", "1e999", "", "\x1b[2J", "0" * 80, "-1", "１"]
json_values = st.recursive(
    st.one_of(
        st.sampled_from(HOSTILE_STRINGS),
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.sampled_from(HOSTILE_STRINGS),
        st.text(max_size=8),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
#: Mutations: each a path of child choices into a document, and what goes there.
paths = st.lists(st.integers(min_value=0, max_value=50), max_size=6)
mutations = st.lists(st.tuples(paths, json_values), max_size=4)
#: A label or a sample of one series set to any value (where most checks are needed).
LABELS = ("gpu", "instance", "__name__", "kind", "severity", "name", "uuid")
label_changes = st.lists(
    st.tuples(st.integers(0, 50), st.sampled_from(LABELS), json_values), max_size=4
)
value_changes = st.lists(st.tuples(st.integers(0, 50), st.integers(0, 1), json_values), max_size=3)


def mutate(doc: Any, path: list[int], value: Any) -> Any:
    """``doc`` with the node that ``path`` leads to replaced by ``value``."""
    if not path or not isinstance(doc, dict | list) or not doc:
        return value
    keys = list(doc) if isinstance(doc, dict) else list(range(len(doc)))
    key = keys[path[0] % len(keys)]
    out = dict(doc) if isinstance(doc, dict) else list(doc)
    out[key] = mutate(doc[key], path[1:], value)  # type: ignore[index]
    return out


def test_fuzz_mutated_answers_never_stop_the_poller(fuzz_seed: int) -> None:
    """Seeded: GPUTOP_FUZZ_SEED replays it."""
    base = {"status": "success", "data": {"resultType": "vector", "result": good_series()}}
    with hostile_prometheus() as p:
        fleet = PrometheusFleet(p.url, interval=15.0)

        @seed(fuzz_seed)
        @settings(
            max_examples=150,
            deadline=None,
            database=None,
            print_blob=True,
            suppress_health_check=[HealthCheck.too_slow],
        )
        @given(label_changes, value_changes, mutations, mutations)
        def one(
            labels: list[tuple[int, str, Any]],
            values: list[tuple[int, int, Any]],
            in_series: list[tuple[list[int], Any]],
            in_answer: list[tuple[list[int], Any]],
        ) -> None:
            result: Any = good_series()
            for i, label, value in labels:
                result[i % len(result)]["metric"][label] = value
            for i, at, value in values:  # the time or the value of a [time, value] pair
                result[i % len(result)]["value"][at] = value
            for path, value in in_series:
                result = mutate(result, path, value)
            doc: Any = {**base, "data": {"resultType": "vector", "result": result}}
            for path, value in in_answer:
                doc = mutate(doc, path, value)
            p.set(Answer(body=json.dumps(doc).encode()))
            fleet.poll()
            assert fleet.error is None or (
                "\n" not in fleet.error and fleet.error.startswith(("not a", "Prometheus"))
            ), fleet.error
            for view in fleet.views():
                if view.data is not None:  # what the screen reads is a checked snapshot
                    summarize(parse_line(json.dumps(view.data)))

        one()
        p.set(good())
        fleet.poll()
        assert fleet.error is None
        assert_good_host_live(fleet)


def test_hosts_are_bounded_and_the_gone_make_room(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prom, "MAX_HOSTS", 4)

    def hosts(first: int) -> Callable[[], Answer]:
        names = [f"h{i}:9867" for i in range(first, first + 6)]
        lost = [series("gputop_gpu_lost", "0", instance=n, gpu="0") for n in names]
        return lambda: vector([*(series("up", "1", instance=n) for n in names), *lost])

    with hostile_prometheus() as p:
        fleet = PrometheusFleet(p.url, interval=15.0)
        p.set(hosts(0))
        fleet.poll()
        assert fleet.hosts == ("h0:9867", "h1:9867", "h2:9867", "h3:9867")
        assert fleet.skipped == 2 and fleet.note is not None and "over 4 hosts" in fleet.note
        p.set(hosts(10))  # all new names: the old ones are gone from Prometheus
        fleet.poll()
        assert fleet.hosts == ("h10:9867", "h11:9867", "h12:9867", "h13:9867")


@pytest.mark.requires_tool("openssl")
def test_over_https_a_trickling_server_is_cut_off_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deadline shuts TLS connections as it does plain ones (a self-signed
    certificate for 127.0.0.1, trusted through SSL_CERT_FILE)."""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    with hostile_prometheus() as p:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        p.server.socket = context.wrap_socket(p.server.socket, server_side=True)
        fleet = PrometheusFleet(p.url.replace("http:", "https:"), interval=15.0, timeout=1.0)
        fleet.poll()
        assert fleet.error is None
        assert_good_host_live(fleet)
        for answer in (Answer(trickle_headers=True), Answer(trickle=True)):
            p.set(answer)
            fleet.poll()
            assert fleet.error == "Prometheus did not answer within 1s"
        p.released.set()
        p.set(good())
        fleet.poll()
        assert fleet.error is None
