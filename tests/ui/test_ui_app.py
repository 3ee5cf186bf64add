"""The main screen, driven headlessly with Textual's pilot. Snapshots are fed explicitly."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest
from rich.protocol import rich_cast
from textual.widgets import Static

from gputop.model import DriverInfo, Snapshot, UnlistedHolder, replace
from gputop.present import resolve_gpu_selection
from gputop.ui.app import GpuTopApp, help_bindings
from gputop.ui.gpu_panel import GpuBlock, GpuLines, history_parts
from gputop.views import process_view
from gputop.views.gpu_view import pcie_downgrade, throttle_words
from gputop.views.parts import INTERVAL_STEPS, level, plain
from gputop.views.process_view import MIN_COMMAND_WIDTH, column_widths
from tests import builders as fx

WIDE = (200, 50)
SMALL = (80, 24)


class FakeSampler:
    """A gputop.pipeline.Stream (what the app uses of a Sampler), without a thread."""

    def __init__(self, snapshots: Sequence[Snapshot] = ()) -> None:
        self._history = tuple(snapshots)
        self.interval = 1.0
        self.paused = False
        self.stale = False
        self.last_error: str | None = None
        self.running = True
        self.on_snapshot = None
        self.source: object | None = None
        self.started = False

    def latest(self) -> Snapshot | None:
        return self._history[-1] if self._history else None

    def history(self) -> tuple[Snapshot, ...]:
        return self._history

    def push(self, snap: Snapshot) -> None:
        self._history = (*self._history, snap)

    def start(self) -> None:
        self.started = True

    def stop(self, timeout: float = 5.0) -> None:
        self.running = False


def history_cells(lines: GpuLines, index: int, row: int) -> str:
    """The history cells of one GPU's row as drawn now."""
    block = lines.blocks[index]
    label_width = block.label_width
    parts = history_parts(block.series[row], lines.history_width(block), label_width)
    return parts[-1][0]


def table_pids(app: GpuTopApp) -> list[int]:
    return [app.table.rows_by_key[r.key.value].pid for r in app.table.ordered_rows]  # type: ignore[index]


def header_y(app: GpuTopApp) -> int:
    """Row of the table's header inside the widget (below its top border, if any)."""
    return app.table.content_region.y - app.table.region.y


def row_texts(app: GpuTopApp, key: str) -> list[str]:
    return [cell.plain for cell in app.table.get_row(key)]


async def test_q_quits() -> None:
    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(2)])
    async with app.run_test(size=SMALL) as pilot:
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0
    assert not app.is_running


async def test_first_frame_shows_gpus_host_and_processes() -> None:
    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(3)])
    async with app.run_test(size=WIDE):
        assert sorted(app.gpu_panel.blocks) == [0, 1, 2]
        assert "H100 80GB HBM3" in app.gpu_panel.blocks[0].text
        assert "CPU  25%" in app.host_panel.text
        assert table_pids(app) == [1000, 1001, 1010, 1011, 1020, 1021]
        assert "node-1" in app.header.text and "live" in app.header.text
        assert app.focused is app.table


async def test_digit_shows_one_gpu_and_a_restores_the_cli_filter() -> None:
    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(4)], gpu_filter=frozenset({0, 2}))
    async with app.run_test(size=WIDE) as pilot:
        assert sorted(app.gpu_panel.blocks) == [0, 2]
        assert {p // 10 for p in table_pids(app)} == {100, 102}
        await pilot.press("3")
        assert sorted(app.gpu_panel.blocks) == [3]
        assert table_pids(app) == [1030, 1031]
        assert "GPU 3" in app.header.text
        await pilot.press("9")  # no such GPU: nothing changes, the user is told
        assert sorted(app.gpu_panel.blocks) == [3]
        await pilot.press("a")
        assert sorted(app.gpu_panel.blocks) == [0, 2]


async def test_a_gpu_filter_of_uuids_resolves_as_the_cli_does() -> None:
    # The CLI resolves --gpus (indices or UUIDs) before the app starts; unknown: exit 2.
    snap = fx.multi_gpu_snapshot(4)
    chosen = resolve_gpu_selection(["GPU-00000002", "3"], snap.gpus)
    app = GpuTopApp(snapshots=[snap], gpu_filter=chosen)
    async with app.run_test(size=WIDE):
        assert sorted(app.gpu_panel.blocks) == [2, 3]
    with pytest.raises(ValueError, match="no GPU with index 7"):
        resolve_gpu_selection(["7"], snap.gpus)


async def test_a_shows_all_gpus_without_cli_filter() -> None:
    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(3)], gpu_filter=frozenset({1}))
    async with app.run_test(size=WIDE) as pilot:
        assert sorted(app.gpu_panel.blocks) == [1]
        await pilot.press("0")
        assert sorted(app.gpu_panel.blocks) == [0]
    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(3)])
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("1", "a")
        assert sorted(app.gpu_panel.blocks) == [0, 1, 2]
        assert "GPU " not in app.header.text.replace("GPU-", "")


