"""The lines around the process table keep what they show themselves (issue 32 §6): the
app hands them a snapshot or what the keys chose and keeps no copy."""

from __future__ import annotations

from gputop.model import SampleError, Snapshot, replace
from gputop.ui.app import GpuTopApp
from gputop.ui.main_area import NO_MATCH, NoMatch, ProcessNotes
from gputop.views.process_view import process_notes
from tests import builders as fx


def refused(snap: Snapshot) -> Snapshot:
    """GPU 1's process list refused (NoPermission)."""
    error = SampleError("nvml", "GPU 1: no permission", gpu=1, metric="compute_processes")
    return replace(snap, errors=(error,))


async def test_the_notes_line_keeps_its_notes_and_the_app_none() -> None:
    first = fx.multi_gpu_snapshot(2)
    app = GpuTopApp(snapshots=[first])
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        box = app.query_one("#notes", ProcessNotes)
        assert box.notes == () and not box.display
        app.apply_snapshot(refused(replace(first, time=first.time + 1)))
        await pilot.pause()
        assert box.notes == process_notes(app.snapshot) and box.notes and box.display
        assert "NoPermission" in str(box.render())
        app.apply_snapshot(replace(first, time=first.time + 2))
        await pilot.pause()
        assert box.notes == () and not box.display
        assert not hasattr(app, "_notes")  # one copy: the widget's


async def test_the_no_match_line_says_what_hides_the_rows() -> None:
    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(2)])
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        line = app.query_one("#no-match", NoMatch)
        line.show(True, text="", gpus=frozenset({5}))
        said = str(line.render())
        assert said.startswith(NO_MATCH) and "GPU 5" in said and "a shows all GPUs" in said
        line.show(True, text="[/]x", gpus=None)  # the user's text, never markup
        said = str(line.render())
        assert 'filter "[/]x"' in said and "Esc clears the filter" in said
        line.show(False, text="x", gpus=None)
        assert not line.display


async def test_the_filter_lives_in_its_box_only() -> None:
    """The filter in effect is the box's text, read from the main screen also while
    another screen is on top; the app keeps no copy that could drift from it."""
    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(2)])
    assert app.text_filter == ""  # before the box exists
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("slash", *"u1", "enter")
        await pilot.pause()
        assert app.text_filter == "u1" == app.filter_input.value
        assert "text_filter" not in vars(app)
        await pilot.press("question_mark")  # the help screen on top
        await pilot.pause()
        assert app.screen is not app.screen_stack[0]
        assert app.text_filter == "u1"
        assert "u1" in "".join(
            t for t, _ in app.header_parts(paused=False, stale=False, error=None)
        )
