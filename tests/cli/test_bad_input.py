"""Bad input gets one line and exit 2, never a traceback or a runaway (issue 9, part 3).

Each case runs the real ``python -m gputop`` in a subprocess (a FIFO or ``/dev/zero``
must not hang or eat memory: a timeout would say so), except the dashboard ones, which
run in a tmux pane.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lifecycle_harness import ROOT, env_for_gputop, gputop_command, tmux_pane


def gputop(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputop", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env_for_gputop(env),
        timeout=30,
        stdin=subprocess.DEVNULL,
    )


def one_line_exit_2(r: subprocess.CompletedProcess[str], *words: str) -> None:
    assert r.returncode == 2, r.stderr
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("gputop: error: "), r.stderr
    assert "Traceback" not in r.stderr
    for word in words:
        assert word in r.stderr


# --- output encodings --------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["latin-1", "ascii"])
def test_once_in_a_non_utf8_encoding_prints_ascii_look_alikes(encoding: str) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "gputop", "--once", "--demo"],
        capture_output=True,
        cwd=ROOT,
        env=env_for_gputop({"PYTHONIOENCODING": encoding}),
        timeout=30,
    )
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode(encoding)  # the bytes are in that encoding
    assert "NVIDIA H100 80GB HBM3" in out and "Verdict" in out
    assert "\\u" not in out and "Traceback" not in r.stderr.decode(errors="replace")


def test_json_in_an_ascii_encoding_stays_valid_json() -> None:
    import json

    r = subprocess.run(
        [sys.executable, "-m", "gputop", "--json", "--demo"],
        capture_output=True,
        cwd=ROOT,
        env=env_for_gputop({"PYTHONIOENCODING": "ascii"}),
        timeout=30,
    )
    assert r.returncode == 0
    assert json.loads(r.stdout)["gpus"]


def test_dashboard_in_latin1_draws_no_escaped_characters(tmp_path: Path) -> None:
    line = gputop_command(tmp_path / "pid", "--demo", env={"PYTHONIOENCODING": "latin-1"})
    with tmux_pane(tmp_path, line) as pane:
        shown = pane.wait_text("COMMAND", "H100")
        assert "\\u" not in shown  # Textual's own path drew a literal \u2588 per bar cell
        assert "█" not in shown and "#" in shown  # bars drawn as ASCII look-alikes


def test_columns_and_lines_in_the_environment_do_not_pin_the_size(tmp_path: Path) -> None:
    line = gputop_command(tmp_path / "pid", "--demo", env={"COLUMNS": "10", "LINES": "5"})
    with tmux_pane(tmp_path, line, 120, 40) as pane:
        pane.wait_text("COMMAND", "H100", absent=("too small",))


# --- the config file ---------------------------------------------------------------------


def test_config_nested_thousands_deep_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "deep.toml"
    path.write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    one_line_exit_2(gputop("--once", "--demo", "--config", str(path)), "nested too deeply")


def test_config_dev_zero_is_refused_at_once() -> None:
    one_line_exit_2(gputop("--once", "--demo", "--config", "/dev/zero"), "not a regular file")


def test_config_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    one_line_exit_2(gputop("--once", "--demo", "--config", str(fifo)), "not a regular file")


def test_config_too_big_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.toml"
    path.write_text("# " + "x" * (2 << 20) + "\n")
    one_line_exit_2(gputop("--once", "--demo", "--config", str(path)), "too big")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('[thresholds]\nUTIL_HIGH = "90"\n', ("UTIL_HIGH: expected a number", "'90'")),
        ('interval = "1"\n', ("interval must be a number",)),
        ("[thresholds]\nUTIL_HIGH = true\n", ("expected a number", "True")),
    ],
)
def test_config_types_are_checked_alike(tmp_path: Path, text: str, words: tuple[str, ...]) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    one_line_exit_2(gputop("--once", "--demo", "--config", str(path)), *words)


# --- the command line --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--gpus", "３"), ("--gpus", "ASCII")),  # a fullwidth 3
        (("--gpus", "0,٣"), ("--gpus", "ASCII")),  # an Arabic-Indic 3
        (("--interval", "١"), ("--interval", "ASCII")),
        (("--window", "３０"), ("--window", "ASCII")),
        (("--threshold", "UTIL_HIGH=９０"), ("UTIL_HIGH", "ASCII")),
        (("--seed", "３"), ("--seed", "ASCII")),
        (("--gpus", "7" * 100_000), ("--gpus", "too large")),
    ],
    ids=["gpus-fullwidth", "gpus-arabic", "interval", "window", "threshold", "seed", "gpus-huge"],
)
def test_non_ascii_digits_and_huge_numbers(args: tuple[str, ...], words: tuple[str, ...]) -> None:
    r = gputop("--once", "--demo", *args)
    one_line_exit_2(r, *words)
    assert len(r.stderr) < 300  # not the 100,000 digits back, nor Python's own limit text
    assert "limit" not in r.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--window", "2"), ("window of 2 s", "MIN_SECONDS=4")),
        (("--threshold", "MIN_SECONDS=100", "--window", "10"), ("MIN_SECONDS=100",)),
        (("--interval", "5", "--window", "20"), ("MIN_SAMPLES=5", "needs 25 s")),
    ],
)
def test_a_window_too_short_for_any_verdict_is_refused(
    args: tuple[str, ...], words: tuple[str, ...]
) -> None:
    one_line_exit_2(gputop("--once", "--demo", *args), *words)


def test_a_window_in_the_config_file_is_checked_too(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("window = 3\n")
    one_line_exit_2(gputop("--once", "--demo", "--config", str(path)), "MIN_SECONDS")


def test_a_long_interval_alone_stretches_the_default_window() -> None:
    import json

    r = gputop("--json", "--demo", "--interval", "10")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)
