"""Recording store: segment files in a directory, written by :class:`Recorder`, read by
:class:`Recording`. The file format, retention and crash safety: docs/recording.md."""

from __future__ import annotations

import bisect
import contextlib
import errno
import fcntl
import gc
import itertools
import json
import math
import os
import re
import stat
import struct
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from gputop import __version__
from gputop.argtypes import MAX_INTERVAL, MIN_INTERVAL
from gputop.model import Snapshot
from gputop.record import codec

#: Format 2: the header's CRC covers the fixed part (magic, version, length) too, so a
#: flipped version reads as damage, not as a newer format. Format 1 is still read.
FORMAT_VERSION = 2
MAGIC = b"GPUTOPR\n"
BLOCK_MAGIC = b"BLK1"
_FILE_HEAD = struct.Struct("<8sHI")  # magic, version, head length
_BLOCK_HEAD = struct.Struct("<4sIHdd")  # magic, length, count, first, last
_CRC = struct.Struct("<I")
SUFFIX = ".rec"
_NAME = re.compile(r"^gputop-(\d{8}T\d{6}Z)(?:-\d+)?\.rec$")
_Cancelled = Callable[[], bool] | None  # asked before each block to decode: stop?

#: Longest time between two flushes: a crash loses at most this much.
MAX_FLUSH_SECONDS = 60.0
#: Fewest bytes ``--max-size`` may say: about half an hour of an 8-GPU server (the disk
#: per hour: bench/README.md). Less would leave retention nothing to keep but the segment
#: being written, and a size of a few bytes is a slip, not a wish.
MIN_MAX_SIZE = 1 << 20
SEGMENT_SECONDS = 3600.0
#: A segment that has grown to this size is closed at its next block and a new one begun.
SEGMENT_BYTES = 256 << 20
#: What a reader accepts: a segment is at most SEGMENT_BYTES and one block more, so a
#: file far larger than that was not written by a recorder and is refused unread.
MAX_SEGMENT_BYTES = 4 * SEGMENT_BYTES
#: The header is a few hundred bytes of JSON; a larger length field is damage.
MAX_HEAD_BYTES = 1 << 16
_CHUNK = 1 << 20  # bytes read at once while a block's CRC is checked


class RecordingError(Exception):
    """Input that is not a readable recording (bad path, not a recording, a newer
    format, nothing recorded): exit 2. The message is one line."""


