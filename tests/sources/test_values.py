"""Values that cannot be true are not shown as true (issue 9, part 4): garbage from the
driver, a pid that exited against one in another PID namespace, the holder scan of a
non-root user, and 2 MB command lines. Against the real gputop (a subprocess with the
fake libnvidia-ml) where the output is what users read, in-process for the rest.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gputop.model import GPU_METRICS
from gputop.sources import procfs
from gputop.sources.host import HostReader
from tests.fakenvml import FakeGpu, FakeNvml, FakeProcess, GiB, Scenario
from tests.helpers.pidns import in_driver_pid_namespace
from tests.lifecycle_harness import ROOT

MakeEnv = Callable[..., dict[str, str]]


def run(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputop", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )


GARBAGE = FakeGpu(
    util_gpu=255,
    util_mem=4294967295,
    fan=4294967295,
    temperature=0xFFFFFFFF,
    memory_total=80 * GiB,
    memory_used=400 * GiB,  # used > total: 500 %
    memory_reserved=0,
    memory_free=0,
    power_mw=0xFFFFFFFF,
)


def test_impossible_values_are_na_with_an_error_each(fake_nvml_env: MakeEnv) -> None:
    env = fake_nvml_env(Scenario(gpus=[GARBAGE, FakeGpu()]))
    r = run("--json", env=env)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    bad, good = data["gpus"]
    assert bad["utilization"] == {"gpu": None, "memory": None}
    assert bad["fan_percent"] is None and bad["temperature_c"] is None
    assert bad["power_w"] is None
    assert bad["memory"]["used"] is None and bad["memory"]["free"] is None
    assert bad["memory"]["total"] == 80 * GiB  # the total is plausible: kept
    said = {e["metric"]: e for e in data["errors"] if e["gpu"] == 0}
    for metric in (
        "utilization.gpu",
        "utilization.memory",
        "fan_percent",
        "temperature_c",
        "power_w",
        "memory.used",
    ):
        assert metric in said, metric
        assert said[metric]["message"].endswith("shown as n/a")
    assert "utilization.gpu = 255, outside 0-100 %" in said["utilization.gpu"]["message"]
    # The other GPU's plausible values pass untouched.
    assert good["utilization"]["gpu"] == 50 and good["temperature_c"] == 45
    assert not [e for e in data["errors"] if e["gpu"] == 1]

    text = run("--once", env=env)
    assert text.returncode == 0
    shown = text.stdout
    assert "255%" not in shown and "4294967295" not in shown.split("Errors while sampling")[0]
    assert "-1°C" not in shown and "500%" not in shown
    assert "Errors while sampling" in shown and "shown as n/a" in shown


def test_the_bounds_are_in_the_docs() -> None:
    doc = (ROOT / "docs" / "metrics.md").read_text()
    for m in GPU_METRICS:
        if m.bounds is not None:
            low, high = m.bounds
            assert f"| `{m.field}` |" in doc and f"| {low:g}-{high:g} |" in doc, m.field
    assert "at most the total" in doc


# --- exited, or in another PID namespace ---------------------------------------------------


def _exited_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(10)
    return child.pid


def test_real_gputop_says_exited_in_the_drivers_namespace(fake_nvml_env: MakeEnv) -> None:
    """A pid NVML lists that has exited: "exited" when gputop shares the driver's PID
    namespace (detected), "not visible" only when it does not."""
    pid = _exited_pid()
    env = fake_nvml_env(Scenario(gpus=[FakeGpu(processes=[FakeProcess(pid, GiB)])]))
    env.pop("GPUTOP_PID_NAMESPACE", None)  # detected, as for users
    r = run("--json", env=env)
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(r.stdout)["gpus"][0]["processes"]
    text = run("--once", env=env).stdout
    if in_driver_pid_namespace():
        assert row["visible"] is True and row["status"] == "dead"
        assert "not visible" not in text and "exited" in text
    else:  # pragma: no cover - a CI container without --pid=host
        assert row["visible"] is False
        assert "not visible (another PID namespace)" in text


@pytest.mark.parametrize("shared", [True, False])
def test_a_missing_pid_reads_exited_only_in_the_drivers_namespace(shared: bool) -> None:
    pid = _exited_pid()
    reader = HostReader(shared_pid_namespace=shared)
    (row,) = [r for r in reader.read_processes([pid]) if r.pid == pid]
    if shared:
        assert row.visible and row.status == "dead"
    else:
        assert not row.visible and row.status is None
    # No process can have pid 0 or one above pid_max: never "exited".
    assert not reader.read_processes([0])[0].visible
    assert not reader.read_processes([1 << 23])[0].visible


def test_namespace_detection_and_its_override(monkeypatch: pytest.MonkeyPatch) -> None:
    from gputop.sources.host import INIT_PID_NS_INODE, shares_driver_pid_namespace

    assert INIT_PID_NS_INODE == 0xEFFFFFFC
    monkeypatch.delenv("GPUTOP_PID_NAMESPACE")
    assert shares_driver_pid_namespace() is in_driver_pid_namespace()
    assert shares_driver_pid_namespace("/nonexistent") is None
    monkeypatch.setenv("GPUTOP_PID_NAMESPACE", "host")
    assert shares_driver_pid_namespace() is True
    monkeypatch.setenv("GPUTOP_PID_NAMESPACE", "other")
    assert shares_driver_pid_namespace() is False


# --- holders of other users ------------------------------------------------------------


def test_a_non_root_holder_scan_says_others_are_not_visible(fake_nvml: FakeNvml) -> None:
    from gputop.present import render_json
    from gputop.sources.live import LiveSource
    from gputop.textout import render_text
    from gputop.views import process_view
    from tests.builders import diagnose

    fake_nvml.write(Scenario(gpus=[FakeGpu()]))
    source = LiveSource()
    try:
        source.sees_all_holders = False  # as for a user who is not root
        snap = source.snapshot()
    finally:
        source.close()
    note = "holders of other users not visible (run as root to see them)"
    assert [e.message for e in snap.errors if e.metric == "unlisted_holders"] == [note]
    assert note in json.dumps(json.loads(render_json(snap, diagnose((snap,)))))
    assert note in " ".join(render_text(snap).split())
    notes = " ".join(text for parts in process_view.process_notes(snap) for text, _ in parts)
    assert note in notes  # the dashboard's line above the process table


# --- huge command lines ------------------------------------------------------------------


def test_a_2mb_command_line_is_kept_as_what_is_shown(tmp_path: Path) -> None:
    arg = "x" * 120_000  # one argument may not exceed 128 KiB
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()", *([arg] * 15)],
        stdin=subprocess.PIPE,
    )
    try:
        cmdline = Path(f"/proc/{child.pid}/cmdline")
        deadline = time.monotonic() + 10
        while not cmdline.read_bytes():  # empty until the exec has completed
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert len(cmdline.read_bytes()) > 1_800_000
        raw = procfs.read_cmdline(child.pid)
        assert len(raw) <= procfs.CMDLINE_READ_LIMIT + 1 and raw.endswith(b"\x00")
        assert procfs.split_cmdline(raw)[:2] == [sys.executable, "-c"]
        (row,) = [r for r in HostReader().read_processes([child.pid]) if r.pid == child.pid]
        assert row.command is not None and row.command.startswith(sys.executable + " -c ")
        assert len(row.command) <= 4096
    finally:
        child.kill()
        child.wait(10)


def test_an_unchanged_process_row_is_the_same_object_tick_after_tick(fake_nvml: FakeNvml) -> None:
    """The live source reuses last tick's joined row when neither NVML's row nor the host's
    changed (the history shares it); a change makes a new row with the new values."""
    from gputop.sources.live import LiveSource

    pid = next(p for p in range(30_000, 300, -7) if not Path(f"/proc/{p}").exists())
    fake_nvml.write(Scenario(gpus=[FakeGpu(processes=[FakeProcess(pid, GiB)])]))
    source = LiveSource()
    try:
        first = source.snapshot().gpus[0].processes
        second = source.snapshot().gpus[0].processes
        assert len(first) == 1 and second[0] is first[0]
        fake_nvml.write(Scenario(gpus=[FakeGpu(processes=[FakeProcess(pid, 2 * GiB)])]))
        third = source.snapshot().gpus[0].processes
        assert third[0] is not first[0] and third[0].gpu_memory == 2 * GiB
        assert third[0].host == first[0].host
    finally:
        source.close()


def test_an_unchanged_gpu_and_process_list_are_the_same_objects_tick_after_tick(
    fake_nvml: FakeNvml,
) -> None:
    """With nothing changed, the live source gives last tick's joined GPU sample and its
    process tuple again (600 snapshots of history hold one copy); a pid NVML keeps
    listing after it exited keeps one "dead" row, and a change still shows at once."""
    from gputop.sources.live import LiveSource

    pid = next(p for p in range(30_000, 300, -7) if not Path(f"/proc/{p}").exists())
    fake_nvml.write(Scenario(gpus=[FakeGpu(processes=[FakeProcess(pid, GiB)])]))
    source = LiveSource()
    try:
        first = source.snapshot()
        second = source.snapshot()
        assert second.gpus[0] is first.gpus[0]
        assert second.processes is first.processes and len(first.processes) == 1
        fake_nvml.write(Scenario(gpus=[FakeGpu(util_gpu=77, processes=[FakeProcess(pid, GiB)])]))
        third = source.snapshot()
        assert third.gpus[0] is not first.gpus[0] and third.gpus[0].utilization.gpu == 77.0
        assert third.gpus[0].processes is first.gpus[0].processes
        assert third.processes is first.processes
    finally:
        source.close()