async def test_keys_typed_right_after_slash_go_to_the_filter() -> None:
    """The keys after "/" may already be queued when "/" is handled (a fast typist, a
    paste, a loaded machine: a tmux test saw "/x" lose its x): they go to the filter."""
    from textual import events

    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(3)])
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        for key, char in (("slash", "/"), ("v", "v"), ("1", "1")):
            app.post_message(events.Key(key, char))  # all queued before any is handled
        await pilot.pause()
        assert app.focused is app.filter_input
        assert app.text_filter == "v1"
        await pilot.press("slash")  # in the box, "/" is a character
        assert app.text_filter == "v1/" and app.focused is app.filter_input


async def test_slash_filters_and_escape_clears() -> None:
    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(3)])
    async with app.run_test(size=WIDE) as pilot:
        box = app.filter_input  # mounted one refresh after the first frame, or when asked for
        assert not box.display
        await pilot.press("slash")
        assert box.display and app.focused is box
        await pilot.press("v", "1", "q")  # typed into the box: q does not quit here
        assert app.is_running
        assert app.text_filter == "v1q"
        assert table_pids(app) == []
        await pilot.press("backspace")
        assert table_pids(app) == [1011]
        assert "filter v1" in app.header.text
        await pilot.press("enter")  # keeps the filter, back to the table
        assert app.focused is app.table and box.display
        assert table_pids(app) == [1011]
        await pilot.press("escape")
        assert not box.display and app.text_filter == ""
        assert len(table_pids(app)) == 6
        assert app.focused is app.table


async def test_sort_cycles_and_reverses() -> None:
    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(3)])
    async with app.run_test(size=WIDE) as pilot:
        assert app.sort_key == "gpu"
        await pilot.press("s")
        assert app.sort_key == "pid"
        assert table_pids(app) == [1000, 1001, 1010, 1011, 1020, 1021]
        await pilot.press("r")
        assert table_pids(app) == [1021, 1020, 1011, 1010, 1001, 1000]
        label = app.table.ordered_columns[2].label.plain
        assert "PID▼" in label
        await pilot.press("r", "s", "s", "s")
        assert app.sort_key == "sm"  # pid -> user -> mem -> sm
        assert table_pids(app) == [1000, 1010, 1020, 1001, 1011, 1021]  # n/a last


async def test_sort_key_skips_columns_the_compact_table_hides() -> None:
    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(2)])
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.compact
        shown = {c.key for c in process_view.visible_columns(compact=True)}
        assert "rss" not in shown and "read" not in shown
        seen = []
        for _ in range(len(process_view.SORT_KEYS)):
            await pilot.press("s")
            seen.append(app.sort_key)
        assert set(seen) == shown & set(process_view.SORT_KEYS) and "rss" not in seen


async def test_clicking_a_header_sorts_and_again_reverses() -> None:
    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(3)])
    async with app.run_test(size=WIDE) as pilot:
        widths = column_widths(WIDE[0] - 1, compact=False)
        x = widths["tag"] + widths["gpu"] + 1 + widths["pid"] + 1 + 3  # inside USER
        y = header_y(app)
        await pilot.click("#procs", offset=(x, y))
        assert app.sort_key == "user" and not app.sort_reverse
        assert table_pids(app)[0] == 1000  # u0
        await pilot.click("#procs", offset=(x, y))
        assert app.sort_key == "user" and app.sort_reverse
        assert table_pids(app)[0] == 1021  # v2


async def test_clicking_a_row_selects_it() -> None:
    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(3)])
    async with app.run_test(size=WIDE) as pilot:
        await pilot.click("#procs", offset=(20, header_y(app) + 3))
        assert app.table.cursor_row == 2
        assert app.table.cursor_key == "1:1010"


