"""gputop.cells: the one definition of how many terminal columns text takes."""

from __future__ import annotations

import pytest

from gputop import cells


@pytest.mark.parametrize(
    ("text", "width"),
    [("abc", 3), ("日本", 4), ("e\u0301", 1), ("a\u200bb", 2), ("🙂x", 3), ("", 0)],
)
def test_cell_width(text: str, width: int) -> None:
    assert cells.cell_width(text) == width


def test_fit_pads_or_cuts_to_exactly_the_width() -> None:
    assert cells.fit("ab", 4) == "ab  " and cells.fit("ab", 4, ">") == "  ab"
    assert cells.fit("ab", 5, "^") == " ab  "
    assert cells.fit("abcdef", 4) == "abc…"
    # a wide character that would straddle the cut is left out, the column stays exact
    assert cells.fit("日本語", 4) == "日 …" and cells.cell_width(cells.fit("日本語", 4)) == 4
    assert cells.fit("日本", 1) == " " and cells.fit("x", 0) == ""


def test_truncate_cuts_without_padding() -> None:
    assert cells.truncate("abc", 5) == "abc"
    assert cells.truncate("abcdef", 4) == "abc…"
    assert cells.truncate("日本語", 4) == "日…"
    assert cells.cell_width(cells.truncate("日本語x" * 30, 80)) <= 80
