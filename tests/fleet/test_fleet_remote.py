"""A remote host's lines are untrusted: size, schema, types and text all checked."""

from __future__ import annotations

import json

import pytest

from gputop.model import SCHEMA_VERSION, Snapshot
from gputop.present import to_json_dict
from gputop.sources import remote
from gputop.sources.demo import DemoSource
from gputop.sources.prometheus import build_hosts
from tests.builders import diagnose


def demo_line(seed: int = 0, ticks: int = 6) -> str:
    source = DemoSource(seed, step=1.0)
    history = [source.snapshot() for _ in range(ticks)]
    return json.dumps(to_json_dict(history[-1], diagnose(history)), separators=(",", ":"))


def test_a_demo_line_round_trips_to_the_same_snapshot() -> None:
    line = demo_line()
    data = remote.parse_line(line)
    assert remote.to_snapshot(data) == Snapshot.from_dict(json.loads(line))
    report = remote.summarize(data)
    assert report.hostname == "gpu-node-07"
    assert len(report.gpus) == 8
    assert {"alice", "bob", "carol"} <= set(report.users)
    assert all(c.verdict is not None for c in report.gpus)
    assert report.gpus[3].mem_percent is not None and report.gpus[3].mem_percent > 80


@pytest.mark.parametrize(
    "line, why",
    [
        (b"garbage", "not JSON"),
        (b"[1,2]", "not a JSON object"),
        (b'{"time": 1}', "no schema"),
        (b'{"schema": "1", "time": 1}', "no schema"),
        (b'{"schema": 0, "time": 1}', "unknown schema"),
        (b'{"schema": 1}', "no time"),
        (b'{"schema": 1, "time": 1, "gpus": {}}', "no time or GPU list"),
        (b"[" * 100_000, "not JSON"),
    ],
)
def test_garbage_is_refused_with_one_line(line: bytes, why: str) -> None:
    with pytest.raises(remote.LineError) as err:
        remote.parse_line(line)
    assert why in str(err.value)
    assert "\n" not in str(err.value)


def test_a_future_schema_is_its_own_error() -> None:
    with pytest.raises(remote.FutureSchema) as err:
        remote.parse_line(json.dumps({"schema": SCHEMA_VERSION + 1, "time": 1}))
    assert "newer" in str(err.value)


def test_an_over_long_line_is_refused() -> None:
    with pytest.raises(remote.LineError, match="limit"):
        remote.parse_line(b" " * (remote.MAX_LINE_BYTES + 1))


def test_wrong_types_become_na_and_text_is_cleaned() -> None:
    data = json.loads(demo_line())
    g = data["gpus"][0]
    g["utilization"]["gpu"] = "97"  # a string where a number belongs
    g["memory"]["used"] = float("nan")
    g["name"] = "\x1b]52;c;AAAA\x07H100\x1b[31m [red]evil[/red]"
    g["verdict"] = {"kind": "gpu-bound\x1b[2J", "severity": "catastrophic"}
    g["processes"][0]["user"] = "eve\u202e\nroot"
    g["temperature_c"] = {"nested": True}
    data["hostname"] = "host\x00name"
    report = remote.summarize(remote.parse_line(json.dumps(data)))
    cell = report.gpus[0]
    assert cell.util is None and cell.mem_used is None
    assert cell.verdict is not None and cell.verdict.kind == "gpu-bound"
    assert cell.verdict.severity == "info"  # unknown severities are not trusted
    assert all("\x1b" not in u and "\n" not in u and "\u202e" not in u for u in report.users)
    assert report.hostname == "hostname"
    snap = remote.to_snapshot(remote.parse_line(json.dumps(data)))
    gpu = snap.gpus[0]
    assert gpu.utilization.gpu is None and gpu.temperature_c is None
    assert gpu.name is not None and "\x1b" not in gpu.name and "\x07" not in gpu.name
    assert "[red]" in gpu.name  # markup stays text: the UI never parses it


def test_missing_required_fields_are_an_error_not_a_crash() -> None:
    with pytest.raises(remote.LineError):
        remote.to_snapshot({"schema": 1, "time": "now", "gpus": []})
    snap = remote.to_snapshot({"schema": 1, "time": 5, "gpus": [{"index": "x"}, {"index": 1}]})
    assert [g.index for g in snap.gpus] == [1]  # a GPU without a usable index is dropped
    assert snap.driver.available is False


def test_prometheus_series_become_snapshot_dicts() -> None:
    def s(name: str, value: float, **labels: str) -> dict[str, object]:
        return {"metric": {"__name__": name, **labels}, "value": [1000.0, str(value)]}

    series = [
        s("up", 1, instance="a:9867"),
        s("gputop_gpu_utilization_ratio", 0.97, instance="a:9867", gpu="0"),
        s("gputop_gpu_memory_used_bytes", 2**30, instance="a:9867", gpu="0"),
        s("gputop_gpu_memory_total_bytes", 2**32, instance="a:9867", gpu="0"),
        s("gputop_gpu_verdict", 1, instance="a:9867", gpu="0", kind="gpu-bound", severity="ok"),
        s("gputop_gpu_verdict", 0, instance="a:9867", gpu="0", kind="idle", severity="ok"),
        s("up", 1, instance="b:9400"),
        s("DCGM_FI_DEV_GPU_UTIL", 40, instance="b:9400", gpu="1", UUID="GPU-x"),
        s("DCGM_FI_DEV_FB_USED", 1024, instance="b:9400", gpu="1"),
        s("DCGM_FI_DEV_FB_FREE", 3072, instance="b:9400", gpu="1"),
        s("up", 0, instance="c:9867"),
        {"metric": {"__name__": "gputop_gpu_lost"}, "value": "junk"},
    ]
    hosts, up = build_hosts(series)
    assert up == {"a:9867": True, "b:9400": True, "c:9867": False}
    a = remote.summarize(remote.parse_line(json.dumps(hosts["a:9867"])))
    assert a.gpus[0].util == pytest.approx(97.0)
    assert a.gpus[0].mem_percent == pytest.approx(25.0)
    assert a.gpus[0].verdict is not None and a.gpus[0].verdict.kind == "gpu-bound"
    b = remote.summarize(remote.parse_line(json.dumps(hosts["b:9400"])))
    assert b.source == "dcgm"
    assert b.gpus[0].index == 1 and b.gpus[0].util == 40.0
    assert b.gpus[0].mem_total == 4096 * 2**20 and b.gpus[0].verdict is None
