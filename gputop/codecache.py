"""The code that :mod:`dataclasses` compiles for each class, kept from one start to the next.

For every dataclass, ``dataclasses`` writes the source text of each method it adds
(``__init__``, ``__repr__``, ``__eq__``, a frozen class's ``__setattr__``...) and runs it
with ``exec``, which compiles it first: most of what a dataclass costs to make, and the
largest part of gputop's own import time. ``dataclasses`` looks ``exec`` up as a global of
its module, so for the start only, :func:`start` puts a layer there that runs the code
compiled from that exact text on an earlier start, and compiles (as ``exec`` would) only
a text it has not seen. :func:`stop` takes the layer away and, where it learnt a text,
writes what this start used for the next one. Nothing else changes: the same text gives
the same code, run with the same globals and locals.

The codes live in a file beside gputop's byte code (the package's ``__pycache__``), named
for the interpreter, and are only read from a regular file that the user or the
directory's owner wrote, in a directory that is theirs, closed to group and others
(docs/architecture.md, "The dataclasses' code"). Anything else is ignored: the classes are
compiled as usual. ``GPUTOP_NO_CODE_CACHE=1`` turns the layer off.

Standard library only, and nothing of gputop: imported before any of gputop's classes.
"""

from __future__ import annotations
import __future__

import array
import atexit
import builtins
import contextlib
import dataclasses
import importlib.util
import logging
import marshal
import os
import stat
import sys
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import CodeType, FunctionType
from typing import Any, Final

log = logging.getLogger(__name__)

#: Set (to anything but ``0``): no layer, every dataclass compiled as usual.
ENV_OFF = "GPUTOP_NO_CODE_CACHE"
#: The directory of the file instead of the one beside gputop's byte code (the tests'
#: and benches' own directories).
ENV_DIR = "GPUTOP_CODE_CACHE_DIR"
#: A larger file is not read (several times what the codes of every gputop module take).
SIZE_LIMIT = 4 << 20
#: The file's first bytes, before the interpreter's own magic and cache tag.
MAGIC = b"gputop dataclass code 2\n"
#: The source name ``exec`` gives the code it compiles from a text.
SOURCE_NAME = "<string>"

#: The compiler flags ``exec`` takes from the code that calls it: its __future__ imports
#: (nested_scopes' flag marks a nested function, not an import).
FUTURE_FLAGS = sum(
    getattr(__future__, name).compiler_flag
    for name in __future__.all_feature_names
    if name != "nested_scopes"
)


def _names_exec(code: CodeType) -> bool:
    return "exec" in code.co_names or any(
        isinstance(const, CodeType) and _names_exec(const) for const in code.co_consts
    )


def supported() -> bool:
    """Whether this Python's ``dataclasses`` runs its texts through a global ``exec`` of
    its module (CPython 3.11's does); if not, there is nothing to put a layer in."""
    names = vars(dataclasses)
    if (
        "exec" in names
        or sys.implementation.cache_tag is None
        or array.array(ENTRY_FORMAT).itemsize != 4
    ):
        return False
    for value in names.values():
        owned = vars(value).values() if isinstance(value, type) else (value,)
        for function in owned:
            if (
                isinstance(function, FunctionType)
                and function.__module__ == dataclasses.__name__
                and _names_exec(function.__code__)
            ):
                return True
    return False


def file_name() -> str:
    """This interpreter's file: marshalled code is only valid for the version that wrote it."""
    tag = sys.implementation.cache_tag
    opt = f".opt-{sys.flags.optimize}" if sys.flags.optimize else ""
    return f"dataclass-code.{tag}{opt}.bin"


def header() -> bytes:
    """The file's header: gputop's magic, then the interpreter's (its byte code's) own."""
    tag = f"{sys.implementation.cache_tag} {sys.byteorder}"
    return MAGIC + importlib.util.MAGIC_NUMBER + tag.encode("ascii", "replace") + b"\n"


def default_dir() -> Path | None:
    """The directory of gputop's byte code (where ``PYTHONPYCACHEPREFIX`` puts it, if set)."""
    try:
        return Path(
            importlib.util.cache_from_source(str(Path(__file__).parent / "__init__.py"))
        ).parent
    except (NotImplementedError, ValueError):
        return None


def cache_dir() -> Path | None:
    """``$GPUTOP_CODE_CACHE_DIR``, else :func:`default_dir`."""
    chosen = os.environ.get(ENV_DIR)
    return Path(chosen) if chosen else default_dir()


class Untrusted(Exception):
    """The file or its directory is not one whose code gputop runs."""


