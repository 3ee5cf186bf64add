"""The dashboard under faults: the real GpuTopApp, driven by Textual's pilot, fed by a
real Sampler over LiveSource on the in-process fake NVML (or by snapshots where the row
is not about NVML). Every test asserts on what reaches the screen: the composited lines.

The faults are those docs/troubleshooting.md lists ("When things go wrong").
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len
from textual import events
from textual.pilot import Pilot

from gputop.analysis import window as analysis_window
from gputop.model import ProcessInfo, Snapshot, replace
from gputop.pipeline import Feed
from gputop.sampler import Sampler
from gputop.sources.live import LiveSource
from gputop.sources.nvml import NvmlReader
from gputop.ui.app import GpuTopApp
from gputop.views import process_view
from gputop.views.process_view import table_rows, visible_columns
from tests import builders as fx
from tests.fakenvml import FakeGpu, FakeNvml, FakeProcess, Scenario, many_gpus
from tests.helpers.counting import count_calls
from tests.helpers.screen import terminal_rows, terminal_strips, terminal_words
from tests.pids import free_pid
from tests.tmux_pane import TmuxPane

ROOT = Path(__file__).resolve().parents[2]
WIDE = (160, 40)
SMALL = (80, 24)


# --- what is on screen ------------------------------------------------------------------


def assert_layout_intact(app: GpuTopApp) -> None:
    """Every row fits the terminal and no escape character reaches it as text."""
    width, height = app.size
    strips = terminal_strips(app)
    if os.environ.get("GPUTOP_TEST_SHOW_SCREEN"):  # debugging aid: print what is checked
        print("\n".join(strip.text for strip in strips))
    assert len(strips) == height
    for strip in strips:
        assert strip.cell_length <= width, strip.text
        for seg in strip:
            assert "\x1b" not in seg.text and "\x9b" not in seg.text, repr(seg.text)
            assert "\x07" not in seg.text, repr(seg.text)


async def wait_for(
    pilot: Pilot[int], predicate: Callable[[], bool], timeout: float = 15.0, what: str = ""
) -> None:
    """Poll ``predicate`` until true. The timeout only catches a hang: generous, as a
    loaded 2-core machine can be many times slower than an idle one."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        await pilot.pause(0.02)


def no_holders(_minors: object, _listed: object) -> tuple[()]:
    return ()


@contextlib.asynccontextmanager
async def live_app(
    size: tuple[int, int] = WIDE, *, interval: float = 0.1, **app_kw: object
) -> AsyncIterator[tuple[GpuTopApp, Pilot[int], Sampler]]:
    """GpuTopApp + Sampler + LiveSource + NvmlReader on the fake (scenario already written)."""
    source = LiveSource(nvml=NvmlReader(), holders=no_holders, hostname="node-1")
    sampler = Sampler(source, interval=interval)
    app = GpuTopApp(sampler, **app_kw)  # type: ignore[arg-type]
    try:
        async with app.run_test(size=size) as pilot:
            await wait_for(pilot, lambda: app.frames >= 1, what="the first frame")
            yield app, pilot, sampler
    finally:
        sampler.stop()


def ticks_after(sampler: Sampler, n: int = 2) -> Callable[[], bool]:
    target = sampler.ticks + n
    return lambda: sampler.ticks >= target


def me() -> int:
    return os.getpid()


# --- no library / driver not loaded / version mismatch ------------------------------------


@pytest.mark.parametrize(
    ("init", "words"),
    [
        ("DRIVER_NOT_LOADED", "NVIDIA driver is not loaded"),
        ("LIB_RM_VERSION_MISMATCH", "driver/library version mismatch"),
    ],
)
async def test_driver_fault_shows_host_only_and_why(
    fake_nvml: FakeNvml, init: str, words: str
) -> None:
    fake_nvml.write(Scenario(init_result=init))
    async with live_app(SMALL) as (app, pilot, sampler):
        assert sampler.source.kind == "host-only"
        await wait_for(pilot, ticks_after(sampler, 1))
        await pilot.pause()
        text = terminal_words(app)
        assert "HOST-ONLY" in text
        assert words in text
        assert "Host metrics" in text and "CPU" in text
        assert not app.gpu_panel.blocks
        assert_layout_intact(app)


