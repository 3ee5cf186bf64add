"""The process screen (``e``, issue 32 §3): the selected process's whole command line,
who runs and owns it, and its GPU memory and SM % history; Enter opens its GPU."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

from gputop.model import Snapshot
from gputop.sampler import Sampler
from gputop.sources.live import LiveSource
from gputop.sources.nvml import NvmlReader
from gputop.ui.app import GpuTopApp
from gputop.ui.screens.detail import DetailScreen, HistoryPlot
from gputop.ui.screens.process import ProcessScreen
from gputop.views.parts import plain
from gputop.views.process_view import NO_ENVIRONMENT, environment_parts, process_timeline
from tests import builders as fx
from tests.fakenvml import FakeGpu, FakeNvml, FakeProcess, Scenario

GiB = 1024**3
#: Far longer than the COMMAND column at 100 columns: its end must still show.
LONG = "python train.py " + " ".join(f"--option-{n}=value-{n}" for n in range(30)) + " --the-end"

ENV = (("CUDA_VISIBLE_DEVICES", "1"), ("LOCAL_RANK", "0"))


def history(n: int = 6) -> list[Snapshot]:
    """Two GPUs; pid 4242 on GPU 1 grows its memory; the last snapshot without it."""
    snaps = []
    for i in range(n):
        t = fx.FULL_T0 + i
        info = replace(fx.full_process_info(4242, command=LONG), environment=ENV)
        procs = [fx.full_gpu_process(4242, memory=(i + 1) * GiB, sm=10.0 * i, info=info)]
        gpus = [
            fx.full_gpu_sample(0, processes=[fx.full_gpu_process(7)]),
            fx.full_gpu_sample(1, processes=procs),
        ]
        snaps.append(fx.full_snapshot(gpus, time=t))
    return snaps


async def test_e_opens_the_process_with_its_whole_command_and_enter_its_gpu() -> None:
    snaps = history()
    app = GpuTopApp(snapshots=snaps)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        table = app.table
        keys = [r.key.value for r in table.ordered_rows]
        table.move_cursor(row=keys.index("1:4242"))
        await pilot.press("e")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ProcessScreen)
        facts = str(screen.query_one("#process-facts").render())
        assert LONG.replace(" ", "") in facts.replace(" ", "").replace("\n", "")
        assert "4242" in facts and "alice" in facts and "GPU 1" in facts
        assert "CUDA_VISIBLE_DEVICES=1 LOCAL_RANK=0" in facts  # read by the host source
        mem = screen.query_one("#plot-proc-mem", HistoryPlot)
        assert mem._last_draw is not None
        points = mem._last_draw[1][0].points
        assert [y for _, y in points] == [(i + 1) * GiB for i in range(6)]
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen) and app.screen.gpu_index == 1
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ProcessScreen)


async def test_the_process_screen_says_when_the_process_ended() -> None:
    snaps = history()
    app = GpuTopApp(snapshots=snaps)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        keys = [r.key.value for r in app.table.ordered_rows]
        app.table.move_cursor(row=keys.index("1:4242"))
        await pilot.press("e")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ProcessScreen)
        t = snaps[-1].time + 1
        gone = replace(snaps[-1], time=t, gpus=(snaps[-1].gpus[0], fx.full_gpu_sample(1)))
        app.apply_snapshot(gone, [*snaps, gone])
        await pilot.pause()
        assert screen.ended
        assert "ended" in str(screen.query_one("#process-facts").render())
        assert LONG in screen.row.command  # the last row it had stays readable


def test_a_reused_pid_is_not_the_same_process_in_the_history() -> None:
    snaps = history(3)
    born = snaps[0].gpus[1].processes[0].host
    assert born is not None and born.create_time is not None
    points = process_timeline(snaps, 1, 4242, born.create_time + 99)
    assert [(m, s) for _, m, s in points] == [(None, None)] * 3
    points = process_timeline(snaps, 1, 4242, born.create_time)
    assert [m for _, m, _ in points] == [GiB, 2 * GiB, 3 * GiB]


def test_the_environment_line_says_unread_and_none_set_apart() -> None:
    assert NO_ENVIRONMENT in plain(environment_parts(None))  # closed to gputop: n/a
    assert "none of CUDA_VISIBLE_DEVICES" in plain(environment_parts(()))
    hostile = (("CUDA_VISIBLE_DEVICES", "\x1b[31m0\x07"),)  # from a remote stream
    assert "\x1b" not in plain(environment_parts(hostile))


async def test_a_real_process_on_the_fake_driver_shows_its_environment(
    fake_nvml: FakeNvml,
) -> None:
    """The whole path: a real process, listed by the fake libnvidia-ml, read by the host
    source (its /proc environ), shown by `e`."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", *LONG.split()[2:12]],
        env={"PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": "3", "API_TOKEN": "no"},
    )
    try:
        fake_nvml.write(Scenario(gpus=[FakeGpu(processes=[FakeProcess(child.pid)])]))
        source = LiveSource(nvml=NvmlReader(), holders=lambda *_: (), hostname="node-1")
        sampler = Sampler(source, interval=0.1)
        app = GpuTopApp(sampler)
        try:
            async with app.run_test(size=(100, 30)) as pilot:
                for _ in range(200):
                    await pilot.pause(0.05)
                    if app.table.row_count:
                        break
                assert app.table.cursor_proc is not None
                assert app.table.cursor_proc.pid == child.pid
                await pilot.press("e")
                await pilot.pause()
                assert isinstance(app.screen, ProcessScreen)
                facts = str(app.screen.query_one("#process-facts").render())
                flat = facts.replace("\n", " ")
                assert "environment CUDA_VISIBLE_DEVICES=3" in flat, facts
                assert "API_TOKEN" not in flat and "--option-9=value-9" in flat
        finally:
            sampler.stop()
    finally:
        child.kill()
        child.wait()
