"""Issue 29, class 9: an error that echoes what was given cuts it to a readable length
(one home: ``argtypes.ECHO_CHARS``); ``--at``/``--from`` take ISO times in either case;
``[keys]`` takes only keys a key press produces. The command-line cases run the real
``python -m gputop``; the property tests print their seed (Hypothesis, ``print_blob``)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from gputop.argtypes import ECHO_CHARS, cut_echoes, echo, shorten
from gputop.config import ConfigError, load_config
from gputop.keys import CHARACTER_NAMES, NAMED_KEYS, canonical_key
from gputop.record.store import parse_duration, parse_size
from gputop.record.when import parse_time
from tests.cli.test_cli import ROOT
from tests.helpers.fuzz import SEED
from tests.record.test_record import demo, record

SETTINGS = settings(max_examples=200, deadline=None, database=None, print_blob=True)
#: An error line with a cut echo in it stays well under this.
SHORT = 4 * ECHO_CHARS
HUGE = "7" * 100_000
HUGE_WORDS = "x " * 50_000


def gputop(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputop", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def one_short_line_exit_2(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 2, r.stderr[:500]
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.endswith("\n"), r.stderr[:500]
    assert "Traceback" not in r.stderr
    assert len(r.stderr) < SHORT, f"{len(r.stderr)} characters: {r.stderr[:300]}..."
    return r.stderr


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rec")
    record(out, demo(30))
    return out


# --- the cut ---------------------------------------------------------------------------


# ids: the test's name goes into the environment (PYTEST_CURRENT_TEST), which has a limit
@pytest.mark.parametrize(
    "what", [HUGE, HUGE_WORDS, "\x1b[31m" * 20_000], ids=["digits", "words", "escapes"]
)
@pytest.mark.parametrize(
    "args",
    [
        ["replay", "{rec}", "--at", "{}", "--once"],
        ["replay", "{rec}", "--from", "{}"],
        ["replay", "{rec}", "--from", "@0", "--to", "{}"],
        ["--interval", "{}"],
        ["--window", "{}"],
        ["--gpus", "{}"],
        ["--stream", "--count", "{}"],
        ["--demo", "--seed", "{}"],
        ["--threshold", "{}"],
        ["--threshold", "UTIL_HIGH={}"],
        ["--theme", "{}"],
        ["--config", "/nonexistent/{}"],
        ["--once", "--demo", "{}"],  # argparse's own "unrecognized arguments"
        ["--demo", "--once", "--interval={}"],
        ["record", "--max-size", "{}"],
        ["export", "--listen", "{}"],
    ],
)
def test_a_huge_argument_is_one_short_line_and_exit_2(
    recording: Path, args: list[str], what: str
) -> None:
    filled = [a.replace("{rec}", str(recording)).replace("{}", what) for a in args]
    if args[0] == "--config" and len(what) > 4000:  # a path: the kernel's limit first
        filled = ["--config", "/nonexistent/" + what[:3000]]
    one_short_line_exit_2(gputop(*filled))


@pytest.mark.parametrize("length", [1000, 5000], ids=["missing", "too-long-for-the-kernel"])
def test_a_long_recording_path_is_one_short_line_and_exit_2(tmp_path: Path, length: int) -> None:
    """The path given to replay, missing or past the kernel's name limit (ENAMETOOLONG was
    a traceback), is cut like every other echo."""
    one_short_line_exit_2(gputop("replay", str(tmp_path / ("y" * length)), "--once"))


def test_a_long_record_directory_is_one_short_line(tmp_path: Path) -> None:
    r = gputop("record", "--demo", "--dir", str(tmp_path / ("w" * 5000) / "rec"))
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr[:500]
    assert "Traceback" not in r.stderr and len(r.stderr) < SHORT, r.stderr[:300]


@pytest.mark.parametrize("size", ["\u0661\u0660M", "\uff11G"], ids=["arabic-indic", "fullwidth"])
def test_sizes_and_durations_take_ascii_digits_only(size: str) -> None:
    with pytest.raises(ValueError):
        parse_size(size)
    with pytest.raises(ValueError):
        parse_duration(size.rstrip("MG") + "d")


def test_a_long_time_is_cut_in_the_middle_and_says_both_ends(recording: Path) -> None:
    text = "2026-12-04T" + "9" * 10_000 + "Z-the-end"
    err = one_short_line_exit_2(gputop("replay", str(recording), "--at", text, "--once"))
    assert "2026-12-04T99" in err and "Z-the-end" in err and "..." in err


def test_an_unknown_key_in_the_config_file_is_cut(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(f'"{HUGE}" = 1\n[keys]\n')
    one_short_line_exit_2(gputop("--demo", "--once", "--config", str(config)))


@seed(SEED)
@SETTINGS
@given(st.text(max_size=3 * ECHO_CHARS))
def test_shorten_is_one_printable_line_of_bounded_length(text: str) -> None:
    """Seeded: GPUTOP_FUZZ_SEED replays it."""
    for shown in (shorten(text), echo(text)):
        assert shown.isprintable()
        # each character escaped at most as repr() does (\U0010ffff: 10 characters)
        assert len(shown) <= 10 * ECHO_CHARS + 2
    if len(text) <= ECHO_CHARS and text.isprintable():
        assert shorten(text) == text and echo(text) == f"'{text}'"


@seed(SEED)
@SETTINGS
@given(
    st.lists(st.text(min_size=0, max_size=1000), max_size=4),
    st.sampled_from(["unrecognized arguments: {}", "invalid value: {!r}", "x={}: bad"]),
)
def test_an_error_quoting_any_argument_is_one_short_line(given_args: list[str], form: str) -> None:
    """Seeded: GPUTOP_FUZZ_SEED replays it."""
    message = cut_echoes(form.format(" ".join(given_args)), given_args)
    assert "\n" not in message and message.isprintable()
    # every argument's echo is cut; what stays is the form and the cut echoes
    assert len(message) <= len(form) + len(given_args) * (10 * ECHO_CHARS + 3) + 3


# --- times -----------------------------------------------------------------------------

Z = 1796413200.0  # 2026-12-04 19:40:00 UTC


@pytest.mark.parametrize(
    ("text", "epoch"),
    [
        ("2026-12-04T19:40:00Z", Z),
        ("2026-12-04t19:40:00z", Z),
        ("2026-12-04T19:40Z", Z),
        ("2026-12-04 19:40:00Z", Z),
        ("  2026-12-04T19:40:00Z ", Z),
        ("2026-12-04T19:40:00+00:00", Z),
        ("2026-12-04T20:40:00+01:00", Z),
        ("2026-12-04 20:40:00 +01:00", Z),
        ("2026-12-04T14:40:00-05:00", Z),
        ("2026-12-04T14:40:00.000-0500", Z),
        ("20261204T194000Z", Z),
    ],
)
def test_iso_times_in_either_case_with_t_z_and_offsets(text: str, epoch: float) -> None:
    assert parse_time(text, now=time.time()) == epoch


def test_a_naive_iso_time_is_local_time() -> None:
    import datetime as dt

    want = dt.datetime(2026, 12, 4, 19, 40).timestamp()
    assert parse_time("2026-12-04T19:40", now=time.time()) == want
    assert parse_time("2026-12-04 19:40", now=time.time()) == want


def test_replay_at_an_iso_utc_time(recording: Path) -> None:
    from gputop.record.store import Recording

    start = Recording(recording).start
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start + 10))
    for text in (at, at.lower()):
        r = gputop("replay", str(recording), "--at", text, "--json")
        assert r.returncode == 0, r.stderr
        assert abs(json.loads(r.stdout)["time"] - (start + 10)) <= 1


@pytest.mark.parametrize("text", ["@\uff11\uff12", "\uff12h ago", "\uff10\uff13:00", "1_000 s ago"])
def test_times_take_ascii_digits_only(text: str) -> None:
    with pytest.raises(ValueError, match="not a time"):
        parse_time(text, now=time.time())


@seed(SEED)
@SETTINGS
@given(st.text(max_size=400) | st.from_regex(r"\A[0-9:@ tTzZ+.-]{0,40}\Z"))
def test_any_time_text_is_a_time_in_span_or_a_short_value_error(text: str) -> None:
    """Seeded: GPUTOP_FUZZ_SEED replays it."""
    try:
        t = parse_time(text, now=1.7e9)
    except ValueError as exc:
        message = str(exc)
        assert "\n" not in message and len(message) < SHORT, message
    else:
        assert 0 <= t <= 253402300799.0


# --- [keys] ----------------------------------------------------------------------------


def test_the_key_tables_are_textuals() -> None:
    # The name Textual gives a typed character's key event (no public name for it).
    from textual.keys import Keys, _character_to_key

    assert {k.value for k in Keys} >= NAMED_KEYS
    printable = [chr(c) for c in range(33, 127) if not chr(c).isalnum()]
    assert sorted(CHARACTER_NAMES) == sorted(printable)
    for character, name in CHARACTER_NAMES.items():
        assert _character_to_key(character) == name, character


def _keys(tmp_path: Path, body: str) -> tuple[tuple[str, str], ...]:
    path = tmp_path / "c.toml"
    path.write_text("[keys]\n" + body)
    return load_config(str(path)).keys


@pytest.mark.parametrize(
    "key",
    [
        "zzz",
        "f25",
        "Esc",
        "ctrl+zzz",
        "shift+ctrl+a",
        "ctrl+ctrl+a",
        "ctrl+",
        "+a",
        "ctrl+?",
        "é",
        " ",
    ],
)
def test_a_key_no_key_press_produces_is_refused(tmp_path: Path, key: str) -> None:
    with pytest.raises(ConfigError, match=r"\[keys\] help must be a key such as"):
        _keys(tmp_path, f"help = {json.dumps(key)}\n")


@pytest.mark.parametrize(
    "key", ["h", "?", "question_mark", "f1", "f24", "ctrl+o", "ctrl+shift+up", "A", "alt+x", "home"]
)
def test_a_key_a_key_press_produces_is_taken(tmp_path: Path, key: str) -> None:
    body = f'help = "f2"\njobs = "{key}"\n'  # help's own "?" moved out of the way
    assert _keys(tmp_path, body) == (("help", "f2"), ("jobs", key))


def test_a_character_and_its_name_are_one_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="already the key of help"):
        _keys(tmp_path, 'sort = "question_mark"\n')
    with pytest.raises(ConfigError, match="already the key of slower"):
        _keys(tmp_path, 'sort = "="\n')


def test_help_zzz_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[keys]\nhelp = "zzz"\n')
    err = one_short_line_exit_2(gputop("--demo", "--once", "--config", str(path)))
    assert "help must be a key" in err and "'zzz'" in err


@seed(SEED)
@SETTINGS
@given(st.text(max_size=30) | st.from_regex(r"\A((ctrl|shift|alt|meta)\+){0,3}[ -~]{1,12}\Z"))
def test_canonical_key_of_any_text(text: str) -> None:
    """Seeded: GPUTOP_FUZZ_SEED replays it."""
    name = canonical_key(text)
    if name is not None:  # a name Textual's keys produce, given again it is the same
        assert canonical_key(name) == name
        base = name.rpartition("+")[2]
        assert base in NAMED_KEYS or base in CHARACTER_NAMES.values() or base.isalnum()


def test_random_bytes_as_keys_never_raise_anything_but_config_error(
    tmp_path: Path, fuzz_seed: int
) -> None:
    """Seeded (GPUTOP_FUZZ_SEED replays it)."""
    seed = fuzz_seed
    rng = random.Random(seed)
    for _ in range(50):
        key = "".join(chr(rng.randrange(0x20, 0x3000)) for _ in range(rng.randrange(1, 8)))
        try:
            _keys(tmp_path, f"kill = {json.dumps(key)}\n")
        except ConfigError as exc:
            assert "\n" not in str(exc), f"seed {seed}"
