"""The replay's header says the recording's time range and where the cursor is in it
(issue 32 §3); the recording's times come from a file: any float is shown or left out."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, seed, settings
from hypothesis import strategies as st

from gputop.cells import cell_width
from gputop.ui.screens.prompt import GPU_PROMPT, Prompt
from gputop.views.header_view import replay_range_parts
from gputop.views.parts import plain
from tests.helpers.fuzz import SEED
from tests.helpers.replay import demo_replay

T0 = 1_750_000_000.0


def test_the_replay_range_says_where_the_cursor_is() -> None:
    text = plain(replay_range_parts(T0, T0 + 400, T0 + 100))
    assert text.startswith("25% of ") and text.count(":") == 4, text
    assert plain(replay_range_parts(T0, T0 + 7200, T0 + 7200, compact=True)) == "100% of 2:00:00"
    assert plain(replay_range_parts(T0, T0, T0)).startswith("100% of")
    assert replay_range_parts(None, T0, T0) == ()
    assert replay_range_parts(T0 + 1, T0, T0) == ()  # an end before the start: nothing


def test_a_recording_over_midnight_gives_the_day() -> None:
    text = plain(replay_range_parts(T0, T0 + 2 * 86400, T0))
    assert text.count("-") == 2, text  # the end with its month-day


TIMES = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True))


@seed(SEED)
@settings(max_examples=300, deadline=None)
@given(TIMES, TIMES, TIMES, st.booleans())
def test_the_replay_range_never_raises(
    start: float | None, end: float | None, cursor: float | None, compact: bool
) -> None:
    """Seeded: GPUTOP_FUZZ_SEED replays it."""
    parts = replay_range_parts(start, end, cursor, compact=compact)
    assert len(plain(parts)) <= 40


async def test_at_80x24_the_replay_header_shows_the_cursor_and_range_whole(
    tmp_path: Path,
) -> None:
    app = demo_replay(tmp_path, 121, 30)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            header = plain(app.header_parts_now())
            assert "REPLAY" in header and "25% of 2:00" in header, header
            assert cell_width(header) <= 80, header
            # In a replay `g` goes to a time: the GPU prompt is on `#`.
            await pilot.press("number_sign")
            await pilot.pause()
            assert isinstance(app.screen, Prompt) and app.screen.spec is GPU_PROMPT
            await pilot.press("escape")
    finally:
        app.player.stop()
