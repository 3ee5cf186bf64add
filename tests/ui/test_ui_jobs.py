"""The diagnosis in the dashboard: verdicts on the GPU lines, the jobs view (j), the detail
screen's verdict, help and palette. Headless (Textual pilot), snapshots fed explicitly."""

from __future__ import annotations

import inspect
from functools import cache
from typing import Any

import pytest

from gputop.analysis import kinds as vd
from gputop.analysis.thresholds import Thresholds
from gputop.analysis.verdict import Analyzer
from gputop.diagnosis import lookback_seconds, recent
from gputop.model import ProcessInfo, Snapshot, Verdict, replace
from gputop.pipeline import Feed
from gputop.ui.app import GpuTopApp, help_legend, run_app
from gputop.ui.screens.detail import DetailScreen, HistoryScreen, verdict_history
from gputop.ui.screens.help import HelpScreen
from gputop.ui.screens.jobs import JobsScreen, job_entries
from gputop.views.gpu_view import (
    LONG_VERDICT_WIDTH,
    MIN_WIDE_HISTORY,
    VERDICT_WIDTH,
    bar_width_for,
    gpu_view,
    verdict_mark,
    verdict_width_for,
)
from gputop.views.parts import gpu_ranges, plain
from tests import builders as fx
from tests.helpers.screen import widgets_words

WIDE = (200, 50)
SMALL = (80, 24)


@cache
def demo(n: int) -> tuple[Snapshot, ...]:
    return tuple(fx.demo_snapshots(n))


def gpu_line(app: GpuTopApp, index: int) -> str:
    return app.gpu_panel.blocks[index].text.splitlines()[0]


def tree_lines(screen: JobsScreen) -> list[str]:
    """Every node's label (folded or not), depth-first."""
    out: list[str] = []

    def walk(node: Any, depth: int) -> None:
        for child in node.children:
            out.append("  " * depth + child.label.plain)
            walk(child, depth + 1)

    walk(screen.job_tree.root, 0)
    return out


# --- verdicts on the GPU lines ------------------------------------------------------------


@pytest.mark.parametrize(("size", "wide"), [(SMALL, False), (WIDE, True)])
async def test_demo_gpu_lines_carry_their_verdicts(size: tuple[int, int], wide: bool) -> None:
    app = GpuTopApp(snapshots=demo(30))
    async with app.run_test(size=size):
        diagnosis = app.diagnosis()
        assert diagnosis is not None
        kinds = {i: v.kind for i, v in diagnosis.gpus.items()}
        assert kinds[0] == vd.GPU_BOUND and kinds[1] == vd.GPU_BOUND
        assert kinds[2] == vd.INPUT_DISK and kinds[4] == vd.IDLE
        expect = {0: "GPU-bound", 2: "input-bound: disk", 4: "idle", 5: "transfer-bound: PCIe"}
        if not wide:
            expect = {0: "GPU-bnd", 2: "disk-bnd", 4: "idle", 5: "PCIe-bnd"}
        for index, word in expect.items():
            assert word in gpu_line(app, index), (index, gpu_line(app, index))
        # Not yet an idle holder after 29 s: GPU 3 (memory full, no load) is underused.
        assert kinds[3] == vd.UNDERUSED
        assert ("GPU underused" if wide else "low util") in gpu_line(app, 3)
        # Every GPU line stays as wide as the others: the slot is fixed.
        widths = {len(gpu_line(app, i)) for i in app.gpu_panel.blocks}
        assert len(widths) == 1


async def test_idle_memory_holder_shows_mem_idle_once_long_enough() -> None:
    app = GpuTopApp(snapshots=demo(150))
    async with app.run_test(size=SMALL):
        diagnosis = app.diagnosis()
        assert diagnosis is not None
        assert diagnosis.gpus[3].kind == vd.IDLE_HOLDER
        assert gpu_line(app, 3).rstrip().endswith("MEM IDLE")
        # The MEM IDLE meaning stays: the percentages are marked too.
        block = app.gpu_panel.blocks[3]
        roles = {role for text, role in block.view.lines[0] if "%" in text}
        assert "warn" in roles


