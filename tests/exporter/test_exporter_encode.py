"""The exporter's cached text encoder writes exactly generate_latest's bytes, and the
exporter without --jobs judges no job (but the same GPU verdicts)."""

from __future__ import annotations

import random
import re
from collections.abc import Iterable

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as om_latest
from prometheus_client.registry import Collector, CollectorRegistry

from gputop.exporter.encode import OpenMetricsEncoder, TextEncoder
from gputop.exporter.server import ExportState, make_registry
from gputop.model import Verdict
from gputop.pipeline import Feed
from gputop.sources.demo import DemoSource


class _Fams(Collector):
    def __init__(self, fams: list[Metric]) -> None:
        self.fams = fams

    def collect(self) -> Iterable[Metric]:
        return list(self.fams)


def test_demo_scrapes_are_byte_identical_tick_after_tick() -> None:
    for jobs, mig in ((True, False), (False, True), (True, True)):
        state = ExportState(with_jobs=jobs)
        source = DemoSource(0, start_time=0.0, step=1.0, mig=mig)
        for _ in range(5):
            state.on_snapshot(source.snapshot())
        registry = CollectorRegistry(auto_describe=False)
        registry.register(state)
        encoder, full, om = TextEncoder(), TextEncoder(), OpenMetricsEncoder()
        for _ in range(6):  # the cache carries across ticks: values change, labels stay
            state.on_snapshot(source.snapshot())
            fast = encoder(registry)
            assert fast == generate_latest(registry)
            assert om(registry) == om_latest(registry)  # type: ignore[no-untyped-call]
            # The served registry adds process_* (its CPU moves between two reads).
            served = full(make_registry(state)).decode().splitlines()
            collector = re.compile(r"(?:# (?:HELP|TYPE) )?process_")  # not gputop_process_*
            mine = [line for line in served if not collector.match(line)]
            assert mine == fast.decode().splitlines()
        assert b"gputop_gpu_verdict_seconds_total{" in fast
        assert (b"gputop_job_verdict{" in fast) == jobs


def test_hostile_labels_and_values_are_escaped_as_the_library_does() -> None:
    g = GaugeMetricFamily("x_ratio", 'help with \\ and\nnewline "q"', labels=["b", "a"])
    g.add_metric(['quo"te\\back\nslash', "ünï\x07"], 0.5)
    g.add_metric(["", "x"], float("nan"))
    g.add_metric(["y", "z"], float("inf"))
    g.add_metric(["1e9", "z"], 1234567890.0)
    g.add_metric(["neg", "z"], -float("inf"))
    c = CounterMetricFamily("c", "a counter", labels=["k"])
    c.add_metric(["v"], 3.0)
    i = InfoMetricFamily("i", "info", labels=["gpu"])
    i.add_metric(["0"], {"name": 'NVIDIA "H100"\n', "z": "1"})
    plain = GaugeMetricFamily("p", "plain", value=7)
    u = GaugeMetricFamily("u_seconds", "with a unit", unit="seconds", value=2.5)
    registry = _Fams([g, c, i, plain, u])
    encoder = TextEncoder()
    assert encoder(registry) == generate_latest(registry)
    assert encoder(registry) == generate_latest(registry)  # from the cache
    om = OpenMetricsEncoder()
    assert om(registry) == om_latest(registry)  # type: ignore[no-untyped-call]
    assert om(registry) == om_latest(registry)  # type: ignore[no-untyped-call]


def test_what_it_does_not_handle_falls_back_to_the_library() -> None:
    h = HistogramMetricFamily(
        "h_seconds", "a histogram", buckets=[("1", 1), ("+Inf", 2)], sum_value=3
    )
    stamped = GaugeMetricFamily("t", "with a timestamp", labels=["a"])
    stamped.add_metric(["x"], 1.0, timestamp=12.5)
    created = CounterMetricFamily("cc", "with created", labels=["a"], created=None)
    created.add_metric(["x"], 2.0, created=100.0)
    for fams in ([h], [stamped], [created], [GaugeMetricFamily("g", "g", value=1), h]):
        registry = _Fams(fams)
        assert TextEncoder()(registry) == generate_latest(registry)
        assert OpenMetricsEncoder()(registry) == om_latest(registry)  # type: ignore[no-untyped-call]