async def test_pause_holds_snapshots_back() -> None:
    sampler = FakeSampler([fx.multi_gpu_snapshot(2)])
    app = GpuTopApp(sampler)  # type: ignore[arg-type]
    async with app.run_test(size=WIDE) as pilot:
        assert sampler.on_snapshot is not None
        await pilot.press("p")
        assert app.paused and sampler.paused
        assert "PAUSED" in app.header.text
        newer = fx.multi_gpu_snapshot(3, time=fx.FULL_T0 + 1)
        assert app.apply_snapshot(newer, (newer,)) is False
        assert app.pending and sorted(app.gpu_panel.blocks) == [0, 1]
        await pilot.press("s")  # keys still act on what is shown
        assert app.sort_key == "pid"
        await pilot.press("p")
        assert not app.paused and not sampler.paused
        assert "PAUSED" not in app.header.text
        assert sorted(app.gpu_panel.blocks) == [0, 1, 2]


async def test_plus_minus_change_the_interval_within_bounds() -> None:
    sampler = FakeSampler([fx.multi_gpu_snapshot(1)])
    app = GpuTopApp(sampler)  # type: ignore[arg-type]
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("plus")
        assert sampler.interval == 2.0 and "every 2s" in app.header.text
        await pilot.press("minus", "minus")
        assert sampler.interval == 0.5
        await pilot.press(*["minus"] * 5)
        assert sampler.interval == INTERVAL_STEPS[0] == 0.25
        await pilot.press(*["plus"] * 10)
        assert sampler.interval == INTERVAL_STEPS[-1] == 10.0
        assert "every 10s" in app.header.text


async def test_space_tags_and_untags_rows() -> None:
    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(2)])
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("space")
        assert app.tagged == {"0:1000"}
        assert row_texts(app, "0:1000")[0] == "*"
        assert app.table.cursor_key == "0:1001"  # moved on, like htop
        await pilot.press("space")
        assert app.tagged == {"0:1000", "0:1001"}
        assert app.table.cursor_key == "1:1010"
        await pilot.press("up", "space")  # untag 0:1001
        assert app.tagged == {"0:1000"}
        assert row_texts(app, "0:1001")[0] == " "
        assert row_texts(app, "0:1000")[0] == "*"


async def test_resize_compact_too_small_and_back() -> None:
    app = GpuTopApp(snapshots=fx.demo_snapshots(5))
    async with app.run_test(size=WIDE) as pilot:
        assert not app.compact
        block = app.gpu_panel.blocks[0]
        assert block.text.count("\n") == 1  # two lines per GPU
        await pilot.resize_terminal(*SMALL)
        await pilot.pause()
        assert app.compact
        assert app.query_one("#main").has_class("-compact")
        assert app.gpu_panel.blocks[0].text.count("\n") == 0  # one line per GPU
        # one line per GPU, and one more where a throttle or a slow link must be read whole
        alerts = sum(
            1
            for g in app.snapshot.gpus
            if throttle_words(g.clock_event_reasons) or pcie_downgrade(g)
        )
        assert sum(len(app.gpu_panel.blocks[i].view.lines) for i in range(8)) == 8 + alerts
        lines = app.gpu_panel.query_one(GpuLines)
        assert lines.region.height == 8 + alerts and len(lines.lines) == 8 + alerts
        assert app.table.ordered_columns[-1].width >= MIN_COMMAND_WIDTH
        await pilot.resize_terminal(40, 12)
        await pilot.pause()
        assert app.too_small
        note = app.query_one("#too-small", Static)
        assert note.display and not app.query_one("#main").display
        assert "too small" in str(note.render())
        newer = fx.demo_snapshots(6)[-1]
        assert app.apply_snapshot(newer) is False  # nothing drawn while too small
        await pilot.resize_terminal(*WIDE)
        await pilot.pause()
        assert not app.too_small and not app.compact and not note.display
        assert app.gpu_panel.blocks[0].text.count("\n") == 1
        assert not app.pending


