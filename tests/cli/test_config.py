"""gputop.config: the TOML configuration file and command-line overrides."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import cast

import pytest

from gputop.analysis.thresholds import Thresholds
from gputop.config import Config, ConfigError, default_path, load_config, with_overrides
from tests.helpers.nobody import as_nobody

FULL = """
readonly = true
interval = 2.5
window = 30
theme = "gruvbox"

[thresholds]
UTIL_HIGH = 90
worker-busy-cpu = 70
min_samples = 8
"""


def write(tmp_path: Path, text: str | bytes, name: str = "config.toml") -> str:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return str(path)


def error(tmp_path: Path, text: str | bytes) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}: ")
    return message.removeprefix(f"{path}: ")


def test_every_key(tmp_path: Path) -> None:
    path = write(tmp_path, FULL)
    config = load_config(path)
    assert config == Config(
        readonly=True,
        interval=2.5,
        thresholds=Thresholds(
            util_high=90.0, worker_busy_cpu=70.0, min_samples=8, window_seconds=30.0
        ),
        theme="gruvbox",
    )
    assert isinstance(config.thresholds.min_samples, int)
    with pytest.raises(AttributeError):
        config.readonly = False  # type: ignore[misc]  # frozen


def test_empty_file_gives_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, "# nothing set\n")
    assert load_config(path) == Config()
    assert Config().thresholds.window_seconds == Thresholds().window_seconds == 20.0
    assert Config().interval == 1.0 and Config().readonly is False and Config().theme is None


def test_default_path_follows_xdg(tmp_path: Path) -> None:
    assert default_path({"XDG_CONFIG_HOME": "/x/conf", "HOME": "/home/a"}) == Path(
        "/x/conf/gputop/config.toml"
    )
    # Unset or relative: ~/.config
    assert default_path({"HOME": "/home/a"}) == Path("/home/a/.config/gputop/config.toml")
    assert default_path({"XDG_CONFIG_HOME": "rel", "HOME": "/home/a"}) == Path(
        "/home/a/.config/gputop/config.toml"
    )


def test_default_file_is_read_and_optional(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path), "HOME": "/nonexistent"}
    assert load_config(None, env) == Config()  # no file: defaults, no error
    (tmp_path / "gputop").mkdir()
    write(tmp_path / "gputop", "interval = 0.5\n")
    config = load_config(None, env)
    assert config.interval == 0.5


def test_default_path_uses_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "gputop").mkdir()
    write(tmp_path / "gputop", "readonly = true\n")
    assert load_config().readonly is True
    assert default_path() == tmp_path / "gputop" / "config.toml"


def test_explicit_missing_file_is_an_error(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match=f"^config file not found: {missing}$"):
        load_config(missing)
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(str(tmp_path))


def _load_unprivileged(path: str) -> str:
    """``load_config(path)`` without root's power to read any file (``as_nobody``).
    Returns the ConfigError's message ("" when the file was read)."""

    def load() -> str:
        assert os.path.exists(path)  # visible: only its content is out of reach
        try:
            load_config(path)
        except ConfigError as exc:
            return str(exc)
        return ""

    return cast(str, as_nobody(load))