def test_without_jobs_no_job_is_judged_and_gpu_verdicts_are_the_same() -> None:
    source = DemoSource(0, start_time=0.0, step=1.0)
    history = [source.snapshot() for _ in range(25)]
    full = Feed().frame(history).diagnosis
    lean = Feed(judge_jobs=False).frame(history).diagnosis
    assert full.job_verdicts and not lean.job_verdicts
    assert dict(lean.gpus) == dict(full.gpus)
    assert lean.jobs == full.jobs
    assert lean.error is None


def test_values_are_written_as_go_writes_them() -> None:
    from prometheus_client.utils import floatToGoString

    from gputop.exporter.encode import _value

    values = [0, 1, -1, 0.5, 1e-9, 123456.0, 1234567.0, 12345678.9, 1.5e300, -1234567.0]
    values += [float("inf"), float("-inf"), float("nan"), 1e22, 9999999.0, 100.25, -0.0, 3]
    values += [1e6, 999999.5, 1e7, 85899345920, 10**20, 2**53 + 1, 5e-324, 1.7976931348623157e308]
    rng = random.Random(12)
    for exponent in range(-30, 30):  # every magnitude, integers and fractions, both signs
        for _ in range(40):
            x = rng.random() * 10.0**exponent
            values += [x, -x, float(round(x)), -float(round(x)), int(x)]
    for v in values:
        assert _value(v) == floatToGoString(v), v  # type: ignore[no-untyped-call]


PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
    "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)


def test_the_server_serves_each_format_as_the_library_writes_it() -> None:
    from prometheus_client.exposition import choose_encoder

    from gputop.exporter.server import _Server

    state = ExportState(with_jobs=True)
    source = DemoSource(0, start_time=0.0, step=1.0)
    state.on_snapshot(source.snapshot())
    server = _Server(("127.0.0.1", 0), state)
    try:
        only = CollectorRegistry(auto_describe=False)
        only.register(state)
        for accept in (
            "",
            PROMETHEUS_ACCEPT,
            "text/plain;version=1.0.0;escaping=allow-utf-8",
            "application/openmetrics-text;version=1.0.0;escaping=values",
        ):
            server.registry = only  # without process_* (its values move between two reads)
            state.on_snapshot(source.snapshot())
            body, content_type = server.body(accept, False)
            encoder, expected_type = choose_encoder(accept)
            assert content_type == expected_type
            assert body == encoder(only), accept
    finally:
        server.server_close()


def _both_match(encoders: tuple[TextEncoder, OpenMetricsEncoder], fams: list[Metric]) -> bytes:
    """The fast encoders' bytes equal the library's on the same families (whose samples
    the library's own Gauge/Counter/InfoMetricFamily make); returns the text scrape."""
    registry = _Fams(fams)
    text, om = encoders[0](registry), encoders[1](registry)
    assert text == generate_latest(registry)
    assert om == om_latest(registry)  # type: ignore[no-untyped-call]
    return text


