"""One text cleaner on every way out (issue 29, class 3): every string from a recording, a
remote host, /proc, a cgroup or NVML is cleaned before it reaches a terminal, by the real
commands (``gputop replay DIR --once``, ``--json``, ``--from``, a remote line), and
:func:`gputop.model.clean_text` leaves nothing a terminal acts on or that shows as nothing."""

from __future__ import annotations

import dataclasses
import json
import random
import re
import subprocess
import sys
import time
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from gputop.model import Snapshot, clean_text
from gputop.present import to_json_dict
from gputop.record.store import Recording
from gputop.sources.remote import parse_line, to_snapshot
from gputop.textout import render_text
from tests.cli.test_cli import run_cli
from tests.helpers.fuzz import SEED
from tests.record.test_record import demo, record

#: What a hostile writer puts in every string: a pane title (OSC), a screen clear and a
#: colour (CSI), the same as 8-bit C1 controls, a bell, bidi overrides, zero-width and BOM.
HOSTILE = (
    "\x1b]0;PWNED\x07\x1b]8;;http://evil/\x1b\\link\x1b]8;;\x1b\\\x1b[2J\x1b[31mred\x1bc"
    "\x9b2J\x9d0;c1\x9c\x90dcs\x9c\x07\x7f\u202eevil\u202c\u2066\u200b\u200d\ufeff\u00ad"
)
#: Unicode's format characters (zero-width, BOM, bidi marks...) and blank letters, found
#: here independently of the code under test.
FORMAT = "".join(chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf")
BLANK = "\u034f\u115f\u1160\u17b4\u17b5\u3164\uffa0"
#: Any character a terminal acts on (C0 but newline, DEL, C1) or that shows as nothing.
UNSAFE = re.compile(f"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029{re.escape(FORMAT + BLANK)}]")


def poison_strings(snapshot: Snapshot, text: str = HOSTILE) -> Snapshot:
    """``snapshot`` with ``text`` after every string in it: hostname, GPU names and UUIDs,
    commands, users, owners, errors."""

    def walk(obj: Any) -> Any:
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            changes = {f.name: walk(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
            return dataclasses.replace(obj, **changes)
        if isinstance(obj, tuple):
            return tuple(walk(v) for v in obj)
        if isinstance(obj, str):
            return obj + text
        return obj

    return walk(snapshot)  # type: ignore[no-any-return]


def strings_of(obj: Any) -> list[str]:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [s for f in dataclasses.fields(obj) for s in strings_of(getattr(obj, f.name))]
    if isinstance(obj, tuple):
        return [s for v in obj for s in strings_of(v)]
    return [obj] if isinstance(obj, str) else []


def assert_clean(out: str) -> None:
    found = UNSAFE.search(out)
    assert found is None, (
        f"{found.group()!r} at {found.start()}: {out[found.start() - 40 :][:80]!r}"
    )


@pytest.fixture(scope="module")
def hostile_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recording whose writer put escape sequences into every string it holds."""
    d = tmp_path_factory.mktemp("hostile")
    snaps = [poison_strings(s) for s in demo(30)]
    assert "PWNED" in snaps[-1].hostname and any(p.command for p in snaps[-1].processes)
    record(d, snaps)
    return d


def test_a_recordings_strings_are_clean_when_read(hostile_recording: Path) -> None:
    rec = Recording(hostile_recording)
    snap = rec[len(rec) - 1]
    texts = strings_of(snap)
    assert any("PWNED" not in t and "red" in t for t in texts)  # the text kept, the codes not
    for t in texts:
        assert_clean(t)


@pytest.mark.parametrize("mode", [(), ("--json",)], ids=["text", "json"])
def test_replay_once_writes_no_escape_sequence(hostile_recording: Path, mode: tuple[str]) -> None:
    done = run_cli("replay", str(hostile_recording), "--once", *mode)
    assert done.returncode == 0, done.stderr
    assert "red" in done.stdout  # the recorded text is shown, cleaned
    assert_clean(done.stdout)
    assert_clean(done.stderr)


def test_replay_from_writes_no_escape_sequence(hostile_recording: Path) -> None:
    rec = Recording(hostile_recording)
    t1, t2 = (time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) for t in (rec.start, rec.end))
    done = run_cli("replay", str(hostile_recording), "--from", t1, "--to", t2)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 30
    assert_clean(done.stdout)


def test_a_remote_lines_strings_are_clean() -> None:
    line = json.dumps(to_json_dict(poison_strings(demo(1)[0])), ensure_ascii=False)
    snap = to_snapshot(parse_line(line))
    for t in strings_of(snap):
        assert_clean(t)
    assert_clean(render_text(snap, total_gpus=len(snap.gpus)))


# --- the cleaner itself ----------------------------------------------------------------------


def test_clean_text_drops_every_format_character() -> None:
    """Unicode's format characters (Cf: zero-width, BOM, bidi marks) and blank letters."""
    left = [f"U+{ord(c):04X}" for c in FORMAT + BLANK if clean_text(f"a{c}b") != "ab"]
    assert not left, left


@pytest.mark.parametrize(
    "raw, shown",
    [
        ("ro\u200bot", "root"),  # zero-width space
        ("\ufeffalice", "alice"),  # BOM
        ("bob\u202egpj.exe", "bobgpj.exe"),  # right-to-left override
        ("\u2066x\u2069\u200e\u200f\u061c", "x"),  # isolates and marks
        ("a\u2060b\u00adc\u200dd", "abcd"),  # word joiner, soft hyphen, zero-width joiner
        ("a\u3164b\u115f", "ab"),  # Hangul fillers: blank letters
        ("\x1b]0;title\x07host\x1b[2Jname", "hostname"),
        ("tab\tand\nline", "tab and line"),
        ("plain ünïcödé 名前", "plain ünïcödé 名前"),
    ],
)
def test_clean_text_removes_what_shows_as_nothing(raw: str, shown: str) -> None:
    assert clean_text(raw) == shown


_ALPHABET = st.one_of(
    st.characters(codec="utf-8"),
    st.sampled_from(list("\x1b\x07\x9b\x9d\x9c\x90[];\\()0123456789JmP")),
    st.characters(categories=["Cf", "Cc", "Zl", "Zp", "Cs"]),
)


@seed(SEED)
@settings(max_examples=400, deadline=None, print_blob=True)
@given(text=st.text(_ALPHABET, max_size=200), limit=st.integers(1, 300))
def test_clean_text_fuzz(text: str, limit: int) -> None:
    """Seeded: GPUTOP_FUZZ_SEED replays it."""
    out = clean_text(text, limit)
    assert out is not None and len(out) <= limit
    assert_clean(out)
    assert clean_text(out, limit) == out  # already clean: unchanged
    out.encode("utf-8")  # no lone surrogate: every terminal encoding takes it
    from gputop.model import clean_texts

    assert clean_texts([text, 1, None], limit) == [clean_text(text, limit), 1, None]


def test_clean_text_fuzz_seeded(fuzz_seed: int) -> None:
    """The same property from the run's seed (GPUTOP_FUZZ_SEED replays it)."""
    rng = random.Random(fuzz_seed)
    pool = (
        "\x1b\x07\x9b\x9d\x9c[];0123456789Jm ab\u202e\u200b\ufeff\ud800\n\t" + FORMAT[:40] + BLANK
    )
    for _ in range(2000):
        text = "".join(rng.choice(pool) for _ in range(rng.randrange(60)))
        out = clean_text(text, 50)
        assert out is not None and len(out) <= 50
        assert_clean(out)


# --- live: /proc and NVML --------------------------------------------------------------------


@pytest.fixture
def hostile_process() -> Iterator[subprocess.Popen[bytes]]:
    """A real process whose name and command line hold escape sequences."""
    argv0 = "\x1b]0;PWNED\x07\x1b[2J" + "\u202ename\u200b"
    code = (
        "import os, time; open('/proc/self/comm', 'w').write('\\x1b[2J\\x9bJ\\u202ex');"
        " os.close(1); time.sleep(120)"
    )
    child = subprocess.Popen(
        [argv0, "-c", code, HOSTILE], executable=sys.executable, stdout=subprocess.PIPE
    )
    try:
        child.stdout.read()  # type: ignore[union-attr]  # at its end: the child runs, named
        yield child
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("mode", [(), ("--json",)], ids=["text", "json"])
def test_live_once_writes_no_escape_sequence(
    fake_nvml_env: Any, hostile_process: subprocess.Popen[bytes], mode: tuple[str]
) -> None:
    from tests import fakenvml

    scenario = fakenvml.Scenario(
        gpus=[
            fakenvml.FakeGpu(
                name=b"\x1b]0;PWNED\x07H100\x9b2J\xe2\x80\xae\xef\xbb\xbf",
                processes=[fakenvml.FakeProcess(pid=hostile_process.pid, used_memory=2**30)],
            )
        ]
    )
    done = run_cli("--once", *mode, env=fake_nvml_env(scenario))
    assert done.returncode == 0, done.stderr
    assert str(hostile_process.pid) in done.stdout and "H100" in done.stdout
    assert_clean(done.stdout)
    assert_clean(done.stderr)


# --- error lines that echo what they were given ----------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        (HOSTILE,),  # argparse: "unrecognized arguments: ..."
        ("--once", "--interval", HOSTILE),
        ("replay", f"/nonexistent/{HOSTILE}", "--once"),
        ("replay", "--at", HOSTILE),
        ("record", "--max-size", HOSTILE),
        ("fleet", "--once", HOSTILE),
    ],
    ids=["unknown", "interval", "replay-path", "replay-at", "record", "fleet"],
)
def test_an_error_that_echoes_an_argument_writes_no_escape_sequence(argv: tuple[str, ...]) -> None:
    done = run_cli(*argv)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert_clean(done.stderr)
    assert_clean(done.stdout)


# --- fuzz: generated strings through a recording's decoding and a remote line's check ----------

_DEMO = demo(1)[0]


@seed(SEED)
@settings(max_examples=60, deadline=None, print_blob=True)
@given(text=st.text(_ALPHABET, min_size=1, max_size=80))
def test_decoded_strings_are_clean_fuzz(text: str) -> None:
    """Seeded: GPUTOP_FUZZ_SEED replays it."""
    from gputop.record.codec import decode_snapshots, encode_rows, flatten

    snap = poison_strings(_DEMO, text)
    (recorded,) = decode_snapshots(encode_rows([flatten(snap)]))
    line = json.dumps(to_json_dict(snap), ensure_ascii=False)
    remote = to_snapshot(parse_line(line))
    for got in (recorded, remote):
        for t in strings_of(got):
            assert_clean(t)
        assert_clean(render_text(got, total_gpus=len(got.gpus)))
    assert recorded.hostname == clean_text(snap.hostname, 4096)