async def test_cursor_stays_on_the_same_process_when_rows_reorder() -> None:
    first = fx.multi_gpu_snapshot(3)
    app = GpuTopApp(snapshots=[first])
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("s", "s", "s", "s", "s")  # cpu
        assert app.sort_key == "cpu"
        await pilot.press("down", "down")
        key = app.table.cursor_key
        assert key is not None
        row_before = app.table.cursor_row
        # Every process's CPU changes so that the order reverses.
        gpus = []
        for g in first.gpus:
            procs = []
            for p in g.processes:
                assert p.host is not None
                procs.append(replace(p, host=replace(p.host, cpu_percent=10_000.0 - p.pid)))
            gpus.append(replace(g, processes=tuple(procs)))
        second = replace(first, gpus=tuple(gpus), time=fx.FULL_T0 + 1)
        app.apply_snapshot(second, (first, second))
        await pilot.pause()
        assert app.table.last_update == "reorder"  # the same rows moved, not rebuilt
        assert app.table.cursor_key == key
        assert app.table.cursor_row == len(table_pids(app)) - 1 - row_before
        pids = table_pids(app)
        assert pids == sorted(pids, reverse=True)  # CPU 10,000 - pid: highest CPU first
        # What is drawn follows the new order too (line 0 is the header).
        drawn = [app.table.render_line(y).text for y in range(1, len(pids) + 1)]
        assert [int(line.split()[1]) for line in drawn] == pids


async def test_table_diffing_skips_updates_cells_or_rebuilds() -> None:
    first = fx.multi_gpu_snapshot(4)
    app = GpuTopApp(snapshots=[first])
    async with app.run_test(size=WIDE):
        app.apply_snapshot(replace(first, time=first.time), (first,))
        assert app.table.last_update == "skip"
        g0 = first.gpus[0]
        p0 = replace(g0.processes[0], sm_percent=1.0)
        changed = replace(g0, processes=(p0, *g0.processes[1:]))
        second = replace(first, gpus=(changed, *first.gpus[1:]))
        app.apply_snapshot(second, (first, second))
        assert app.table.last_update == "cells"
        assert row_texts(app, "0:1000")[process_view.SORT_KEYS.index("sm") + 2].strip() == "1%"
        app.apply_snapshot(fx.multi_gpu_snapshot(2), None)
        assert app.table.last_update == "rebuild"


async def test_markup_and_escape_sequences_in_untrusted_text_show_literally() -> None:
    evil_cmd = "python [bold red]x[/] \x1b[31mred\x1b[0m [link=http://e]y[/link]"
    g = fx.full_gpu_sample(
        0,
        name="[blink]Evil[/] GPU",
        processes=[fx.full_gpu_process(4242, command=evil_cmd, user="[i]eve[/]")],
    )
    app = GpuTopApp(snapshots=[fx.full_snapshot([g])])
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        cells = app.table.get_row("0:4242")
        command = cells[-1]
        assert command.plain.strip() == "python [bold red]x[/] red [link=http://e]y[/link]"
        assert "\x1b" not in command.plain
        assert all(not span.style for span in rich_cast(command).spans)  # as DataTable draws it
        assert cells[3].plain.strip() == "[i]eve[/]"
        block = app.gpu_panel.blocks[0]
        assert "[blink]Evil[/] GPU" in block.text
        # What reaches the screen: the literal text, and no bold/red/blink/link from it.
        screen_text = app.export_screenshot()
        assert "[bold&#160;red]x[/]" in screen_text or "[bold red]x[/]" in screen_text
        strips = app.table.render_lines(app.table.region.reset_offset)
        for strip in strips:
            for seg in strip:
                if "x[/]" in seg.text or "red" in seg.text:
                    assert seg.style is None or not (seg.style.blink or seg.style.link)


async def test_host_only_mode_explains_and_still_shows_host_and_holders() -> None:
    driver = DriverInfo(available=False, error="NVIDIA driver is not loaded")
    holder = UnlistedHolder(pid=777, gpu=None, minor_number=0, user="bob", command="python x.py")
    snap = fx.full_snapshot(
        driver=driver,
        source="host-only",
        holders=[holder],
        processes=[fx.full_process_info(777, user="bob", command="python x.py")],
    )
    app = GpuTopApp(snapshots=[snap])
    async with app.run_test(size=SMALL):
        assert app.gpu_panel.message is not None
        assert "NVIDIA driver is not loaded" in app.gpu_panel.message
        assert not app.gpu_panel.blocks
        assert "HOST-ONLY (NVIDIA driver is not loaded)" in app.header.text
        assert "CPU" in app.host_panel.text
        assert row_texts(app, "?:777")[-1].startswith(" [holds /dev/nvidia0")
        row = app.table.rows_by_key["?:777"]
        assert row.command == "[holds /dev/nvidia0, not listed by NVML] python x.py"
        assert row.type == "-"