def test_series_families_are_byte_identical_through_lost_gpus_host_only_and_na() -> None:
    """One pair of encoders (their per-series caches carry over) through a scripted run:
    no sample yet, demo ticks with jobs, a lost GPU that comes back, n/a values, values
    that change sign at zero or are NaN/inf, MIG, host-only."""
    from gputop.exporter.metrics import Family, Totals, build
    from gputop.model import (
        Clocks,
        DriverInfo,
        GpuMemory,
        GpuSample,
        HostSample,
        MigDevice,
        Pcie,
        Snapshot,
        Utilization,
    )

    encoders = (TextEncoder(), OpenMetricsEncoder())
    totals = Totals()
    assert _both_match(encoders, build(None, {}, (), {}, totals)).startswith(b"# HELP gputop_build")

    source = DemoSource(0, start_time=0.0, step=1.0, mig=True)
    history = [source.snapshot() for _ in range(20)]
    diagnoser = Feed()
    for _ in range(4):
        history.append(source.snapshot())
        d = diagnoser.frame(history).diagnosis
        totals.add(history[-1], d.gpus, 2.0)
        fams = build(history[-1], d.gpus, d.jobs, d.job_verdicts, totals, with_jobs=True)
        assert all(type(f) is Family for f in fams)
        text = _both_match(encoders, fams)
        assert b"gputop_job_workers{" in text and b"gputop_gpu_mig_info{" in text

    def snap(t: float, *gpus: GpuSample, available: bool = True) -> Snapshot:
        return Snapshot(
            time=t,
            hostname="h",
            driver=DriverInfo(available=available, driver_version="550.1" if available else None),
            host=HostSample(cpu_count=8),
            gpus=gpus,
            tick_seconds=0.004,
        )

    def gpu(util: float | None, power: float | None, **kw: object) -> GpuSample:
        return GpuSample(
            index=0,
            uuid='GPU-"0"\\',
            name="H100\n",
            memory=GpuMemory(total=80 << 30, used=(1 << 53) + 1, reserved=None),
            utilization=Utilization(gpu=util),
            power_w=power,
            clocks=Clocks(sm_mhz=1755),
            pcie=Pcie(tx_bytes_per_s=1e6, rx_bytes_per_s=None, gen=4, max_gen=5),
            clock_event_reasons=("sw power cap", "some new reason"),
            **kw,  # type: ignore[arg-type]
        )

    lost = GpuSample(index=1, uuid="GPU-1", name="H100", lost=True, lost_reason="gone")
    back = GpuSample(index=1, uuid="GPU-1", name="H100", utilization=Utilization(gpu=5.0))
    mig = GpuSample(
        index=2,
        mig_mode=True,
        mig_devices=(
            MigDevice(0, uuid="MIG-a", profile="1g.5gb", gpu_instance_id=1, memory=GpuMemory()),
            MigDevice(1, uuid="MIG-b", profile=None, memory=GpuMemory(used=0, total=5 << 30)),
        ),
    )
    verdict = Verdict("idle", "idle", "", "", "ok")
    values = [(-0.0, 0.0), (0.0, -0.0), (0.0, 0.0), (float("nan"), float("inf"))]
    values += [(float("nan"), float("-inf")), (None, None), (100.0, 1e22), (100.0, 1e22)]
    for i, (util, power) in enumerate(values):
        second = lost if i % 3 == 1 else back
        s = snap(100.0 + i, gpu(util, power), second, mig)
        totals.add(s, {0: verdict}, 2.0)
        _both_match(encoders, build(s, {0: verdict, 2: verdict}, (), {}, totals))
    for available in (False, True, False):
        s = snap(200.0, available=available)
        text = _both_match(encoders, build(s, {}, (), {}, totals, with_jobs=True))
        assert b"gputop_gpu_lost" not in text


def test_a_series_line_is_reused_only_for_a_value_that_writes_the_same() -> None:
    from gputop.exporter.metrics import Family

    encoders = (TextEncoder(), OpenMetricsEncoder())
    seen = []
    for value in (0.0, -0.0, -0.0, 0, 0.0, float("nan"), float("nan"), 5, 5.0, 1e22, -1e22):
        fam = Family("x_ratio", "x", "gauge", ("gpu",))
        fam.series.append((("0",), value))
        counter = Family("c_seconds", "c", "counter", ("gpu", "kind"), unit="seconds")
        counter.series.append((("0", "idle"), value))
        seen.append(_both_match(encoders, [fam, counter]))
    assert seen[0] != seen[1] and seen[1] == seen[2] and seen[3] == seen[4]


def test_what_the_encoders_remember_stays_about_one_scrape_as_jobs_come_and_go() -> None:
    from gputop.exporter.metrics import Family

    encoders = (TextEncoder(), OpenMetricsEncoder())
    for tick in range(300):  # 20 job series sets a tick, all new every tick
        fams = [Family("gputop_job_workers", "w", "gauge", ("user", "command", "gpus"))]
        fams[0].series.extend(((f"u{tick}", f"job{k}", "0"), float(k)) for k in range(20))
        _both_match(encoders, fams)  # type: ignore[arg-type]
        for encoder in encoders:
            assert len(encoder._lines) <= 2 * 20 + 64
    assert len(encoders[0]._lines) >= 20  # the last scrape's are kept
