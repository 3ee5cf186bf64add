"""gputop.fmt: None and 0 through every formatter, then the boundaries.

Unknown is "n/a", never 0; and 0 is "0", never "n/a". The SVG snapshots would show a
mix-up too, but they get regenerated: these cannot be.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from gputop import fmt
from tests.helpers.fuzz import SEED

GiB = 2**30

#: Every formatter: None -> what it gives, 0 -> what it gives.
FORMATTERS: dict[str, tuple[Callable[[Any], Any], Any, Any]] = {
    "bytes_": (fmt.bytes_, "n/a", "0B"),
    "memory": (fmt.memory, "n/a", "0B"),
    "rate": (fmt.rate, "n/a", "0B/s"),
    "percent": (fmt.percent, "n/a", "0%"),
    "number": (fmt.number, "n/a", "0"),
    "shown": (lambda v: fmt.shown(v, "{:.0f}W"), "n/a", "0W"),
    "duration": (fmt.duration, "n/a", "0s"),
    "running_time": (fmt.running_time, "n/a", "0s"),
    "ratio_percent": (lambda v: fmt.ratio_percent(v, 100.0), None, 0.0),
    "finite": (fmt.finite, None, 0),
    "since": (lambda v: fmt.since(v, 0.0), None, 0.0),
    "clock": (fmt.clock, "n/a", time.strftime("%H:%M:%S", time.localtime(0))),
    "clean_text": (fmt.clean_text, None, "0"),  # text: 0 arrives as "0"
}


def test_every_formatter_is_in_the_table() -> None:
    """A new formatter must be added to FORMATTERS (so that None and 0 go through it)."""
    public = {
        name
        for name, f in inspect.getmembers(fmt, inspect.isfunction)
        # clean_text lives in the model (checked decoding) and is re-exported here
        if (f.__module__ == fmt.__name__ or f is fmt.clean_text) and not name.startswith("_")
    }
    assert public == set(FORMATTERS)


@pytest.mark.parametrize("name", sorted(FORMATTERS))
def test_none_is_not_available_never_zero(name: str) -> None:
    f, none, zero = FORMATTERS[name]
    assert f(None) == none
    assert none != zero


@pytest.mark.parametrize("name", sorted(FORMATTERS))
def test_zero_is_zero_never_not_available(name: str) -> None:
    f, _none, zero = FORMATTERS[name]
    arg = "0" if name == "clean_text" else 0
    assert f(arg) == zero
    assert f(arg) != fmt.NA
    assert f(0.0 if name != "clean_text" else "0") == zero  # a float 0 as well


def test_ratio_percent_unknown_parts() -> None:
    assert fmt.ratio_percent(None, 100.0) is None
    assert fmt.ratio_percent(50.0, None) is None
    assert fmt.ratio_percent(50.0, 0.0) is None  # no whole: not "infinitely" full
    assert fmt.ratio_percent(0.0, 100.0) == 0.0
    assert fmt.ratio_percent(25.0, 200.0) == 12.5


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (0.9, "0s"),
        (-5, "0s"),  # a clock step backwards: not a negative age
        (59, "59s"),
        (60, "1:00"),
        (3599, "59:59"),
        (3600, "1:00:00"),
        (86399, "23:59:59"),
        (86400, "1d00h"),
        (2 * 86400 + 3 * 3600 + 59, "2d03h"),
    ],
)
def test_duration_boundaries(seconds: float, text: str) -> None:
    assert fmt.duration(seconds) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "0s"),
        (59.9, "59s"),
        (60, "1m"),
        (3599, "59m"),
        (3600, "1h00m"),
        (86399, "23h59m"),
        (86400, "1d00h"),
        (2 * 86400 + 3 * 3600 + 59, "2d03h"),
        (float("nan"), "n/a"),
        (float("inf"), "n/a"),
    ],
)
def test_running_time_boundaries(seconds: float, text: str) -> None:
    assert fmt.running_time(seconds) == text


@seed(SEED)
@settings(max_examples=300, deadline=None, database=None, print_blob=True)
@given(seconds=st.integers(min_value=60, max_value=10**9), offset=st.integers(0, 59))
def test_running_time_changes_at_most_once_a_minute_after_the_first(
    seconds: int, offset: int
) -> None:
    """The live table repaints a row when its text changes: past the first minute, every
    second of one minute reads the same (hypothesis prints the failing example).
    Seeded: GPUTOP_FUZZ_SEED replays it."""
    minute = seconds - seconds % 60
    assert fmt.running_time(minute + offset) == fmt.running_time(minute)
    assert len(fmt.running_time(seconds)) <= 8 or seconds >= 86400 * 1000  # TIME's cells


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1, "1B"),
        (1023, "1023B"),
        (1024, "1.0KiB"),
        (1536, "1.5KiB"),
        (GiB, "1.0GiB"),
        (80 * GiB, "80.0GiB"),
        (2**60, "1024.0PiB"),  # the largest unit keeps growing
    ],
)
def test_bytes_boundaries(value: float, text: str) -> None:
    assert fmt.bytes_(value) == text


def test_the_other_formatters_with_values() -> None:
    # GPU memory: one style at every width, never wider than the compact column (issue 32)
    assert fmt.memory(80 * GiB) == "80.0GiB" and fmt.memory(19456 * 2**20) == "19.0GiB"
    assert fmt.memory(999 * 2**20) == "999.0MiB" and fmt.memory(1000 * 2**20) == "1.0GiB"
    assert fmt.memory(1023 * 2**20) == "1.0GiB" and fmt.memory(999) == "999B"
    assert fmt.rate(1.5 * 2**20) == "1.5MiB/s"
    assert fmt.percent(99.6) == "100%" and fmt.percent(12.34, 1) == "12.3%"
    assert fmt.number(45.0, "°C") == "45°C" and fmt.number(0, "W") == "0W"
    assert fmt.number(None, "W") == "n/a"  # the unit is not glued to n/a


def test_clean_text_strips_what_a_terminal_would_run() -> None:
    assert fmt.clean_text("") == ""
    assert fmt.clean_text(b"a\xffb") == "a\ufffdb"
    assert fmt.clean_text("\x1b[31mred\x1b[0m\ttab\nnl\u202e") == "red tab nl"
    assert fmt.clean_text("x" * 100, limit=10) == "x" * 9 + "…"
