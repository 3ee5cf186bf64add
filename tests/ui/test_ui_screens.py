"""The kill dialog, help and detail screens, each pushed by a tiny host app."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
from textual.app import App, ComposeResult
from textual.screen import Screen
from textual.widgets import Button, Label

from gputop.actions import KillTarget, pid_max
from gputop.model import (
    DriverInfo,
    GpuMemory,
    GpuProcess,
    GpuSample,
    Pcie,
    ProcessInfo,
    Snapshot,
    Utilization,
)
from gputop.ui.app import help_legend
from gputop.ui.screens.detail import DetailScreen, HistoryPlot, downsample, runs
from gputop.ui.screens.help import HelpScreen
from gputop.ui.screens.kill import KillScreen
from tests.helpers.screen import widgets_text

GiB = 2**30
HIDDEN_PID = pid_max() - 1  # a pid not visible here: identity unknown


class Host(App[None]):
    """Pushes one screen and records what it was dismissed with."""

    def __init__(self, screen: Screen[Any]) -> None:
        super().__init__()
        self.screen_under_test = screen
        self.results: list[Any] = []

    def compose(self) -> ComposeResult:
        yield Label("host")

    def on_mount(self) -> None:
        self.push_screen(self.screen_under_test, self.results.append)


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=5)


def _target(
    proc: subprocess.Popen[bytes], *, shift: float = 0.0, command: str = "sleep 60"
) -> KillTarget:
    created = psutil.Process(proc.pid).create_time() + shift
    return KillTarget(proc.pid, created, "root", command, 2, 3 * GiB)


# --- kill dialog ----------------------------------------------------------------------------


async def test_sigterm_button_kills_the_child(child: subprocess.Popen[bytes]) -> None:
    app = Host(KillScreen([_target(child)]))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        assert isinstance(screen, KillScreen)
        assert screen.focused is not None and screen.focused.id == "sigterm"
        shown = widgets_text(app)
        assert str(child.pid) in shown and "sleep 60" in shown and "3.0GiB" in shown
        await pilot.press("enter")  # the focused button: SIGTERM
        await pilot.pause()
        assert child.wait(timeout=5) == -signal.SIGTERM
        assert f"SIGTERM sent to pid {child.pid}" in widgets_text(app)
        assert app.screen is screen  # the outcome stays until a key is pressed
        await pilot.press("space")
        await pilot.pause()
        assert app.screen is not screen
    assert app.results == [f"SIGTERM sent to pid {child.pid}"]


async def test_click_sigkill(child: subprocess.Popen[bytes]) -> None:
    app = Host(KillScreen([_target(child)]))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.click("#sigkill")
        await pilot.pause()
        assert child.wait(timeout=5) == -signal.SIGKILL
        await pilot.press("escape")
        await pilot.pause()
    assert app.results == [f"SIGKILL sent to pid {child.pid}"]


async def test_changed_create_time_is_refused(child: subprocess.Popen[bytes]) -> None:
    app = Host(KillScreen([_target(child, shift=-3.0)]))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.click("#sigkill")
        await pilot.pause()
        shown = widgets_text(app)
        assert f"pid {child.pid} is now a different process; not signalled" in shown
        assert "refused" in shown
        await pilot.press("enter")
        await pilot.pause()
    time.sleep(0.05)
    assert child.poll() is None
    assert app.results == [f"pid {child.pid} is now a different process; not signalled"]


async def test_permission_denied_is_reported(
    child: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    def deny(self: psutil.Process, sig: int) -> None:
        raise psutil.AccessDenied(self.pid)

    monkeypatch.setattr(psutil.Process, "send_signal", deny)
    monkeypatch.setattr(psutil.Process, "username", lambda self: "alice")
    app = Host(KillScreen([_target(child)]))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("enter")
        await pilot.pause()
        shown = widgets_text(app)
        assert f"permission denied: pid {child.pid} belongs to alice (you are" in shown
        await pilot.press("escape")
        await pilot.pause()
    assert child.poll() is None
    assert app.results[0].startswith("permission denied")


async def test_markup_in_the_command_is_shown_literally(child: subprocess.Popen[bytes]) -> None:
    app = Host(KillScreen([_target(child, command="evil [bold red]x[/] \x1b[31mred")]))
    async with app.run_test(size=(100, 30)) as pilot:
        shown = widgets_text(app)
        assert "[bold red]x[/]" in shown
        assert "\x1b" not in shown
        await pilot.press("escape")
        await pilot.pause()
    assert app.results == [None]
    assert child.poll() is None


async def test_cancel_and_several_targets(child: subprocess.Popen[bytes]) -> None:
    hidden = KillTarget(HIDDEN_PID, None, None, None, 7, None)
    app = Host(KillScreen([_target(child), hidden]))
    async with app.run_test(size=(80, 24)) as pilot:
        shown = widgets_text(app)
        assert "these 2 processes" in shown and "identity unknown" in shown
        await pilot.press("right", "right", "right")  # SIGTERM -> SIGINT -> SIGKILL -> Cancel
        assert app.screen.focused is not None and app.screen.focused.id == "cancel"
        await pilot.press("enter")
        await pilot.pause()
    assert app.results == [None]
    assert child.poll() is None


async def test_several_targets_outcomes(child: subprocess.Popen[bytes]) -> None:
    hidden = KillTarget(HIDDEN_PID, None, None, None, 7, None)
    app = Host(KillScreen([_target(child), hidden]))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("enter")
        await pilot.pause()
        assert child.wait(timeout=5) == -signal.SIGTERM
        shown = widgets_text(app)
        assert f"identity of pid {HIDDEN_PID} unknown" in shown
        await pilot.press("x")
        await pilot.pause()
    assert app.results == [
        f"SIGTERM: sent to 1 of 2; identity of pid {HIDDEN_PID} unknown "
        "(not visible in this PID namespace?); not signalled"
    ]


async def test_readonly_dialog(child: subprocess.Popen[bytes]) -> None:
    app = Host(KillScreen([_target(child)], readonly=True))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        assert "Signals are disabled (read-only mode)" in widgets_text(app)
        # no signal is drawn under "nothing will be signalled" (issue 32): only Cancel
        assert [b.id for b in screen.query(Button)] == ["cancel", "close"]  # close: after
        assert not screen.query("#sigterm, #sigint, #sigkill")
        assert screen.focused is not None and screen.focused.id == "cancel"
        await pilot.press("enter")  # Cancel
        await pilot.pause()
    assert app.results == [None]
    assert child.poll() is None


# --- help -----------------------------------------------------------------------------------


@pytest.mark.parametrize("close_key", ["escape", "question_mark", "q"])
async def test_help_lists_keys_and_closes(close_key: str) -> None:
    keys = [("q", "quit"), ("k", "send a signal to the selected process"), ("[b]x[/b]", "literal")]
    app = Host(HelpScreen(keys, help_legend()))
    async with app.run_test(size=(100, 30)) as pilot:
        shown = widgets_text(app)
        for key, what in keys:
            assert key in shown and what in shown
        for marker in ("MEM IDLE", "LOST", "not visible", "! LINK gen3x8<gen5x16"):
            assert marker in shown
        await pilot.press(close_key)
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)
    assert app.results == [None]


# --- detail ---------------------------------------------------------------------------------


def _gpu(index: int, t: int, *, lost: bool = False, gaps: bool = False) -> GpuSample:
    if lost:
        return GpuSample(index=index, lost=True, lost_reason="GPU is lost")
    missing = gaps and t % 3 == 0
    return GpuSample(
        index=index,
        name="NVIDIA H100 80GB HBM3 [red]x[/]",
        memory=GpuMemory(total=80 * GiB, used=(40 + t % 10) * GiB, free=(40 - t % 10) * GiB),
        utilization=Utilization(gpu=None if missing else float(50 + 5 * (t % 9)), memory=30.0),
        power_w=None if missing else 300.0 + t,
        power_limit_w=700.0,
        temperature_c=60.0,
        pcie=Pcie(
            gen=5,
            width=16,
            max_gen=5,
            max_width=16,
            link_max_bytes_per_s=63e9,
            tx_bytes_per_s=None if missing or t == 0 else 1e9 + t * 1e7,
            rx_bytes_per_s=None if missing or t == 0 else 2e10,
        ),
        processes=(
            GpuProcess(
                pid=100 + index,
                gpu_memory=10 * GiB,
                host=ProcessInfo(pid=100 + index, user="alice"),
            ),
        ),
    )


def _history(n: int, *, lost_from: int | None = None, gaps: bool = False) -> tuple[Snapshot, ...]:
    snaps = []
    for t in range(n):
        gpus = tuple(
            _gpu(i, t, lost=lost_from is not None and i == 1 and t >= lost_from, gaps=gaps)
            for i in range(2)
        )
        snaps.append(
            Snapshot(
                time=1_700_000_000.0 + t,
                hostname="node",
                driver=DriverInfo(True),
                gpus=gpus,
                source="demo",
            )
        )
    return tuple(snaps)


def test_runs_split_at_gaps() -> None:
    points = [(-3.0, 1.0), (-2.0, None), (-1.0, 2.0), (0.0, 3.0)]
    assert runs(points) == [([-3.0], [1.0]), ([-1.0, 0.0], [2.0, 3.0])]
    assert runs([(0.0, None)]) == []


def test_downsample_averages_buckets_and_keeps_gaps() -> None:
    points = [(float(-9 + k), None if k in (4, 5) else float(k)) for k in range(10)]
    assert downsample(points, 10.0, 20) == points  # short enough: unchanged
    # 10 s in 5 buckets of 2 s: (-9,-8) (-7,-6) (-5,-4) (-3,-2) (-1,0); k=4,5 unknown.
    assert downsample(points, 10.0, 5) == [
        (-9.0, 0.5),
        (-7.0, 2.5),
        (-5.0, None),
        (-3.0, 6.5),
        (-1.0, 8.5),
    ]


def test_screens_package_imports_plotext_only_for_the_detail_screen() -> None:
    code = (
        "import sys, gputop.ui.screens.kill, gputop.ui.screens.help; "
        "assert 'plotext' not in sys.modules; import gputop.ui.screens.detail; "
        "assert 'plotext' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


async def test_detail_renders_and_updates() -> None:
    screen = DetailScreen(0, _history(30))
    app = Host(screen)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        shown = widgets_text(app)
        assert "GPU 0" in shown and "[red]x[/]" in shown  # the name is not markup
        assert "util 60%" in shown and "mem 49.0GiB / 80.0GiB (61%)" in shown
        assert "power 329W / 700W" in shown
        plots = [p for p in screen.query(HistoryPlot) if p.display]
        assert len(plots) == 4  # no GPM, no NVLink: no activity or NVLink chart
        # Each chart really drew something: plotext output is not blank.
        for plot in plots:
            assert plot.render().plain.strip()
        screen.update_history(_history(60))
        await pilot.pause()
        assert "last 59 s, 60 samples" in widgets_text(app)
        assert "power 359W / 700W" in widgets_text(app)
        await pilot.press("q")
        await pilot.pause()
        assert app.screen is not screen
    assert app.results == [None]


async def test_detail_lost_gpu_and_gaps() -> None:
    screen = DetailScreen(1, _history(20, lost_from=15, gaps=True))
    app = Host(screen)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert "GPU 1 is LOST (GPU is lost)" in widgets_text(app)
        for plot in screen.query(HistoryPlot):
            if plot.display:  # no GPM, no NVLink: those two charts are hidden
                assert plot.render().plain.strip()
        screen.update_history(())
        await pilot.pause()
        assert "no samples yet" in widgets_text(app)
        screen.update_history(_history(1, gaps=True))  # one sample, all gaps
        await pilot.pause()
        for plot in screen.query(HistoryPlot):
            plot.render()
        await pilot.press("escape")
        await pilot.pause()
    assert app.results == [None]


async def test_detail_gpu_missing_from_latest_snapshot() -> None:
    screen = DetailScreen(5, _history(5))
    app = Host(screen)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert "GPU 5 is not in the latest snapshot" in widgets_text(app)


async def test_many_targets_fit_at_80x24(child: subprocess.Popen[bytes]) -> None:
    hidden = [KillTarget(HIDDEN_PID - k, None, None, None, k % 8, None) for k in range(1, 30)]
    app = Host(KillScreen([_target(child), *hidden]))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        for button in ("#sigterm", "#cancel"):
            region = screen.query_one(button).region
            assert region.area > 0 and region.bottom <= 24
        await pilot.press("enter")
        await pilot.pause()
        assert child.wait(timeout=5) == -signal.SIGTERM
        region = screen.query_one("#close").region
        assert region.area > 0 and region.bottom <= 24
        await pilot.press("escape")
        await pilot.pause()
    assert app.results[0].startswith("SIGTERM: sent to 1 of 30; identity of pid")