def test_unreadable_file() -> None:
    """Run as root too (no skip): the reading is done by an unprivileged process."""
    directory = tempfile.mkdtemp(prefix="gputop-config-")  # /tmp: others may enter
    try:
        os.chmod(directory, 0o755)
        path = os.path.join(directory, "config.toml")
        with open(path, "w") as f:
            f.write("readonly = true\n")
        os.chmod(path, 0o644)
        assert _load_unprivileged(path) == ""  # the same file, readable: read
        os.chmod(path, 0)
        message = _load_unprivileged(path)
        assert message.startswith(f"cannot read config file {path}"), message
        assert "Permission denied" in message or "permission" in message.lower(), message
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("interval = \n", "not valid TOML: Invalid value (at line 1, column 12)"),
        (b"theme = '\xff'\n", "not valid TOML"),
        ("colour = 'red'\n", "unknown key 'colour'; known: readonly, interval, window"),
        ("readonly = 'yes'\n", "readonly must be true or false, not 'yes'"),
        ("readonly = 1\n", "readonly must be true or false, not 1"),
        ("interval = 'fast'\n", "interval must be a number of seconds, not 'fast'"),
        ("interval = true\n", "interval must be a number of seconds, not True"),
        ("interval = 0.01\n", "interval = 0.01 is out of range: seconds from 0.1 to 60"),
        ("interval = 61\n", "out of range"),
        ("interval = nan\n", "interval must be a finite number"),
        ("window = 0\n", "window = 0 must be above 0 seconds"),
        ("window = -5\n", "must be above 0"),
        ("window = [1]\n", "window must be a number of seconds, not a list"),
        ("theme = 3\n", "theme must be a string (a theme name), not 3"),
        ("theme = ''\n", "theme must be a theme name, not ''"),
        ('theme = "a\\u001b[31m"\n', "theme must be a theme name"),
        ("thresholds = 5\n", "thresholds must be a table ([thresholds]), not 5"),
        ("[thresholds]\nUTIL_HIGHEST = 3\n", "[thresholds] unknown threshold 'UTIL_HIGHEST'"),
        ("[thresholds]\nUTIL_HIGH = 'lots'\n", "[thresholds] UTIL_HIGH: expected a number"),
        ("[thresholds]\nUTIL_HIGH = 101\n", "UTIL_HIGH=101.0: must be between 0 and 100"),
        ("[thresholds]\nUTIL_LOW = 95\n", "UTIL_LOW=95.0 must not exceed UTIL_HIGH=85.0"),
        ("[thresholds]\nmin_samples = 2.5\n", "MIN_SAMPLES: expected a whole number"),
        (
            "window = 30\n[thresholds]\nWINDOW_SECONDS = 40\n",
            "window = 30 and [thresholds] WINDOW_SECONDS = 40 disagree; set one of them",
        ),
        ("keys = 'vi'\n", "keys must be a table ([keys]), not 'vi'"),
        ("[keys]\nexplode = 'x'\n", "[keys] unknown action 'explode'; known: quit, help, jobs"),
        ("[keys]\nsort = 3\n", '[keys] sort must be a key such as "h", "ctrl+o" or "f2", not 3'),
        ("[keys]\nsort = 'Esc'\n", "[keys] sort must be a key such as"),
        ("[keys]\nsort = 'o o'\n", "[keys] sort must be a key such as"),
        ("[keys]\nsort = '5'\n", "[keys] sort = '5': reserved (0, 1,"),
        ("[keys]\nhelp = 'ctrl+c'\n", "[keys] help = 'ctrl+c': reserved"),
        ("[keys]\nsort = 'k'\n", "[keys] sort = 'k' is already the key of kill"),
        ("[keys]\nsort = '?'\n", "[keys] sort = '?' is already the key of help"),
        ("[keys]\nsort = 'o'\nhelp = 'o'\n", "[keys] help = 'o' is already the key of sort"),
    ],
)
def test_bad_files_give_one_clear_line(tmp_path: Path, text: str | bytes, words: str) -> None:
    assert words in error(tmp_path, text)


def test_keys_move_actions_and_may_swap(tmp_path: Path) -> None:
    text = "[keys]\nsort = 'k'\nkill = 's'\nhelp = 'f1'\nslower = ']'\nfilter = 'ctrl+f'\n"
    keys = load_config(write(tmp_path, text)).keys
    assert keys == (
        ("sort", "k"),
        ("kill", "s"),
        ("help", "f1"),
        ("slower", "]"),
        ("filter", "ctrl+f"),
    )


def test_window_and_window_seconds_may_agree(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "window = 30\n[thresholds]\nwindow_seconds = 30\n"))
    assert config.thresholds.window_seconds == 30.0
    config = load_config(write(tmp_path, "[thresholds]\nWINDOW_SECONDS = 45\n", "b.toml"))
    assert config.thresholds.window_seconds == 45.0  # one setting, two spellings


def test_flags_override_the_file(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, FULL))
    assert with_overrides(config) is config  # nothing given: unchanged
    out = with_overrides(
        config,
        readonly=False,
        interval=0.5,
        window=10,
        thresholds=["UTIL_HIGH=95", "util_low=40"],
        theme="nord",
    )
    assert out.readonly is False and out.interval == 0.5 and out.theme == "nord"
    assert out.thresholds.window_seconds == 10.0
    t = out.thresholds
    assert (t.util_high, t.util_low, t.worker_busy_cpu, t.min_samples) == (95.0, 40.0, 70.0, 8)
    # --threshold WINDOW_SECONDS is the same setting as --window; --window wins.
    out = with_overrides(config, thresholds=["WINDOW_SECONDS=12"])
    assert out.thresholds.window_seconds == 12.0
    out = with_overrides(config, window=5, thresholds=["WINDOW_SECONDS=12"])
    assert out.thresholds.window_seconds == 5.0 and out.theme == config.theme


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"interval": 0.0}, "--interval = 0 is out of range"),
        ({"window": -1.0}, "--window = -1 must be above 0 seconds"),
        ({"thresholds": ["UTIL_HIGH"]}, "--threshold: bad threshold 'UTIL_HIGH'"),
        ({"thresholds": ["UTIL_LOW=99"]}, "--threshold: UTIL_LOW=99.0 must not exceed"),
        ({"theme": ""}, "theme must be a theme name"),
    ],
)
def test_bad_flags(kwargs: dict[str, object], words: str) -> None:
    with pytest.raises(ConfigError) as info:
        with_overrides(Config(), **kwargs)  # type: ignore[arg-type]
    assert words in str(info.value) and "\n" not in str(info.value)