async def test_lost_gpu_shows_lost_and_others_keep_updating() -> None:
    snap = fx.full_snapshot(
        [fx.full_gpu_sample(0), fx.full_gpu_sample(1, lost=True), fx.full_gpu_sample(2)]
    )
    app = GpuTopApp(snapshots=[snap])
    async with app.run_test(size=SMALL):
        assert "LOST" in app.gpu_panel.blocks[1].text
        assert app.gpu_panel.blocks[1].view.lost
        assert "LOST" not in app.gpu_panel.blocks[0].text
        assert "55°C" in app.gpu_panel.blocks[2].text


async def test_invisible_pid_row_and_kill_refused_for_it() -> None:
    g = fx.full_gpu_sample(
        0, processes=[fx.full_gpu_process(999_999, visible=False, memory=3 * fx.GiB)]
    )
    app = GpuTopApp(snapshots=[fx.full_snapshot([g])])
    async with app.run_test(size=WIDE) as pilot:
        texts = [t.strip() for t in row_texts(app, "0:999999")]
        assert texts[-1].startswith("pid not visible")
        assert texts[3] == "n/a"  # user
        assert texts[5] == "3.0GiB"  # GPU memory is still known
        await pilot.press("k")
        await pilot.pause()
        assert app.screen is app.screen_stack[0]  # no kill dialog for it
        assert any("not visible" in n.message for n in app._notifications)


async def test_kill_opens_the_dialog_with_tagged_targets() -> None:
    from gputop.ui.screens.kill import KillScreen

    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(2)], readonly=True)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("k")
        await pilot.pause()
        assert isinstance(app.screen, KillScreen)
        assert [t.pid for t in app.screen.targets] == [1000]
        assert app.screen.readonly
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("space", "down", "space")
        await pilot.press("k")
        await pilot.pause()
        assert isinstance(app.screen, KillScreen)
        targets = app.screen.targets
        assert sorted(t.pid for t in targets) == [1000, 1010]
        assert all(t.create_time is not None for t in targets)


async def test_enter_opens_the_detail_screen_and_it_gets_new_history() -> None:
    from gputop.ui.screens.detail import DetailScreen

    first = fx.multi_gpu_snapshot(3)
    app = GpuTopApp(snapshots=[first])
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("down", "down", "enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)
        assert app.screen.gpu_index == 1
        second = fx.multi_gpu_snapshot(4, time=fx.FULL_T0 + 1)
        assert app.apply_snapshot(second, (first, second)) is False  # main screen hidden
        assert app.screen.history == (first, second)
        await pilot.press("escape")
        await pilot.pause()
        assert not app.pending
        assert sorted(app.gpu_panel.blocks) == [0, 1, 2, 3]


async def test_help_screen_lists_the_keys() -> None:
    from gputop.ui.screens.help import HelpScreen

    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(1)])
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        keys = dict(app.screen.key_bindings)
        for key in ("q", "/", "s", "r", "p", "+", "-", "Enter", "k", "Space", "0-9", "a"):
            assert key in keys, key
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.screen_stack[0]
    assert ("0-9", "show only that GPU (a: all GPUs again)") in help_bindings()


async def test_command_palette_offers_the_actions() -> None:
    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(1)])
    async with app.run_test(size=WIDE):
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for title in ("Pause (p)", "Filter (/)", "Kill (k)", "Sort (s)", "Detail (Enter)"):
            assert title in titles


async def test_snapshots_from_the_sampler_thread_are_applied() -> None:
    sampler = FakeSampler([fx.multi_gpu_snapshot(1)])
    app = GpuTopApp(sampler)  # type: ignore[arg-type]
    async with app.run_test(size=WIDE) as pilot:
        assert sorted(app.gpu_panel.blocks) == [0]
        newer = fx.multi_gpu_snapshot(2, time=fx.FULL_T0 + 1)
        sampler.push(newer)
        callback = sampler.on_snapshot
        assert callback is not None
        thread = threading.Thread(target=callback, args=(newer,))
        thread.start()
        thread.join()
        await pilot.pause()
        await pilot.pause()
        assert app.snapshot is newer
        assert sorted(app.gpu_panel.blocks) == [0, 1]


