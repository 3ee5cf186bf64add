"""The verdict kinds are declared once (``kinds.KIND_SPECS``): the ranks, labels, words,
legend and the table in ``docs/verdicts.md`` are made from that table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gputop.analysis import kinds
from gputop.views.gpu_view import VERDICT_WIDTH

ROOT = Path(__file__).resolve().parents[2]
BEGIN = "<!-- BEGIN generated: verdict-kinds -->"
END = "<!-- END generated: verdict-kinds -->"


def test_the_docs_verdict_table_is_the_generated_one() -> None:
    """docs/verdicts.md holds ``python -m gputop.analysis.kinds --markdown`` between its
    markers: a kind changed in the code and not in the docs fails here."""
    text = (ROOT / "docs" / "verdicts.md").read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    block = text[text.index(BEGIN) : text.index(END) + len(END)]
    assert block == kinds.markdown_block()
    printed = subprocess.run(
        [sys.executable, "-m", "gputop.analysis.kinds", "--markdown"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    assert printed == kinds.markdown_block() + "\n"


def test_the_readme_short_verdict_table_is_the_generated_one() -> None:
    """The README's "Verdicts in short" is the legend, word by word, made from the table."""
    name = "verdict-kinds-short"
    text = (ROOT / "README.md").read_text()
    begin, end = f"<!-- BEGIN generated: {name} -->", f"<!-- END generated: {name} -->"
    assert text.count(begin) == 1 and text.count(end) == 1
    assert text[text.index(begin) : text.index(end) + len(end)] == kinds.markdown_block(name)


def test_ranks_follow_the_table_order_and_rules_are_named_once() -> None:
    assert [s.rank for s in kinds.KIND_SPECS] == list(range(1, len(kinds.KIND_SPECS) + 1))
    assert len(kinds.RULES) == len(kinds.KIND_SPECS)


def test_a_kind_has_one_label_and_its_rows_valid_severities_and_short_words() -> None:
    for s in kinds.KIND_SPECS:
        assert kinds.LABELS[s.kind] == s.label, s.rule
        assert s.severity in (*kinds.SEVERITIES, kinds.WAITING), s.rule
        assert 0 < len(s.word) <= VERDICT_WIDTH, s.rule
    assert set(kinds.KINDS) == {s.kind for s in kinds.KIND_SPECS}


def test_the_legend_lists_each_kind_with_a_meaning_in_kind_order() -> None:
    legend = kinds.legend()
    words = [w for w, _ in legend]
    assert words[:6] == ["MEM IDLE", "idle", "data-wt", "warming", "throttle", "pwr cap"]
    assert "LOST" not in words  # a lost GPU says so itself
    assert len(words) == len(set(words))