async def test_one_snapshot_is_warming_up() -> None:
    app = GpuTopApp(snapshots=demo(1))
    async with app.run_test(size=SMALL):
        diagnosis = app.diagnosis()
        assert diagnosis is not None
        assert diagnosis.gpus[0].kind == vd.WARMING_UP
        assert "warming" in gpu_line(app, 0)
        # GPU 4 has no process and no memory: idle is known at once.
        assert gpu_line(app, 4).rstrip().endswith("idle")
    app = GpuTopApp(snapshots=demo(1))
    async with app.run_test(size=WIDE):
        assert "warming up" in gpu_line(app, 0)


async def test_no_color_keeps_the_words(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = GpuTopApp(snapshots=demo(30))
    async with app.run_test(size=SMALL) as pilot:
        assert app.no_color
        await pilot.pause()
        text = widgets_words(app)
        for word in ("GPU-bnd", "disk-bnd", "idle", "PCIe-bnd", "main-bnd"):
            assert word in text, word
        await pilot.press("j")
        await pilot.pause()
        assert isinstance(app.screen, JobsScreen)
        assert "verdict: GPU-bound (ok)" in widgets_words(app)


def test_verdict_words_fit_the_compact_slot() -> None:
    for kind in vd.KINDS:
        verdict = Verdict(kind, vd.LABELS[kind], "e", "a", "warn")
        mark = verdict_mark(verdict)
        assert 0 < len(mark.word) <= VERDICT_WIDTH, kind
        assert len(mark.text(VERDICT_WIDTH)) <= VERDICT_WIDTH
        assert mark.text(LONG_VERDICT_WIDTH) == vd.LABELS[kind]
    soft = verdict_mark(Verdict(vd.THROTTLED, "throttled", "e", "a", "info"))
    hard = verdict_mark(Verdict(vd.THROTTLED, "throttled", "e", "a", "bad"))
    assert soft.word != hard.word  # the power cap is told apart in words, not colour only
    roles = {s: verdict_mark(Verdict(vd.MODERATE, "m", "e", "a", s)).role for s in vd.SEVERITIES}
    assert roles == {"ok": "ok", "info": "dim", "warn": "warn", "bad": "error"}


def test_the_wide_slot_widens_only_when_the_history_keeps_room() -> None:
    for width in (100, 120, 140, 160, 200, 300):
        bar = bar_width_for(width, False)
        slot = verdict_width_for(width, False, bar)
        assert VERDICT_WIDTH <= slot <= LONG_VERDICT_WIDTH
        line = gpu_view(fx.full_gpu_sample(0), compact=False, bar_width=bar, verdict_width=slot)
        text = len(plain(line.lines[0]))
        if slot > VERDICT_WIDTH:
            assert width - text - 7 >= MIN_WIDE_HISTORY
    assert verdict_width_for(200, False, bar_width_for(200, False)) == 25
    assert verdict_width_for(80, True, 8) == VERDICT_WIDTH


async def test_a_failing_analysis_falls_back_to_the_mem_idle_marker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*_a: object, **_k: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(Analyzer, "update", broken)
    app = GpuTopApp(snapshots=demo(30))
    async with app.run_test(size=SMALL):
        assert app.verdict_error == "boom"
        assert app.is_running
        assert gpu_line(app, 3).rstrip().endswith("MEM IDLE")  # the heuristic
        assert "GPU-bnd" not in gpu_line(app, 0)


# --- thresholds, window, cost ---------------------------------------------------------------


def test_run_app_accepts_every_keyword_the_cli_passes() -> None:
    import ast

    import gputop.cli

    params = inspect.signature(run_app).parameters
    assert {"thresholds", "window", "theme"} <= set(params)
    tree = ast.parse(inspect.getsource(gputop.cli))
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "run_app"
    ]
    assert calls
    for call in calls:
        for kw in call.keywords:
            assert kw.arg is None or kw.arg in params, kw.arg


async def test_theme_by_name_and_an_unknown_one_is_said() -> None:
    app = GpuTopApp(snapshots=demo(2), theme="textual-light")
    async with app.run_test(size=SMALL):
        assert app.theme == "textual-light"
    app = GpuTopApp(snapshots=demo(2), theme="no-such-theme")
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause()
        assert app.theme != "no-such-theme"
        assert any("unknown theme 'no-such-theme'" in str(n.message) for n in app._notifications)


