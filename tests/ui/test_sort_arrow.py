"""Issue 32 §3: the sorted column is unmistakable: its arrow follows its own name, the name
is drawn in reverse video, and a gap still parts it from the next column (never
"PID▼USER", which read as a broken PID sort)."""

from __future__ import annotations

import pytest

from gputop.ui.app import GpuTopApp
from gputop.views import process_view
from gputop.views.process_view import COLUMNS
from tests import builders as fx


@pytest.fixture(autouse=True)
def _no_animations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_the_arrow_follows_the_sorted_name(size: tuple[int, int]) -> None:
    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(2)])
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        seen = set()
        for _ in range(len(process_view.SORT_KEYS)):
            for reverse in (False, True):
                assert app.sort_reverse is reverse
                key = app.sort_key
                seen.add(key)
                columns = app.table.ordered_columns
                header = "".join(c.label.plain for c in columns)
                sorted_col = next(c for c in columns if c.key.value == key)
                name = next(c.label for c in COLUMNS if c.key == key)
                arrow = "▼" if app.sort_reverse else "▲"
                label = sorted_col.label
                assert name + arrow in label.plain, (label.plain, header)
                # the name and its arrow are styled as the sorted column's, the gap not
                start = label.plain.index(name)
                styles = {str(s.style) for s in label.spans if s.start <= start < s.end}
                assert any("reverse" in s for s in styles), (label.plain, label.spans)
                # a gap (or the table's end) after the arrow: it belongs to this column
                after = header.index(name + arrow) + len(name + arrow)
                assert after == len(header) or header[after] == " ", header
                # one arrow in the whole header
                assert header.count("▲") + header.count("▼") == 1, header
                await pilot.press("r")
                await pilot.pause()
            await pilot.press("s")
            await pilot.pause()
        assert len(seen) >= 5
