"""gputop.cells: the one definition of how many terminal columns text takes."""

from __future__ import annotations

import ast
import unicodedata
from pathlib import Path

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


def _drawn_characters() -> dict[str, str]:
    """Each non-ASCII character in a string constant (not a docstring) of the modules that
    draw (views, screens, verdict texts), and one file that has it."""
    root = Path(cells.__file__).parent
    files = [*(root / "views").rglob("*.py"), *(root / "ui").rglob("*.py")]
    files += [*(root / "analysis").rglob("*.py"), root / "fmt.py", root / "pipeline.py"]
    found: dict[str, str] = {}
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        strings = [
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            if id(node) not in docs
        ]
        for ch in "".join(strings):
            if not ch.isascii():
                found.setdefault(ch, str(path.relative_to(root)))
    return found


def test_the_characters_gputop_draws_are_answered_without_unicode_database() -> None:
    drawn = _drawn_characters()
    assert drawn, "the scan found nothing: it no longer reads the drawing modules"
    missing = {ch: where for ch, where in drawn.items() if ch not in cells.OWN_GLYPHS}
    assert missing == {}, f"drawn but not in cells.OWN_GLYPHS: {missing}"


def test_ascii_and_own_glyphs_never_page_in_unicode_database(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Unreadable:
        def __getattr__(self, name: str) -> object:
            raise AssertionError(f"unicodedata.{name} was asked")

    cells.char_cells.cache_clear()
    try:
        with monkeypatch.context() as m:
            m.setattr(cells, "unicodedata", Unreadable())
            text = "".join(chr(c) for c in range(128)) + "".join(sorted(cells.OWN_GLYPHS))
            assert [cells.char_cells(ch) for ch in text] == [1] * len(text)
            assert cells.cell_width("GPU 0 · util ▁▂█ … ≥ 90 %") == 25
    finally:
        cells.char_cells.cache_clear()


def test_each_own_glyph_takes_the_cells_unicode_database_gives_it() -> None:
    for ch in sorted(cells.OWN_GLYPHS):
        wide = unicodedata.east_asian_width(ch) in ("W", "F")
        zero = unicodedata.combining(ch) or unicodedata.category(ch) in ("Cf", "Mn", "Me")
        assert (wide, bool(zero)) == (False, False), ch
    for c in range(128):  # ASCII, control characters included: one cell each
        ch = chr(c)
        assert unicodedata.east_asian_width(ch) not in ("W", "F"), repr(ch)
        assert not unicodedata.combining(ch), repr(ch)
        assert unicodedata.category(ch) not in ("Cf", "Mn", "Me"), repr(ch)
