"""Issue 32 §5: the dashboard's first frame is drawn from the GPUs and the host; the first
snapshot's processes (their rows, trees, owners and probes, the /dev/nvidia holders) are
read by the sampler's thread right after the first paint, into that same snapshot, and
the rows follow at once, not an interval later. Meanwhile the table says they are being
read: never "no processes", never a row whose owner, user or command reads as if read.
Every other consumer (--once, --json, --stream, export, record) takes whole snapshots."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gputop.model import PROCESSES_PENDING, Snapshot, processes_pending, replace
from gputop.pipeline import Feed, Frame
from gputop.sampler import Sampler
from gputop.sources.base import Deferring
from gputop.sources.demo import DemoSource
from gputop.sources.host import HostReader
from gputop.sources.live import LiveSource
from gputop.sources.nvml import NvmlReader
from gputop.ui.main_area import NoMatch, ProcessNotes
from gputop.views import process_view
from tests import builders as fx
from tests.fakenvml import FakeGpu, FakeNvml, FakeProcess, Scenario
from tests.helpers.counting import count_calls
from tests.helpers.first_frame import FirstFrameProbe
from tests.helpers.screen import terminal_words
from tests.tmux_pane import probe_in_pane
from tests.ui.test_faults_ui import no_holders, wait_for
from tests.ui.test_ui_app import table_pids

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _no_animations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")


def _two_gpus(pid: int) -> Scenario:
    return Scenario(gpus=[FakeGpu(processes=[FakeProcess(pid)]), FakeGpu()])


class ProcessesProbe(FirstFrameProbe):
    """Notes what the first drawn frame shows of the processes."""

    reads_at_first_frame: list[int] | None = None

    def noted(self, frame: Frame) -> dict[str, Any]:
        return {
            "pending": processes_pending(frame.snapshot),
            "pids": table_pids(self),
            # What the notes line and the no-match line above the table hold now.
            "notes": " ".join(
                t for line in self.query_one("#notes", ProcessNotes).notes for t, _ in line
            ),
            "no match": self.query_one("#no-match", NoMatch).display,
            "gpus": sorted(self.gpu_panel.blocks),
            "reads": None if self.reads_at_first_frame is None else self.reads_at_first_frame[0],
            "kill": self.kill_refused(),
        }


async def test_the_rows_follow_the_first_frame_at_once(
    fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch
) -> None:
    me = os.getpid()
    fake_nvml.write(_two_gpus(me))
    host = HostReader()
    reads = count_calls(monkeypatch, host, "read_processes")
    source = LiveSource(nvml=NvmlReader(), host=host, holders=no_holders, hostname="node-1")
    # An hour: a row that came with the sampler's next tick would not come in the test.
    sampler = Sampler(source, interval=3600.0)
    first = sampler.tick_now(processes=False)  # as the dashboard's start takes it (cli)
    assert processes_pending(first) and reads == [0]
    app = ProcessesProbe(sampler)
    app.reads_at_first_frame = reads
    try:
        async with app.run_test(size=(160, 40)) as pilot:
            await wait_for(pilot, lambda: app.at_first_frame is not None, what="a frame")
            at_first = app.at_first_frame
            assert at_first is not None
            # The GPUs are on the first frame; the processes are not read yet, and it says so.
            assert at_first["pending"] and at_first["reads"] == 0
            assert at_first["gpus"] == [0, 1] and at_first["pids"] == []
            assert at_first["notes"] == PROCESSES_PENDING.message
            assert not at_first["no match"]
            assert at_first["kill"] == PROCESSES_PENDING.message
            # Then the rows, from the same snapshot completed, with no tick of the sampler.
            await wait_for(pilot, lambda: table_pids(app) == [me], what="the process rows")
            await pilot.pause()
            assert sampler.ticks == 1 and reads == [1]
            assert app.snapshot is not None and app.snapshot.time == first.time
            assert not processes_pending(app.snapshot)
            assert [s.time for s in app.history] == [first.time]  # in the first one's place
            assert [s.time for s in sampler.history()] == [first.time]
            row = app.table.rows_by_key[f"0:{me}"]
            assert row.user and row.command  # read
            assert PROCESSES_PENDING.message not in terminal_words(app)
            assert app.judging is None and app.diagnosis() is not None  # judged
    finally:
        sampler.stop()


def test_the_completed_snapshot_is_the_plain_one(fake_nvml: FakeNvml) -> None:
    """The plain path (``snapshot()``) is the completion of the GPUs' and host's reading."""
    me = os.getpid()
    fake_nvml.write(_two_gpus(me))
    plain_source = LiveSource(nvml=NvmlReader(), holders=no_holders, hostname="node-1")
    split_source = LiveSource(nvml=NvmlReader(), holders=no_holders, hostname="node-1")
    try:
        plain = plain_source.snapshot()
        part = split_source.snapshot(processes=False)
        assert isinstance(split_source, Deferring)
        assert part.processes == () and part.errors[-1] == PROCESSES_PENDING
        assert [p.pid for p in part.gpus[0].processes] == [me]  # NVML's list: read
        assert part.gpus[0].processes[0].host is None
        whole = split_source.complete(part)
        assert split_source.complete(whole) is whole  # nothing left to read
        assert whole.time == part.time and whole.host is part.host

        def shape(s: Snapshot) -> object:
            rows = [(p.pid, p.host and (p.host.user, p.host.command)) for p in s.gpus[0].processes]
            procs = [(i.pid, i.user, i.command, i.ppid) for i in s.processes]
            return rows, procs, s.unlisted_holders, s.errors, s.gpus[1]

        assert shape(whole) == shape(plain)
        assert not processes_pending(whole) and not processes_pending(plain)
    finally:
        plain_source.close()
        split_source.close()


def test_the_sampler_completes_its_first_snapshot_when_started(fake_nvml: FakeNvml) -> None:
    fake_nvml.write(_two_gpus(os.getpid()))
    sampler = Sampler(LiveSource(nvml=NvmlReader(), holders=no_holders), interval=3600.0)
    handed: list[Snapshot] = []
    sampler.on_snapshot = handed.append
    try:
        first = sampler.tick_now(processes=False)
        assert processes_pending(first) and sampler.latest() is first
        sampler.start()
        deadline = time.monotonic() + 15
        while not handed:
            assert time.monotonic() < deadline, "the first snapshot was not completed"
            time.sleep(0.01)
        (whole,) = handed
        assert not processes_pending(whole) and whole.time == first.time
        assert sampler.history() == (whole,) and sampler.ticks == 1
    finally:
        sampler.stop()


def test_every_other_tick_is_whole(fake_nvml: FakeNvml) -> None:
    """--once, --json, --stream, export and record tick with ``tick_now()`` or the worker:
    never a snapshot whose processes are still to be read."""
    fake_nvml.write(_two_gpus(os.getpid()))
    sampler = Sampler(LiveSource(nvml=NvmlReader(), holders=no_holders), interval=3600.0)
    try:
        assert not processes_pending(sampler.tick_now())
        assert not processes_pending(sampler.tick_pair(0.0))
    finally:
        sampler.stop()
    demo = Sampler(DemoSource(0, clock=time.time))  # no deferring: whole at once
    assert not isinstance(demo.source, Deferring)
    assert not processes_pending(demo.tick_now(processes=False))


def test_a_pending_snapshot_shows_no_rows_and_says_why() -> None:
    snap = fx.demo_snapshots(1)[0]
    assert process_view.process_rows(snap) != []
    pending = replace(snap, errors=(*snap.errors, PROCESSES_PENDING))
    assert process_view.process_rows(pending) == []
    notes = process_view.process_notes(pending)
    assert notes == (((PROCESSES_PENDING.message, "dim"),),)  # for a moment: no "!"


def test_a_restated_snapshot_takes_the_place_of_the_one_before() -> None:
    one, two = fx.demo_snapshots(2)
    plain = Feed(history=10)
    plain.push(one)
    expected = plain.push(two)
    part = replace(two, processes=(), errors=(*two.errors, PROCESSES_PENDING))

    waiting = Feed(history=10)  # the dashboard's way: the part not judged, then the whole
    waiting.push(one)
    waiting.push(part, judge=False)
    got = waiting.push(two)
    assert got.history == (one, two)
    assert got.diagnosis is not None and expected.diagnosis is not None
    assert {i: v.kind for i, v in got.diagnosis.gpus.items()} == {
        i: v.kind for i, v in expected.diagnosis.gpus.items()
    }
    assert [j.id for j in got.diagnosis.jobs] == [j.id for j in expected.diagnosis.jobs]

    judged = Feed(history=10)  # the part judged already: the whole history judged afresh
    judged.push(one)
    judged.push(part)
    again = judged.push(two)
    assert again.history == (one, two)
    assert again.diagnosis is not None
    assert [j.id for j in again.diagnosis.jobs] == [j.id for j in expected.diagnosis.jobs]
    assert judged.kept == plain.kept


#: The real start (``gputop`` in a tmux pane on the fake NVML): a probe notes, at the first
#: painted frame, the table's rows, its notes and the host reads of processes so far; then
#: how long after it the rows came.
PROBE = """
import json, sys, time
import gputop.cli as cli
import gputop.sources.host as host
out = sys.argv[1]
reads = [0]
read = host.HostReader.read_processes
def counted(self, *a, **k):
    reads[0] += 1
    return read(self, *a, **k)