async def test_stale_marker_follows_the_sampler() -> None:
    sampler = FakeSampler([fx.multi_gpu_snapshot(1)])
    app = GpuTopApp(sampler)  # type: ignore[arg-type]
    async with app.run_test(size=WIDE):
        assert "STALE" not in app.header.text
        sampler.stale = True
        app._check_stale()
        assert "STALE" in app.header.text
        sampler.stale = False
        app._check_stale()
        assert "STALE" not in app.header.text


async def test_a_failing_tick_is_said_in_the_header() -> None:
    sampler = FakeSampler([fx.multi_gpu_snapshot(1)])
    app = GpuTopApp(sampler)  # type: ignore[arg-type]
    async with app.run_test(size=WIDE):
        sampler.last_error = "RuntimeError: [bold]boom[/]"
        app._check_stale()
        assert "sampling failed: RuntimeError: [bold]boom[/]" in app.header.text
        sampler.last_error = None
        app._check_stale()
        assert "sampling failed" not in app.header.text


async def test_the_verdicts_are_judged_on_the_sampler_thread() -> None:
    sampler = FakeSampler([fx.multi_gpu_snapshot(1)])
    app = GpuTopApp(sampler)  # type: ignore[arg-type]
    async with app.run_test(size=WIDE) as pilot:
        newer = fx.multi_gpu_snapshot(2, time=fx.FULL_T0 + 1)
        sampler.push(newer)
        callback = sampler.on_snapshot
        assert callback is not None
        judged_on: list[str] = []
        push, frame = app.feed.push, app.feed.frame

        def spy(real: Any) -> Any:
            def call(*args: Any, **kw: Any) -> Any:
                judged_on.append(threading.current_thread().name)
                return real(*args, **kw)

            return call

        app.feed.push, app.feed.frame = spy(push), spy(frame)  # type: ignore[method-assign]
        thread = threading.Thread(target=callback, args=(newer,), name="sampler")
        thread.start()
        thread.join()
        await pilot.pause()
        await pilot.pause()
        assert app.snapshot is newer
        assert judged_on == ["sampler"]  # not again on the UI thread
        diagnosis = app.diagnosis()
        assert diagnosis is not None and diagnosis.snapshot is newer


async def test_a_sampler_not_yet_running_is_started() -> None:
    """Once the first frame is drawn: its thread would take the interpreter from the paint."""
    sampler = FakeSampler([fx.multi_gpu_snapshot(1)])
    sampler.running = False
    app = GpuTopApp(sampler)  # type: ignore[arg-type]
    async with app.run_test(size=WIDE) as pilot:
        assert app.snapshot is sampler.latest()
        await pilot.pause()
        assert sampler.started


async def test_history_widget_draws_fixed_scale_series() -> None:
    history = [
        fx.full_snapshot([fx.full_gpu_sample(0, util=u)], time=fx.FULL_T0 + i)
        for i, u in enumerate([0, 50, 100])
    ]
    app = GpuTopApp(snapshots=history)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        lines = app.gpu_panel.query_one(GpuLines)
        assert history_cells(lines, 0, 0).endswith(" ▄█")
        assert history_cells(lines, 0, 1).endswith("▄▄▄")  # memory 50 %
        # The history fills the line after the GPU's text and one space.
        first = plain(lines.lines[0])
        assert len(first) == lines.size.width
        assert first.endswith(history_cells(lines, 0, 0))
        assert "util " in first and "mem  " in plain(lines.lines[1])


async def test_history_repaints_only_rows_whose_cells_changed() -> None:
    history = [
        fx.full_snapshot([fx.full_gpu_sample(0, util=u)], time=fx.FULL_T0 + i)
        for i, u in enumerate([0, 50, 100])
    ]
    app = GpuTopApp(snapshots=history)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        lines = app.gpu_panel.query_one(GpuLines)
        (block,) = lines.blocks.values()
        (util_label, _), (mem_label, _) = block.series
        # A history wider than the line: the window shows only its newest samples.
        util = mem = level(50.0) * 300
        lines.set_blocks({0: GpuBlock(block.view, [(util_label, util), (mem_label, mem)])}, 60)
        lines.render_line(0), lines.render_line(1)
        util_strip, mem_strip = lines._cache[0], lines._cache[1]
        # One more sample: util moves, memory stays at 50 % (a flat line looks the same).
        moved = [
            (util_label, util[1:] + level(25.0)),
            (mem_label, mem[1:] + level(50.0)),
        ]
        lines.set_blocks({0: GpuBlock(block.view, moved)}, 60)
        assert lines._cache.get(1) is mem_strip  # kept: nothing to repaint
        assert 0 not in lines._cache  # util changed: redrawn on the next frame
        assert lines.render_line(0) is not util_strip
        assert history_cells(lines, 0, 0).endswith("▄▄▂")