async def test_thresholds_and_window_change_the_verdicts() -> None:
    # UTIL_HIGH above anything the demo's GPU 0 reaches: no longer GPU-bound.
    strict = Thresholds.from_overrides({"util_high": 100.0})
    app = GpuTopApp(snapshots=demo(30), thresholds=strict, window=10.0)
    assert app.thresholds.window_seconds == 10.0 and app.thresholds.util_high == 100.0
    async with app.run_test(size=WIDE):
        diagnosis = app.diagnosis()
        assert diagnosis is not None
        assert diagnosis.gpus[0].kind != vd.GPU_BOUND
        assert "over 10 s" in diagnosis.gpus[2].evidence


def test_verdicts_only_see_the_recent_history() -> None:
    history = demo(700)
    seconds = lookback_seconds(Thresholds())
    assert seconds == 600.0
    kept = recent(history, seconds)
    assert kept[-1] is history[-1]
    assert kept[-1].time - kept[0].time == 600.0
    assert len(recent(history[:5], seconds)) == 5
    assert recent((), seconds) == ()


async def test_diagnosis_runs_once_per_snapshot_and_is_shared() -> None:
    history = demo(31)
    app = GpuTopApp(snapshots=history[:30])
    async with app.run_test(size=SMALL):
        first = app.diagnosis()
        assert first is app.diagnosis()  # cached for the same snapshot
        assert len(app.verdict_seconds) == 1
        app.apply_snapshot(history[30], history)
        assert app.diagnosis() is not first
        assert len(app.verdict_seconds) == 2
        assert len(app.verdict_log) == 2


# --- jobs view ------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [SMALL, WIDE])
async def test_j_opens_the_jobs_tree_navigates_and_closes(size: tuple[int, int]) -> None:
    app = GpuTopApp(snapshots=demo(30))
    async with app.run_test(size=size) as pilot:
        await pilot.press("j")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, JobsScreen)
        tree = screen.job_tree
        jobs = [n.data for n in tree.root.children]
        assert len(jobs) == 7
        assert jobs[0] == "job:41187:1748846820.00"
        lines = tree_lines(screen)
        # The torchrun job: 2 GPU processes, 8 workers, its verdict in words.
        assert "alice" in lines[0] and "python3" in lines[0]
        assert "torchrun" in widgets_words(app)  # the full command, in the panel
        assert sum("GPU 0 pid 41201" in line for line in lines) == 1
        assert sum("worker pid 4126" in line for line in lines) == 8
        assert "Jobs · 7 jobs on 7 GPUs" in widgets_words(app)
        text = widgets_words(app)
        assert "verdict: GPU-bound (ok)" in text
        assert "util mean" in text and "advice:" in text
        assert "8 workers" in text

        # Down through the first job's children, then to the next job: bob's disk-bound one.
        node = tree.root.children[1]
        assert tree.select_key(str(node.data))
        await pilot.pause()
        job = screen.selected_job()
        assert job is not None and job.root_pid == 52840
        text = widgets_words(app)
        assert "verdict: input-bound: disk (warn)" in text
        assert "D state" in text and "Storage is too slow" in text
        await pilot.press("down")
        await pilot.pause()
        assert str(tree.cursor_key).startswith("gpu:52840:")
        assert "GPU process 52840" in widgets_words(app)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, JobsScreen)
        assert app.focused is app.table


@pytest.mark.parametrize("key", ["j", "q"])
async def test_j_and_q_close_the_jobs_view(key: str) -> None:
    app = GpuTopApp(snapshots=demo(10))
    async with app.run_test(size=SMALL) as pilot:
        await pilot.press("j")
        await pilot.pause()
        assert isinstance(app.screen, JobsScreen)
        await pilot.press(key)
        await pilot.pause()
        assert not isinstance(app.screen, JobsScreen)
        assert app.is_running  # q closes the view, it does not quit


