"""Issue 32, section 2: record, then replay at once. Against the real ``gputop record``
(a subprocess on the demo): a replay sees the first sample before a second one is taken;
stopping says in one line what was written; the config file's interval is honoured;
options that make no sense are refused in one line, exit 2."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputop.record.record_cli import build_parser
from gputop.record.store import MIN_MAX_SIZE, Recorder, Recording
from tests.cli.test_cli import ROOT, run_cli
from tests.record.test_record import demo, segments

#: The slowest interval: the recorder's second sample is a minute after its first, so
#: a replay that works before then saw the first sample's own block (before, the first
#: block waited for the flush interval, a minute too).
SLOWEST = "60"


def _env(**extra: str) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), **extra)


class Started:
    """``gputop record --demo`` running, its first stderr line read."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gputop", "record", "--demo", *args],
            cwd=ROOT,
            env=env or _env(),
            text=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert self.proc.stderr is not None
        self.first_line = self.proc.stderr.readline()  # after its signal handlers are set

    def stop(self, sig: int) -> tuple[int, str]:
        self.proc.send_signal(sig)
        _, err = self.proc.communicate(timeout=60)
        return self.proc.returncode, err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate(timeout=60)


@pytest.fixture
def started() -> Iterator[list[Started]]:
    made: list[Started] = []
    yield made
    for s in made:
        s.kill()


def _replay_once(directory: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli("replay", str(directory), *extra, "--once")


def test_a_replay_sees_the_first_sample_before_the_second(
    tmp_path: Path, started: list[Started]
) -> None:
    out = tmp_path / "rec"
    rec = Started("--dir", str(out), "--interval", SLOWEST)
    started.append(rec)
    assert "recording to" in rec.first_line, rec.first_line
    deadline = time.monotonic() + 50  # well before the second sample, a minute after
    seen = None
    while rec.proc.poll() is None and time.monotonic() < deadline:
        result = _replay_once(out, "--at", "now")
        if result.returncode == 0:
            seen = result
            break
        assert "no recording in" in result.stderr or "nothing recorded" in result.stderr, (
            result.stderr
        )
        time.sleep(0.2)  # polling a file the recorder writes, not a synchronisation
    assert seen is not None, "no replayable segment before the recorder's second sample"
    assert "source: demo" in seen.stdout, seen.stdout
    rc, err = rec.stop(signal.SIGINT)
    assert rc == 0, err
    (line,) = err.splitlines()
    assert re.fullmatch(
        r"gputop record: wrote 1 segment, 1 block, \d+\.\d KiB "
        r"\(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d to \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\) in .+",
        line,
    ), line
    assert line.endswith(f"in {out}")
    assert len(Recording(out)) == 1


def test_stopping_says_what_was_written(tmp_path: Path, started: list[Started]) -> None:
    out = tmp_path / "rec"
    rec = Started("--dir", str(out), "--interval", "0.2", "--flush", "0.5")
    started.append(rec)
    deadline = time.monotonic() + 60
    while len(segments(out)) < 2:  # the first sample's segment, then the hour's
        assert rec.proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    rc, err = rec.stop(signal.SIGTERM)
    assert rc == 0, err
    (line,) = err.splitlines()
    m = re.fullmatch(r"gputop record: wrote (\d+) segments, (\d+) blocks, ([\d.]+) KiB .*", line)
    assert m is not None, line
    recording = Recording(out)
    files = segments(out)
    assert int(m.group(1)) == len(files)
    assert int(m.group(2)) == len(recording.blocks)
    total = sum(p.stat().st_size for p in files)
    assert m.group(3) == f"{total / 1024:.1f}"


def test_record_honours_the_config_file(tmp_path: Path, started: list[Started]) -> None:
    config = tmp_path / "config" / "gputop" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("interval = 3\n")
    out = tmp_path / "rec"
    rec = Started("--dir", str(out), env=_env(XDG_CONFIG_HOME=str(config.parents[1])))
    started.append(rec)
    assert "every 3s" in rec.first_line, rec.first_line
    deadline = time.monotonic() + 60
    while not segments(out):
        assert rec.proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    rc, err = rec.stop(signal.SIGTERM)
    assert rc == 0, err
    assert Recording(out).header["interval"] == 3


def test_the_interval_flag_overrides_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("interval = 3\n")
    rec = Started("--dir", str(tmp_path / "rec"), "--config", str(config), "--interval", "2")
    try:
        assert "every 2s" in rec.first_line, rec.first_line
        assert rec.stop(signal.SIGTERM)[0] == 0
    finally:
        rec.kill()


def test_a_bad_config_file_stops_record_with_one_line(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("interval = 0.01\n")
    r = run_cli("record", "--demo", "--dir", str(tmp_path / "rec"), "--config", str(config))
    assert r.returncode == 2
    (line,) = r.stderr.splitlines()
    assert "interval = 0.01 is out of range" in line
    assert not (tmp_path / "rec").exists()


@pytest.mark.parametrize("size", ["1", "1k", "1023k", "0.5M"])
def test_a_max_size_below_the_floor_is_refused(tmp_path: Path, size: str) -> None:
    r = run_cli("record", "--demo", "--dir", str(tmp_path / "rec"), "--max-size", size)
    assert r.returncode == 2, r.stderr
    (line,) = r.stderr.splitlines()
    assert "--max-size" in line and "at least 1M" in line, line
    assert not (tmp_path / "rec").exists()


def test_the_floor_itself_is_accepted() -> None:
    args = build_parser().parse_args(["--max-size", "1M"])
    assert args.max_size == MIN_MAX_SIZE


def test_the_first_sample_alone_costs_one_small_segment(tmp_path: Path) -> None:
    """The budget (bench/bench_record.py, section 1): the early segment is one sample;
    the hour's segment keeps a whole flush interval as its dictionary."""
    snaps = demo(600)
    sizes = []
    for alone in (False, True):
        out = tmp_path / str(alone)
        rec = Recorder(out, interval=1.0, retain=None, max_size=None, first_alone=alone)
        for s in snaps:
            rec.add(s)
        rec.close()
        assert len(Recording(out)) == 600
        sizes.append(sum(p.stat().st_size for p in segments(out)))
        assert rec.bytes_written == sizes[-1]
    plain, alone_size = sizes
    assert alone_size <= plain + 8 * 1024, sizes


def test_the_first_sample_is_readable_before_any_flush(tmp_path: Path) -> None:
    """In process, without the clock: one sample added, nothing closed, already a replay."""
    from gputop.record.store import BackgroundRecorder

    snaps = demo(3)
    rec = Recorder(tmp_path / "cli", interval=1.0, first_alone=True)
    bg = BackgroundRecorder(tmp_path / "dashboard", interval=1.0)  # the dashboard's --record
    try:
        for take in (rec.add, bg):
            take(snaps[0])
        for where in ("cli", "dashboard"):
            recording = Recording(tmp_path / where)
            assert len(recording) == 1 and recording[0] == snaps[0]
        rec.add(snaps[1])
        rec.add(snaps[2])
        assert len(Recording(tmp_path / "cli")) == 1  # the rest waits for the flush interval
    finally:
        rec.close()
        bg.close()
    assert [Recording(tmp_path / "cli")[i] for i in range(3)] == snaps
    assert rec.segments_written == 2 and rec.blocks_written == 2
