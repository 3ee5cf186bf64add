"""Issue 29, classes 5 and 6: segments read in bounded memory with their damage always
named, and one recorder per directory whatever happens to the files in it. Tried
against the real ``gputop record`` / ``gputop replay`` (subprocesses, a memory limit,
a second process holding a segment) and the replay dashboard in Pilot."""

from __future__ import annotations

import asyncio
import json
import os
import random
import resource
import signal
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from textual.pilot import Pilot

from gputop.record.player import Player
from gputop.record.store import (
    MAGIC,
    MAX_HEAD_BYTES,
    MAX_SEGMENT_BYTES,
    EmptySegment,
    Recorder,
    Recording,
    RecordingError,
    index_segment,
)
from gputop.sources.demo import DEMO_EPOCH
from gputop.ui.replay import ReplayApp
from tests.cli.test_cli import ROOT, run_cli
from tests.helpers.fuzz import SEED
from tests.record.test_record import demo, record, segments

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

FILE_HEAD = struct.Struct("<8sHI")  # as docs/recording.md, "Format"
BLOCK_HEAD = struct.Struct("<4sIHdd")
OTHER = "gputop-20200102T000000Z.rec"  # a name beside the real segment
MEMORY_LIMIT = 1 << 30  # the replay runs under this address-space limit
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    """A recording directory with one real segment of 120 snapshots (3 blocks)."""
    out = tmp_path / "rec"
    record(out, demo(120), flush_seconds=40)
    return out


def _one_line(text: str) -> str:
    assert text.count("\n") == 1 and "Traceback" not in text, text
    return text


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _replay_limited(path: Path) -> subprocess.CompletedProcess[str]:
    """``gputop replay PATH --once --json`` under an address-space limit far below 2 GiB."""
    return subprocess.run(
        [sys.executable, "-m", "gputop", "replay", str(path), "--once", "--json"],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limit_memory,
    )


# --- 5. bounded memory ------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["zeros", "a real segment grown"])
def test_a_2gib_sparse_file_named_like_a_segment_is_refused_in_bounded_memory(
    recorded: Path, kind: str
) -> None:
    huge = recorded / OTHER
    if kind == "zeros":
        huge.touch()
        said = "is not a gputop recording"
    else:
        (real,) = segments(recorded)
        huge.write_bytes(real.read_bytes())
        said = "far larger than any segment gputop writes"
    os.truncate(huge, 2 << 30)  # sparse: no disk used, 2 GiB to whoever reads it whole
    assert huge.stat().st_size > MAX_SEGMENT_BYTES
    r = _replay_limited(recorded)
    assert r.returncode == 0 and json.loads(r.stdout)["time"] > 0, r.stderr
    assert str(huge) in _one_line(r.stderr) and said in r.stderr
    r = _replay_limited(huge)
    assert r.returncode == 2 and r.stdout == ""
    assert said in _one_line(r.stderr)


def test_a_recorder_begins_a_new_segment_past_its_size_limit(tmp_path: Path) -> None:
    snaps = demo(60)
    record(tmp_path, snaps, flush_seconds=5, segment_bytes=1)  # a segment per block
    assert len(segments(tmp_path)) == 12
    rec = Recording(tmp_path)
    assert rec.problems == [] and [rec[i] for i in range(len(rec))] == snaps


# --- 5. the header's CRC before its length ------------------------------------------------