@pytest.mark.parametrize("action", ["jobs", "detail", "process"])
async def test_a_frame_before_the_pushed_screen_is_composed(action: str) -> None:
    """A screen is on top from its push, but its widgets come on its own task later; a
    frame applied in between is handed to it (update_history) before they exist. In a
    real start: the first frame's completion runs on the main screen's task one refresh
    after the first paint, and a `j` pressed at once is pushed on the app's task before
    it (the jobs view then raised NoMatches and gputop exited: a lifecycle test's pane
    was gone). Forced here: the frame comes in the same step as the push."""
    history = demo(12)
    app = GpuTopApp(snapshots=history[:10])
    async with app.run_test(size=WIDE) as pilot:
        getattr(app, f"action_{action}")()
        pushed = app.screen
        assert pushed is not app.screen_stack[0]
        assert not pushed.is_mounted and not pushed.children  # not composed yet
        assert app.apply_snapshot(history[10], history[:11]) is False  # under the screen
        await pilot.pause()
        assert app.is_running and app.screen is pushed and pushed.is_mounted
        diagnosis = app.diagnosis()
        assert diagnosis is not None and diagnosis.snapshot is history[10]
        if isinstance(pushed, JobsScreen):  # the newest frame's jobs
            job = pushed.selected_job()
            assert job is not None and job is diagnosis.job(job.id)
        else:  # the charts end with the newest frame
            assert isinstance(pushed, HistoryScreen) and pushed.history[-1] is history[10]


async def test_jobs_view_updates_keeps_the_selection_and_skips_when_paused() -> None:
    history = list(demo(40))
    app = GpuTopApp(snapshots=history[:30])
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("j")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, JobsScreen)
        key = "worker:52840:1748851970.00:52873"
        assert screen.job_tree.select_key(key)
        updates = screen.updates
        for i in range(30, 33):
            app.apply_snapshot(history[i], history[: i + 1])
            await pilot.pause()
        assert screen.updates == updates + 3
        assert screen.job_tree.cursor_key == key
        assert "job 52840" in widgets_words(app)

        await pilot.press("p")
        app.apply_snapshot(history[33], history[:34])
        await pilot.pause()
        assert screen.updates == updates + 3  # paused: the view holds still
        await pilot.press("p")
        await pilot.pause()
        assert screen.updates == updates + 4  # unpaused: catches up at once

        # The worker ends: the selection moves to its GPU process, not to the top.
        snap = history[34]
        gone = replace(snap, processes=tuple(p for p in snap.processes if p.pid != 52873))
        app.apply_snapshot(gone, (*history[:34], gone))
        await pilot.pause()
        assert "worker:52840:1748851970.00:52873" not in screen.job_tree.nodes_by_key
        assert str(screen.job_tree.cursor_key).startswith("gpu:52840:")


async def test_jobs_view_opens_on_the_selected_process_job() -> None:
    app = GpuTopApp(snapshots=demo(10))
    async with app.run_test(size=WIDE) as pilot:
        app.table.move_cursor(row=2)  # sorted by GPU: row 2 is bob's pid 52840 on GPU 2
        await pilot.pause()
        proc = app.table.cursor_proc
        assert proc is not None and proc.pid == 52840
        await pilot.press("j")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, JobsScreen)
        job = screen.selected_job()
        assert job is not None and job.root_pid == 52840


async def test_small_terminals_fold_the_workers() -> None:
    app = GpuTopApp(snapshots=demo(10))
    async with app.run_test(size=SMALL) as pilot:
        await pilot.press("j")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, JobsScreen)
        first_gpu = screen.job_tree.root.children[0].children[0]
        assert not first_gpu.is_expanded and first_gpu.allow_expand
        screen.job_tree.select_key(str(first_gpu.data))
        await pilot.press("space")
        await pilot.pause()
        assert first_gpu.is_expanded
        # A new snapshot does not fold it again.
        history = demo(11)
        app.apply_snapshot(history[-1], history)
        await pilot.pause()
        assert first_gpu.is_expanded


async def test_main_screen_keys_do_nothing_under_the_jobs_view() -> None:
    app = GpuTopApp(snapshots=demo(10))
    async with app.run_test(size=SMALL) as pilot:
        await pilot.press("j")
        await pilot.pause()
        await pilot.press("s", "3", "slash", "k")
        await pilot.pause()
        assert isinstance(app.screen, JobsScreen)
        assert app.sort_key == "gpu" and app.shown_gpus is None and app.text_filter == ""


