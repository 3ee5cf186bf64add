"""The dataclasses' code kept from one start to the next (gputop.codecache).

The plain path is ``dataclasses`` with its own ``exec`` (``GPUTOP_NO_CODE_CACHE=1``): every
class made through the cache, cold and warm, has the same generated code and behaves the
same (tests/helpers/dataclass_oracle.py, each start in a fresh interpreter). The file is
only read when it is a regular file of the user's (or of its directory's owner) in a
directory closed to group and others, with this interpreter's header and an intact
checksum, holding a dict of texts and codes; anything else is ignored, and a start is then
as without a file.
"""

from __future__ import annotations

import dataclasses
import json
import marshal
import os
import shutil
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from types import CodeType
from typing import Any

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from gputop import codecache
from tests.helpers.nobody import NOBODY, as_nobody

ROOT = Path(__file__).resolve().parents[2]
ORACLE = ROOT / "tests" / "helpers" / "dataclass_oracle.py"
SEED = 20261205

#: A text as ``dataclasses`` writes one, and another.
TEXT = "def __create_fn__(_cls):\n def f(self):\n  return _cls\n return f"
OTHER = "def __create_fn__():\n def f(self):\n  return 2\n return f"


def compiled(text: str) -> CodeType:
    return compile(text, "<string>", "exec", dont_inherit=True)


def put(directory: Path, data: bytes, mode: int = 0o644) -> Path:
    path = directory / codecache.file_name()
    path.write_bytes(data)
    path.chmod(mode)
    return path


def with_checksum(body: bytes) -> bytes:
    return codecache.header() + zlib.crc32(body).to_bytes(4, "little") + body


def valid() -> bytes:
    return codecache.encode({TEXT: compiled(TEXT)})


def one_entry(code: bytes, text: str = TEXT) -> bytes:
    return codecache.pack([(text.encode(), code)])


def texts(directory: Path) -> list[str]:
    return codecache.read(directory).texts()


@pytest.fixture
def stopped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """No layer in place (a test module may have imported the CLI), the cache in tmp_path,
    byte code written as where it is allowed; any layer the test started is stopped."""
    codecache.stop()
    monkeypatch.setenv(codecache.ENV_DIR, str(tmp_path))
    monkeypatch.delenv(codecache.ENV_OFF, raising=False)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    yield tmp_path
    codecache.stop()


# --- the plain path as the oracle: every class the same, cold and warm -----------------


