"""gputop record / replay: the format, crash safety, damage, retention, bad input, and
``replay --once --json`` against what was live at that moment."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gputop.model import Snapshot, check_values
from gputop.pipeline import Feed
from gputop.present import to_json_dict
from gputop.record import codec
from gputop.record.store import (
    FORMAT_VERSION,
    MAGIC,
    Recorder,
    Recording,
    RecordingError,
    RecordWriteError,
    index_segment,
    parse_duration,
    parse_size,
)
from gputop.record.when import parse_time
from gputop.sampler import Sampler
from gputop.sources.demo import DEMO_EPOCH, DemoSource
from tests.cli.test_cli import GHOST, ROOT, fake_scenario, run_cli

HOUR = 3600.0


def demo(n: int, *, seed: int = 0, start: float = DEMO_EPOCH, step: float = 1.0) -> list[Snapshot]:
    src = DemoSource(seed, start_time=start, step=step)
    return [src.snapshot() for _ in range(n)]


def record(directory: Path, snaps: list[Snapshot], **kw: Any) -> Recorder:
    rec = Recorder(directory, interval=1.0, retain=None, max_size=None, **kw)
    for s in snaps:
        rec.add(s)
    rec.close()
    return rec


def segments(directory: Path) -> list[Path]:
    return sorted(directory.glob("gputop-*.rec"))


# --- format -------------------------------------------------------------------------


def test_demo_round_trips_losslessly_across_segments(tmp_path: Path) -> None:
    # 150 s from 30 s before an hour boundary, blocks of 20 s: two segments.
    start = (DEMO_EPOCH // HOUR + 1) * HOUR - 30
    snaps = demo(150, start=start)
    record(tmp_path, snaps, flush_seconds=20)
    assert len(segments(tmp_path)) == 2
    rec = Recording(tmp_path)
    assert rec.problems == []
    assert len(rec) == 150
    assert [rec[i] for i in range(150)] == snaps
    head = index_segment(segments(tmp_path)[0]).header
    assert head["format"] == FORMAT_VERSION and head["interval"] == 1.0
    assert head["host"] and head["gputop"]


def test_every_value_kind_survives(tmp_path: Path) -> None:
    """None, NaN, inf, -0.0, big ints, odd floats, unicode, processes coming and going."""
    base = demo(1)[0]
    odd = []
    for i, value in enumerate([None, float("nan"), float("inf"), -0.0, 1e300, 0.1 + 0.2]):
        gpus = list(base.gpus)
        gpus[0] = codec_replace_power(gpus[0], value)
        procs = base.processes if i % 2 else base.processes[:3]
        odd.append(
            Snapshot.from_dict(
                {
                    **base.to_dict(),
                    "time": base.time + i,
                    "hostname": "hôst-☃",
                    "gpus": [g.to_dict() if hasattr(g, "to_dict") else _d(g) for g in gpus],
                    "processes": [_d(p) for p in procs],
                    "errors": [{"source": "nvml", "message": "x" * i, "gpu": None, "metric": None}],
                }
            )
        )
    odd[2] = Snapshot.from_dict({**odd[2].to_dict(), "host": None})
    record(tmp_path, odd)
    back = [Recording(tmp_path)[i] for i in range(len(odd))]
    # Exact, then checked by value as a remote line is: NaN, inf and 1e300 W are n/a.
    checked = [check_values(s, "replay", "the recording") for s in odd]
    assert [json.dumps(b.to_dict()) for b in back] == [json.dumps(s.to_dict()) for s in checked]
    assert [b.gpus[0].power_w for b in (back[1], back[2], back[4])] == [None, None, None]
    assert any("the recording reported power_w = nan" in e.message for e in back[1].errors)


def _d(obj: Any) -> Any:
    from gputop.model import _to_jsonable

    return _to_jsonable(obj)


def codec_replace_power(gpu: Any, value: Any) -> Any:
    from gputop.model import replace

    return replace(gpu, power_w=value, ecc_uncorrected=2**64 - 1)


def test_fake_nvml_scenario_is_recorded_for_real(fake_nvml_env: Any, tmp_path: Path) -> None:
    env = fake_nvml_env(fake_scenario())
    out = tmp_path / "rec"
    proc = _start_recorder(out, env=env, interval=0.2, flush=0.5)
    try:
        _wait_for_snapshots(out, 3)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    rec = Recording(out)
    snaps = [rec[i] for i in range(len(rec))]
    assert snaps[0].source == "nvml"
    assert [g.lost for g in snaps[-1].gpus] == [False, True, False]
    pids = {p.pid for p in snaps[-1].gpus[0].processes}
    assert GHOST in pids
    r = run_cli("replay", str(out), "--once", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["gpus"][1]["verdict"]["kind"] == "lost"
    assert Snapshot.from_dict(data) == snaps[-1]


# --- crash safety ---------------------------------------------------------------------


def _start_recorder(
    directory: Path, *, env: dict[str, str] | None = None, interval: float = 0.1, flush: float = 1
) -> subprocess.Popen[str]:
    full_env = dict(os.environ if env is None else env)
    full_env["PYTHONPATH"] = str(ROOT)
    args = ["--interval", str(interval), "--flush", str(flush), "--dir", str(directory)]
    if env is None:
        args.append("--demo")
    return subprocess.Popen(
        [sys.executable, "-m", "gputop", "record", *args],
        cwd=ROOT,
        env=full_env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _count(directory: Path) -> int:
    total = 0
    for seg in segments(directory):
        with contextlib.suppress(RecordingError):
            total += sum(b.count for b in index_segment(seg).blocks)
    return total


def _wait_for_snapshots(directory: Path, n: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while _count(directory) < n:
        assert time.monotonic() < deadline, f"fewer than {n} snapshots recorded"
        time.sleep(0.1)


@pytest.fixture
def killed_recording(tmp_path: Path) -> Iterator[tuple[Path, float, int]]:
    """A demo recorder SIGKILLed after at least 3 flushes: (dir, kill time, snapshots
    on disk just before the kill)."""
    out = tmp_path / "rec"
    proc = _start_recorder(out)
    try:
        _wait_for_snapshots(out, 20)
        on_disk = _count(out)
        killed_at = time.time()
        proc.kill()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.communicate()
    yield out, killed_at, on_disk


def test_sigkill_keeps_everything_up_to_the_last_flush(
    killed_recording: tuple[Path, float, int],
) -> None:
    out, killed_at, on_disk = killed_recording
    rec = Recording(out)
    assert rec.problems == []  # a block is written whole: nothing half-written
    assert len(rec) >= on_disk  # everything flushed before the kill is there
    times = [rec[i].time for i in range(len(rec))]
    assert times == sorted(times)
    assert killed_at - times[-1] < 60  # the design's bound: at most the last 60 s lost
    r = run_cli("replay", str(out), "--once", "--json")
    assert r.returncode == 0 and r.stderr == ""
    assert json.loads(r.stdout)["time"] == times[-1]


def test_a_restart_never_appends_to_an_old_segment(
    killed_recording: tuple[Path, float, int],
) -> None:
    out, _, _ = killed_recording
    before = {p: p.read_bytes() for p in segments(out)}
    # Damage the newest segment: cut it inside its last block.
    last = max(before, key=lambda p: index_segment(p).blocks[-1].last)  # written last
    with last.open("r+b") as f:
        f.truncate(len(before[last]) - 7)
    before[last] = last.read_bytes()
    proc = _start_recorder(out)
    try:
        _wait_for_snapshots(out, _count(out) + 5)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    assert proc.returncode == 0
    after = segments(out)
    assert len(after) == len(before) + 2  # the first sample's own, then the rest's
    for p, data in before.items():
        assert p.read_bytes() == data  # untouched
    rec = Recording(out)
    assert len(rec.problems) == 1 and "bytes could not be read" in rec.problems[0]


# --- damage -----------------------------------------------------------------------------


@pytest.fixture
def five_blocks(tmp_path: Path) -> tuple[Path, list[Snapshot]]:
    snaps = demo(100)
    record(tmp_path, snaps, flush_seconds=20)
    (seg,) = segments(tmp_path)
    assert len(index_segment(seg).blocks) == 5
    return seg, snaps


def test_a_truncated_segment_gives_its_readable_prefix(
    five_blocks: tuple[Path, list[Snapshot]],
) -> None:
    seg, snaps = five_blocks
    blocks = index_segment(seg).blocks
    cut = blocks[3].offset + 10  # inside the fourth block's payload
    data = seg.read_bytes()
    seg.write_bytes(data[:cut])
    rec = Recording(seg)
    assert [rec[i] for i in range(len(rec))] == snaps[:60]
    lost = cut - (blocks[2].offset + blocks[2].length)
    assert rec.problems == [
        f"{seg}: {lost} bytes could not be read (damaged or cut short); "
        "showing the 60 snapshots before them"
    ]
    r = run_cli("replay", str(seg), "--once", "--json")
    assert r.returncode == 0
    assert r.stderr.count("\n") == 1 and f"{lost} bytes could not be read" in r.stderr
    assert json.loads(r.stdout)["time"] == snaps[59].time


def test_a_bit_flip_gives_the_prefix_before_it(five_blocks: tuple[Path, list[Snapshot]]) -> None:
    seg, snaps = five_blocks
    blocks = index_segment(seg).blocks
    data = bytearray(seg.read_bytes())
    at = blocks[2].offset + blocks[2].length // 2
    data[at] ^= 0x10
    seg.write_bytes(bytes(data))
    rec = Recording(seg)
    assert len(rec) == 40
    assert [rec[i] for i in range(40)] == snaps[:40]
    (line,) = rec.problems
    assert f"{len(data) - (blocks[1].offset + blocks[1].length)} bytes could not be read" in line


def test_a_flipped_block_header_is_caught_too(five_blocks: tuple[Path, list[Snapshot]]) -> None:
    seg, _ = five_blocks
    blocks = index_segment(seg).blocks
    data = bytearray(seg.read_bytes())
    data[blocks[1].offset - 12] ^= 0x01  # in the block's first-time field
    seg.write_bytes(bytes(data))
    assert len(Recording(seg)) == 20


# --- retention ---------------------------------------------------------------------------


def _fake_segment(directory: Path, name: str, size: int, mtime: float) -> Path:
    p = directory / name
    p.write_bytes(MAGIC + b"\0" * (size - len(MAGIC)))
    os.utime(p, (mtime, mtime))
    return p


def test_retention_by_age_and_size_on_an_injected_clock(tmp_path: Path) -> None:
    now = 2_000_000_000.0
    day = 86400.0
    old = _fake_segment(tmp_path, "gputop-20330101T000000Z.rec", 1000, now - 8 * day)
    mid = _fake_segment(tmp_path, "gputop-20330102T000000Z.rec", 1000, now - 3 * day)
    new = _fake_segment(tmp_path, "gputop-20330105T000000Z.rec", 1000, now - 1 * day)
    other = tmp_path / "notes.txt"
    other.write_text("not mine")
    clock = [now]
    rec = Recorder(tmp_path, interval=1, retain=7 * day, max_size=10_000, clock=lambda: clock[0])
    assert not old.exists() and mid.exists() and new.exists()
    clock[0] = now + 5 * day  # mid is now 8 days old
    assert rec.apply_retention() == [mid.name]
    rec.max_size = 500  # too big: the oldest go first, whatever their age
    assert rec.apply_retention() == [new.name]
    assert other.exists()
    rec.close()


def test_size_retention_never_deletes_the_segment_being_written(tmp_path: Path) -> None:
    snaps = demo(40)
    rec = Recorder(tmp_path, interval=1, retain=None, max_size=1, flush_seconds=10)
    for s in snaps:
        rec.add(s)
    rec.flush()
    (seg,) = segments(tmp_path)
    assert rec.apply_retention() == []
    rec.close()
    assert len(Recording(seg)) == 40


def test_sizes_and_durations() -> None:
    assert parse_size("2G") == 2 * 2**30 and parse_size("500M") == 500 * 2**20
    assert parse_size("10kB") == 10240 and parse_size("1024") == 1024
    assert parse_duration("7d") == 7 * 86400 and parse_duration("90m") == 5400
    for bad in ("", "2X", "-1G", "0"):
        with pytest.raises(ValueError):
            parse_size(bad)
    with pytest.raises(ValueError):
        parse_duration("soon")


# --- writing fails: one line, non-zero --------------------------------------------------


def test_an_unwritable_dir_is_one_line_and_exit_1(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = run_cli("record", "--demo", "--dir", str(blocker / "sub"))
    assert r.returncode == 1
    assert r.stderr == f"gputop record: cannot use {blocker / 'sub'}: Not a directory\n"


def test_two_recorders_do_not_share_a_directory(tmp_path: Path) -> None:
    first = Recorder(tmp_path, interval=1)
    with pytest.raises(RecordWriteError, match="another gputop record"):
        Recorder(tmp_path, interval=1)
    first.close()


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs (needs root: skipped otherwise)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True
    )
    if r.returncode != 0:
        from tests.conftest import missing

        missing(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_full_disk_is_one_line_and_exit_1(tiny_fs: Path) -> None:
    proc = _start_recorder(tiny_fs, interval=0.1, flush=0.2)
    try:
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1
    lines = err.splitlines()
    assert lines[0].startswith("gputop record: recording to")
    assert len(lines) == 2 and lines[1].startswith("gputop record: cannot write ")
    assert lines[1].endswith(": No space left on device")
    # What reached the disk reads back (the cut-short block is said, not fatal).
    rec = Recording(tiny_fs)
    assert len(rec) > 0


# --- bad input: one line, exit 2 ---------------------------------------------------------


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    text = tmp_path / "notes.rec"
    text.write_text("hello\n")
    future = tmp_path / "future.rec"
    head = MAGIC + struct.pack("<HI", FORMAT_VERSION + 1, 2) + b"{}"
    future.write_bytes(head + struct.pack("<I", zlib.crc32(head)))  # as format 2 on checks
    cases = {
        empty: f"gputop replay: no recording in {empty} (no gputop-*.rec segment files)\n",
        text: f"gputop replay: {text} is not a gputop recording\n",
        future: f"gputop replay: {future} was written by a newer gputop (recording format "
        f"{FORMAT_VERSION + 1}; this gputop 0.1.0 reads format {FORMAT_VERSION})\n",
        tmp_path / "nope": f"gputop replay: {tmp_path / 'nope'}: no such file or directory\n",
    }
    for path, message in cases.items():
        r = run_cli("replay", str(path), "--once")
        assert (r.returncode, r.stdout, r.stderr) == (2, "", message)
    r = run_cli("replay", str(empty), "--at", "teatime", "--once")
    assert r.returncode == 2 and r.stderr.count("\n") == 1


# --- replay: the same truth as live ------------------------------------------------------


def test_replay_once_json_is_what_was_live_then(tmp_path: Path) -> None:
    """A live dashboard's pipeline (sampler, diagnoser on its history) and a recorder on
    the same snapshots; then ``replay --at T --once --json`` for a few moments T."""
    source = DemoSource(2, start_time=DEMO_EPOCH, step=1.0)
    sampler = Sampler(source, interval=1.0)
    diagnoser = Feed()
    rec = Recorder(tmp_path, interval=1.0, retain=None, max_size=None, flush_seconds=30)
    live: dict[float, dict[str, Any]] = {}
    for _ in range(700):
        snap = sampler.tick_now()
        rec.add(snap)
        live[snap.time] = to_json_dict(snap, diagnoser.frame(sampler.history()).diagnosis)
    rec.close()
    sampler.stop()
    times = sorted(live)
    for t in (times[5], times[333], times[-1]):
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
        r = run_cli("replay", str(tmp_path), "--at", stamp, "--once", "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout) == live[t]
    r = run_cli("replay", str(tmp_path), "--from", f"@{times[600]}", "--to", f"@{times[604]}")
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert lines == [live[t] for t in times[600:605]]


def test_replay_range_into_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    record(tmp_path, demo(200))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run(
        f"{sys.executable} -m gputop replay {tmp_path} --from @0 --json | head -2",
        shell=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )
    assert r.returncode == 0 and r.stderr == ""
    assert len(r.stdout.splitlines()) == 2


def test_replay_once_before_the_recording_is_said(tmp_path: Path) -> None:
    record(tmp_path, demo(5))
    r = run_cli("replay", str(tmp_path), "--at", "@1000", "--once")
    assert r.returncode == 2 and "the recording starts later" in r.stderr


# --- times --------------------------------------------------------------------------------


def test_time_forms() -> None:
    import datetime as dt

    now = dt.datetime(2026, 11, 30, 12, 0, 0).timestamp()
    at = dt.datetime(2026, 11, 30, 3, 0).timestamp()
    assert parse_time("2026-11-30 03:00", now) == at
    assert parse_time("03:00", now) == at
    assert parse_time("13:00", now) == dt.datetime(2026, 11, 29, 13, 0).timestamp()
    assert parse_time("2h ago", now) == now - 7200
    assert parse_time("90 s ago", now) == now - 90
    assert parse_time("yesterday 23:10", now) == dt.datetime(2026, 11, 29, 23, 10).timestamp()
    assert parse_time("now", now) == now and parse_time("@12.5", now) == 12.5
    assert parse_time("2026-11-30T03:00:05", now) == at + 5
    for bad in ("teatime", "25:00", "yesterday 9", ""):
        with pytest.raises(ValueError):
            parse_time(bad, now)


def test_codec_rejects_garbage() -> None:
    with pytest.raises(codec.CodecError):
        codec.decode_snapshots(b"\x05\x00\x00\x00{oops")
    # Column descriptions that are not what the codec writes: a CodecError, nothing else.
    for col in (5, [], ["c", "x", 1.0], ["c", 0, 1.0, {"rows": [7]}], ["c", 0, 1.0, {}]):
        head = json.dumps({"n": 1, "keys": [["time"]], "cols": [col]}).encode()
        with pytest.raises(codec.CodecError, match="unreadable column"):
            codec.decode_snapshots(struct.pack("<I", len(head)) + head)


# --- the dashboard's --record ---------------------------------------------------------


def test_background_recorder_never_raises_and_says_why(tiny_fs: Path) -> None:
    from gputop.record.store import BackgroundRecorder

    bg = BackgroundRecorder(tiny_fs, interval=1.0, flush_seconds=1)
    for s in demo(600):
        bg(s)  # fills the 256 KiB disk on the way: never raises
    assert bg.status() is not None and "No space left on device" in bg.status()  # type: ignore[operator]
    bg.close()
    assert len(Recording(tiny_fs)) > 0


def test_background_recorder_in_an_unusable_dir(tmp_path: Path) -> None:
    from gputop.record.store import BackgroundRecorder

    (tmp_path / "file").write_text("x")
    bg = BackgroundRecorder(tmp_path / "file" / "sub", interval=1.0)
    assert bg.status() == f"cannot use {tmp_path / 'file' / 'sub'}: Not a directory"
    bg(demo(1)[0])
    bg.close()


def test_the_dashboard_records_what_its_sampler_ticks(tmp_path: Path) -> None:
    from gputop.record.store import BackgroundRecorder

    bg = BackgroundRecorder(tmp_path, interval=0.1, flush_seconds=0.3)
    feed = Feed()  # the dashboard's: the recorder is a subscriber of its frames
    feed.subscribers.append(lambda frame: bg(frame.snapshot))
    sampler = Sampler(DemoSource(0, clock=time.time), interval=0.1, on_snapshot=feed.push)
    sampler.start()
    try:
        deadline = time.monotonic() + 30
        while _count(tmp_path) < 3:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        sampler.stop()
        bg.close()
    assert bg.status() is None and len(Recording(tmp_path)) >= 3


async def test_a_record_failure_is_in_the_header() -> None:
    from gputop.ui.app import GpuTopApp

    app = GpuTopApp(snapshots=demo(3))
    app.record_status = lambda: "cannot write x.rec: No space left on device"
    async with app.run_test(size=(160, 40)) as pilot:
        app._check_stale()
        await pilot.pause()
        line = "".join(seg.text for seg in app.header.render_line(0))
        assert "! not recording: cannot write x.rec: No space left on device" in line


def test_record_is_for_the_dashboard(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.cli.test_cli import run_main

    rc, _, err = run_main(capsys, "--once", "--record")
    assert rc == 2 and "--record goes with the dashboard" in err


def test_the_compiled_decoder_is_the_plain_walk(fake_nvml: Any) -> None:
    """Snapshot.from_dict (compiled once per class) gives what the plain walk over the
    type hints gives (tests/helpers/plain_decoder.py), on the demo, the fake NVML source
    and odd values."""
    from gputop.sources.live import LiveSource
    from tests.helpers.plain_decoder import plain_from_dict

    src = LiveSource()
    try:
        live = [src.snapshot(), src.snapshot()]
    finally:
        src.close()
    for snap in [*demo(30), *live]:
        d = snap.to_dict()
        assert Snapshot.from_dict(d) == plain_from_dict(d) == snap
    d = demo(2)[1].to_dict()
    d["host"] = None
    d["gpus"][0]["processes"][0]["visible"] = None
    d["gpus"][1]["power_w"] = 300  # an int where a float belongs
    assert Snapshot.from_dict(d) == plain_from_dict(d)
    assert type(Snapshot.from_dict(d).gpus[1].power_w) is float


def _direct(snaps: list[Snapshot]) -> tuple[list[Snapshot], list[Snapshot]]:
    """A block of ``snaps`` decoded straight from its columns (failing if that falls
    back) and through the rows' dicts."""
    payload = codec.encode_rows([codec.flatten(s) for s in snaps])
    n, keys, columns, flags = codec._decode_columns(payload)
    direct = codec._Direct(n, keys, columns, flags).snapshots()
    checked = [check_values(s, "replay", "the recording") for s in direct]
    assert _same(codec.decode_snapshots(payload), checked)
    return direct, codec._from_dicts(n, keys, columns)