host.HostReader.read_processes = counted
real = cli._dashboard
noted = {}

def dashboard(*args, **kwargs):
    import gputop.ui.app as app
    apply = app.GpuTopApp.apply_frame

    def first(self, frame):
        drawn = apply(self, frame)
        rows = self.table.row_count
        if drawn and "first" not in noted:
            notes = [str(n) for n in self.query_one("#notes").notes]
            noted["first"] = {"rows": rows, "reads": reads[0], "notes": notes}
            noted["t"] = time.monotonic()
        elif drawn and rows and "rows after" not in noted:
            noted["rows after"] = time.monotonic() - noted["t"]
            noted["reads"] = reads[0]
            with open(out, "w") as f:
                json.dump(noted, f)
            self.exit()
        return drawn

    app.GpuTopApp.apply_frame = first
    return real(*args, **kwargs)

cli._dashboard = dashboard
sys.exit(cli.main(sys.argv[2:]))
"""


def test_the_real_start_paints_before_it_reads_the_processes(
    tmp_path: Path, fake_nvml_env: Callable[..., dict[str, str]]
) -> None:
    me = os.getpid()  # a live process of the host, on GPU 0
    env = {"PYTHONPATH": str(ROOT), "TERM": "xterm-256color", "TEXTUAL_ANIMATIONS": "none"}
    env.update(fake_nvml_env(_two_gpus(me)))
    out = tmp_path / "noted.json"
    noted = probe_in_pane(PROBE, out, ["--interval", "60"], env, ROOT, closer="}", what="rows")
    assert noted["first"]["rows"] == 0 and noted["first"]["reads"] == 0
    assert any(PROCESSES_PENDING.message in n for n in noted["first"]["notes"])
    assert noted["reads"] == 1  # the rows of the first snapshot, completed
    assert noted["rows after"] < 30  # not the interval's 60 s