class SegmentCut(RecordingError):
    """A segment now ends before a block its index found there: cut (or replaced) after
    it was opened. ``path``: that segment."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"{path} was cut short after it was opened")
        self.path = path


class RecordWriteError(Exception):
    """Writing failed (disk full, directory not writable...). One line."""


class DirectoryBusy(RecordWriteError):
    """Another recorder holds the directory: nothing was written (a usage error)."""


def default_dir() -> Path:
    """``$XDG_STATE_HOME/gputop`` (``~/.local/state/gputop`` when unset or relative)."""
    state = os.environ.get("XDG_STATE_HOME", "")
    base = Path(state) if state and os.path.isabs(state) else Path.home() / ".local" / "state"
    return base / "gputop"


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def open_segment(path: Path) -> tuple[BinaryIO, os.stat_result]:
    """A segment opened for reading only if it is a regular file: never through a link,
    never blocking on a FIFO or a device. Raises RecordingError (one line)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if os.path.islink(path):
            raise RecordingError(f"{path}: a symbolic link, not a segment file") from None
        raise RecordingError(f"cannot read {path}: {_why(exc)}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise RecordingError(f"{path}: not a regular file (a FIFO, a device or a directory)")
    return os.fdopen(fd, "rb"), info


def _ours(path: Path) -> os.stat_result | None:
    """The status of a regular file starting with gputop's magic, else None (retention
    touches nothing else, and never follows a link)."""
    try:
        return path.lstat() if _read(path, 0, len(MAGIC)) == MAGIC else None
    except (RecordingError, OSError):
        return None


def _delete_unless_open(path: Path) -> bool:
    """Delete a segment unless its writer holds it (its flock): never one being written."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode) or os.pread(fd, len(MAGIC), 0) != MAGIC:
            return False
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        # Deleted while locked: a writer that starts now cannot have this file open.
        path.unlink()
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


class SegmentWriter:
    """One segment file, created new (never appended to), written one block at a time."""

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        self.path = path
        self._dictionary: bytes | None = None
        self._compressor = codec.compressor()
        head = json.dumps(header, separators=(",", ":")).encode()
        if len(head) > MAX_HEAD_BYTES:
            raise RecordWriteError(f"cannot create {path}: its header is too long")
        data = _FILE_HEAD.pack(MAGIC, FORMAT_VERSION, len(head)) + head
        data += _CRC.pack(zlib.crc32(data))
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise RecordWriteError(f"cannot create {path}: {_why(exc)}") from None
        # Held while it is written: retention (of any process) passes over a locked segment.
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._file: BinaryIO = os.fdopen(fd, "wb", buffering=0)
        self.size = 0
        try:
            self._write(data)
        except RecordWriteError:
            # A segment without its header holds nothing: it must not stay as "damage".
            self.close()
            with contextlib.suppress(OSError):
                path.unlink()
            raise

    def _write(self, data: bytes) -> None:
        try:
            view = memoryview(data)
            while view:
                n = self._file.write(view)
                if not n:
                    raise OSError(28, "No space left on device")
                view = view[n:]
                self.size += n
            os.fsync(self._file.fileno())
        except OSError as exc:
            raise RecordWriteError(f"cannot write {self.path}: {_why(exc)}") from None

    def write_block(self, rows: Sequence[codec.Row], first: float, last: float) -> None:
        payload = codec.encode_rows(rows)
        data = self._compressor.compress(payload)
        if self._dictionary is None:
            self._dictionary = payload
            self._compressor = codec.compressor(payload)
        if len(data) > SEGMENT_BYTES:  # what a reader takes for damage: not written
            raise RecordWriteError(f"cannot write {self.path}: a block larger than a segment")
        head = _BLOCK_HEAD.pack(BLOCK_MAGIC, len(data), len(rows), first, last)
        crc = zlib.crc32(data, zlib.crc32(head))
        self._write(head + _CRC.pack(crc) + data)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._file.close()


def parse_size(text: str) -> int:
    """'2G', '500M', '10k', '1024' -> bytes (powers of 1024). Raises ValueError."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([kKmMgGtT]?)(?:i?[bB])?\s*", text)
    if not m:
        raise ValueError(f"not a size: {text!r} (e.g. 500M, 2G)")
    scale = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}[m.group(2).lower()]
    number = float(m.group(1)) * scale
    if not number < 2**63:  # 1e400 is inf to float(), which int() refuses with OverflowError
        raise ValueError(f"not a size: {text!r} (too large)")
    value = int(number)
    if value <= 0:
        raise ValueError(f"a size above 0 expected: {text!r}")
    return value