def _same(a: list[Snapshot], b: list[Snapshot]) -> bool:
    # json.dumps: NaN equals NaN and -0.0 differs from 0.0, bit for bit as the codec keeps.
    return [json.dumps(s.to_dict()) for s in a] == [json.dumps(s.to_dict()) for s in b]


def test_decoding_straight_from_the_columns_is_the_dict_path(fake_nvml: Any) -> None:
    """codec._Direct (what a replay uses) gives exactly what the rows' dicts give, on the
    demo (processes coming and going), MIG, the fake NVML source, a host-only snapshot,
    a lost GPU and odd values; and shares what is the same in every row of a block."""
    from gputop.model import replace
    from gputop.sources.live import LiveSource

    src = LiveSource()
    try:
        live = [src.snapshot() for _ in range(3)]
    finally:
        src.close()
    demo_snaps = demo(60)
    mig = [DemoSource(0, start_time=DEMO_EPOCH, step=1.0, mig=True).snapshot() for _ in range(5)]
    base = demo(3)
    odd = []
    for i, value in enumerate([None, float("nan"), float("inf"), -0.0, 1e300, 0.1 + 0.2]):
        gpus = list(base[i % 3].gpus)
        gpus[0] = codec_replace_power(gpus[0], value)
        gpus[1] = replace(gpus[1], lost=True, lost_reason="fell off the bus ☃")
        odd.append(
            replace(
                base[i % 3],
                time=base[0].time + i,
                hostname="hôst-☃",
                gpus=tuple(gpus),
                processes=base[i % 3].processes[: 3 + 5 * (i % 2)],
                host=None if i == 2 else base[i % 3].host,
            )
        )
    host_only = Snapshot.from_dict(
        {**demo(1)[0].to_dict(), "gpus": [], "driver": {"available": False, "error": "no"}}
    )
    d = demo(2)[1].to_dict()
    d["gpus"][0]["processes"][0]["visible"] = None  # a GPU process with no host view
    d["gpus"][1]["power_w"] = 300  # an int where a float belongs
    ints = [Snapshot.from_dict(d), Snapshot.from_dict({**d, "time": d["time"] + 1})]
    for block in (demo_snaps, mig, live, odd, [host_only, *demo(2)], ints):
        direct, rows = _direct(block)
        assert _same(direct, rows)
        # The codec's promise: Snapshot.from_dict of the very same dicts (an int where
        # a float belongs comes back a float, as from_dict makes it).
        assert _same(direct, [Snapshot.from_dict(b.to_dict()) for b in block])
    direct, _ = _direct(ints)
    assert type(direct[0].gpus[1].power_w) is float and direct[0].gpus[0].processes[0].host is None
    # Shared: a part that is the same in every row is one object; the host side of a
    # GPU process is its snapshot's own ProcessInfo.
    direct, _ = _direct(demo_snaps)
    assert direct[0].driver is direct[-1].driver
    proc = direct[5].gpus[0].processes[0]
    assert proc.host is direct[5].process_info(proc.pid)


