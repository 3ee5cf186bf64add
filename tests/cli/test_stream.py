"""``gputop --stream``: JSON lines, one snapshot with jobs and verdicts per line."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from typing import Any

import pytest

from gputop import stream
from gputop.analysis.thresholds import Thresholds
from gputop.argtypes import EXIT_NO_DRIVER, EXIT_USAGE
from gputop.model import SCHEMA_VERSION, Snapshot
from gputop.sampler import Sampler
from gputop.sources.demo import DemoSource
from tests.cli.test_cli import ROOT, fake_scenario, no_driver_env, run_cli, run_main


def lines_of(out: str) -> list[dict[str, Any]]:
    assert out.endswith("\n")
    return [json.loads(line) for line in out.splitlines()]


def test_count_lines_each_a_schema_1_snapshot_with_jobs_and_verdicts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, out, err = run_main(capsys, "--stream", "--demo", "--count", "3", "--interval", "0.1")
    assert rc == 0 and err == ""
    docs = lines_of(out)
    assert len(docs) == 3
    times = [d["time"] for d in docs]
    assert times == sorted(times) and len(set(times)) == 3
    for doc in docs:
        assert doc["schema"] == SCHEMA_VERSION
        snap = Snapshot.from_dict(doc)  # the extra keys (verdict, jobs) are additive
        assert len(snap.gpus) == 8
        assert all(g["verdict"]["kind"] for g in doc["gpus"])
        assert doc["jobs"] and all("verdict" in j for j in doc["jobs"])
    # the first line already has rates (over the short first window), as the later ones;
    # how long that window was is a matter of the machine's load, not checked here
    assert docs[0]["host"]["rate_seconds"] > 0
    assert docs[0]["host"]["cpu_percent"] is not None
    assert all(d["host"]["rate_seconds"] > 0 for d in docs[1:])


def test_stream_json_is_the_same_stream(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_main(capsys, "--stream", "--json", "--demo", "--count", "2")
    assert rc == 0 and len(lines_of(out)) == 2


def test_gpus_narrow_every_line(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_main(
        capsys, "--stream", "--demo", "--count", "2", "--interval", "0.1", "--gpus", "1,3"
    )
    assert rc == 0
    for doc in lines_of(out):
        assert [g["index"] for g in doc["gpus"]] == [1, 3]
        assert all({1, 3} & set(j["gpus"]) for j in doc["jobs"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--stream", "--once"], "--stream and --once exclude each other"),
        (["--count", "3"], "--count needs --stream"),
        (["--stream", "--count", "0"], "at least 1 expected"),
        (["--stream", "--count", "x"], "not a whole number"),
        (["--stream", "--demo", "--gpus", "9"], "no GPU with index 9"),
    ],
)
def test_bad_arguments_one_line_exit_2_and_no_output(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    rc, out, err = run_main(capsys, *argv)
    assert rc == EXIT_USAGE and out == ""
    assert message in err and err.count("\n") == 1


def test_a_closed_pipe_ends_it_quietly_with_status_0() -> None:
    """As a user runs it: ``gputop --stream | head -3`` in a shell."""
    gputop = f"{shlex.quote(sys.executable)} -m gputop --stream --demo --interval 0.1"
    r = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {gputop} | head -3"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=60,
    )
    assert r.returncode == 0, r.stderr  # pipefail: gputop's status too
    assert r.stderr == ""
    assert len(lines_of(r.stdout)) == 3


def test_each_line_is_flushed_as_it_is_taken() -> None:
    """A reader gets the first line while the stream still runs (a block-buffered pipe
    would hold it until exit: a fleet view over SSH would see nothing)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputop", "--stream", "--demo", "--interval", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert proc.poll() is None  # still running: the next line is a minute away
        assert json.loads(first)["source"] == "demo"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def test_without_a_driver_it_streams_the_host_part_and_says_why_once() -> None:
    r = run_cli("--stream", "--count", "2", "--interval", "0.1", env=no_driver_env())
    assert r.returncode == EXIT_NO_DRIVER
    docs = lines_of(r.stdout)
    assert len(docs) == 2
    assert all(d["driver"]["available"] is False and d["gpus"] == [] for d in docs)
    assert all(d["host"]["cpu_count"] for d in docs)
    assert r.stderr.count("\n") == 1
    assert r.stderr.startswith("gputop: NVIDIA driver not available: ")


def test_the_real_nvml_path_on_the_fake_library(fake_nvml_env: Any) -> None:
    r = run_cli("--stream", "--count", "2", "--interval", "0.1", env=fake_nvml_env(fake_scenario()))
    assert r.returncode == 0, r.stderr
    docs = lines_of(r.stdout)
    assert [d["source"] for d in docs] == ["nvml", "nvml"]
    assert [g["verdict"]["kind"] for g in docs[0]["gpus"]] == ["warming up", "lost", "idle"]
    assert docs[0]["host"]["rate_seconds"] is not None