async def test_untrusted_text_in_the_jobs_view_is_shown_literally() -> None:
    snap = fx.full_snapshot(
        [
            fx.full_gpu_sample(
                0,
                processes=[
                    fx.full_gpu_process(
                        500,
                        info=fx.full_process_info(
                            500, user="[b]eve[/b]", command="python [red]x[/red] t"
                        ),
                    )
                ],
            )
        ]
    )
    worker = ProcessInfo(
        pid=501, ppid=500, user="[b]eve[/b]", command="[link=x]w[/link]", status="running"
    )
    snap = replace(snap, processes=(worker,))
    app = GpuTopApp(snapshots=[snap])
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("j")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, JobsScreen)
        lines = "\n".join(tree_lines(screen))
        assert "python [red]x[/red] t" in lines
        assert "[link=x]w[/link]" in lines
        assert "[b]eve[/b]" in widgets_words(app)


async def test_host_only_jobs_view_says_why_it_is_empty() -> None:
    from gputop.model import DriverInfo

    snap = fx.full_snapshot(
        driver=DriverInfo(available=False, error="no driver"), source="host-only"
    )
    app = GpuTopApp(snapshots=[snap])
    async with app.run_test(size=SMALL) as pilot:
        await pilot.press("j")
        await pilot.pause()
        assert isinstance(app.screen, JobsScreen)
        assert "No jobs: no GPU data (host-only)" in widgets_words(app)


def test_job_entries_group_workers_under_their_gpu_process() -> None:
    snap = demo(5)[-1]
    diagnosis = Feed().frame(demo(5)).diagnosis  # the dashboard's feed
    assert diagnosis is not None
    entries = job_entries(diagnosis.jobs, diagnosis.job_verdicts, snap, 200)
    torchrun = entries[0]
    assert [c.key.rsplit(":", 2)[-2:] for c in torchrun.children] == [
        ["0", "41201"],
        ["1", "41202"],
    ]
    assert [w.key.rsplit(":", 1)[1] for w in torchrun.children[0].children] == [
        "41260",
        "41261",
        "41262",
        "41263",
    ]
    assert gpu_ranges((0, 1, 2, 3, 6)) == "0-3,6"
    assert gpu_ranges((0, 1)) == "0,1"
    assert gpu_ranges(()) == "-"


# --- detail, help, palette ------------------------------------------------------------------


async def test_detail_screen_shows_the_verdict_and_its_history() -> None:
    history = demo(40)
    app = GpuTopApp(snapshots=history[:30])
    async with app.run_test(size=WIDE) as pilot:
        for i in range(30, 40):
            app.apply_snapshot(history[i], history[: i + 1])
        await pilot.press("2")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)
        text = widgets_words(app)
        assert "verdict: input-bound: disk (warn)" in text
        assert "evidence: util mean" in text and "advice: Storage is too slow" in text
        assert "verdict history, last 10s (11 samples): input-bound: disk 100 %" in text


def test_verdict_history_summary() -> None:
    log = [(float(t), vd.GPU_BOUND if t < 8 else vd.INPUT_CPU) for t in range(10)]
    assert verdict_history(log) == (
        "verdict history, last 9s (10 samples): GPU-bound 80 %, input-bound: CPU workers 20 %"
    )
    assert verdict_history(log[:1]) is None


async def test_help_and_palette_list_the_jobs_view() -> None:
    app = GpuTopApp(snapshots=demo(5))
    async with app.run_test(size=WIDE) as pilot:
        commands = [c.title for c in app.get_system_commands(app.screen)]
        assert "Jobs (j)" in commands
        footer = [b.binding.key for b in app.active_bindings.values() if b.binding.show]
        assert "j" in footer
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = widgets_words(app)
        assert "Jobs" in text
        for word in ("MEM IDLE", "GPU-bnd", "disk-bnd", "warming", "pwr cap"):
            assert word in text, word
    legend = dict(help_legend())
    assert list(legend).count("MEM IDLE") == 1


async def test_the_palette_opens_the_jobs_view() -> None:
    app = GpuTopApp(snapshots=demo(5))
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Jobs")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause(0.3)
        await pilot.pause()
        assert isinstance(app.screen, JobsScreen)