def test_decoding_a_block_leaves_the_collector_as_it_was(tmp_path: Path) -> None:
    """Recording pauses the cyclic GC while it builds a block, and only then."""
    import gc

    snaps = demo(30)
    record(tmp_path, snaps, flush_seconds=10)
    seen: list[bool] = []
    rec = Recording(tmp_path)
    decode = codec.decode_snapshots

    def spy(payload: bytes) -> list[Snapshot]:
        seen.append(gc.isenabled())
        return decode(payload)

    try:
        codec.decode_snapshots = spy  # type: ignore[assignment]
        assert gc.isenabled()
        assert [rec[i] for i in range(30)] == snaps
        assert gc.isenabled() and seen and not any(seen)
        gc.disable()
        rec._cache.clear()
        assert rec[0] == snaps[0]
        assert not gc.isenabled()  # not switched on by a decode
    finally:
        gc.enable()
        codec.decode_snapshots = decode  # type: ignore[assignment]


def test_a_block_the_direct_decoder_does_not_know_goes_the_dict_way() -> None:
    snaps = demo(3)
    rows = [codec.flatten(s) for s in snaps]
    for row in rows:
        row[("gpus", 0, "future_field")] = 1  # what a newer gputop might add
    payload = codec.encode_rows(rows)
    n, keys, columns, flags = codec._decode_columns(payload)
    with pytest.raises(codec._Fallback):
        codec._Direct(n, keys, columns, flags).snapshots()
    assert codec.decode_snapshots(payload) == snaps
    # An empty dict, or a fixed tuple with an item too many: the dict way too, whose
    # answer it is (not an exception of the column decoder's own).
    rows = [codec.flatten(s) for s in snaps]
    for row in rows:
        row[("gpus", 0, "future_part", "{}")] = 0
    assert codec.decode_snapshots(codec.encode_rows(rows)) == snaps
    rows = [codec.flatten(s) for s in snaps]
    for row in rows:
        row[("host", "load_average", 3)] = 1.0
    with pytest.raises(codec.CodecError, match="does not fit the model"):
        codec.decode_snapshots(codec.encode_rows(rows))