def oracle(directory: Path, *args: str, **env: str) -> dict[str, Any]:
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    environ.update(
        PYTHONPATH=str(ROOT), PYTHONHASHSEED="0", GPUTOP_PROBE="0",
        **{codecache.ENV_DIR: str(directory)}, **env,
    )  # fmt: skip
    done = subprocess.run(
        [sys.executable, str(ORACLE), *args],
        env=environ, cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_every_dataclass_is_the_same_through_the_cache_cold_and_warm(tmp_path: Path) -> None:
    plain = oracle(tmp_path, **{codecache.ENV_OFF: "1"})
    assert not (tmp_path / codecache.file_name()).exists()
    assert len(plain["behaviours"]) > 50 and len(plain["codes"]) > 300
    cold = oracle(tmp_path)
    assert cold["compiled"] > 300
    assert (tmp_path / codecache.file_name()).is_file()  # a cold start writes the file
    warm = oracle(tmp_path)
    assert warm["compiled"] == 0  # a warm start compiles nothing
    for run in (cold, warm):
        assert run["codes"] == plain["codes"]
        assert run["behaviours"] == plain["behaviours"]
        assert run["exec left"] is False  # dataclasses' exec is the builtin again
    assert plain["exec left"] is False


def test_the_exit_ends_the_start_and_writes_what_it_learnt(tmp_path: Path) -> None:
    """A command that never reaches a first frame: the exit handler ends its start."""
    plain = oracle(tmp_path, "--at-exit", **{codecache.ENV_OFF: "1"})
    cold = oracle(tmp_path, "--at-exit")
    assert cold["exec left"] is False and cold["codes"] == plain["codes"]
    assert oracle(tmp_path, "--at-exit")["compiled"] == 0


@pytest.mark.parametrize(
    "name",
    ["garbage", "wrong types", "code under another text", "group-writable", "symlink"],
)
def test_a_start_on_a_hostile_file_is_a_plain_one(tmp_path: Path, name: str) -> None:
    plain = oracle(tmp_path / "plain", **{codecache.ENV_OFF: "1"})
    hostile = tmp_path / "hostile"
    hostile.mkdir(mode=0o755)
    if name == "garbage":
        put(hostile, codecache.header() + bytes(range(256)) * 20)
    elif name in ("wrong types", "code under another text"):
        oracle(tmp_path)  # a valid file: every text the start uses
        whole = codecache.read(tmp_path)
        entries = [whole.entry(i) for i in range(len(whole))]
        if name == "wrong types":  # each text's code a list
            entries = [(raw, marshal.dumps(["not", "code"])) for raw, _ in entries]
        else:  # each code under a text dataclasses never writes: never run
            entries = [(raw + b"\n#", code) for raw, code in entries]
        put(hostile, codecache.pack(entries))
    elif name == "group-writable":
        oracle(hostile)  # a valid file...
        (hostile / codecache.file_name()).chmod(0o664)  # ...that others may have changed
    else:
        oracle(tmp_path)
        (hostile / codecache.file_name()).symlink_to(tmp_path / codecache.file_name())
    run = oracle(hostile)
    assert run["compiled"] > 300  # nothing taken from the file
    assert run["codes"] == plain["codes"] and run["behaviours"] == plain["behaviours"]


def test_a_command_ends_the_start_at_its_end(tmp_path: Path) -> None:
    """``gputop --once`` through ``entry``: the layer is gone once the command is over."""
    code = (
        "import sys, dataclasses; sys.argv = ['gputop', '--demo', '--once']\n"
        "from gputop import cli\n"
        "assert 'exec' in vars(dataclasses)\n"
        "status = cli.entry()\n"
        "print(status, 'exec' in vars(dataclasses), file=sys.stderr)\n"
    )
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    environ.update(PYTHONPATH=str(ROOT), **{codecache.ENV_DIR: str(tmp_path)})
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=environ, cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.split() == ["0", "False"]
    assert (tmp_path / codecache.file_name()).is_file()


# --- the file: what is read, what is ignored --------------------------------------------


def test_a_valid_file_is_read_and_what_is_written_reads_back(stopped: Path) -> None:
    put(stopped, valid())
    assert texts(stopped) == [TEXT]
    found = codecache.read(stopped).find(TEXT)
    assert found is not None and found[1] == compiled(TEXT)
    assert codecache.write(stopped, codecache.encode({OTHER: compiled(OTHER)}))
    assert texts(stopped) == [OTHER]
    assert not [p for p in stopped.iterdir() if p.name.endswith(".tmp")]


def damaged_files() -> dict[str, bytes]:
    good = valid()
    head = codecache.header()
    flipped = bytearray(good)
    flipped[-3] ^= 0x40
    count = len(head) + 4  # where the number of entries is
    return {
        "empty": b"",
        "garbage": bytes(range(255, -1, -1)) * 16,
        "wrong magic": b"X" + good[1:],
        "another interpreter": good.replace(head, head[:-2] + b"9\n", 1),
        "no checksum": head,
        "checksum differs": bytes(flipped),
        "more entries than the table holds": with_checksum(
            (1000).to_bytes(4, sys.byteorder) + good[count + 4 :]
        ),
        "an entry outside the file": with_checksum(one_entry(b"x")[count:-1]),
        **{f"truncated at {n}": good[:n] for n in (10, len(head), count, len(good) - 1)},
    }


@pytest.mark.parametrize("name", sorted(damaged_files()))
def test_a_damaged_or_foreign_file_is_ignored(stopped: Path, name: str) -> None:
    put(stopped, damaged_files()[name])
    assert len(codecache.read(stopped)) == 0


def wrong_entries() -> dict[str, bytes]:
    return {
        "not marshal": one_entry(b"\xff\xfe garbage"),
        "a list": one_entry(marshal.dumps([TEXT])),
        "an int": one_entry(marshal.dumps(1)),
        "a code of a file": one_entry(marshal.dumps(compile(TEXT, "x.py", "exec"))),
        "a function's code": one_entry(marshal.dumps(compiled(TEXT).co_consts[0])),
        "another text's code": one_entry(marshal.dumps(compiled(TEXT)), OTHER),
        "a truncated code": one_entry(marshal.dumps(compiled(TEXT))[:-5]),
    }


@pytest.mark.parametrize("name", sorted(wrong_entries()))
def test_an_entry_that_is_not_a_texts_code_is_not_run(stopped: Path, name: str) -> None:
    """The lookup is by the exact text, and only a module's code compiled from a string
    is taken: anything else, and the text is compiled as usual."""
    put(stopped, wrong_entries()[name])
    assert codecache.read(stopped).find(TEXT) is None
    assert codecache.start()
    space: dict[str, Any] = {}
    vars(dataclasses)["exec"](TEXT, {}, space)
    assert space["__create_fn__"](7)(None) == 7


@pytest.mark.parametrize("mode", [0o664, 0o646, 0o666])
def test_a_file_others_may_write_is_ignored(stopped: Path, mode: int) -> None:
    put(stopped, valid(), mode)
    assert len(codecache.read(stopped)) == 0


@pytest.mark.parametrize("mode", [0o775, 0o757, 0o1777])
def test_a_directory_others_may_write_is_neither_read_nor_written(stopped: Path, mode: int) -> None:
    put(stopped, valid())
    stopped.chmod(mode)
    assert len(codecache.read(stopped)) == 0
    assert not codecache.write(stopped, codecache.encode({OTHER: compiled(OTHER)}))


def test_links_are_not_followed(stopped: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    target = put(elsewhere, valid())
    (stopped / codecache.file_name()).symlink_to(target)
    assert len(codecache.read(stopped)) == 0
    linked_dir = tmp_path_factory.mktemp("links") / "cache"
    linked_dir.symlink_to(elsewhere)
    assert len(codecache.read(linked_dir)) == 0
    # Writing replaces the link itself, never the file it points to.
    assert codecache.write(stopped, codecache.encode({OTHER: compiled(OTHER)}))
    assert not (stopped / codecache.file_name()).is_symlink()
    assert target.read_bytes() == valid()


def test_not_a_regular_file_is_ignored_without_blocking(stopped: Path) -> None:
    os.mkfifo(stopped / codecache.file_name())  # a FIFO with no writer would block a read
    assert len(codecache.read(stopped)) == 0
    (stopped / codecache.file_name()).unlink()
    (stopped / codecache.file_name()).mkdir()
    assert len(codecache.read(stopped)) == 0


def test_a_huge_file_is_not_read(stopped: Path) -> None:
    path = put(stopped, valid())
    with path.open("r+b") as f:
        f.truncate(codecache.SIZE_LIMIT + 1)  # sparse: no disk used
    assert len(codecache.read(stopped)) == 0
    huge = {f"{TEXT}\n#{i}{'x' * 2000}": compiled(TEXT) for i in range(3000)}
    assert not codecache.write(stopped, codecache.encode(huge))  # nor written: it'd be ignored


@pytest.mark.requires_root("gives the file to another user")
def test_another_users_file_is_ignored(stopped: Path) -> None:
    path = put(stopped, valid())
    os.chown(path, NOBODY, NOBODY)
    assert len(codecache.read(stopped)) == 0


@pytest.mark.requires_root("gives the directory to another user")
def test_another_users_directory_is_neither_read_nor_written(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    parent = tmp_path_factory.mktemp("parent")
    theirs = parent / "cache"
    theirs.mkdir(mode=0o755)
    put(theirs, valid())
    os.chown(theirs, NOBODY, NOBODY)
    assert len(codecache.read(theirs)) == 0  # neither root's nor its parent's owner's
    assert not codecache.write(theirs, codecache.encode({OTHER: compiled(OTHER)}))


@pytest.mark.requires_root("drops to nobody")
def test_a_plain_user_reads_the_installers_cache_and_writes_nothing() -> None:
    """An install of root's, run by another user: the file root wrote is used, nothing is
    written or kept; a file of root's in a directory of nobody's is not theirs to trust."""
    installed = Path(tempfile.mkdtemp(prefix="gputop-test-codecache-"))
    try:
        installed.chmod(0o755)
        put(installed, valid())
        empty = installed / "empty"
        empty.mkdir(mode=0o755)
        theirs = installed / "nobodys"
        theirs.mkdir(mode=0o755)
        put(theirs, valid())
        os.chown(theirs, NOBODY, NOBODY)

        def as_user() -> object:
            os.environ[codecache.ENV_DIR] = str(installed)
            started = codecache.start()  # the file is read, nothing compiled is kept
            dataclasses.make_dataclass("Users", [("u", int)])
            codecache.stop()
            os.environ[codecache.ENV_DIR] = str(empty)
            return [
                texts(installed),
                codecache.write(installed, codecache.encode({OTHER: compiled(OTHER)})),
                texts(theirs),
                started,
                codecache.start(),  # no file, nowhere to write one: no layer
            ]

        assert as_nobody(as_user) == [[TEXT], False, [], True, False]
        assert (installed / codecache.file_name()).read_bytes() == valid()
    finally:
        shutil.rmtree(installed)


@seed(SEED)  # fixed: a failure reproduces (hypothesis prints the example)
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600), st.booleans())
def test_any_bytes_after_the_header_are_ignored_or_entries_looked_up_safely(
    tail: bytes, checksummed: bool
) -> None:
    data = with_checksum(tail) if checksummed else codecache.header() + tail
    try:
        codes = codecache.decode(data)
    except codecache.Untrusted:
        return
    for i in range(len(codes)):
        raw, _ = codes.entry(i)
        text = raw.decode("utf-8", "replace")
        hit = codes.find(text)
        assert hit is None or type(hit[1]) is CodeType
    assert codes.find(TEXT) is None


# --- the layer: in place for the start, semantics of exec -------------------------------


def test_the_layer_is_put_in_and_taken_out(stopped: Path) -> None:
    assert codecache.start()
    assert "exec" in vars(dataclasses) and codecache.running()
    assert not codecache.start()  # once
    made = dataclasses.make_dataclass("Made", [("a", int)], frozen=True)
    codecache.stop()
    assert "exec" not in vars(dataclasses) and not codecache.running()
    assert made(1) == made(1) and repr(made(2)) == "Made(a=2)"
    with pytest.raises(dataclasses.FrozenInstanceError):
        made(1).a = 2
    assert len(codecache.read(stopped)) >= 3  # __init__, __repr__, __eq__, ...


def test_the_opt_out_puts_no_layer(stopped: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(codecache.ENV_OFF, "1")
    assert not codecache.start()
    assert "exec" not in vars(dataclasses)
    monkeypatch.setenv(codecache.ENV_OFF, "0")
    assert codecache.start()


def test_no_layer_where_dataclasses_has_no_global_exec(
    stopped: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert codecache.supported()
    monkeypatch.setitem(vars(dataclasses), "exec", exec)  # as if it had its own
    assert not codecache.supported() and not codecache.start()


def test_a_warm_start_writes_nothing_and_a_new_text_keeps_the_others(stopped: Path) -> None:
    path = put(stopped, codecache.encode({OTHER: compiled(OTHER)}))
    assert codecache.start()
    codecache.stop()  # nothing learnt
    assert path.read_bytes() == codecache.encode({OTHER: compiled(OTHER)})
    assert codecache.start()
    dataclasses.make_dataclass("Learnt", [("b", int)])
    codecache.stop()
    kept = texts(stopped)
    assert OTHER in kept and len(kept) >= 4  # another command's text kept with the new


def test_texts_not_used_are_dropped_once_they_outnumber_the_used(stopped: Path) -> None:
    stale = {f"{OTHER}\n#{i}": compiled(OTHER) for i in range(50)}
    put(stopped, codecache.encode(stale))
    assert codecache.start()
    dataclasses.make_dataclass("Fresh", [("c", int)])
    codecache.stop()
    kept = texts(stopped)
    assert kept and not set(kept) & set(stale)


def test_where_nothing_can_be_read_or_written_there_is_no_layer(
    stopped: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache directory that does not exist (a __pycache__ never made), or byte code not
    to be written: a layer would compile every text as plain exec does, for nothing."""
    monkeypatch.setenv(codecache.ENV_DIR, str(stopped / "not made"))
    assert not codecache.start()
    monkeypatch.setenv(codecache.ENV_DIR, str(stopped))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert not codecache.start()
    path = put(stopped, valid())
    assert codecache.start()  # the file is read, but not written
    dataclasses.make_dataclass("NotWritten", [("d", int)])
    codecache.stop()
    assert path.read_bytes() == valid()


def test_a_text_compiles_as_exec_would_from_its_caller(stopped: Path) -> None:
    """``exec`` compiles with its caller's __future__ flags: the layer does too (here a
    caller with ``annotations``, whose annotations stay text), keeps only what it compiled
    without any, and runs code objects and bytes as ``exec`` does."""
    import __future__

    def call_from(flags: int, text: str | bytes) -> dict[str, Any]:
        space: dict[str, Any] = {}
        source = "def call(run, text, ns):\n run(text, {}, ns)\n"
        caller = compile(source, "c", "exec", flags, dont_inherit=True)
        exec(caller, space)
        ns: dict[str, Any] = {}
        space["call"](vars(dataclasses)["exec"], text, ns)
        return dict(ns["g"].__annotations__)

    text = "def g(x: int): pass"
    annotations = __future__.annotations.compiler_flag
    assert codecache.start()
    assert call_from(0, text) == {"x": int}
    assert call_from(annotations, text) == {"x": "int"}
    assert call_from(0, text.encode()) == {"x": int}
    assert call_from(annotations, text.encode()) == {"x": "int"}
    assert call_from(0, compile(text, "<string>", "exec", annotations, dont_inherit=True)) == {
        "x": "int"
    }
    codecache.stop()
    assert texts(stopped) == [text]
