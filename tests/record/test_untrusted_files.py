"""A recording directory is input from outside: files of the wrong kind, links, headers
that disagree with their payload, flipped version bytes and failed starts, each
tried against the real ``gputop record`` / ``gputop replay``."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from gputop.record.store import MAGIC, Recorder, Recording, RecordingError, index_segment
from tests.cli.test_cli import ROOT, run_cli
from tests.record.test_record import demo, record, segments, tiny_fs

__all__ = ["tiny_fs"]  # the fixture, shared

RECORD = (sys.executable, "-m", "gputop", "record", "--demo", "--interval", "0.1", "--flush", "0.2")
OLD = "gputop-20200102T000000Z.rec"  # a name retention would pick first, by name and age


def _make_old(p: Path) -> None:
    os.utime(p, (1_577_923_200, 1_577_923_200), follow_symlinks=False)


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    """A recording directory with one real segment of 120 snapshots (3 blocks)."""
    out = tmp_path / "rec"
    record(out, demo(120), flush_seconds=40)
    return out


def _replay_json(path: Path) -> subprocess.CompletedProcess[str]:
    return run_cli("replay", str(path), "--once", "--json")


def _one_line(text: str) -> str:
    assert text.count("\n") == 1 and "Traceback" not in text, text
    return text


# --- files by kind ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["directory", "fifo", "link to /dev/zero", "link elsewhere"])
def test_replay_skips_what_is_not_a_regular_segment_with_one_line(
    recorded: Path, tmp_path: Path, kind: str
) -> None:
    odd = recorded / OLD
    if kind == "directory":
        odd.mkdir()
    elif kind == "fifo":
        os.mkfifo(odd)
    elif kind == "link to /dev/zero":
        odd.symlink_to("/dev/zero")
    else:
        (real,) = segments(recorded)
        odd.symlink_to(real)
    r = _replay_json(recorded)
    assert r.returncode == 0 and json.loads(r.stdout)["time"] > 0
    assert str(odd) in _one_line(r.stderr)
    # Named alone: one line and exit 2, never a hang.
    if kind != "link elsewhere":  # a link the user names is followed to the real segment
        r = _replay_json(odd)
        assert r.returncode == 2 and r.stdout == ""
        said = "no recording in" if kind == "directory" else "not a regular file"
        assert said in _one_line(r.stderr)


def _record_briefly(directory: Path, *extra: str) -> tuple[int, str]:
    """``gputop record --demo`` until it has written a block, then SIGTERM: (rc, stderr)."""
    before = _blocks(directory)
    proc = subprocess.Popen(
        [*RECORD, "--dir", str(directory), *extra],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        text=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while proc.poll() is None and _blocks(directory) == before:
            assert time.monotonic() < deadline, "nothing recorded"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err


def _blocks(directory: Path) -> int:
    n = 0
    for p in segments(directory):
        if p.name != OLD and p.is_file() and not p.is_symlink():
            with contextlib.suppress(RecordingError):
                n += len(index_segment(p).blocks)
    return n


def test_record_starts_beside_a_directory_named_like_an_old_segment(tmp_path: Path) -> None:
    out = tmp_path / "rec"
    out.mkdir()
    odd = out / OLD
    odd.mkdir()
    _make_old(odd)
    rc, err = _record_briefly(out, "--retain", "1d")
    assert rc == 0 and err.startswith("gputop record: recording to"), err
    _, stopped = err.splitlines()  # nothing but the start and the stop
    assert stopped.startswith("gputop record: wrote ") and odd.is_dir(), err


def test_retention_at_a_new_segment_passes_over_a_directory(tmp_path: Path) -> None:
    (tmp_path / OLD).mkdir()
    _make_old(tmp_path / OLD)  # retention would pick it by age
    snaps = demo(30)
    rec = Recorder(
        tmp_path, interval=1, retain=60.0, max_size=None, segment_seconds=10, flush_seconds=5
    )
    for s in snaps:
        rec.add(s)  # three rollovers, each runs retention
    rec.close()
    assert len(Recording(tmp_path)) == 30  # not one sample lost
    assert (tmp_path / OLD).is_dir()


def test_retention_deletes_only_its_own_regular_files_and_never_follows_links(
    recorded: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = elsewhere / "gputop-20200101T000000Z.rec"  # gputop's magic, large and old
    target.write_bytes(MAGIC + b"\0" * (4 << 20))
    _make_old(target)
    link = recorded / "gputop-20200101T010000Z.rec"
    link.symlink_to(target)
    _make_old(link)
    foreign = recorded / OLD  # a regular file, old, not gputop's
    foreign.write_bytes(b"not a recording" * 100)
    _make_old(foreign)
    (mine,) = [p for p in segments(recorded) if p not in (link, foreign)]
    # The target's 4 MiB would push the total over 1M: only a followed link would count it.
    rc, err = _record_briefly(recorded, "--retain", "1d", "--max-size", "1M")
    assert rc == 0, err
    assert link.is_symlink() and target.exists() and foreign.exists() and mine.exists()


# --- a failed start ------------------------------------------------------------------------


def test_a_full_disk_at_start_leaves_no_empty_segment(tiny_fs: Path) -> None:
    with open(tiny_fs / "filler", "wb", buffering=0) as f, contextlib.suppress(OSError):
        while True:  # until the file system is full
            f.write(b"\0" * 4096)
    out = tiny_fs / "rec"
    r = subprocess.run(
        [*RECORD, "--dir", str(out)],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1
    assert r.stderr.splitlines()[-1].endswith(": No space left on device"), r.stderr
    assert segments(out) == []


@pytest.mark.parametrize(
    "left", [b"", MAGIC[:5], MAGIC + b"\2\0"], ids=["empty", "magic cut", "head cut"]
)
def test_a_segment_cut_before_its_header_ends_is_skipped_without_a_word(
    recorded: Path, left: bytes
) -> None:
    (recorded / OLD).write_bytes(left)
    r = _replay_json(recorded)
    assert (r.returncode, r.stderr) == (0, "")
    r = _replay_json(recorded / OLD)
    assert r.returncode == 2 and "nothing recorded yet" in _one_line(r.stderr)


# --- headers trusted as far as the payload agrees ---------------------------------------

FILE_HEAD = struct.Struct("<8sHI")  # as docs/recording.md, "Format"
BLOCK_HEAD = struct.Struct("<4sIHdd")


def _rewrite_block(seg: Path, i: int, **fields: float) -> None:
    """Change block ``i``'s header fields and give it a matching CRC (a writer's bug, or a
    crafted file: the CRC cannot tell)."""
    data = bytearray(seg.read_bytes())
    b = index_segment(seg).blocks[i]
    at = b.offset - BLOCK_HEAD.size - 4
    magic, length, count, first, last = BLOCK_HEAD.unpack_from(data, at)
    new = {"count": count, "first": first, "last": last} | fields
    head = BLOCK_HEAD.pack(magic, length, int(new["count"]), new["first"], new["last"])
    data[at : at + BLOCK_HEAD.size] = head
    crc = zlib.crc32(bytes(data[b.offset : b.offset + length]), zlib.crc32(head))
    struct.pack_into("<I", data, at + BLOCK_HEAD.size, crc)
    seg.write_bytes(bytes(data))


@pytest.mark.parametrize("change", [1, -1], ids=["more", "fewer"])
def test_a_block_count_the_payload_disagrees_with_is_one_line_and_exit_2(
    recorded: Path, change: int
) -> None:
    (seg,) = segments(recorded)
    last = index_segment(seg).blocks[-1]
    _rewrite_block(seg, len(index_segment(seg).blocks) - 1, count=last.count + change)
    for args in (["--once", "--json"], ["--once"], ["--from", "@0", "--json"]):
        r = run_cli("replay", str(recorded), *args)
        assert r.returncode == 2 and "is damaged" in _one_line(r.stderr), args


def test_a_block_with_times_out_of_order_is_damage(recorded: Path) -> None:
    (seg,) = segments(recorded)
    _rewrite_block(seg, 1, first=float("nan"))
    rec = Recording(seg)
    assert len(rec) == 40 and "could not be read" in rec.problems[0]


def test_every_flipped_bit_of_the_version_is_damage_not_a_newer_format(recorded: Path) -> None:
    (seg,) = segments(recorded)
    good = seg.read_bytes()
    for bit in range(16):
        data = bytearray(good)
        data[len(MAGIC) + bit // 8] ^= 1 << (bit % 8)
        seg.write_bytes(bytes(data))
        with pytest.raises(RecordingError, match="header is damaged"):
            Recording(seg)
    r = _replay_json(seg)
    assert r.returncode == 2 and "header is damaged" in _one_line(r.stderr)


@pytest.mark.parametrize("interval", [float("nan"), "1", 1e308, -1, None])
def test_a_header_with_an_interval_no_recorder_writes_is_damage(
    recorded: Path, interval: object
) -> None:
    (seg,) = segments(recorded)
    data = seg.read_bytes()
    _, version, n = FILE_HEAD.unpack_from(data)
    header = json.loads(data[FILE_HEAD.size : FILE_HEAD.size + n])
    header["interval"] = interval
    head = json.dumps(header).encode()
    fixed = FILE_HEAD.pack(MAGIC, version, len(head)) + head
    seg.write_bytes(fixed + struct.pack("<I", zlib.crc32(fixed)) + data[FILE_HEAD.size + n + 4 :])
    r = _replay_json(recorded)
    assert r.returncode == 2 and "header is damaged (its interval)" in _one_line(r.stderr)


def test_a_lock_file_that_is_a_link_is_left_alone(tmp_path: Path) -> None:
    """The lock is on the directory: a ``.lock`` (an old gputop's, or a trap) is not
    opened, so a link there leads nowhere."""
    target = tmp_path / "precious"
    target.write_text("keep")
    out = tmp_path / "rec"
    out.mkdir()
    (out / ".lock").symlink_to(target)
    rc, err = _record_briefly(out)
    assert rc == 0 and err.startswith("gputop record: recording to"), err
    assert target.read_text() == "keep" and (out / ".lock").is_symlink()


def test_format_1_is_still_read(recorded: Path) -> None:
    (seg,) = segments(recorded)
    want = _replay_json(recorded).stdout
    data = seg.read_bytes()
    _, _, n = FILE_HEAD.unpack_from(data)
    head = data[FILE_HEAD.size : FILE_HEAD.size + n]
    old = FILE_HEAD.pack(MAGIC, 1, n) + head + struct.pack("<I", zlib.crc32(head))
    seg.write_bytes(old + data[len(old) :])
    r = _replay_json(recorded)
    assert (r.returncode, r.stderr, r.stdout) == (0, "", want)


# --- hostile bytes ------------------------------------------------------------------------


def _damage(good: bytes, rng: random.Random) -> bytes:
    data = bytearray(good)
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(data))
        action = rng.choice(("flip", "cut", "repeat"))
        if action == "flip":
            data[at] ^= 1 << rng.randrange(8)
        elif action == "cut":
            del data[at:]
            if not data:
                break
        else:
            data[at:at] = data[at : at + rng.randint(1, 64)]
    return bytes(data)


def test_random_damage_is_one_line_or_the_readable_prefix(recorded: Path, fuzz_seed: int) -> None:
    """Bytes flipped, cut or repeated anywhere: reading gives snapshots or one
    RecordingError, never another exception; the real replay answers with a snapshot
    (exit 0) or one line (exit 2). Bounded: a fixed number of tries; seeded
    (GPUTOP_FUZZ_SEED replays it)."""
    (seg,) = segments(recorded)
    good = seg.read_bytes()
    seed = fuzz_seed
    rng = random.Random(seed)
    for _ in range(150):
        seg.write_bytes(_damage(good, rng))
        try:
            rec = Recording(recorded)
            for i in range(len(rec)):
                assert rec[i].time > 0
        except RecordingError as exc:
            assert "\n" not in str(exc), f"seed {seed}"
        except Exception as exc:
            raise AssertionError(f"seed {seed}: {exc!r}") from exc
    for _ in range(4):
        seg.write_bytes(_damage(good, rng))
        r = _replay_json(recorded)
        assert r.returncode in (0, 2) and "Traceback" not in r.stderr, f"seed {seed}: {r.stderr}"