# --- the loop itself, on an injected clock -------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 6))
        self.now += seconds


class _SlowSource(DemoSource):
    """Each tick takes ``cost`` seconds of the fake clock."""

    def __init__(self, clock: _Clock, costs: list[float]) -> None:
        super().__init__(0)
        self.clock = clock
        self.costs = costs

    def snapshot(self) -> Snapshot:
        self.clock.now += self.costs.pop(0) if self.costs else 0.0
        return super().snapshot()


def test_ticks_keep_the_interval_and_a_late_one_is_not_made_up() -> None:
    clock = _Clock()
    # the two first readings, then ticks of 0.2, 1.5 (late), 0.1, 0 s
    source = _SlowSource(clock, [0.0, 0.0, 0.2, 1.5, 0.1, 0.0])
    sampler = Sampler(source, interval=1.0)
    out = _Lines()
    try:
        rc = stream.run(sampler, count=5, out=out, first_window=0.1, clock=clock, sleep=clock.sleep)
    finally:
        sampler.stop()
    assert rc == 0 and len(out.lines) == 5
    # after each line, wait for the interval since the tick started; the 1.5 s tick
    # is followed by the next one at once, with no burst to catch up
    assert clock.sleeps == [0.1, 1.0, 0.8, 0.9]


def test_a_pipe_closed_mid_stream_is_raised_for_the_command_to_say() -> None:
    """The stream stops at the failed write; what it means (a reader gone: quiet, exit
    0) is the command's to say (gputop.output, tests/cli/test_closed_stdout.py)."""
    sampler = Sampler(DemoSource(0, clock=time.time), interval=0.01)
    out = _Lines(fail_after=2)
    try:
        with pytest.raises(BrokenPipeError):
            stream.run(sampler, out=out, first_window=0.01, thresholds=Thresholds())
    finally:
        sampler.stop()
    assert len(out.lines) == 2


def test_the_sampler_keeps_only_the_first_pair(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What the verdicts look back on is the diagnoser's (``Diagnoser.push``)."""
    seen: dict[str, int] = {}
    real = Sampler.__init__

    def spy(self: Sampler, *args: Any, **kwargs: Any) -> None:
        seen["history"] = kwargs.get("history", 3600)
        real(self, *args, **kwargs)

    monkeypatch.setattr(Sampler, "__init__", spy)
    rc, _, _ = run_main(capsys, "--stream", "--demo", "--count", "1", "--interval", "2")
    assert rc == 0
    assert seen["history"] == 2


class _Lines:
    """A text stream that records lines; raises BrokenPipeError after ``fail_after``."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.lines: list[str] = []
        self.fail_after = fail_after
        self._buffer = ""

    def write(self, text: str) -> int:
        if self.fail_after is not None and len(self.lines) >= self.fail_after:
            raise BrokenPipeError(32, "Broken pipe")
        self._buffer += text
        *done, self._buffer = self._buffer.split("\n")
        self.lines.extend(done)
        return len(text)

    def flush(self) -> None:
        pass


def test_the_first_reading_is_analysed_inside_the_window_and_the_line_is_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first reading's share of the incremental analysis is done while waiting for
    the second (it costs the first line nothing), and the line is what a one-shot
    diagnosis of the same two readings gives."""
    from gputop import diagnosis as diagnosis_module
    from tests.builders import diagnose

    clock = _Clock()
    calls: list[tuple[Any, int]] = []  # (the snapshot pushed, sleeps so far)
    real_push = diagnosis_module.Diagnoser.push

    def push(self: Any, snapshot: Any, **kw: Any) -> Any:
        calls.append((snapshot, len(clock.sleeps)))
        return real_push(self, snapshot, **kw)

    monkeypatch.setattr(diagnosis_module.Diagnoser, "push", push)
    sampler = Sampler(_SlowSource(clock, []), interval=1.0)
    out = _Lines()
    try:
        rc = stream.run(sampler, count=1, out=out, first_window=0.1, clock=clock, sleep=clock.sleep)
        history = sampler.history()
    finally:
        sampler.stop()
    assert rc == 0
    # the first before the wait, the second after it
    assert calls == [(history[0], 0), (history[1], 1)]
    monkeypatch.setattr(diagnosis_module.Diagnoser, "push", real_push)
    from gputop.present import to_json_dict

    expected = to_json_dict(history[-1], diagnose(history))
    assert json.loads(out.lines[0]) == json.loads(stream.json_line(expected))