def _closed(st: os.stat_result) -> bool:
    return not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _open_dir(directory: Path) -> tuple[int, os.stat_result]:
    """The directory, checked: a directory (not a link to one), closed to group and
    others, owned by this user or by the owner of the directory it is in."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        parent = os.stat("..", dir_fd=fd)
        if st.st_uid not in (os.geteuid(), parent.st_uid):
            raise Untrusted(f"{directory} belongs to uid {st.st_uid}")
        if not _closed(st):
            raise Untrusted(f"{directory} is writable by group or others")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def _read_trusted(dir_fd: int, dir_st: os.stat_result) -> bytes:
    fd = os.open(
        file_name(), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd
    )
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Untrusted("not a regular file")
        if st.st_uid not in (os.geteuid(), dir_st.st_uid):
            raise Untrusted(f"the file belongs to uid {st.st_uid}")
        if not _closed(st):
            raise Untrusted("the file is writable by group or others")
        if st.st_size > SIZE_LIMIT:
            raise Untrusted(f"the file has {st.st_size} bytes")
        data = f.read(SIZE_LIMIT + 1)
    if len(data) > SIZE_LIMIT:
        raise Untrusted("the file grew while read")
    return data


#: A file's table: per entry its key (the CRC-32 of the text's UTF-8), and where its text
#: and its marshalled code are in the block after the table (offset, lengths).
ENTRY_FIELDS = 4
#: The entries' numbers: unsigned, 4 bytes, in this machine's byte order (in the header).
ENTRY_FORMAT: Final = "I"


def _raw(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


class Codes:
    """A file's entries, looked up by their exact text. The file stays one block of bytes
    until the start is over, and a code is unmarshalled only when its text comes: what
    the start keeps is allocated as the plain path allocates it, and nothing of the file
    stays resident after."""

    def __init__(self, table: memoryview | None = None, block: memoryview | None = None):
        self.table = table if table is not None else memoryview(b"").cast(ENTRY_FORMAT)
        self.block = block if block is not None else memoryview(b"")
        self.index: dict[int, int] = {}
        count = len(self.table) // ENTRY_FIELDS
        for i in range(count):
            key, offset, text_len, code_len = self.entry_numbers(i)
            if offset + text_len + code_len > len(self.block):
                raise Untrusted(f"entry {i} lies outside the file")
            self.index.setdefault(key, i)
        self.count = count

    def __len__(self) -> int:
        return self.count

    def entry_numbers(self, i: int) -> tuple[int, int, int, int]:
        at = i * ENTRY_FIELDS
        key, offset, text_len, code_len = self.table[at : at + ENTRY_FIELDS].tolist()
        return key, offset, text_len, code_len

    def entry(self, i: int) -> tuple[bytes, bytes]:
        """Entry ``i``'s text (UTF-8) and marshalled code, as bytes."""
        _, offset, text_len, code_len = self.entry_numbers(i)
        end = offset + text_len
        return bytes(self.block[offset:end]), bytes(self.block[end : end + code_len])

    def find(self, text: str) -> tuple[int, CodeType] | None:
        """The entry of exactly ``text`` and its code, if the file has it whole."""
        raw = _raw(text)
        i = self.index.get(zlib.crc32(raw))
        if i is None:
            return None
        _, offset, text_len, code_len = self.entry_numbers(i)
        end = offset + text_len
        if self.block[offset:end] != raw:
            return None
        try:
            code = marshal.loads(self.block[end : end + code_len])
        except (ValueError, EOFError, TypeError):
            return None
        if (
            type(code) is not CodeType
            or code.co_filename != SOURCE_NAME
            or code.co_name != "<module>"
        ):
            return None
        return i, code

    def texts(self) -> list[str]:
        """Every entry's text (for the tests)."""
        return [self.entry(i)[0].decode("utf-8", "surrogatepass") for i in range(self.count)]


def decode(data: bytes) -> Codes:
    """A file's entries: after its header and the checksum of the rest, the number of
    entries, their table, then the block of texts and codes. Raises Untrusted where the
    bytes are not such a file."""
    head = header()
    if not data.startswith(head) or len(data) < len(head) + 8:
        raise Untrusted("not this interpreter's file")
    crc = int.from_bytes(data[len(head) : len(head) + 4], "little")
    body = memoryview(data)[len(head) + 4 :]
    if zlib.crc32(body) != crc:
        raise Untrusted("the checksum differs")
    count = int.from_bytes(body[:4], sys.byteorder)
    table_end = 4 + count * ENTRY_FIELDS * 4
    if table_end > len(body):
        raise Untrusted("the table is longer than the file")
    return Codes(body[4:table_end].cast(ENTRY_FORMAT), body[table_end:])


def pack(entries: Iterable[tuple[bytes, bytes]]) -> bytes:
    """A file of (UTF-8 text, marshalled code) entries."""
    table = array.array(ENTRY_FORMAT)
    block = bytearray()
    count = 0
    for raw, code in entries:
        table.extend((zlib.crc32(raw), len(block), len(raw), len(code)))
        block += raw
        block += code
        count += 1
    body = count.to_bytes(4, sys.byteorder) + table.tobytes() + block
    return header() + zlib.crc32(body).to_bytes(4, "little") + body


def encode(codes: Mapping[str, CodeType]) -> bytes:
    """A file of these texts and their codes."""
    return pack((_raw(text), marshal.dumps(code)) for text, code in codes.items())