def test_the_systemd_units_run_valid_commands() -> None:
    import shlex

    from gputop.record.record_cli import build_parser

    units = sorted((ROOT / "contrib" / "systemd").glob("gputop-record*.service"))
    assert len(units) == 2
    for unit in units:
        (line,) = [x for x in unit.read_text().splitlines() if x.startswith("ExecStart=")]
        argv = shlex.split(line.removeprefix("ExecStart="))
        assert argv[0].endswith("/gputop") and argv[1] == "record"
        build_parser().parse_args(argv[2:])  # exits 2 on a bad argument


@pytest.mark.parametrize("name", ["demo_mig", "busy_node", "coming_and_going", "irregular"])
def test_the_column_path_is_from_dict_on_the_verdict_scenarios(name: str) -> None:
    """The seeded histories of tests/verdict_scenarios (MIG, lost GPUs, processes
    coming and going, with and without a host, n/a readings) decode from a block's
    columns to exactly ``Snapshot.from_dict`` of the recorded dicts."""
    from tests.verdict_scenarios import SCENARIOS

    _, histories = SCENARIOS[name]()
    *_, history = itertools.islice(histories, 90)
    snaps = list(history)
    for start in range(0, len(snaps), 30):
        block = snaps[start : start + 30]
        direct, _ = _direct(block)
        dicts = [json.loads(json.dumps(b.to_dict())) for b in block]
        assert _same(direct, [Snapshot.from_dict(d) for d in dicts])
        hosts = [p.host for s in direct for g in s.gpus for p in g.processes]
        assert any(h is not None for h in hosts)