def test_no_library_json_fed_to_the_dashboard(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("FAKE_NVML_SCENARIO",)}
    env["LD_LIBRARY_PATH"] = str(tmp_path)  # nothing there: no libnvidia-ml.so.1
    out = subprocess.run(
        [sys.executable, "-m", "gputop", "--once", "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if out.returncode == 0:
        pytest.skip("a real NVIDIA library is installed on this machine")
    assert out.returncode == 3, out.stderr
    data = json.loads(out.stdout)
    snap = Snapshot.from_dict(data)
    assert not snap.driver.available and snap.driver.error

    async def run() -> str:
        app = GpuTopApp(snapshots=[snap])
        async with app.run_test(size=SMALL) as pilot:
            await pilot.pause()
            assert_layout_intact(app)
            return terminal_words(app)

    text = asyncio.run(run())
    assert "HOST-ONLY" in text
    assert "No GPU data" in text
    # the reason, in words (library not found), not a bare error code
    assert re.search(r"(?i)library|not found|not installed", text), text


# --- every optional metric NotSupported on every GPU -------------------------------------

# A value the screen made up where NVML gave nothing: 0 with a unit.
_INVENTED_ZERO = re.compile(r"(?<![\d.])0(\.0+)?(%|W\b|°C|B/s|MiB|B\b|KiB|MHz)")


def _bare_gpu(**kw: object) -> FakeGpu:
    """Identity only: every optional metric answers NOT_SUPPORTED."""
    fields: dict[str, object] = dict(
        memory_total=None,
        memory_used=None,
        memory_reserved=None,
        memory_free=None,
        util_gpu=None,
        util_mem=None,
        temperature=None,
        power_mw=None,
        power_limit_mw=None,
        fan=None,
        sm_clock=None,
        mem_clock=None,
        sm_clock_max=None,
        mem_clock_max=None,
        clock_event_reasons=None,
        pcie_gen=None,
        pcie_width=None,
        pcie_max_gen=None,
        pcie_max_width=None,
        pcie_tx_kbps=None,
        pcie_rx_kbps=None,
        encoder=None,
        decoder=None,
        mig_mode=None,
        ecc_uncorrected=None,
        ecc_uncorrected_aggregate=None,
    )
    fields.update(kw)
    return FakeGpu(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("size", [WIDE, SMALL], ids=["wide", "compact"])
async def test_every_metric_not_supported_shows_na_never_zero(
    fake_nvml: FakeNvml, size: tuple[int, int]
) -> None:
    not_supported = {"nvmlDeviceGetProcessUtilization": "NOT_SUPPORTED"}
    fake_nvml.write(
        Scenario(
            gpus=[
                _bare_gpu(processes=[FakeProcess(me(), used_memory=None)], errors=not_supported),
                _bare_gpu(errors=not_supported),
            ]
        )
    )
    async with live_app(size) as (app, pilot, sampler):
        await wait_for(pilot, ticks_after(sampler, 2))
        await pilot.pause()
        assert_layout_intact(app)
        assert sorted(app.gpu_panel.blocks) == [0, 1]
        for block in app.gpu_panel.blocks.values():
            text = block.text
            assert "n/a" in text
            assert not _INVENTED_ZERO.search(text), text
        wide = size == WIDE
        if wide:  # temperature, power, fan and PCIe rates are all on the second line
            second = app.gpu_panel.blocks[0].text.splitlines()[1]
            assert "n/a n/a/n/a" in second
            assert "fan n/a" in second
            assert "PCIe TX n/a RX n/a" in second
        # the process row: GPU memory and SM % unknown -> n/a, not 0
        cells = [c.plain.strip() for c in app.table.get_row(f"0:{me()}")]
        columns = [str(c.key.value) for c in app.table.ordered_columns]
        assert cells[columns.index("mem")] == "n/a"
        assert cells[columns.index("sm")] == "n/a"
        # and on the screen itself: no GPU line shows a made-up zero
        lines = terminal_rows(app)
        gpu_lines = [ln for ln in lines if "H100" in ln]
        assert len(gpu_lines) == 2
        for ln in gpu_lines:
            assert not _INVENTED_ZERO.search(ln), ln


# --- NoPermission on the process lists and process utilization ---------------------------


async def test_no_permission_on_processes_is_said_on_screen(fake_nvml: FakeNvml) -> None:
    denied: dict[str, int | str] = {
        "nvmlDeviceGetComputeRunningProcesses": "NO_PERMISSION",
        "nvmlDeviceGetGraphicsRunningProcesses": "NO_PERMISSION",
        "nvmlDeviceGetProcessUtilization": "NO_PERMISSION",
    }
    fake_nvml.write(
        Scenario(
            gpus=[FakeGpu(processes=[FakeProcess(me())]), FakeGpu()],
            errors=denied,
        )
    )
    async with live_app(SMALL) as (app, pilot, sampler):
        await wait_for(pilot, ticks_after(sampler, 2))
        await pilot.pause()
        assert_layout_intact(app)
        assert app.table.row_count == 0
        said = re.compile(r"(?i)process info not permitted")
        await wait_for(pilot, lambda: bool(said.search(terminal_words(app))), what="the note")
        assert "GPU 0,1:" in terminal_words(app)  # both GPUs named, one line


async def test_no_permission_on_process_utilization_only_gives_na(
    fake_nvml: FakeNvml,
) -> None:
    fake_nvml.write(
        Scenario(
            gpus=[FakeGpu(processes=[FakeProcess(me())])],
            errors={"nvmlDeviceGetProcessUtilization": "NO_PERMISSION"},
        )
    )
    async with live_app(WIDE) as (app, pilot, sampler):
        await wait_for(pilot, ticks_after(sampler, 2))
        await pilot.pause()
        assert_layout_intact(app)
        columns = [str(c.key.value) for c in app.table.ordered_columns]
        cells = [c.plain.strip() for c in app.table.get_row(f"0:{me()}")]
        assert cells[columns.index("sm")] == "n/a"
        said = re.compile(r"(?i)per-process GPU utilization not permitted")
        await wait_for(pilot, lambda: bool(said.search(terminal_words(app))), what="the note")


# --- one GPU of four lost mid-run, then back ----------------------------------------------


def _four(util0: int, lost: bool) -> Scenario:
    gpus = [FakeGpu(util_gpu=util0 if i == 0 else 10 * i) for i in range(4)]
    if lost:
        gpus[2].errors = {"*": "GPU_IS_LOST"}
    return Scenario(gpus=gpus)


def _gpu_line(app: GpuTopApp, index: int) -> str:
    """The screen row of GPU ``index`` ("" while not on screen, e.g. still mounting)."""
    for line in terminal_rows(app):
        if re.match(rf"^ ?{index} \S", line):
            return line
    return ""


async def test_one_gpu_lost_mid_run_shows_lost_then_comes_back(fake_nvml: FakeNvml) -> None:
    fake_nvml.write(_four(util0=11, lost=False))
    async with live_app(SMALL) as (app, pilot, _sampler):
        await wait_for(pilot, lambda: "11%" in _gpu_line(app, 0), what="GPU 0 at 11%")
        assert "LOST" not in terminal_words(app)

        fake_nvml.write(_four(util0=77, lost=True))
        await wait_for(pilot, lambda: "LOST" in _gpu_line(app, 2), what="GPU 2 LOST")
        await wait_for(pilot, lambda: "77%" in _gpu_line(app, 0), what="GPU 0 at 77%")
        assert_layout_intact(app)
        for i in (0, 1, 3):  # the others keep their values and are not marked
            line = _gpu_line(app, i)
            assert "LOST" not in line and "45°C" in line
        lost = _gpu_line(app, 2)
        assert "n/a" not in lost.split("LOST")[0]  # no invented numbers on a lost GPU
        assert not re.search(r"\d+%", lost), lost
        # still updating while one is lost
        fake_nvml.write(_four(util0=33, lost=True))
        await wait_for(pilot, lambda: "33%" in _gpu_line(app, 0), what="GPU 0 at 33%")
        assert "LOST" in _gpu_line(app, 2)

        fake_nvml.write(_four(util0=44, lost=False))
        await wait_for(pilot, lambda: "20%" in _gpu_line(app, 2), what="GPU 2 back")
        assert "LOST" not in _gpu_line(app, 2)
        await wait_for(pilot, lambda: "44%" in _gpu_line(app, 0), what="GPU 0 at 44%")
        assert sorted(app.gpu_panel.blocks) == [0, 1, 2, 3]
        assert_layout_intact(app)


# --- invisible pids, pid 0 and 4294967295 --------------------------------------------------


def _free_pid() -> int:
    """A pid that does not exist here (a process of another PID namespace), below pid_max
    (above it, it could not be a real process: gputop drops it)."""
    return free_pid()


async def test_invisible_pids_are_shown_as_such_and_invalid_pids_left_out(
    fake_nvml: FakeNvml,
) -> None:
    hidden = _free_pid()
    fake_nvml.write(
        Scenario(
            gpus=[
                FakeGpu(
                    processes=[
                        FakeProcess(hidden, used_memory=3 * 2**30),
                        FakeProcess(0),
                        FakeProcess(4294967295),
                    ]
                ),
                FakeGpu(processes=[FakeProcess(me())]),
            ]
        )
    )
    async with live_app(WIDE) as (app, pilot, _sampler):
        await wait_for(pilot, lambda: app.table.row_count == 2, what="two rows")
        assert_layout_intact(app)
        keys = sorted(app.table.rows_by_key)
        assert keys == sorted([f"0:{hidden}", f"1:{me()}"])  # 0 and 4294967295 dropped
        lines = terminal_rows(app)
        row = next(ln for ln in lines if f" {hidden} " in ln)
        assert "not visible" in row
        assert "3.0GiB" in row  # what NVML does know is still shown
        assert not any(re.search(r"\s4294967295\s", ln) for ln in lines)
        # the driver bug is said in words
        await wait_for(
            pilot, lambda: "cannot be a real process" in terminal_words(app), what="the note"
        )
        # k on the invisible row: refused with a notice, no kill dialog
        assert app.table.cursor_key == f"0:{hidden}"
        await pilot.press("k")
        await pilot.pause()
        assert app.screen is app.screen_stack[0]
        await wait_for(pilot, lambda: "not visible" in terminal_words(app).split("Enter Detail")[0])
        assert any("cannot be signalled" in n.message for n in app._notifications)


# --- hostile text -------------------------------------------------------------------------

HOSTILE_ARGV0 = "[red]x[/]"
HOSTILE_ARGS = [
    "[link=http://x]y[/link]",
    "[bold]B",
    "\x1b[31mANSI\x1b[0m",
    "\x1b]8;;http://evil\x07osc\x1b]8;;\x07",
    "\x1b]0;title\x07T",
    "\x9b31mC1",
    "שלום\u202eRTL",
    "漢字🚀",
]
HOSTILE_GPU_NAME = b"[red]Evil[/] \x1b]0;pwn\x07\xff\xfe GPU [link=http://x]L"


@contextlib.contextmanager
def hostile_child() -> Iterator[subprocess.Popen[bytes]]:
    args: list[str | bytes] = [
        HOSTILE_ARGV0,
        "-c",
        "import time; time.sleep(60)",
        *HOSTILE_ARGS,
        b"\xff\xfe-not-utf8",
        "A" * 100_000,
    ]
    child = subprocess.Popen(args, executable=sys.executable, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while b"not-utf8" not in Path(f"/proc/{child.pid}/cmdline").read_bytes():
            assert time.monotonic() < deadline, "the child did not start"
            time.sleep(0.01)
        yield child
    finally:
        child.kill()
        child.wait(10)


def _assert_no_injected_style(app: GpuTopApp) -> None:
    """Markup never interpreted: segments carrying the literal tags have no link/blink."""
    for strip in terminal_strips(app):
        for seg in strip:
            if "[" in seg.text and seg.style is not None:
                assert not seg.style.link and not seg.style.blink, (seg.text, seg.style)


@pytest.mark.parametrize("size", [(200, 40), SMALL], ids=["wide", "compact"])
async def test_hostile_command_and_gpu_name_render_literally(
    fake_nvml: FakeNvml, size: tuple[int, int]
) -> None:
    with hostile_child() as child:
        fake_nvml.write(
            Scenario(gpus=[FakeGpu(name=HOSTILE_GPU_NAME, processes=[FakeProcess(child.pid)])])
        )
        async with live_app(size) as (app, pilot, _sampler):
            key = f"0:{child.pid}"
            await wait_for(
                pilot,
                lambda: (
                    key in app.table.rows_by_key
                    and app.table.rows_by_key[key].command.startswith(HOSTILE_ARGV0)
                ),
                what="the hostile row",
            )
            await pilot.pause()
            assert_layout_intact(app)
            _assert_no_injected_style(app)
            row = app.table.rows_by_key[key]
            command = row.command
            for literal in ("[red]x[/]", "[link=http://x]y[/link]", "[bold]B", "ANSI", "漢字🚀"):
                assert literal in command
            assert "\u202e" not in command and "\x9b" not in command
            # the non-UTF-8 bytes are replaced, never passed on as lone surrogates
            assert re.search(r"[?\ufffd]+-not-utf8", command), command[:300]
            assert not any(0xD800 <= ord(c) <= 0xDFFF for c in command)
            assert len(command) <= 2048  # the 100 kB argument is cut
            text = "\n".join(terminal_rows(app))
            assert "[red]x[/]" in text  # on screen, literally
            gpu = _gpu_line(app, 0) if size == SMALL else text
            assert "[red]Evil[/]" in gpu
            if size != SMALL:
                assert "[link=http://x]y[/link]" in text and "[bold]B" in text


async def test_hostile_user_names_keep_the_columns_aligned() -> None:
    names = ["[i]eve[/]", "漢字漢字漢字漢字", "🚀🚀🚀🚀🚀🚀", "שלום\u202eעולם", "\x1b[31mred"]
    procs = [
        fx.full_gpu_process(2000 + i, user=name, command=f"{name} train.py 漢字 🚀 שלום")
        for i, name in enumerate(names)
    ]
    snap = fx.full_snapshot([fx.full_gpu_sample(0, processes=procs, name="漢字 GPU 🚀 [b]x[/b]")])
    for size in ((200, 40), SMALL, (60, 20)):
        app = GpuTopApp(snapshots=[snap])
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            assert_layout_intact(app)
            _assert_no_injected_style(app)
            lines = terminal_rows(app)
            rows = [ln for ln in lines if re.match(r"\s*0\s+20\d\d\s", ln)]
            assert len(rows) == len(names), lines
            # the column after USER starts at the same cell on every row
            starts = set()
            for ln in rows:
                m = re.search(r"(\d+(\.\d)?GiB|\d+MiB)", ln)
                assert m is not None, ln
                starts.add(cell_len(ln[: m.start()]))
            assert len(starts) == 1, rows
            assert "[i]eve[" in "\n".join(lines)
            gpu_line = next(ln for ln in lines if "GPU 🚀" in ln)
            if size[0] >= 100:  # the name takes its 22 cells, as an ASCII name does
                assert cell_len(gpu_line[: gpu_line.index(" MEM ")]) == 3 + 22
                assert "…" not in gpu_line  # and nothing after it is cut


# --- scale ----------------------------------------------------------------------------------


def live_snapshots(scenario: Scenario, fake: FakeNvml, n: int = 2) -> list[Snapshot]:
    """``n`` snapshots taken by the real LiveSource on the fake (then fed to the app)."""
    fake.write(scenario)
    source = LiveSource(nvml=NvmlReader(), holders=no_holders, hostname="node-1")
    try:
        return [source.snapshot() for _ in range(n)]
    finally:
        source.close()


def _sort_label(app: GpuTopApp) -> str:
    """The label of the column the table is sorted by, as the table shows it."""
    for col in app.table.ordered_columns:
        label = col.label.plain
        if "▲" in label or "▼" in label:
            return str(col.key.value)
    return ""


def _table_order(app: GpuTopApp) -> list[str]:
    return [str(r.key.value) for r in app.table.ordered_rows]


async def press_sort_keys(app: GpuTopApp, pilot: Pilot[int], n: int) -> None:
    """Press ``s`` (sort by the next column) ``n`` times; after each, wait until the table
    shows its rows in the new order (and, when that column is on screen, the sort arrow
    on it). The deadline only catches a key that is lost or hangs: the times are in
    ``bench/bench_ui_scale.py``."""
    assert app.snapshot is not None
    shown = {c.key for c in visible_columns(app.compact)}
    expected = {
        k: [r.key for r in table_rows(process_view.process_rows(app.snapshot), sort_key=k)]
        for k in process_view.SORT_KEYS
    }

    def reflected() -> bool:
        key = app.sort_key
        if _table_order(app) != expected[key]:
            return False
        return _sort_label(app) == (key if key in shown else "")

    for _ in range(n):
        before = app.sort_key
        # The key enters as the terminal driver sends it (pilot.press would then also wait
        # for the whole process to go idle, the sampler thread included).
        key = events.Key("s", "s")
        key.set_sender(app)
        assert app._driver is not None
        app._driver.send_message(key)
        await wait_for(
            pilot, lambda b=before: app.sort_key != b and reflected(), 30, "the sort key"
        )
        await pilot._wait_for_screen()  # and the widgets have processed the repaint


@pytest.mark.parametrize(
    ("gpus", "procs", "size"),
    [(16, 64, (200, 50)), (8, 8, SMALL)],
    ids=["16x64-200x50", "8x8-80x24"],
)
async def test_many_gpus_render_and_a_sort_key_redraws_only(
    fake_nvml: FakeNvml,
    monkeypatch: pytest.MonkeyPatch,
    gpus: int,
    procs: int,
    size: tuple[int, int],
) -> None:
    """Work counted, not timed: a sort key redraws the table once, from the snapshot and
    verdicts already there (no re-diagnosis, no snapshot applied again)."""
    snaps = live_snapshots(many_gpus(gpus, procs), fake_nvml)
    assert sum(len(g.processes) for g in snaps[-1].gpus) == gpus * procs
    app = GpuTopApp(snapshots=snaps)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        assert_layout_intact(app)
        assert len(app.gpu_panel.blocks) == gpus
        assert app.table.row_count == gpus * procs
        lines = terminal_rows(app)
        assert any(re.match(r"^ ?0 H100", ln) for ln in lines)  # the first GPU is on screen
        frames, diagnoses = app.frames, len(app.verdict_seconds)
        builds = count_calls(monkeypatch, analysis_window, "build_jobs_reusing")
        shows = count_calls(monkeypatch, app.table, "show")
        await press_sort_keys(app, pilot, 8)
        assert shows[0] == 8  # one table rebuild per key
        assert builds[0] == 0 and len(app.verdict_seconds) == diagnoses
        assert app.frames == frames
        assert_layout_intact(app)


class _CountingProcesses(tuple[ProcessInfo, ...]):
    """A snapshot's host processes, counting the items read from them."""

    reads = 0

    def __iter__(self) -> Iterator[ProcessInfo]:
        for item in super().__iter__():
            _CountingProcesses.reads += 1
            yield item

    def __getitem__(self, index: Any) -> Any:
        _CountingProcesses.reads += 1
        return super().__getitem__(index)


async def test_two_thousand_host_processes_are_read_a_bounded_number_of_times(
    fake_nvml: FakeNvml,
) -> None:
    """Work counted, not timed: a frame with 2,000 host processes beside the 64 GPU ones
    reads each host process a few times (the pid index, the jobs), never once per row.
    The GPU processes carry no host record of their own (as in a snapshot read back
    from JSON): each row looks its pid up among the host processes."""
    live = live_snapshots(many_gpus(8, 8), fake_nvml, n=1)[0]
    infos = {p.pid: p.host for g in live.gpus for p in g.processes if p.host is not None}
    base = replace(
        live,
        gpus=tuple(
            replace(g, processes=tuple(replace(p, host=None) for p in g.processes))
            for g in live.gpus
        ),
        processes=tuple({**{p.pid: p for p in live.processes}, **infos}.values()),
    )
    workers = tuple(
        ProcessInfo(pid=100_000 + i, ppid=10_000 + i % 64, user="w", command=f"worker {i}")
        for i in range(2000)
    )
    app = GpuTopApp(snapshots=[base])
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        reads = []
        for i in range(3):
            many = replace(
                base,
                time=base.time + i + 1,
                processes=_CountingProcesses(workers + base.processes),  # GPU pids last
            )
            _CountingProcesses.reads = 0
            assert app.apply_snapshot(many, (many,))
            reads.append(_CountingProcesses.reads)
        await pilot.pause()
        n = len(base.processes) + len(workers)
        print(f"\nhost processes read per frame: {reads} ({n} processes)")
        assert app.table.row_count == 64  # only GPU processes are listed
        assert all(r.command for r in app.table.rows_by_key.values())  # each row found
        # once per row (64 x 2,064) would be ~132,000
        assert all(0 < r <= 8 * n for r in reads), (reads, n)
        assert_layout_intact(app)


async def test_16x64_with_a_full_verdict_window_judges_the_new_snapshot_only(
    fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Work counted, not timed: with a full verdict window at 16x64, each new snapshot is
    grouped into jobs once (the analysis keeps the window's work between frames)."""
    from gputop.analysis.thresholds import DEFAULT

    _first, second = live_snapshots(many_gpus(16, 64), fake_nvml)
    n = int(DEFAULT.window_seconds) + 2  # one snapshot a second, the default interval
    history = [replace(second, time=second.time + i) for i in range(n)]
    app = GpuTopApp(snapshots=history)
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        builds = count_calls(monkeypatch, analysis_window, "build_jobs_reusing")
        for i in range(3):
            # New process rows, as a live source gives when any process changed (an
            # unchanged snapshot takes the jobs of the one before over: no grouping).
            nxt = replace(
                second, time=history[-1].time + 1, processes=tuple(list(second.processes))
            )
            history = [*history[1:], nxt]
            assert app.apply_snapshot(nxt, history)
            assert builds[0] == i + 1
        await pilot.pause()
        assert app.table.row_count == 16 * 64
        assert_layout_intact(app)


# --- resize storms ------------------------------------------------------------------------


async def test_a_resize_storm_keeps_the_layout_intact(fake_nvml: FakeNvml) -> None:
    from textual.events import Resize
    from textual.geometry import Size

    fake_nvml.write(many_gpus(4, 4))
    sizes = [(40, 12), (200, 60), (80, 24), (120, 40), (55, 14), (49, 13), (160, 30)]
    async with live_app((100, 30), interval=0.5) as (app, pilot, sampler):
        for i in range(21):  # paced: each resize handled before the next (~0.1 s each)
            await pilot.resize_terminal(*sizes[i % len(sizes)])
        driver = app._driver
        for i in range(50):  # rapid: fifty resizes queued at once
            w, h = sizes[(i * 3) % len(sizes)]
            if driver is not None:
                driver._size = Size(w, h)
            app.post_message(Resize(Size(w, h), Size(w, h)))
        await pilot.resize_terminal(120, 40)
        await wait_for(pilot, ticks_after(sampler, 2))
        await pilot.pause()
        assert app.size == Size(120, 40)
        assert not app.too_small and not app.compact
        assert_layout_intact(app)
        lines = terminal_rows(app)
        assert lines[0].startswith("gputop node-1")
        assert sorted(app.gpu_panel.blocks) == [0, 1, 2, 3]
        assert sum(1 for ln in lines if re.match(r"^ ?\d H100", ln)) == 4
        assert app.table.row_count == 16
        header = next(ln for ln in lines if "COMMAND" in ln)
        assert "READ/s" in header  # the wide table's columns
        await pilot.resize_terminal(40, 12)
        assert app.too_small
        assert "terminal too small" in terminal_words(app)
        assert_layout_intact(app)
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert not app.too_small and app.compact
        assert "terminal too small" not in terminal_words(app)
        assert_layout_intact(app)


# --- slow NVML ------------------------------------------------------------------------------


async def test_slow_nvml_keeps_keys_responsive_and_says_stale(fake_nvml: FakeNvml) -> None:
    """Keys are handled while a tick hangs in NVML: deterministic, not timed. The slow
    tick is held (after its 2 s NVML calls) until the keys were handled, and the keys
    must be handled while it is still held: a UI that waited for the tick would never
    see them (the deadline catches it)."""
    fast = Scenario(gpus=[FakeGpu(), FakeGpu()])
    slow = Scenario(
        gpus=[
            FakeGpu(sleeps_ms={"nvmlDeviceGetUtilizationRates": 2000}),
            FakeGpu(sleeps_ms={"nvmlDeviceGetUtilizationRates": 2000}),
        ]
    )
    fake_nvml.write(fast)
    async with live_app(SMALL, interval=0.2) as (app, pilot, sampler):
        source = sampler.source
        real = source.snapshot
        release = threading.Event()

        def held() -> Snapshot:
            try:
                return real()
            finally:
                release.wait(120)

        source.snapshot = held  # type: ignore[method-assign]
        try:
            fake_nvml.write(slow)  # the next tick hangs 2 s in NVML on each GPU, then held
            await wait_for(pilot, lambda: sampler.stale, what="a stuck tick")
            stuck = sampler.ticks
            await press_sort_keys(app, pilot, 4)
            assert sampler.ticks == stuck and sampler.stale  # all while the tick hung
            await wait_for(pilot, lambda: "STALE" in terminal_rows(app)[0], what="STALE shown")
            assert_layout_intact(app)
        finally:
            source.snapshot = real  # type: ignore[method-assign]
            fake_nvml.write(fast)
            release.set()
        await wait_for(
            pilot, lambda: "STALE" not in terminal_rows(app)[0], timeout=30, what="STALE gone"
        )


# --- --readonly -------------------------------------------------------------------------------


async def test_readonly_k_says_signals_are_disabled_and_signals_nothing(
    fake_nvml: FakeNvml,
) -> None:
    from gputop.ui.screens.kill import KillScreen

    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], stdin=subprocess.DEVNULL
    )
    try:
        fake_nvml.write(Scenario(gpus=[FakeGpu(processes=[FakeProcess(child.pid)])]))
        async with live_app(WIDE, readonly=True) as (app, pilot, _sampler):
            key = f"0:{child.pid}"
            await wait_for(
                pilot,
                lambda: (
                    key in app.table.rows_by_key
                    and app.table.rows_by_key[key].create_time is not None
                ),
                what="the child's row",
            )
            assert app.table.cursor_key == key
            await pilot.press("k")
            await pilot.pause()
            assert isinstance(app.screen, KillScreen)
            text = terminal_words(app)
            assert "Signals are disabled" in text and "nothing will be signalled" in text
            await pilot.press("enter")
            await pilot.pause()
            await pilot.press("k", "right", "enter", "left", "left", "enter", "escape")
            await pilot.pause()
            assert app.screen is app.screen_stack[0]
        time.sleep(0.1)
        assert child.poll() is None, "the child was signalled in read-only mode"
    finally:
        child.kill()
        child.wait(10)


# --- clean exit -----------------------------------------------------------------------------


async def test_q_returns_and_nvml_is_shut_down(
    fake_nvml: FakeNvml, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "nvml.log"
    monkeypatch.setenv("FAKE_NVML_LOG", str(log))
    fake_nvml.write(Scenario(gpus=[FakeGpu(), FakeGpu()]))
    async with live_app(SMALL) as (app, pilot, sampler):
        await pilot.press("q")
        await pilot.pause()
        # live_app then stops the sampler, as the CLI does once run_app returns
    assert app.return_code == 0 and not app.is_running
    assert not sampler.running
    pid = os.getpid()
    assert log.read_text().splitlines() == [f"nvmlInit 0 {pid}", f"nvmlShutdown 0 {pid}"]


@pytest.mark.parametrize("path", ["message", "direct", "stale-timer"])
@pytest.mark.parametrize("moment", ["shutdown-begins", "widgets-gone", "exit-called"])
async def test_nothing_is_applied_once_shutdown_begins(moment: str, path: str) -> None:
    """Deterministic: a snapshot (or the stale check) arrives at an exact moment of the
    teardown, by each path that applies one: the sampler's message handler, a direct
    ``apply_snapshot`` call, and the once-a-second stale timer.

    ``run_test`` ends the app with ``_shutdown()`` and no ``exit()``, and the app's message
    loop keeps running while the screens are removed: the sampler's thread still posts
    then. Such a snapshot used to be drawn into widgets being removed (NoMatches
    '#header', exit status 1: about 1 run in 4 under load)."""
    from gputop.ui.app import FrameArrived

    first = fx.multi_gpu_snapshot(2)
    second = fx.multi_gpu_snapshot(2, time=first.time + 1)
    app = GpuTopApp(snapshots=[first])
    fed: list[str] = []

    def feed() -> None:
        fed.append(moment)
        if path == "message":  # what the sampler's FrameArrived runs
            app.on_frame_arrived(FrameArrived(Feed().frame((first, second))))
        elif path == "direct":
            assert app.apply_snapshot(second, (first, second)) is False
        else:
            app.stale = True  # the sampler is not stale: the check would redraw the header
            app._check_stale()

    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause()
        assert app.snapshot is first and app.frames == 1
        if moment == "exit-called":
            app.exit()
            feed()
        else:
            real_prune = app._prune  # Textual removes each screen with it on shutdown

            async def prune(*nodes: Any, parent: Any = None) -> None:
                # Fed at the shutdown's first prune only (Textual may prune more than one
                # node set). A prune while the app runs is not the moment: the footer,
                # mounted after the first frame, recomposes (prunes its keys) when its
                # bindings settle, which may come after the pause above.
                teardown = not app.is_running
                if moment == "shutdown-begins" and teardown and not fed:
                    feed()  # the widgets are still there
                await real_prune(*nodes, parent=parent)
                if moment == "widgets-gone" and teardown and not fed:
                    feed()  # the screen's widgets are removed, the stack not yet empty

            app._prune = prune  # type: ignore[method-assign]
    assert fed == [moment]  # the moment came
    assert app.return_code in (0, None)
    assert app.snapshot is first and app.frames == 1  # nothing taken, nothing drawn
    if path == "stale-timer":
        assert app.stale  # the check did not run


def test_snapshots_arriving_during_shutdown_are_dropped(fake_nvml: FakeNvml) -> None:
    """A snapshot handled while the app tears down must not touch removed widgets (it
    raised NoMatches / ScreenStackError and made the exit status 1 in about half the runs).
    Each run in a fresh event loop, as a real start of gputop."""
    fake_nvml.write(Scenario(gpus=[FakeGpu(), FakeGpu()]))

    async def one() -> int | None:
        sampler = Sampler(
            LiveSource(nvml=NvmlReader(), holders=no_holders, hostname="node-1"), interval=0.01
        )
        app = GpuTopApp(sampler)
        try:
            with pytest.raises(RuntimeError, match="stop here"):
                async with app.run_test(size=SMALL) as pilot:
                    await wait_for(pilot, lambda: app.frames >= 3)
                    raise RuntimeError("stop here")  # the app is torn down mid-stream
        finally:
            sampler.stop()
        return app.return_code

    codes = [asyncio.run(one()) for _ in range(6)]
    assert all(code in (0, None) for code in codes), codes


def _wait_path(path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.read_text().strip():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.05)


@pytest.mark.requires_tool("tmux")
@pytest.mark.parametrize(
    "how",
    [
        "ctrl-c",
        "sighup",
    ],
)
def test_gputop_in_tmux_exits_cleanly_and_shuts_nvml_down(
    fake_nvml_env: Callable[..., dict[str, str]], tmp_path: Path, how: str
) -> None:
    import shlex

    env = fake_nvml_env(Scenario(gpus=[FakeGpu(), FakeGpu()]))
    log = tmp_path / "nvml.log"
    q = shlex.quote
    script = tmp_path / "run.sh"
    script.write_text(
        "\n".join(
            [
                f"export LD_LIBRARY_PATH={q(env['LD_LIBRARY_PATH'])}",
                f"export FAKE_NVML_SCENARIO={q(env['FAKE_NVML_SCENARIO'])}",
                f"export FAKE_NVML_LOG={q(str(log))}",
                "export TEXTUAL_ANIMATIONS=none",
                f"cd {q(str(ROOT))}",
                f"stty -g > {q(str(tmp_path / 'before'))}",
                f"{q(sys.executable)} -m gputop --interval 0.5",
                f"echo $? > {q(str(tmp_path / 'rc'))}",
                f"stty -g > {q(str(tmp_path / 'after'))}",
                "sleep 30",
                "",
            ]
        )
    )
    tmux = TmuxPane(f"sh {q(str(script))}", width=100, height=30)
    try:
        tmux.wait_for(lambda shown: "H100" in shown, "gputop to start", timeout=30, poll=0.1)
        assert tmux.flag("alternate_on") == "1"
        init = [ln for ln in log.read_text().splitlines() if ln.startswith("nvmlInit 0 ")]
        assert len(init) == 1
        pid = int(init[0].split()[2])
        if how == "ctrl-c":
            tmux.keys("C-c")
        else:
            os.kill(pid, signal.SIGHUP)
        _wait_path(tmp_path / "rc", 20)
        rc = int((tmp_path / "rc").read_text())
        _wait_path(tmp_path / "after", 5)
        screen = tmux.screen()
        assert rc in ((0, 130) if how == "ctrl-c" else (0, 129, 128 + signal.SIGHUP)), screen
        # the terminal is restored: same tty modes, main screen, cursor shown, no mouse mode
        assert (tmp_path / "before").read_text() == (tmp_path / "after").read_text()
        assert tmux.flag("alternate_on") == "0"
        assert tmux.flag("cursor_flag") == "1"
        assert tmux.flag("mouse_any_flag") == "0"
        assert "Traceback" not in screen, screen
    finally:
        tmux.close()
    assert f"nvmlShutdown 0 {pid}" in log.read_text().splitlines()