def load(directory: Path) -> tuple[Codes, bool]:
    """The entries kept in ``directory`` (none when anything about the file is off), and
    whether the directory is this user's to write in."""
    try:
        dir_fd, dir_st = _open_dir(directory)
    except (OSError, Untrusted) as exc:
        log.debug("dataclass code cache in %s not used: %s", directory, exc)
        return Codes(), False
    try:
        codes = decode(_read_trusted(dir_fd, dir_st))
    except (OSError, Untrusted) as exc:
        log.debug("dataclass code cache in %s not used: %s", directory, exc)
        codes = Codes()
    finally:
        os.close(dir_fd)
    return codes, dir_st.st_uid == os.geteuid()


def read(directory: Path) -> Codes:
    """The entries kept in ``directory``, or none when anything about the file is off."""
    return load(directory)[0]


def write(directory: Path, data: bytes) -> bool:
    """Replace the file with ``data`` (:func:`pack`) atomically (a temporary beside it,
    then a rename), only in a directory of this user's; False, silently, where it cannot
    be written."""
    if len(data) > SIZE_LIMIT:
        return False
    name = file_name()
    temp = f".{name}.{os.getpid()}.tmp"
    try:
        dir_fd, dir_st = _open_dir(directory)
    except (OSError, Untrusted):
        return False
    try:
        if dir_st.st_uid != os.geteuid():
            return False
        fd = os.open(
            temp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o644,
            dir_fd=dir_fd,
        )
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=dir_fd)
            return False
    except OSError:
        return False
    finally:
        os.close(dir_fd)
    return True


class _Start:
    """One start's layer: the file's entries, those this start ran, what it compiled."""

    def __init__(self, directory: Path, codes: Codes, *, writes: bool) -> None:
        self.directory = directory
        self.codes = codes
        self.writes = writes  # else nothing is kept of what it compiles
        self.used: set[int] = set()
        self.learnt: dict[str, CodeType] = {}

    def exec(
        self,
        source: Any,
        namespace: dict[str, Any] | None = None,
        local_ns: Mapping[str, object] | None = None,
        /,
        **kwargs: Any,
    ) -> None:
        """``exec``, with a text's code taken from the file. Several threads may call it
        at once: each step is one dict or set operation."""
        if kwargs or isinstance(source, CodeType):
            builtins.exec(source, namespace, local_ns, **kwargs)
            return
        # Compiled here, not by exec: exec would take this module's __future__ flags.
        flags = sys._getframe(1).f_code.co_flags & FUTURE_FLAGS
        if type(source) is not str or flags:
            code = compile(source, SOURCE_NAME, "exec", flags, dont_inherit=True)
            builtins.exec(code, namespace, local_ns)
            return
        code = self.learnt.get(source)  # a text may come again
        if code is None:
            found = self.codes.find(source)
            if found is not None:
                i, code = found
                self.used.add(i)
            else:
                code = compile(source, SOURCE_NAME, "exec", dont_inherit=True)
                if self.writes:
                    self.learnt[source] = code
        builtins.exec(code, namespace, local_ns)

    def finish(self) -> None:
        """Write the file if this start compiled anything, then let go of every code."""
        codes, used, learnt = self.codes, self.used, self.learnt
        self.codes, self.used, self.learnt = Codes(), set(), {}
        if not learnt:
            return
        entries = [codes.entry(i) for i in sorted(used)]
        entries += [(_raw(text), marshal.dumps(code)) for text, code in learnt.items()]
        # Texts an earlier start used (another command's) stay while they are fewer than
        # this start's: a file for all of them, which stale texts cannot grow for ever.
        kept = [codes.entry(i) for i in range(len(codes)) if i not in used]
        write(self.directory, pack(entries + kept if len(kept) <= len(entries) else entries))


_current: _Start | None = None


def start() -> bool:
    """Put the layer in ``dataclasses`` for this start (not when turned off, or where this
    Python has no place for it); until :func:`stop`, at the latest at exit."""
    global _current
    if _current is not None or os.environ.get(ENV_OFF, "") not in ("", "0"):
        return False
    directory = cache_dir()
    if directory is None or not supported():
        return False
    codes, ours = load(directory)
    # Where the file may not be written (a directory of another user's, as a root install
    # run by a plain user; PYTHONDONTWRITEBYTECODE, which keeps byte code unwritten too),
    # what is compiled is not kept; and with no file either, a layer gains nothing.
    writes = ours and not sys.dont_write_bytecode
    if not writes and not len(codes):
        return False
    _current = _Start(directory, codes, writes=writes)
    vars(dataclasses)["exec"] = _current.exec
    atexit.register(stop)
    return True


def stop() -> None:
    """The start is over: ``dataclasses`` uses the builtin ``exec`` again, what was learnt
    is written, and the codes are let go."""
    global _current
    current, _current = _current, None
    if current is None:
        return
    names = vars(dataclasses)
    if names.get("exec") == current.exec:
        del names["exec"]
    atexit.unregister(stop)
    current.finish()


def running() -> bool:
    """Whether a start's layer is in place."""
    return _current is not None