def _flip_length_bit(seg: Path, bit: int) -> None:
    data = bytearray(seg.read_bytes())
    data[len(MAGIC) + 2 + bit // 8] ^= 1 << (bit % 8)
    seg.write_bytes(bytes(data))


def test_every_flipped_bit_of_the_header_length_is_named(recorded: Path) -> None:
    (seg,) = segments(recorded)
    good = seg.read_bytes()
    for bit in range(32):
        seg.write_bytes(good)
        _flip_length_bit(seg, bit)
        with pytest.raises(RecordingError, match="header is damaged") as caught:
            Recording(seg)
        assert not isinstance(caught.value, EmptySegment), bit
        with pytest.raises(RecordingError, match="header is damaged"):
            Recording(recorded)  # the directory: the damage named, not "nothing recorded"


@pytest.mark.parametrize("bit", [13, 30], ids=["within the file", "far past it"])
def test_a_flipped_length_bit_is_one_line_in_a_directory_and_named_alone(
    recorded: Path, bit: int
) -> None:
    (seg,) = segments(recorded)
    record(recorded, demo(30, start=DEMO_EPOCH + 7200))  # a second, good segment
    _flip_length_bit(seg, bit)
    r = run_cli("replay", str(recorded), "--once", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["time"] > 0
    assert str(seg) in _one_line(r.stderr) and "header is damaged" in r.stderr
    r = run_cli("replay", str(seg), "--once", "--json")
    assert r.returncode == 2 and "header is damaged" in _one_line(r.stderr)
    assert "nothing recorded yet" not in r.stderr


def test_a_header_cut_short_is_still_a_failed_start(recorded: Path) -> None:
    """What a crash during a segment's first write leaves is not damage: nothing was
    recorded in it, and the directory says nothing of it."""
    (seg,) = segments(recorded)
    data = seg.read_bytes()
    (_, _, n) = FILE_HEAD.unpack_from(data)
    for cut in (FILE_HEAD.size + n // 2, FILE_HEAD.size + n, FILE_HEAD.size + n + 3):
        (recorded / OTHER).write_bytes(data[:cut])
        with pytest.raises(EmptySegment):
            index_segment(recorded / OTHER)
        r = run_cli("replay", str(recorded), "--once", "--json")
        assert (r.returncode, r.stderr) == (0, "")


SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@seed(SEED)
@SETTINGS
@given(
    version=st.integers(0, 2**16 - 1),
    length=st.integers(0, 2**32 - 1),
    tail=st.binary(max_size=300),
)
def test_any_fixed_header_is_a_segment_or_one_line(
    tmp_path: Path, version: int, length: int, tail: bytes
) -> None:
    """Hypothesis, seeded (GPUTOP_FUZZ_SEED replays it): whatever the version and length
    fields and the bytes after them, indexing reads a bounded amount and answers with
    blocks or one RecordingError; a complete header after a wrong length is never "nothing
    recorded"."""
    seg = tmp_path / OTHER
    head = json.dumps({"interval": 1.0, "format": 2}).encode()
    real = FILE_HEAD.pack(MAGIC, 2, len(head)) + head
    good = real + struct.pack("<I", zlib.crc32(real)) + tail
    arbitrary = FILE_HEAD.pack(MAGIC, version, length) + tail
    wrong_length = FILE_HEAD.pack(MAGIC, 2, length) + good[FILE_HEAD.size :]
    for data in (arbitrary, wrong_length):
        seg.write_bytes(data)
        try:
            index_segment(seg)
        except EmptySegment as exc:
            assert data is arbitrary or length == len(head), str(exc)
            assert length <= MAX_HEAD_BYTES
        except RecordingError as exc:
            assert "\n" not in str(exc)


# --- 5. damage always named ---------------------------------------------------------------


def _damage_every_block(seg: Path) -> None:
    data = bytearray(seg.read_bytes())
    for b in index_segment(seg).blocks:
        data[b.offset + b.length // 2] ^= 0x40
    seg.write_bytes(bytes(data))


def test_a_recording_whose_blocks_are_all_damaged_names_the_damage(recorded: Path) -> None:
    (seg,) = segments(recorded)
    _damage_every_block(seg)
    for path in (recorded, seg):
        with pytest.raises(RecordingError, match="damaged") as caught:
            Recording(path)
        assert "nothing recorded yet" not in str(caught.value)
        r = run_cli("replay", str(path), "--once", "--json")
        assert r.returncode == 2 and "damaged" in _one_line(r.stderr)
        assert "nothing recorded yet" not in r.stderr


def test_random_damage_never_says_nothing_recorded(recorded: Path, fuzz_seed: int) -> None:
    """Bytes flipped anywhere after the header's start: the answer is snapshots or a
    line naming damage, never "nothing recorded yet". Bounded; seeded (GPUTOP_FUZZ_SEED
    replays it)."""
    (seg,) = segments(recorded)
    good = seg.read_bytes()
    rng = random.Random(fuzz_seed)
    for _ in range(200):
        data = bytearray(good)
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(MAGIC), len(data))] ^= 1 << rng.randrange(8)
        seg.write_bytes(bytes(data))
        try:
            Recording(recorded)
        except RecordingError as exc:
            assert "nothing recorded yet" not in str(exc), f"seed {fuzz_seed}: {exc}"
            assert "\n" not in str(exc), f"seed {fuzz_seed}"


def test_a_segment_cut_under_the_open_replay_is_said_once_in_replay_words(
    tmp_path: Path,
) -> None:
    record(tmp_path, demo(400), flush_seconds=5)  # 80 blocks: more than the player keeps
    (seg,) = segments(tmp_path)
    player = Player(Recording(tmp_path), 0, lookback=10)
    player.tick_now()
    app = ReplayApp(player)

    def header() -> str:
        return "".join(text for text, _ in app.header_parts_now())

    async def until(done: Callable[[], bool], pilot: Pilot[int]) -> None:
        for _ in range(3000):  # a bound on a loaded machine, not a timing assertion
            if done():
                return
            await pilot.pause(0.01)
        raise AssertionError(header())

    async def run() -> None:
        async with app.run_test(size=(200, 40)) as pilot:
            await pilot.pause()
            start = player.recording.start
            os.truncate(seg, seg.stat().st_size // 2)  # the later blocks are gone
            await pilot.press("G")
            await until(lambda: player.last_error is not None, pilot)
            said = header()
            assert said.count("cut short") == 1, said
            assert "while this replay had it open" in said and "sampling failed" not in said
            await pilot.press("right_square_bracket")  # a move that reads fine: still said
            await until(lambda: app.snapshot is not None and app.snapshot.time == start + 1, pilot)
            assert header().count("cut short") == 1, header()

    try:  # the app starts the player, run_replay stops it: here the test does
        asyncio.run(run())
    finally:
        player.stop()


# --- 6. one recorder per directory --------------------------------------------------------

RECORD = (sys.executable, "-m", "gputop", "record", "--demo", "--interval", "0.1", "--flush", "0.2")


def _snapshots(directory: Path) -> int:
    try:
        return len(Recording(directory))
    except RecordingError:
        return 0


def test_deleting_the_lock_file_lets_no_second_recorder_in(tmp_path: Path) -> None:
    out = tmp_path / "rec"
    first = subprocess.Popen(
        [*RECORD, "--dir", str(out)],
        cwd=ROOT,
        env=ENV,
        text=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while first.poll() is None and _snapshots(out) == 0:
            assert time.monotonic() < deadline, "nothing recorded"
            time.sleep(0.1)
        mine = segments(out)  # the first sample's segment (the hour's may follow)
        for p in out.iterdir():  # whatever an older gputop's lock was: gone
            if not p.name.endswith(".rec"):
                p.unlink()
        second = subprocess.run(
            [*RECORD, "--dir", str(out), "--retain", "1s", "--max-size", "1M"],
            cwd=ROOT,
            env=ENV,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 2, second.stderr
        assert "another gputop record is writing" in _one_line(second.stderr)
        assert all(p.exists() for p in mine)
        seen = _snapshots(out)
        deadline = time.monotonic() + 60
        while first.poll() is None and _snapshots(out) == seen:
            assert time.monotonic() < deadline, "the first recorder stopped writing"
            time.sleep(0.1)
        first.send_signal(signal.SIGTERM)
        _, err = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 0, err
    assert set(mine) <= set(segments(out)) and len(Recording(out)) > seen


HOLD = """
import sys
from pathlib import Path
from gputop.record.store import SegmentWriter
w = SegmentWriter(Path(sys.argv[1]), {"interval": 1.0, "format": 2})
print("open", flush=True)
sys.stdin.read()
"""


def test_retention_never_deletes_a_segment_another_process_is_writing(tmp_path: Path) -> None:
    held = tmp_path / OTHER
    writer = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(held)],
        cwd=ROOT,
        env=ENV,
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "open\n"
        os.utime(held, (1_577_923_200, 1_577_923_200))  # old: retention's first pick
        rec = Recorder(tmp_path, interval=1.0, retain=60.0, max_size=1)
        assert rec.apply_retention() == [] and held.exists()
        rec.close()
    finally:
        writer.communicate("", timeout=60)
    rec = Recorder(tmp_path, interval=1.0, retain=60.0, max_size=1)  # closed now: deleted
    rec.close()
    assert not held.exists()
