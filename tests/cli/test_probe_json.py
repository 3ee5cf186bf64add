"""A probe's file, end to end (issue 31, sections 2 and 3): a real process on the fake
NVML, its probe file in ``$GPUTOP_PROBE_DIR``; ``--once --json`` and ``--stream`` carry
``processes[].probe`` (and the GPU's process rows), a refused file is said in ``errors``,
and a remote host's line with a probe decodes checked: hostile values n/a with an error."""

from __future__ import annotations

import contextlib
import json
import math
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gputop.model import CudaMemory, Probe
from gputop.sources.remote import parse_line, to_snapshot
from tests.cli.test_cli import run_cli
from tests.helpers.probe_files import contents, make_dir, write


@contextlib.contextmanager
def sleeper() -> Iterator[int]:
    proc = subprocess.Popen(["sleep", "600"])
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture
def job(fake_nvml_env: Any, tmp_path: Path) -> Iterator[tuple[dict[str, str], int, int, Path]]:
    """(the environment of gputop, a process with a valid probe file, one with a stale
    one, the probe directory)."""
    from tests import fakenvml

    probe_dir = make_dir(tmp_path / "probes")
    with sleeper() as good, sleeper() as stale:
        write(probe_dir, good)
        write(probe_dir, stale, contents(stale, time=1_000_000_000.0))
        scenario = fakenvml.Scenario(
            gpus=[
                fakenvml.FakeGpu(
                    processes=[
                        fakenvml.FakeProcess(pid=good, used_memory=2**30),
                        fakenvml.FakeProcess(pid=stale, used_memory=2**30),
                    ]
                )
            ]
        )
        env = fake_nvml_env(scenario)
        env["GPUTOP_PROBE_DIR"] = str(probe_dir)
        yield env, good, stale, probe_dir


def _check(doc: dict[str, Any], good: int, stale: int, probe_dir: Path) -> None:
    procs = {p["pid"]: p for p in doc["processes"]}
    probe = procs[good]["probe"]
    assert probe is not None, doc["errors"]
    assert probe["data_wait_ratio"] == 0.42 and probe["step_seconds"] == 0.31
    assert probe["batches_per_second"] == 3.2 and probe["window_seconds"] == 20.0
    assert probe["memory"] == [
        {"device": 0, "allocated": 1 << 30, "reserved": 3 << 30, "peak": 2 << 30}
    ]
    assert procs[stale]["probe"] is None
    rows = {p["pid"]: p for p in doc["gpus"][0]["processes"]}
    assert rows[good]["probe"] == probe and rows[stale]["probe"] is None
    # (this machine's own /tmp/gputop-UID may hold other files: only the test's are counted)
    said = [e for e in doc["errors"] if e["source"] == "probe" and str(probe_dir) in e["message"]]
    assert len(said) == 1 and f"probe-{stale}.json" in said[0]["message"], said
    assert "stale" in said[0]["message"]


def test_once_json_carries_the_probe_and_says_a_refused_file(
    job: tuple[dict[str, str], int, int, Path],
) -> None:
    env, good, stale, probe_dir = job
    r = run_cli("--once", "--json", env=env)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    _check(json.loads(r.stdout), good, stale, probe_dir)


def test_stream_lines_carry_the_probe_and_a_remote_decodes_them_checked(
    job: tuple[dict[str, str], int, int, Path],
) -> None:
    env, good, stale, probe_dir = job
    r = run_cli("--stream", "--count", "2", "--interval", "0.2", env=env)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2
    for line in lines:
        doc = parse_line(line)
        _check(doc, good, stale, probe_dir)
        snap = to_snapshot(doc)  # the fleet's checked decoding
        probe = snap.process_info(good).probe  # type: ignore[union-attr]
        assert isinstance(probe, Probe) and probe.data_wait_ratio == 0.42
        assert probe.memory == (CudaMemory(0, 1 << 30, 3 << 30, 2 << 30),)
        assert not [e for e in snap.errors if e.source == "remote"]


HOSTILE: list[tuple[str, Any]] = [
    ("data_wait_ratio", math.nan),
    ("data_wait_ratio", 7),
    ("step_seconds", 1e308),
    ("steps", -1),
    ("batches_per_second", "fast"),
    ("window_seconds", [1, 2]),
    ("memory", {"device": 0}),
    ("memory", [{"device": "x"}]),
    ("memory", [{"device": 0, "reserved": -1}]),
    ("time", "now"),
]


@pytest.mark.parametrize(("field", "value"), HOSTILE)
def test_a_remote_lines_hostile_probe_values_are_na_with_an_error(field: str, value: Any) -> None:
    """A remote host's line is untrusted as a probe file is: the fleet's decoding makes an
    impossible probe value n/a (or the probe, when its time is unusable) and says it."""
    with sleeper() as pid:
        probe = {k: v for k, v in contents(pid).items() if k in Probe.__slots__}
    probe[field] = value
    line = json.dumps(
        {
            "schema": 1,
            "time": 1_800_000_000.0,
            "hostname": "far",
            "driver": {"available": True},
            "processes": [{"pid": 42, "visible": True, "probe": probe}],
        }
    )
    snap = to_snapshot(parse_line(line))
    said = [e for e in snap.errors if e.source == "remote"]
    assert len(said) == 1 and f"probe.{field}" in (said[0].metric or ""), said
    got = snap.process_info(42)
    assert got is not None
    if field == "time":
        assert got.probe is None
        return
    assert got.probe is not None
    if field == "memory":
        assert all(isinstance(m, CudaMemory) for m in got.probe.memory)
        assert all(m.reserved is None or m.reserved >= 0 for m in got.probe.memory)
    else:
        assert getattr(got.probe, field) is None
