"""Textual's key handling in the dashboard never opens Unicode's name database (issue 32
§5: it kept about a MiB resident), and gputop.keys.UnicodeNames answers as ``unicodedata`` does.
Hypothesis prints the failing example and its seed."""

from __future__ import annotations

import string
import sys
import unicodedata
from collections.abc import Iterator
from typing import Any

import pytest
import textual.keys
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from gputop import keys as keynames
from gputop.keys import KEYS
from gputop.keys import UnicodeNames as Names
from gputop.ui.app import FOOTER_PALETTE_WIDTH, GpuTopApp
from tests import builders as fx
from tests.helpers.fuzz import SEED


def real_lookup(name: str) -> str | None:
    try:
        return unicodedata.lookup(name)
    except KeyError:
        return None


def names_lookup(name: str) -> str | None:
    try:
        return Names.lookup(name)
    except KeyError:
        return None


def test_each_answer_from_the_table_is_unicodedatas() -> None:
    for name, char in keynames.CHARACTERS.items():
        assert real_lookup(name) == real_lookup(name.lower()) == char, name
    for name in keynames.NOT_NAMES:
        assert real_lookup(name) is None and real_lookup(name.lower()) is None, name
    for char, name in keynames.UNICODE_NAMES.items():
        assert unicodedata.name(char) == name
    for char in keynames.UNNAMED:
        assert unicodedata.name(char, None) is None
        with pytest.raises(ValueError):
            Names.name(char)
    assert set(keynames.UNICODE_NAMES) == {
        c for c in string.printable if c.isprintable() and not c.isalnum()
    }


NAME_TEXT = st.one_of(
    st.sampled_from(sorted({*keynames.CHARACTERS, *keynames.NOT_NAMES})).flatmap(
        lambda n: st.sampled_from([n, n.lower(), n.title()])
    ),
    st.text(max_size=24),
    st.text(alphabet=string.ascii_letters + " -_0123456789", max_size=24),
)


@seed(SEED)
@settings(max_examples=300, deadline=None, database=None, print_blob=True)
@given(NAME_TEXT, st.characters())
def test_the_stand_in_answers_as_unicodedata(name: str, char: str) -> None:
    """Seeded: GPUTOP_FUZZ_SEED replays it."""
    assert names_lookup(name) == real_lookup(name)
    assert Names.name(char, None) == unicodedata.name(char, None)


@pytest.fixture
def name_database_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Each call of unicodedata's name functions, except Pilot's own (it looks up the
    character of each key it presses, as no terminal does)."""
    calls: list[str] = []
    for fn in ("lookup", "name"):
        real = getattr(unicodedata, fn)

        def record(*args: Any, _real: Any = real, _fn: str = fn) -> Any:
            if sys._getframe(1).f_code.co_name != "_press_keys":
                calls.append(f"{_fn}{args!r}")
            return _real(*args)

        monkeypatch.setattr(unicodedata, fn, record)
    yield calls


async def test_a_start_and_every_key_never_look_a_name_up(
    name_database_calls: list[str],
) -> None:
    # Textual caches its answers: a name looked up by an earlier test is not asked again.
    textual.keys.key_to_character.cache_clear()
    textual.keys.format_key.cache_clear()
    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(2)])
    async with app.run_test(size=(FOOTER_PALETTE_WIDTH, 40)) as pilot:
        await pilot.pause()
        assert name_database_calls == []
        for k in KEYS:
            if k.action == "quit":
                continue
            for key in k.keys.split(","):
                # What a terminal sends for these keys: a typed character for punctuation.
                typed = {"plus": "+", "minus": "-", "equals_sign": "=", "slash": "/"}
                await pilot.press(typed.get(key, key))
                await pilot.pause()
                await pilot.press("escape")  # closes what the key opened
                await pilot.pause()
                assert name_database_calls == [], key
        assert app.is_running