def parse_duration(text: str) -> float:
    """'7d', '12h', '30m', '90s', '3600' -> seconds. Raises ValueError."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([smhdw]?)\s*", text)
    if not m:
        raise ValueError(f"not a duration: {text!r} (e.g. 7d, 12h, 30m)")
    scale = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}[m.group(2)]
    value = float(m.group(1)) * scale
    if value <= 0:
        raise ValueError(f"a duration above 0 expected: {text!r}")
    return value


class Recorder:
    """Writes snapshots to ``directory`` (layout: docs/recording.md), one recorder per
    directory (an flock on the directory, held for the recorder's life); errors raise
    :class:`RecordWriteError`."""

    def __init__(
        self,
        directory: Path,
        *,
        interval: float,
        retain: float | None = 7 * 86400.0,
        max_size: int | None = None,
        flush_seconds: float = MAX_FLUSH_SECONDS,
        segment_seconds: float = SEGMENT_SECONDS,
        segment_bytes: int = SEGMENT_BYTES,
        clock: Callable[[], float] = time.time,
        first_alone: bool = False,
    ) -> None:
        self.directory = Path(directory)
        self.interval = interval
        self.retain = retain
        self.max_size = max_size
        self.flush_seconds = min(flush_seconds, MAX_FLUSH_SECONDS)
        self.segment_seconds = segment_seconds
        self.segment_bytes = min(segment_bytes, SEGMENT_BYTES)
        self.clock = clock
        self._rows: list[codec.Row] = []  # waiting for the next block
        self._first = 0.0  # time of the first of them
        self._segment: SegmentWriter | None = None
        self._segment_end = 0.0  # where the segment being filled ends (snapshot time)
        self._last: float | None = None  # time of the last snapshot of that segment
        # The first snapshot is written at once, as a segment of its own: a replay started
        # right after the recorder sees it, and the hour's segment still takes a whole
        # flush interval as its compression dictionary (the budget in bench/README.md).
        self._first_alone = first_alone
        # What was written, for the line the recorder ends with.
        self.segments_written = 0
        self.blocks_written = 0
        self.bytes_written = 0
        self.first_written: float | None = None
        self.last_written: float | None = None
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            # The lock is on the directory itself: no file whose deletion or replacement
            # would let a second recorder in (and its retention delete this one's segment).
            fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise RecordWriteError(f"cannot use {self.directory}: {_why(exc)}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise RecordWriteError(f"cannot lock {self.directory}: {_why(exc)}") from None
            busy = f"another gputop record is writing to {self.directory}"
            raise DirectoryBusy(busy) from None
        self._lock_fd = fd
        self.apply_retention()

    def add(self, snapshot: Snapshot) -> None:
        t = snapshot.time
        last = self._last
        if last is not None and (t >= self._segment_end or t < last):
            # A new clock hour, or time went backwards (the clock was set): a new segment.
            self.flush()
            self._close_segment()
            last = None
        if last is None:
            self._segment_end = (t // self.segment_seconds + 1) * self.segment_seconds
        if self._rows and t - self._first >= self.flush_seconds:
            self.flush()
        if not self._rows:
            self._first = t
        self._rows.append(codec.flatten(snapshot))
        self._last = t
        if self._first_alone:
            self._first_alone = False
            self.flush()
            self._close_segment()

    def flush(self) -> None:
        if not self._rows or self._last is None:
            return
        segment = self._segment or self._open_segment(self._first)
        rows, self._rows = self._rows, []
        before = segment.size
        segment.write_block(rows, self._first, self._last)
        self.blocks_written += 1
        self.bytes_written += segment.size - before
        if self.first_written is None:
            self.first_written = self._first
        self.last_written = self._last
        if segment.size >= self.segment_bytes:
            self._close_segment()  # the next snapshot begins a new segment

    def _open_segment(self, start: float) -> SegmentWriter:
        base = "gputop-" + time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(start)) + SUFFIX
        path = self.directory / base
        n = 1
        while os.path.lexists(path):
            path = self.directory / base.replace(SUFFIX, f"-{n}{SUFFIX}")
            n += 1
        header = {
            "format": FORMAT_VERSION,
            "host": os.uname().nodename,
            "interval": self.interval,
            "gputop": __version__,
            "started": start,
            "segment_seconds": self.segment_seconds,
        }
        self._segment = SegmentWriter(path, header)
        self.segments_written += 1
        self.bytes_written += self._segment.size
        self.apply_retention()
        return self._segment

    def _close_segment(self) -> None:
        self._last = None
        if self._segment is not None:
            self._segment.close()
            self._segment = None

    def apply_retention(self) -> list[str]:
        """Delete whole segments by age (``retain``) and total size (``max_size``)."""
        now = self.clock()
        active = None if self._segment is None else self._segment.path
        found = {p: _ours(p) for p in self.directory.iterdir() if _NAME.match(p.name)}
        # Ours only, oldest first; st_mtime: when a segment's last block was written.
        segments = sorted((p.name, p, info) for p, info in found.items() if info is not None)
        too_old = -math.inf if self.retain is None else now - self.retain
        gone = [name for name, p, info in segments if p != active and info.st_mtime < too_old]
        if self.max_size is not None:
            total = sum(info.st_size for name, _, info in segments if name not in gone)
            for name, p, info in segments:
                if total <= self.max_size:
                    break
                if p != active and name not in gone:
                    gone.append(name)
                    total -= info.st_size
        return [name for name in gone if _delete_unless_open(self.directory / name)]

    def close(self, flush: bool = True) -> None:
        """Flush what waits (unless told not to), close the segment and release the lock."""
        try:
            if flush:
                self.flush()
        finally:
            self._close_segment()
            if self._lock_fd >= 0:
                os.close(self._lock_fd)
                self._lock_fd = -1


@dataclass(frozen=True, slots=True)
class BlockRef:
    """Where one block of a segment lies, and the times of its first and last snapshot."""

    path: Path
    offset: int  # of the payload
    length: int
    count: int
    first: float
    last: float
    segment_first_offset: int  # payload offset of the segment's first block (dictionary)
    segment_first_length: int


@dataclass(frozen=True, slots=True)
class SegmentIndex:
    """A segment's header and its readable blocks."""

    header: dict[str, Any]
    blocks: tuple[BlockRef, ...]
    unreadable: int  # bytes after the readable prefix


class EmptySegment(RecordingError):
    """A segment cut before the end of its header (a failed start): it holds nothing."""


def _exactly(f: BinaryIO, path: Path, n: int) -> bytes:
    """Up to ``n`` bytes from where ``f`` stands (fewer: the file ends there)."""
    try:
        return f.read(n)
    except OSError as exc:
        raise RecordingError(f"cannot read {path}: {_why(exc)}") from None


def _read_header(path: Path, f: BinaryIO, size: int) -> tuple[dict[str, Any], int]:
    """The header from the start of ``f`` (``size`` bytes long), checked by its CRC before
    its length is used for anything but finding that CRC."""
    data = _exactly(f, path, _FILE_HEAD.size)
    if len(data) < _FILE_HEAD.size and MAGIC.startswith(data[: len(MAGIC)]):
        raise EmptySegment(f"{path}: nothing recorded yet (no complete block)")
    if len(data) < _FILE_HEAD.size or not data.startswith(MAGIC):
        raise RecordingError(f"{path} is not a gputop recording")
    if size > MAX_SEGMENT_BYTES:
        raise RecordingError(
            f"{path}: {size} bytes, far larger than any segment gputop writes "
            f"(at most {MAX_SEGMENT_BYTES}): not read"
        )
    _, version, head_len = _FILE_HEAD.unpack_from(data, 0)
    end = _FILE_HEAD.size + head_len
    if head_len > MAX_HEAD_BYTES:
        raise RecordingError(f"{path}: the recording's header is damaged (its length)")
    data += _exactly(f, path, head_len + _CRC.size)
    if len(data) < end + _CRC.size:
        # A start cut short (nothing written after it), or a length field that claims
        # more than there is: then a whole header and more follow, and that is damage.
        with contextlib.suppress(ValueError):
            _, n = json.JSONDecoder().raw_decode(data[_FILE_HEAD.size :].decode("utf-8", "replace"))
            if _FILE_HEAD.size + n + _CRC.size <= len(data):
                raise RecordingError(f"{path}: the recording's header is damaged (its length)")
        raise EmptySegment(f"{path}: nothing recorded yet (no complete block)")
    # From format 2 on, the CRC covers the version too: check it before trusting it.
    covered = data[_FILE_HEAD.size if version == 1 else 0 : end]
    header = None
    if version >= 1 and _CRC.unpack_from(data, end)[0] == zlib.crc32(covered):
        with contextlib.suppress(ValueError):
            header = json.loads(data[_FILE_HEAD.size : end])
    if not isinstance(header, dict):
        raise RecordingError(f"{path}: the recording's header is damaged")
    if version > FORMAT_VERSION:
        raise RecordingError(
            f"{path} was written by a newer gputop (recording format {version}; this gputop "
            f"{__version__} reads format {FORMAT_VERSION})"
        )
    interval = header.get("interval")
    # The player paces by it: a number a recorder could have written, or damage.
    if not isinstance(interval, (int, float)) or not MIN_INTERVAL <= interval <= MAX_INTERVAL:
        raise RecordingError(f"{path}: the recording's header is damaged (its interval)")
    return header, end + _CRC.size


def _read(path: Path, offset: int = 0, length: int = -1) -> bytes:
    """``length`` bytes of a segment from ``offset`` (-1: to its end)."""
    f, _ = open_segment(path)
    try:
        with f:
            f.seek(offset)
            data = f.read(length)
    except OSError as exc:
        raise RecordingError(f"cannot read {path}: {_why(exc)}") from None
    if length >= 0 and len(data) != length:
        raise SegmentCut(path)
    return data


def _body_crc(f: BinaryIO, path: Path, length: int, crc: int) -> int | None:
    """The CRC of the next ``length`` bytes, read a chunk at a time (None: cut short)."""
    while length > 0:
        chunk = _exactly(f, path, min(length, _CHUNK))
        if not chunk:
            return None
        crc = zlib.crc32(chunk, crc)
        length -= len(chunk)
    return crc


def index_segment(path: Path) -> SegmentIndex:
    """A segment's header and its blocks up to the first damaged or cut-short one, read
    a block at a time (memory does not grow with the file), up to the size it had when
    opened (a recorder may be adding to it)."""
    f, info = open_segment(path)
    with f:
        size = info.st_size
        header, pos = _read_header(path, f, size)
        blocks: list[BlockRef] = []
        first_off = first_len = -1
        head_size = _BLOCK_HEAD.size + _CRC.size
        while pos + head_size <= size:
            raw = _exactly(f, path, head_size)
            if len(raw) < head_size:
                break
            head = raw[: _BLOCK_HEAD.size]
            magic, length, count, first, last = _BLOCK_HEAD.unpack(head)
            (crc,) = _CRC.unpack_from(raw, _BLOCK_HEAD.size)
            start = pos + head_size
            if magic != BLOCK_MAGIC or start + length > size or count == 0:
                break
            if length > SEGMENT_BYTES:  # no recorder writes it; reading it would cost that
                break
            if not -math.inf < first <= last < math.inf:
                break
            if _body_crc(f, path, length, zlib.crc32(head)) != crc:
                break
            if first_off < 0:
                first_off, first_len = start, length
            blocks.append(BlockRef(path, start, length, count, first, last, first_off, first_len))
            pos = start + length
    return SegmentIndex(header, tuple(blocks), size - pos)


class Recording:
    """A recording (a directory of segments, or one segment file) opened for reading:
    only the block index is kept in memory, the last ``cache_blocks`` decoded blocks."""

    def __init__(self, path: Path | str, *, cache_blocks: int = 16) -> None:
        path = Path(path)
        try:  # a name too long, or a directory that cannot be listed: one line
            is_dir = path.is_dir()
            if is_dir:
                files = sorted(p for p in path.iterdir() if _NAME.match(p.name))
        except OSError as exc:
            raise RecordingError(f"{path}: {_why(exc)}") from None
        if is_dir:
            if not files:
                raise RecordingError(f"no recording in {path} (no gputop-*.rec segment files)")
        elif os.path.lexists(path):
            files = [Path(os.path.realpath(path))]  # a link the user names is followed
        else:
            raise RecordingError(f"{path}: no such file or directory")
        segments: list[SegmentIndex] = []
        self.problems: list[str] = []  # one line per damaged segment
        for f in files:
            try:
                seg = index_segment(f)
            except RecordingError as exc:
                if len(files) == 1:
                    raise
                if not isinstance(exc, EmptySegment):
                    self.problems.append(str(exc))
                continue
            segments.append(seg)
            if seg.unreadable and not seg.blocks:
                self.problems.append(
                    f"{f}: damaged: none of its blocks could be read ({seg.unreadable} bytes)"
                )
            elif seg.unreadable:
                self.problems.append(
                    f"{f}: {seg.unreadable} bytes could not be read (damaged or cut short); "
                    f"showing the {sum(b.count for b in seg.blocks)} snapshots before them"
                )
        blocks = [b for s in segments for b in s.blocks]
        self.blocks = sorted(blocks, key=lambda b: (b.first, b.last))
        self._starts = [b.first for b in self.blocks]
        # Global position of each block's first snapshot.
        self._offsets = [0, *itertools.accumulate(b.count for b in self.blocks)]
        if not blocks and self.problems:
            more = len(self.problems) - 1
            also = f" (and {more} more damaged segment{'s' * (more > 1)})" if more else ""
            raise RecordingError(f"nothing readable: {self.problems[0]}{also}")
        if not blocks:
            raise RecordingError(f"{path}: nothing recorded yet (no complete block)")
        self.header = segments[-1].header  # the newest segment's
        self._cache: OrderedDict[int, list[Snapshot]] = OrderedDict()
        self._dicts: OrderedDict[Path, bytes] = OrderedDict()
        self.cache_blocks = cache_blocks

    def __len__(self) -> int:
        return self._offsets[-1]

    @property
    def start(self) -> float:
        return self.blocks[0].first

    @property
    def end(self) -> float:
        return max(b.last for b in self.blocks)

    def position(self, t: float) -> int:
        """The position of the newest snapshot at or before ``t`` (else 0)."""
        i = bisect.bisect_right(self._starts, t) - 1
        if i < 0:
            return 0
        j = bisect.bisect_right(self.block(i), t, key=lambda s: s.time) - 1
        return self._offsets[i] + max(0, j)

    def __getitem__(self, pos: int) -> Snapshot:
        if not 0 <= pos < len(self):
            raise IndexError(pos)
        i = bisect.bisect_right(self._offsets, pos) - 1
        return self.block(i)[pos - self._offsets[i]]

    def window(
        self, pos: int, seconds: float, *, cancelled: _Cancelled = None, cached_only: bool = False
    ) -> tuple[Snapshot, ...] | None:
        """The snapshots from ``seconds`` before the one at ``pos`` up to it; None when
        ``cancelled()`` (asked before each block to decode) says so. ``cached_only``: only
        as far back as the cache reaches without a gap."""
        end = self[pos]
        i = bisect.bisect_right(self._offsets, pos) - 1
        parts = [self.block(i)[: pos - self._offsets[i] + 1]]
        first = parts[0][0].time
        while i > 0 and first > end.time - seconds:
            i -= 1
            if i not in self._cache:
                if cached_only:
                    break
                if cancelled is not None and cancelled():
                    return None
            block = self.block(i)
            parts.append(block)
            first = block[0].time
        joined = [s for part in reversed(parts) for s in part]
        cut = bisect.bisect_left([s.time for s in joined], end.time - seconds)
        return tuple(joined[cut:])

    def after(
        self, pos: int, seconds: float, *, cancelled: _Cancelled = None
    ) -> tuple[Snapshot, ...] | None:
        """The snapshots up to ``seconds`` after the one at ``pos`` (None: cancelled)."""
        if seconds <= 0 or pos >= len(self) - 1:
            return ()
        start = self[pos].time
        i = bisect.bisect_right(self._offsets, pos) - 1
        out: list[Snapshot] = list(self.block(i)[pos - self._offsets[i] + 1 :])
        while i + 1 < len(self.blocks) and (not out or out[-1].time < start + seconds):
            i += 1
            if self.blocks[i].first > start + seconds:
                break
            if i not in self._cache and cancelled is not None and cancelled():
                return None
            out.extend(self.block(i))
        cut = bisect.bisect_right([s.time for s in out], start + seconds)
        return tuple(out[:cut])

    def blocks_between(self, t1: float, t2: float) -> range:
        """The blocks that may hold snapshots with ``t1 <= time <= t2``."""
        i = max(0, bisect.bisect_right(self._starts, t1) - 1)
        j = bisect.bisect_right(self._starts, t2)
        return range(i, max(i, j))

    def is_cached(self, blocks: range) -> bool:
        return all(i in self._cache for i in blocks)

    def between(self, t1: float, t2: float) -> Iterator[Snapshot]:
        """Every snapshot with ``t1 <= time <= t2``, oldest first, one block at a time."""
        for b in (self.blocks[k] for k in self.blocks_between(t1, t2)):
            if b.last >= t1:
                yield from (s for s in self._decode(b) if t1 <= s.time <= t2)

    def block(self, i: int) -> list[Snapshot]:
        cached = self._cache.get(i)
        if cached is not None:
            self._cache.move_to_end(i)
            return cached
        snaps = self._decode(self.blocks[i])
        self._cache[i] = snaps
        while len(self._cache) > self.cache_blocks:
            self._cache.popitem(last=False)
        return snaps

    def _dictionary(self, b: BlockRef) -> bytes:
        found = self._dicts.get(b.path)
        if found is None:
            raw = _read(b.path, b.segment_first_offset, b.segment_first_length)
            found = codec.decompress(raw)
            self._dicts[b.path] = found
            while len(self._dicts) > 2:
                self._dicts.popitem(last=False)
        return found

    def _decode(self, b: BlockRef) -> list[Snapshot]:
        raw = _read(b.path, b.offset, b.length)
        # A block is many new objects and no reference cycle: the cyclic collector
        # would only walk them again and again while they are made.
        collecting = gc.isenabled()
        gc.disable()
        try:
            dictionary = None if b.offset == b.segment_first_offset else self._dictionary(b)
            snaps = codec.decode_snapshots(codec.decompress(raw, dictionary))
        except codec.CodecError as exc:
            raise RecordingError(f"{b.path}: {exc}") from None
        finally:
            if collecting:
                gc.enable()
        # The header is trusted only as far as the payload agrees: positions rest on it.
        if len(snaps) != b.count or (snaps[0].time, snaps[-1].time) != (b.first, b.last):
            raise RecordingError(
                f"{b.path}: a block's header says {b.count} snapshots from {b.first} to "
                f"{b.last}, its payload holds {len(snaps)}; the recording is damaged"
            )
        return snaps


class BackgroundRecorder:
    """A :class:`Recorder` that never raises (the dashboard's ``--record``): the first
    failure stops the recording and stays in :attr:`error`."""

    def __init__(self, directory: Path, *, interval: float, **kwargs: Any) -> None:
        self.error: str | None = None
        self._recorder: Recorder | None = None
        self._lock = threading.Lock()
        kwargs.setdefault("first_alone", True)  # a replay sees the recording at once
        try:
            self._recorder = Recorder(directory, interval=interval, **kwargs)
        except RecordWriteError as exc:
            self.error = str(exc)

    def __call__(self, snapshot: Snapshot) -> None:
        with self._lock:
            if self._recorder is None:
                return
            try:
                self._recorder.add(snapshot)
            except Exception as exc:  # a bug must not take the dashboard down either
                self.error = str(exc) if isinstance(exc, RecordWriteError) else repr(exc)
                recorder, self._recorder = self._recorder, None
                with contextlib.suppress(Exception):
                    recorder.close(flush=False)

    def status(self) -> str | None:
        return self.error

    def close(self) -> None:
        with self._lock:
            recorder, self._recorder = self._recorder, None
            if recorder is None:
                return
            try:
                recorder.close()
            except RecordWriteError as exc:
                self.error = str(exc)
