"""Issue 32 §3: the GPU lines say the verdict, the throttle reasons and the link warning
whole at every width from 80 columns, on the demo's GPUs (the default fleet and the H200
node: every verdict kind the demo makes), and the history's label never reads as part of
the verdict ("low util util")."""

from __future__ import annotations

import re

import pytest

from gputop.sources.demo import DemoSource
from gputop.ui.app import GpuTopApp
from gputop.ui.gpu_panel import GpuLines
from gputop.views.gpu_view import HISTORY_RULE, pcie_downgrade, throttle_words, verdict_mark

WIDTHS = (80, 100, 120, 160, 200)


def _history(node: str | None, n: int = 120) -> list:  # type: ignore[type-arg]
    source = DemoSource(seed=0, node=node)
    try:
        return [source.snapshot() for _ in range(n)]
    finally:
        source.close()


def _blocks(text: str) -> dict[int, str]:
    """The shown lines of each GPU, by index (a GPU's first line starts with its index)."""
    out: dict[int, list[str]] = {}
    current = -1
    for line in text.splitlines():
        m = re.match(r"\s*(\d+) ", line)
        if m and not line.startswith("   "):
            current = int(m.group(1))
        out.setdefault(current, []).append(line)
    return {k: "\n".join(v) for k, v in out.items()}


@pytest.fixture(autouse=True)
def _no_animations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")


@pytest.mark.parametrize("node", [None, "h200"])
async def test_verdict_throttle_and_link_warning_show_whole(node: str | None) -> None:
    history = _history(node)
    last = history[-1]
    seen_kinds: set[str] = set()
    alerts = 0
    for width in WIDTHS:
        app = GpuTopApp(snapshots=history)
        async with app.run_test(size=(width, 50)) as pilot:
            await pilot.pause()
            shown = _blocks(app.query_one(GpuLines).text)
            for gpu in last.gpus:
                block = shown[gpu.index]
                first = block.splitlines()[0]
                verdict, _ = app.gpu_verdict(gpu.index)
                assert verdict is not None
                mark = verdict_mark(verdict)
                seen_kinds.add(verdict.kind)
                # the word or the full label, never a cut one
                assert re.search(rf"(^|\s){re.escape(mark.word)}(\s|$)", first) or (
                    mark.label in first
                ), (width, first, mark)
                assert "…" not in block, (width, block)
                throttle = throttle_words(gpu.clock_event_reasons)
                if throttle:
                    alerts += 1
                    assert f"throttle: {throttle}" in block, (width, block)
                downgrade = pcie_downgrade(gpu)
                if downgrade:
                    alerts += 1
                    assert f"! {downgrade}" in block, (width, block)
                # a percentage never joins the bar before it
                assert not re.search(r"[█░▓·]\d", first), (width, first)
                # the history's label is set off by a rule: it never reads as the verdict's
                rest = first.replace(mark.label, "").replace(mark.word, "")
                for m in re.finditer(r"util ", rest):
                    assert rest[: m.start()].endswith(HISTORY_RULE), (width, first)
    assert len(seen_kinds) >= 4, seen_kinds
    if node is None:
        assert alerts >= 2 * len(WIDTHS)  # the demo throttles one GPU and slows one link