@pytest.mark.parametrize("size", [SMALL, WIDE])
async def test_demo_frames_judge_each_snapshot_once(
    size: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Work counted, not timed (bench/bench_ui.py times frames): each applied snapshot is
    drawn once, judged once and grouped into jobs once, whatever the views read."""
    from gputop.analysis import window as analysis_window

    snaps = fx.demo_snapshots(40)
    app = GpuTopApp(snapshots=snaps[:20])
    async with app.run_test(size=size) as pilot:
        real = analysis_window.build_jobs_reusing
        builds = [0]

        def counted(snapshot: Snapshot, *args: Any) -> Any:
            builds[0] += 1
            return real(snapshot, *args)

        monkeypatch.setattr(analysis_window, "build_jobs_reusing", counted)  # jobs built here
        diagnoses = len(app.verdict_seconds)
        for i in range(20, 40):
            assert app.apply_snapshot(snaps[i], snaps[: i + 1])
            await pilot.pause()
        assert app.frames == 21
        assert len(app.verdict_seconds) == diagnoses + 20
        assert builds[0] == 20
        assert app.diagnosis() is not None and app.diagnosis().snapshot is snaps[39]  # type: ignore[union-attr]


async def test_interval_outside_the_steps_only_moves_towards_them() -> None:
    sampler = FakeSampler([fx.multi_gpu_snapshot(1)])
    sampler.interval = 0.1  # --interval 0.1
    app = GpuTopApp(sampler)  # type: ignore[arg-type]
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("minus")
        assert sampler.interval == 0.1
        await pilot.press("plus")
        assert sampler.interval == 0.25
    sampler = FakeSampler([fx.multi_gpu_snapshot(1)])
    sampler.interval = 30.0
    app = GpuTopApp(sampler)  # type: ignore[arg-type]
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("plus")
        assert sampler.interval == 30.0
        await pilot.press("minus")
        assert sampler.interval == 10.0


async def test_a_tag_goes_away_with_its_process() -> None:
    first = fx.multi_gpu_snapshot(2)
    app = GpuTopApp(snapshots=[first])
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("space")
        assert app.tagged == {"0:1000"}
        g0 = first.gpus[0]
        second = replace(first, gpus=(replace(g0, processes=g0.processes[1:]), first.gpus[1]))
        app.apply_snapshot(second, (first, second))
        assert app.tagged == set()
        app.apply_snapshot(first, (first,))  # same pid again: a new process, not tagged
        assert row_texts(app, "0:1000")[0] == " "


async def test_theme_change_restyles_the_table() -> None:
    app = GpuTopApp(snapshots=[fx.multi_gpu_snapshot(1)])
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("space")
        before = app.table.get_row("0:1000")[0].style
        app.theme = "nord"
        await pilot.pause()
        after = app.table.get_row("0:1000")[0].style
        assert before != after
        assert str(after.color.triplet.hex) == app.theme_variables["accent"].lower()
        assert app.table.get_row("0:1000")[0].plain == "*"


async def test_live_with_the_real_sampler_and_demo_source() -> None:
    import asyncio

    from gputop.sampler import Sampler
    from gputop.sources.demo import DemoSource

    sampler = Sampler(DemoSource(0), interval=0.05)
    app = GpuTopApp(sampler)
    try:
        async with app.run_test(size=SMALL) as pilot:
            for _ in range(100):
                if app.frames >= 3:
                    break
                await asyncio.sleep(0.02)
            await pilot.pause()
            assert app.frames >= 3
            assert sorted(app.gpu_panel.blocks) == list(range(8))
            assert "DEMO" in app.header.text
            await pilot.press("p")
            assert sampler.paused
    finally:
        sampler.stop()
