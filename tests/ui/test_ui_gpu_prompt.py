"""GPUs 10 and up, and several GPUs at once, from the keyboard (issue 32 §3): the `g`
prompt (`#` in a replay) takes ``10``, ``0,2-3``; the header names the GPUs shown."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, seed, settings
from hypothesis import strategies as st
from textual.widgets import Input, Static

from gputop.ui.app import GpuTopApp
from gputop.ui.screens.prompt import GO_TO, GPU_PROMPT, Prompt
from gputop.views.gpu_choice import MAX_CHOICE_LENGTH, parse_gpu_choice
from gputop.views.parts import plain
from tests import builders as fx
from tests.helpers.fuzz import SEED
from tests.helpers.replay import demo_replay

SIXTEEN = range(16)
WHEN = "2026-11-30 03:00, 03:00, 2h ago, yesterday 23:10"  # as the go-to said it


def shown_gpu_rows(app: GpuTopApp) -> set[int]:
    return {app.table.rows_by_key[r.key.value].gpu for r in app.table.ordered_rows}  # type: ignore[misc]


def header(app: GpuTopApp) -> str:
    return plain(app.header_parts(paused=False, stale=False, error=None))


async def choose(pilot: object, app: GpuTopApp, text: str) -> None:
    await pilot.press("g")  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]
    assert isinstance(app.screen, Prompt) and app.screen.spec is GPU_PROMPT
    box = app.screen.query_one("#gpus-input")
    box.value = ""  # type: ignore[attr-defined]
    await pilot.press(*text, "enter")  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]


async def test_the_g_prompt_chooses_gpu_10_and_several_gpus_of_16() -> None:
    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(16)])
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert shown_gpu_rows(app) == set(SIXTEEN)
        await choose(pilot, app, "10")
        assert app.shown_gpus == {10}
        assert shown_gpu_rows(app) == {10}
        assert "GPU 10" in header(app)
        await choose(pilot, app, "0,2-3,12")
        assert app.shown_gpus == {0, 2, 3, 12}
        assert shown_gpu_rows(app) == {0, 2, 3, 12}
        assert "GPU 0,2,3,12" in header(app)
        await choose(pilot, app, "99")  # not here: said, the choice stays
        assert app.shown_gpus == {0, 2, 3, 12}
        assert any("no GPU 99" in n.message for n in app._notifications)
        await choose(pilot, app, "all")
        assert app.shown_gpus is None and shown_gpu_rows(app) == set(SIXTEEN)
        await pilot.press("g")
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, Prompt) and app.shown_gpus is None


def test_the_choice_reads_indices_and_ranges() -> None:
    assert parse_gpu_choice("10", SIXTEEN) == {10}
    assert parse_gpu_choice(" 0, 2-3 ,15", SIXTEEN) == {0, 2, 3, 15}
    assert parse_gpu_choice("", SIXTEEN) is None
    assert parse_gpu_choice("ALL", SIXTEEN) is None
    for bad in ("3-1", "x", "1-", "-1", "１", "1,,2", "16", "0-99999", "1e3"):
        try:
            parse_gpu_choice(bad, SIXTEEN)
        except ValueError:
            continue
        raise AssertionError(bad)


@seed(SEED)
@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_any_text_is_a_choice_of_known_gpus_or_a_value_error(text: str) -> None:
    """Seeded: GPUTOP_FUZZ_SEED replays it."""
    try:
        chosen = parse_gpu_choice(text, SIXTEEN)
    except ValueError as e:
        assert len(str(e)) <= 200
        return
    assert chosen is None or chosen <= set(SIXTEEN)


async def test_the_gpu_prompt_and_the_go_to_are_one_prompt_with_their_own_words(
    tmp_path: Path,
) -> None:
    """One screen, the differences as data: each prompt asks its own question in a box of
    its own width, the box focused, the GPU prompt's filled with the choice shown and
    bounded; Enter answers, Esc cancels (the replay's `#` is the GPU prompt, `g` the go-to)."""
    app = demo_replay(tmp_path, 30, 10)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            app.shown_gpus = frozenset({0, 1, 2, 5})
            seen = {}
            for key, spec in (("number_sign", GPU_PROMPT), ("g", GO_TO)):
                await pilot.press(key)
                await pilot.pause()
                screen = app.screen
                assert isinstance(screen, Prompt) and screen.spec is spec
                box = screen.query_one(f"#{spec.name}-input", Input)
                question = str(screen.query_one(Static).render())
                width = screen.query_one(f"#{spec.name}-box").outer_size.width
                seen[spec.name] = (question, width, box.value, box.max_length)
                assert box.has_focus
                await pilot.press("escape")
                await pilot.pause()
                assert not isinstance(app.screen, Prompt)
            assert seen == {
                "gpus": ("Show GPUs (10, 0,2-3 or all):", 56, "0-2,5", MAX_CHOICE_LENGTH),
                "goto": (
                    "Go to (e.g. 2026-11-30 03:00, 03:00, 2h ago, yesterday 23:10):",
                    64,
                    "",
                    0,
                ),
            }
            assert app.shown_gpus == {0, 1, 2, 5}  # Esc chose nothing
    finally:
        app.player.stop()
