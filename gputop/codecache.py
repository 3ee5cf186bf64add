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
from collections.abc import Mapping
from pathlib import Path
from types import CodeType, FunctionType
from typing import Any

log = logging.getLogger(__name__)

#: Set (to anything but ``0``): no layer, every dataclass compiled as usual.
ENV_OFF = "GPUTOP_NO_CODE_CACHE"
#: The directory of the file instead of the one beside gputop's byte code (the tests'
#: and benches' own directories).
ENV_DIR = "GPUTOP_CODE_CACHE_DIR"
#: A larger file is not read (several times what the codes of every gputop module take).
SIZE_LIMIT = 4 << 20
#: The file's first bytes, before the interpreter's own magic and cache tag.
MAGIC = b"gputop dataclass code 1\n"
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
    if "exec" in names or sys.implementation.cache_tag is None:
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
    tag = sys.implementation.cache_tag or ""
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


def _read_trusted(directory: Path) -> bytes:
    dir_fd, dir_st = _open_dir(directory)
    try:
        fd = os.open(
            file_name(),
            os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
            dir_fd=dir_fd,
        )
    finally:
        os.close(dir_fd)
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


def decode(data: bytes) -> dict[str, CodeType]:
    """The codes in a file's bytes: its header, its checksum, then a dict of source text
    to the module code compiled from it. Raises Untrusted for anything else."""
    head = header()
    if not data.startswith(head) or len(data) < len(head) + 4:
        raise Untrusted("not this interpreter's file")
    crc = int.from_bytes(data[len(head) : len(head) + 4], "little")
    payload = memoryview(data)[len(head) + 4 :]
    if zlib.crc32(payload) != crc:
        raise Untrusted("the checksum differs")
    try:
        codes = marshal.loads(payload)
    except (ValueError, EOFError, TypeError) as exc:
        raise Untrusted(f"not marshal data: {exc}") from None
    if type(codes) is not dict or not all(
        type(text) is str
        and type(code) is CodeType
        and code.co_filename == SOURCE_NAME
        and code.co_name == "<module>"
        for text, code in codes.items()
    ):
        raise Untrusted("not a dict of texts and their codes")
    return codes


def encode(codes: Mapping[str, CodeType]) -> bytes:
    payload = marshal.dumps(dict(codes))
    return header() + zlib.crc32(payload).to_bytes(4, "little") + payload


def read(directory: Path) -> dict[str, CodeType]:
    """The codes kept in ``directory``, or none when anything about the file is off."""
    try:
        return decode(_read_trusted(directory))
    except (OSError, Untrusted) as exc:
        log.debug("dataclass code cache in %s not used: %s", directory, exc)
        return {}


def write(directory: Path, codes: Mapping[str, CodeType]) -> bool:
    """Replace the file atomically (a temporary beside it, then a rename), only in a
    directory of this user's; False, silently, where it cannot be written."""
    data = encode(codes)
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
    """One start's layer: the codes read from the file, and those this start ran."""

    def __init__(self, directory: Path, known: dict[str, CodeType]) -> None:
        self.directory = directory
        self.known = known
        self.used: dict[str, CodeType] = {}
        self.learnt = False

    def exec(
        self,
        source: Any,
        namespace: dict[str, Any] | None = None,
        local_ns: Mapping[str, object] | None = None,
        /,
        **kwargs: Any,
    ) -> None:
        """``exec``, with a text's code taken from the cache. Several threads may call it
        at once: each step is one dict operation."""
        if kwargs or isinstance(source, CodeType):
            builtins.exec(source, namespace, local_ns, **kwargs)
            return
        # Compiled here, not by exec: exec would take this module's __future__ flags.
        flags = sys._getframe(1).f_code.co_flags & FUTURE_FLAGS
        if type(source) is not str or flags:
            code = compile(source, SOURCE_NAME, "exec", flags, dont_inherit=True)
            builtins.exec(code, namespace, local_ns)
            return
        code = self.used.get(source) or self.known.get(source)  # a text may come again
        if code is None:
            code = compile(source, SOURCE_NAME, "exec", dont_inherit=True)
            self.learnt = True
        self.used[source] = code
        builtins.exec(code, namespace, local_ns)

    def finish(self) -> None:
        """Write the file if this start compiled anything, then let go of every code."""
        known, used = self.known, self.used
        self.known, self.used = {}, {}
        if not self.learnt or sys.dont_write_bytecode:
            return
        # Texts an earlier start used (another command's) stay while they are fewer than
        # this start's: a file for all of them, which stale texts cannot grow for ever.
        kept = {text: code for text, code in known.items() if text not in used}
        write(self.directory, used | kept if len(kept) <= len(used) else used)


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
    _current = _Start(directory, read(directory))
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
