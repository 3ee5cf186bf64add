"""The fault matrix: the real gputop against every failure a GPU server can throw at it.

``python -m gputop --once [--json]`` runs in a subprocess against the fake
``libnvidia-ml.so.1`` (tests/fakenvml), and ``Sampler`` + ``LiveSource`` run in-process on
the same fake. Each fault expects: no crash, no invented value (None / null / "n/a",
never 0), and a clear word in the output. docs/troubleshooting.md ("When things go
wrong") lists the same rows.

Timing: every wait polls with a deadline; bounds are generous (a loaded 2-core machine).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from gputop import actions
from gputop.argtypes import EXIT_NO_DRIVER
from gputop.cells import is_wide
from gputop.fmt import clean_text
from gputop.model import (
    DriverInfo,
    GpuProcess,
    GpuSample,
    HostSample,
    ProcessInfo,
    SampleError,
    Snapshot,
)
from gputop.sampler import Sampler
from gputop.sources.host import HostReader
from gputop.sources.live import LiveSource
from gputop.textout import render_text
from tests import fakenvml
from tests.builders import kill_target
from tests.conftest import missing
from tests.fakenvml import FakeGpu, FakeNvml, FakeProcess, FakeSample, GiB, Scenario
from tests.helpers import spawn
from tests.pids import free_pid, free_pids

ROOT = Path(__file__).resolve().parents[2]
MakeEnv = Callable[..., dict[str, str]]

# C0/C1 control characters (ESC included) and the bidi controls clean_text removes.
BAD_CHARS = re.compile(
    "[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c\u2028\u2029]"
)


# ---------------------------------------------------------------------------- helpers


def run_gputop(*argv: str, env: dict[str, str], timeout: float = 60) -> tuple[int, str, str]:
    """``python -m gputop ARGV``; stdout and stderr must be valid UTF-8."""
    full = dict(env)
    full["PYTHONPATH"] = str(ROOT)
    r = subprocess.run(
        [sys.executable, "-m", "gputop", *argv],
        capture_output=True,
        cwd=ROOT,
        env=full,
        timeout=timeout,
    )
    return r.returncode, r.stdout.decode("utf-8"), r.stderr.decode("utf-8")


def cells(line: str) -> int:
    return sum(2 if is_wide(c) else 1 for c in line)


def assert_clean_text_output(out: str) -> None:
    """Within 80 columns (wide characters count 2), no ESC, control or bidi character."""
    for line in out.split("\n"):
        assert cells(line) <= 80, f"{cells(line)} cells: {line!r}"
        assert not BAD_CHARS.search(line), f"control character in {line!r}"


def strings(obj: Any) -> Iterator[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from strings(v)


def parse_clean_json(out: str) -> dict[str, Any]:
    """Valid JSON, no raw control character in the document nor in any decoded string."""
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f]", out)
    data: dict[str, Any] = json.loads(out)
    for s in strings(data):
        assert not BAD_CHARS.search(s), f"control character in {s[:200]!r}"
    return data


def both(env: dict[str, str]) -> tuple[tuple[int, str, str], tuple[int, str, str]]:
    """The text and the JSON run of one scenario."""
    return run_gputop("--once", env=env), run_gputop("--once", "--json", env=env)


def free_high_pid() -> int:
    """A pid that no process of this namespace has (tests/pids.py)."""
    return free_pid()


def wait_for(what: str, check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def bare_gpu(**changes: Any) -> FakeGpu:
    """A GPU that supports nothing optional (consumer card, vGPU guest)."""
    keep = {"name", "uuid", "bus_id", "minor", "processes", "samples", "errors", "sleeps_ms"}
    gpu = FakeGpu()
    for f in dataclasses.fields(FakeGpu):
        if f.name not in keep:
            setattr(gpu, f.name, None)
    gpu.errors = {"nvmlDeviceGetProcessUtilization": "NOT_SUPPORTED"}
    for k, v in changes.items():
        setattr(gpu, k, v)
    return gpu


@pytest.fixture
def sleeper() -> Iterator[spawn.Child]:
    with spawn.running("sleep") as child:
        yield child


# ------------------------------------------------------------------------------- no driver


@pytest.mark.parametrize("case", ["no library", "driver not loaded", "version mismatch"])
def test_no_driver_once_exits_3_with_host_and_reason(
    case: str, fake_nvml_env: MakeEnv, tmp_path: Path
) -> None:
    if case == "no library":
        env = {k: v for k, v in os.environ.items() if k != fakenvml.SCENARIO_ENV}
        env["LD_LIBRARY_PATH"] = str(tmp_path)  # an empty directory: no libnvidia-ml.so.1
        words = "libnvidia-ml.so.1 not found"
    elif case == "driver not loaded":
        env = fake_nvml_env(Scenario())
        del env[fakenvml.SCENARIO_ENV]  # the library is there, the driver is not
        words = "driver is not loaded"
    else:
        env = fake_nvml_env(Scenario(init_result="LIB_RM_VERSION_MISMATCH"))
        words = "version mismatch"
    (rc_t, text, err_t), (rc_j, out, err_j) = both(env)
    data = parse_clean_json(out)
    if case == "no library" and data["driver"]["available"]:
        pytest.skip("this machine has a real libnvidia-ml.so.1")
    assert rc_t == rc_j == EXIT_NO_DRIVER
    for err in (err_t, err_j):
        assert err.startswith("gputop: NVIDIA driver not available: ")
        assert words in err and err.count("\n") == 1  # one line
    # JSON: no GPU, the reason, and the host part all the same.
    assert data["driver"]["available"] is False and words in data["driver"]["error"]
    assert data["source"] == "host-only" and data["gpus"] == []
    assert data["host"]["memory"]["total"] > 0 and data["host"]["cpu_count"] >= 1
    # Text: the reason and the host part, nothing about GPUs invented.
    assert_clean_text_output(text)
    assert "NVIDIA driver not available" in text and "host only" in text
    assert "Host  CPU" in text and "RAM" in text
    assert "Processes:" not in text


# ------------------------------------------------------------------------------- NotSupported


def test_unsupported_metrics_read_null_and_are_no_error(fake_nvml_env: MakeEnv) -> None:
    me = os.getpid()
    consumer = bare_gpu(name="GeForce RTX 4090", processes=[FakeProcess(me, None)])
    vgpu = bare_gpu(name="GRID A100-4C", processes=[FakeProcess(me, GiB)])
    vgpu.errors = {
        "nvmlDeviceGetComputeRunningProcesses": "NOT_SUPPORTED",
        "nvmlDeviceGetGraphicsRunningProcesses": "NOT_SUPPORTED",
        "nvmlDeviceGetProcessUtilization": "NOT_SUPPORTED",
    }
    (rc_t, text, _), (rc_j, out, _) = both(fake_nvml_env(Scenario(gpus=[consumer, vgpu])))
    assert rc_t == rc_j == 0
    data = parse_clean_json(out)
    assert data["errors"] == []  # "not supported" is not an error: no spam
    for g in data["gpus"]:
        assert g["lost"] is False and g["name"]
        for key in (
            "encoder_percent",
            "decoder_percent",
            "temperature_c",
            "power_w",
            "power_limit_w",
            "fan_percent",
            "clock_event_reasons",
            "performance_state",
            "mig_mode",
            "ecc_uncorrected",
        ):
            assert g[key] is None, key
        for group in ("memory", "utilization", "clocks", "pcie"):
            assert all(v is None for v in g[group].values()), (group, g[group])
    c, v = data["gpus"]
    (p,) = c["processes"]
    assert p["pid"] == me and p["visible"] is True
    assert p["gpu_memory"] is None and p["sm_percent"] is None
    assert p["memory_bandwidth_percent"] is None
    assert c["processes_unavailable"] is None
    # vGPU: the process lists themselves are not supported: unknown, not "none".
    assert v["processes"] == []
    assert v["processes_unavailable"] == (
        "compute list: not supported; graphics list: not supported"
    )
    assert_clean_text_output(text)
    lines = text.splitlines()
    row0 = next(line for line in lines if line.startswith("  0  GeForce RTX 4090 "))
    assert row0[28:].split() == ["n/a", "n/a", "n/a/n/a", "n/a", "n/a/n/a"]
    assert "PCIe n/a (max n/a)  RX n/a  TX n/a" in text
    assert "SM clock n/a of n/a  Fan n/a  Perf n/a  Clock events: n/a" in text
    mine = next(line for line in lines if re.match(rf"\s+0\s+{me}\s", line))
    assert mine.split()[3:5] == ["n/a", "n/a"]  # GPU memory, SM %
    assert "Errors while sampling" not in text
    assert " 0%" not in text.split("Processes:")[0]  # no invented zero in the GPU part


# ------------------------------------------------------------------------------- NoPermission


def test_no_permission_on_processes_is_an_error_and_the_rest_still_reads(
    fake_nvml_env: MakeEnv,
) -> None:
    me = os.getpid()
    denied_lists = FakeGpu(processes=[FakeProcess(me)])
    denied_lists.errors = {
        "nvmlDeviceGetComputeRunningProcesses": "NO_PERMISSION",
        "nvmlDeviceGetGraphicsRunningProcesses": "NO_PERMISSION",
    }
    denied_util = FakeGpu(processes=[FakeProcess(me)], samples=[FakeSample(me, sm=70)])
    denied_util.errors = {"nvmlDeviceGetProcessUtilization": "NO_PERMISSION"}
    env = fake_nvml_env(Scenario(gpus=[denied_lists, denied_util]))
    (rc_t, text, _), (rc_j, out, _) = both(env)
    assert rc_t == rc_j == 0
    data = parse_clean_json(out)
    g0, g1 = data["gpus"]
    assert g0["processes"] == []
    assert (
        g0["processes_unavailable"] == "compute list: no permission; graphics list: no permission"
    )
    assert g0["utilization"]["gpu"] == 50  # the rest of the GPU still reads
    (p,) = g1["processes"]
    assert p["pid"] == me and p["sm_percent"] is None and p["memory_bandwidth_percent"] is None
    assert p["gpu_memory"] == GiB and p["visible"] is True
    by_metric = {(e["gpu"], e["metric"]): e["message"] for e in data["errors"]}
    assert "no permission to list compute processes" in by_metric[(0, "compute_processes")]
    assert "no permission to list graphics processes" in by_metric[(0, "graphics_processes")]
    assert "no permission to read per-process utilization" in by_metric[(1, "process_utilization")]
    assert len(data["errors"]) == 3  # one each, no more
    assert_clean_text_output(text)
    assert "Errors while sampling" in text
    flat = " ".join(text.split())
    assert "no permission to list compute processes" in flat
    assert "no permission to read per-process utilization" in flat
    mine = next(line for line in text.splitlines() if re.match(rf"\s+1\s+{me}\s", line))
    assert mine.split()[3:5] == ["1.0GiB", "n/a"]


# ------------------------------------------------------------------------------- lost GPU


def _four(phase: int, lost: str | None) -> Scenario:
    gpus = [
        FakeGpu(util_gpu=10 * phase + i, temperature=40 + phase, processes=[FakeProcess(100 + i)])
        for i in range(4)
    ]
    if lost:
        gpus[2].errors = {"*": lost}
    return Scenario(gpus=gpus)


def test_a_gpu_lost_mid_run_reads_lost_then_comes_back(fake_nvml: FakeNvml) -> None:
    """A running sampler (its own thread) while the scenario changes under it."""
    fake_nvml.write(_four(1, None))
    sampler = Sampler(LiveSource(), interval=0.05, history=100)
    sampler.start()
    try:
        phases = [(2, None), (3, "GPU_IS_LOST"), (4, "UNKNOWN"), (5, "RESET_REQUIRED"), (6, None)]
        seen: list[Snapshot] = []
        for phase, lost in [(1, None), *phases]:
            fake_nvml.write(_four(phase, lost))

            def arrived(phase: int = phase) -> bool:
                snap = sampler.latest()
                if snap is None or len(snap.gpus) != 4:
                    return False
                others = [snap.gpus[i].utilization.gpu for i in (0, 1, 3)]
                return others == [10.0 * phase + i for i in (0, 1, 3)]

            wait_for(f"phase {phase}", arrived)
            snap = sampler.latest()
            assert snap is not None
            seen.append(snap)
            g2 = snap.gpus[2]
            if lost:
                assert g2.lost is True and g2.lost_reason
                word = {"GPU_IS_LOST": "GpuIsLost", "UNKNOWN": "Unknown"}.get(lost, "ResetRequired")
                assert word in g2.lost_reason
                assert g2.uuid == "GPU-fa4e0000-0000-4000-8000-000000000002"
                assert g2.utilization.gpu is None and g2.temperature_c is None
                assert g2.memory.used is None and g2.processes == ()
                assert any(e.gpu == 2 and e.metric == "lost" for e in snap.errors)
                text = render_text(snap)
                assert "  2  NVIDIA H100 80GB HBM3" in text and "LOST:" in text
                assert "GPU lost: processes unknown" in text
            else:
                assert g2.lost is False and g2.utilization.gpu == 10.0 * phase + 2
                assert [p.pid for p in g2.processes] == [102]
            for i in (0, 1, 3):
                g = snap.gpus[i]
                assert g.lost is False and g.temperature_c == 40.0 + phase
                assert [p.pid for p in g.processes] == [100 + i]
        assert sampler.last_error is None
        # The three healthy GPUs changed value on every phase, the lost one recovered.
        series = [[s.gpus[i].utilization.gpu for s in seen] for i in (0, 1, 3)]
        assert all(len(set(values)) == len(values) for values in series)
        assert [s.gpus[2].lost for s in seen] == [False, False, True, True, True, False]
    finally:
        sampler.stop()


# ------------------------------------------------------------------------------- odd pids


class SpyHost(HostReader):
    """A HostReader that records every pid it is asked about."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[int] = []

    def read_processes(self, pids: Any, *, ancestors: bool = False) -> tuple[ProcessInfo, ...]:
        pids = list(pids)
        self.asked.extend(pids)
        return super().read_processes(pids, ancestors=ancestors)


INVALID = (0, 2**32 - 1)


def test_pids_of_another_namespace_are_not_visible_and_invalid_pids_left_out(
    fake_nvml_env: MakeEnv, fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch
) -> None:
    ghost = free_high_pid()
    gpu = FakeGpu(processes=[FakeProcess(ghost, 3 * GiB), *(FakeProcess(p) for p in INVALID)])
    scenario = Scenario(gpus=[gpu])
    (rc_t, text, _), (rc_j, out, _) = both(fake_nvml_env(scenario))
    assert rc_t == rc_j == 0
    data = parse_clean_json(out)
    (row,) = data["gpus"][0]["processes"]
    assert row["pid"] == ghost and row["visible"] is False and row["gpu_memory"] == 3 * GiB
    for key in ("user", "command", "name", "cpu_percent", "rss", "create_time", "status"):
        assert row[key] is None, key
    hosts = [p for p in data["processes"] if p["pid"] == ghost]
    assert [(h["visible"], h["user"], h["command"]) for h in hosts] == [(False, None, None)]
    (err,) = data["errors"]
    assert err["gpu"] == 0 and "2 process entries that cannot be a real process" in err["message"]
    assert_clean_text_output(text)
    assert "not visible (another PID namespace)" in text
    assert "cannot be a real process" in " ".join(text.split())
    # In-process: the invalid pids are never looked up on the host.
    fake_nvml.write(scenario)
    looked_up: list[int] = []
    real_init = psutil.Process.__init__

    def spy_init(self: psutil.Process, pid: int | None = None) -> None:
        looked_up.append(-1 if pid is None else pid)
        real_init(self, pid)

    monkeypatch.setattr(psutil.Process, "__init__", spy_init)
    host = SpyHost()
    source = LiveSource(host=host)
    try:
        for _ in range(2):
            snap = source.snapshot()
            assert [p.pid for p in snap.gpus[0].processes] == [ghost]
    finally:
        source.close()
    assert host.asked == [ghost, ghost]
    assert not set(INVALID) & set(looked_up)
    # A kill of the invisible pid is refused: its identity is unknown.
    target = kill_target(snap, ghost)
    outcome = actions.send_signal(target, signal.SIGTERM)
    assert not outcome.ok and "not signalled" in outcome.message


# ------------------------------------------------------------------------------- exit races


def _kill_during_process_utilization(
    monkeypatch: pytest.MonkeyPatch, child: spawn.Child, reap: bool
) -> list[str]:
    """Make the process vanish after NVML listed it, before the host looks it up:
    ``nvmlDeviceGetProcessUtilization`` is called between the two."""
    import pynvml

    real = pynvml.nvmlDeviceGetProcessUtilization
    events: list[str] = []

    def kill_then_call(handle: Any, since: int) -> Any:
        if not events:
            if reap:
                child.kill()  # killed and reaped: gone
            else:
                os.kill(child.pid, signal.SIGKILL)  # not reaped: a zombie
                wait_for(
                    "zombie",
                    lambda: psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE,
                )
            events.append("killed")
        return real(handle, since)

    monkeypatch.setattr(pynvml, "nvmlDeviceGetProcessUtilization", kill_then_call)
    return events


@pytest.mark.parametrize("reap", [True, False], ids=["exited", "zombie"])
def test_a_process_exiting_mid_tick_keeps_its_row_and_cannot_be_signalled(
    fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch, reap: bool
) -> None:
    with spawn.running("sleep") as child:
        me = os.getpid()
        fake_nvml.write(
            Scenario(gpus=[FakeGpu(processes=[FakeProcess(child.pid), FakeProcess(me)])])
        )
        source = LiveSource()
        try:
            first = source.snapshot()
            row = first.gpus[0].processes[0]
            assert row.pid == child.pid and row.host is not None and row.host.visible
            assert row.host.command is not None and "host_child.py sleep" in row.host.command
            target = kill_target(first, child.pid)
            events = _kill_during_process_utilization(monkeypatch, child, reap)
            snap = source.snapshot()  # the tick completes
            assert events == ["killed"]
            procs = {p.pid: p for p in snap.gpus[0].processes}
            assert set(procs) == {child.pid, me}  # the row is kept
            info = procs[child.pid].host
            assert info is not None and info.visible is True  # it was here: not "invisible"
            assert procs[child.pid].gpu_memory == GiB
            if reap:
                assert info.status == "dead"
                assert info.command is None and info.cpu_percent is None and info.rss is None
            else:
                assert info.status == "zombie"
                assert info.command is None  # a zombie's command line is gone: n/a
                assert info.ppid == os.getpid()
            mine = procs[me].host
            assert mine is not None and mine.visible and mine.command  # others unaffected
            text = render_text(snap)
            assert_clean_text_output(text)
            assert "not visible" not in text
            # Signalling the vanished process is refused, never sent to a stranger.
            outcome = actions.send_signal(target, signal.SIGTERM)
            assert not outcome.ok and "already gone" in outcome.message
        finally:
            source.close()


# --------------------------------------------------------------------------------- kill guards


def test_create_time_one_clock_tick_apart_is_another_process(sleeper: spawn.Child) -> None:
    """The identity check must tell apart processes started one clock tick apart."""
    real = psutil.Process(sleeper.pid).create_time()
    tick = 1.0 / os.sysconf("SC_CLK_TCK")
    for shown in (real - tick, real + tick):
        target = actions.KillTarget(sleeper.pid, shown, None, "sleep", 0, None)
        outcome = actions.send_signal(target, signal.SIGKILL)
        assert outcome == actions.KillOutcome(
            sleeper.pid, False, f"pid {sleeper.pid} is now a different process; not signalled"
        )
    assert sleeper.proc.poll() is None


def _spawn_with_pid(pid: int, attempts: int = 200) -> subprocess.Popen[bytes] | None:
    """A new `sleep` that gets ``pid`` (root: /proc/sys/kernel/ns_last_pid), or None."""
    for _ in range(attempts):
        try:
            with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                f.write(str(pid - 1))
        except OSError:
            return None
        proc = subprocess.Popen(["sleep", "60"])
        if proc.pid == pid:
            return proc
        proc.kill()
        proc.wait()
    return None


@pytest.mark.requires_root("needs root to choose the next pid")
def test_real_pid_reuse_between_selection_and_kill_is_refused() -> None:
    first = subprocess.Popen(["sleep", "60"])
    pid = first.pid
    info = psutil.Process(pid)
    target = actions.KillTarget(pid, info.create_time(), "root", "sleep 60", 0, None)
    first.kill()
    first.wait()
    time.sleep(2.5 / os.sysconf("SC_CLK_TCK"))  # the new process starts ticks later
    second = _spawn_with_pid(pid)
    if second is None:
        missing("could not get the same pid again (busy host or no ns_last_pid)")
    try:
        outcome = actions.send_signal(target, signal.SIGKILL)
        assert outcome == actions.KillOutcome(
            pid, False, f"pid {pid} is now a different process; not signalled"
        )
        time.sleep(0.05)
        assert second.poll() is None  # the stranger lives
    finally:
        second.kill()
        second.wait()


# Kill refused for another user's process: tests/cli/test_actions.py
# (test_permission_denied_for_another_users_process) forks, drops to uid 65534 and checks
# the refusal message and that the target lives.


# ------------------------------------------------------------------------------- hostile text

HOSTILE_ARGS: list[bytes] = [
    b"[red]x[/red] [bold magenta]",
    b"[link=https://evil.example]click[/link]",
    b"\x1b]8;;https://evil.example\x07link\x1b]8;;\x07",  # OSC 8 hyperlink
    b"\x1b]0;pwned title\x07\x1b[2J\x1b[H\x1b[31mred",  # OSC title, clear screen, colour
    "\u202eevil\u2066iso\u2069 \u05e9\u05dc\u05d5\u05dd \u0645\u0631\u062d\u0628\u0627".encode(),
    ("宽字符テスト" * 8).encode(),
    b"\xff\xfe\xc3(bad utf-8)",
    b"\x07\x08\x0b\x0c\x7f\xc2\x9b\xc2\x85",  # BEL BS VT FF DEL CSI(C1) NEL(C1)
    "line\u2028sep\u2029para\r\nnext".encode(),
    b"A" * 100_000,
]


@pytest.fixture
def hostile_child(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A shell whose program name and argv hold every kind of hostile text."""
    link = os.path.join(os.fsencode(tmp_path), b"\x1b[31m\xe7\xba\xa2[red]\xff\xe2\x80\xae")
    os.symlink(b"/bin/sh", link)
    proc = subprocess.Popen(
        [link, b"-c", b"sleep 60; exit 0", *HOSTILE_ARGS], start_new_session=True
    )
    try:
        wait_for(
            "the shell",
            lambda: psutil.Process(proc.pid).cmdline()[1:3] == ["-c", "sleep 60; exit 0"],
        )
        yield proc
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the shell and its sleep
        proc.wait()


def test_hostile_text_is_kept_as_text_and_capped_in_once_and_json(
    fake_nvml_env: MakeEnv, hostile_child: subprocess.Popen[bytes]
) -> None:
    evil_name = b"\x1b[31mEvil\xff [bold]GPU\xe2\x80\xae" + "宽".encode() * 40
    gpu = FakeGpu(name=evil_name, processes=[FakeProcess(hostile_child.pid)])
    (rc_t, text, _), (rc_j, out, _) = both(fake_nvml_env(Scenario(gpus=[gpu])))
    assert rc_t == rc_j == 0
    data = parse_clean_json(out)
    g = data["gpus"][0]
    assert g["name"].startswith("Evil") and "[bold]GPU" in g["name"]  # kept, as text
    (p,) = g["processes"]
    assert p["pid"] == hostile_child.pid and p["visible"] is True
    command = p["command"]
    assert len(command) <= 4096 and command.endswith("…")  # 100 kB capped
    for literal in ("[red]x[/red]", "[link=https://evil.example]click[/link]", "宽字符テスト"):
        assert literal in command  # markup is just text here
    assert "pwned title" not in command and "https://evil.example\x07" not in command
    assert "\u05e9\u05dc\u05d5\u05dd" in command  # right-to-left text kept, overrides gone
    assert "红[red]" in p["name"]
    assert_clean_text_output(text)
    assert "Evil" in text and "红[red]" in text


@pytest.mark.parametrize(
    "raw",
    [
        "\x1b[31mroot\x1b[0m",
        "[red]admin[/red]",
        "\u202etoor",
        "用户名很长很长很长",
        "x" * 100_000,
        "a\x00b\x07c\x9bd",
        "\udcff\udcfe",  # surrogate-escaped bytes from a non-UTF-8 passwd entry
        "ab\u2028cd",
    ],
)
def test_hostile_user_names_are_cleaned(raw: str) -> None:
    cleaned = clean_text(raw)
    assert cleaned is not None
    assert not BAD_CHARS.search(cleaned)
    assert len(cleaned) <= 4096
    cleaned.encode("utf-8")  # always encodable for the terminal


def test_hostile_user_names_and_commands_keep_the_text_columns() -> None:
    hostile = [
        "用户名很长很长很长",
        "[red]admin[/red]",
        "\x1b]8;;http://e\x07root",
        "\u202eevil",
        "x" * 100_000,
    ]
    infos = tuple(
        ProcessInfo(
            pid=1000 + i,
            user=clean_text(u),
            name=clean_text(u),
            command=clean_text(f"/usr/bin/{u} --flag {'宽' * 100} {u}"),
            cpu_percent=12.5,
            create_time=1_700_000_000.0,
        )
        for i, u in enumerate(hostile)
    )
    gpus = (
        GpuSample(
            index=0,
            name=clean_text("宽" * 30 + "\x1b[2J"),
            processes=tuple(
                GpuProcess(pid=i.pid, gpu_memory=GiB, sm_percent=1.0, host=i) for i in infos
            ),
        ),
    )
    snap = Snapshot(
        time=1_700_000_100.0,
        hostname=clean_text("宽" * 50 + "\x1b]0;x\x07") or "?",
        driver=DriverInfo(True, driver_version="550.54.15"),
        host=HostSample(),
        gpus=gpus,
        processes=infos,
        errors=(SampleError("host", clean_text("宽" * 300 + "\x1b[31m") or ""),),
    )
    text = render_text(snap)
    assert_clean_text_output(text)
    assert text.count("\n") > 10
    assert " [red]ad… " in text  # the user column: 8 cells of it, literally


# -------------------------------------------------------------------------------- scale


def test_sixteen_gpus_with_64_processes_each_are_all_listed(fake_nvml_env: MakeEnv) -> None:
    # pids without a process (tests/pids.py): another PID namespace
    ghosts = free_pids(16 * 64)
    env = fake_nvml_env(fakenvml.many_gpus(16, 64, pcie_sleep_ms=20, pids=ghosts))
    start = time.perf_counter()
    rc, out, err = run_gputop("--once", "--json", env=env)
    wall = time.perf_counter() - start
    assert rc == 0, err
    data = parse_clean_json(out)
    assert len(data["gpus"]) == 16
    assert [len(g["processes"]) for g in data["gpus"]] == [64] * 16
    assert all(
        p["visible"] is False
        for g in data["gpus"]
        for p in g["processes"]
        if not os.path.exists(f"/proc/{p['pid']}")
    )
    assert data["errors"] == []
    assert data["tick_seconds"] < 2.0  # measured ~0.04 s; generous for a loaded machine
    assert wall < 30
    rc, text, err = run_gputop("--once", env=env)
    assert rc == 0, err
    assert_clean_text_output(text)
    assert [i for i in range(16) if f"\n{i:>3}  NVIDIA H100" in text] == list(range(16))
    hidden = sum(not os.path.exists(f"/proc/{pid}") for pid in ghosts)
    assert text.count("not visible (another PID namespace)") >= hidden


def test_many_host_processes_are_all_in_the_process_tree(fake_nvml_env: MakeEnv) -> None:
    """500 real processes: a GPU process with 499 workers (the bench measures 2,000)."""
    with spawn.running("tree", "499") as tree:
        workers = tree.extra[:499]
        assert len(workers) == 499
        gpus = [
            FakeGpu(processes=[FakeProcess(tree.pid)] + [FakeProcess(w) for w in workers[:63]]),
            FakeGpu(processes=[FakeProcess(w) for w in workers[63:127]]),
        ]
        rc, out, err = run_gputop("--once", "--json", env=fake_nvml_env(Scenario(gpus=gpus)))
    assert rc == 0, err
    data = parse_clean_json(out)
    rows = {p["pid"] for p in data["processes"]}
    assert {tree.pid, *workers} <= rows  # every worker is in the process tree
    assert all(p["visible"] for g in data["gpus"] for p in g["processes"])
    assert data["tick_seconds"] < 5.0


# -------------------------------------------------------------------------------- slow NVML


class CountingSource:
    """Wraps a source: counts ticks in flight (they must never overlap)."""

    def __init__(self, inner: LiveSource) -> None:
        self.inner = inner
        self.kind = inner.kind
        self.in_flight = 0
        self.max_in_flight = 0
        self.started = 0
        self._lock = threading.Lock()

    def snapshot(self) -> Snapshot:
        with self._lock:
            self.in_flight += 1
            self.started += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return self.inner.snapshot()
        finally:
            with self._lock:
                self.in_flight -= 1

    def close(self) -> None:
        self.inner.close()


def test_slow_nvml_call_does_not_stack_ticks(fake_nvml: FakeNvml) -> None:
    fast = Scenario(gpus=[FakeGpu(util_gpu=11), FakeGpu(util_gpu=12)])
    slow = Scenario(gpus=[FakeGpu(util_gpu=21), FakeGpu(util_gpu=22)])
    slow.gpus[0].sleeps_ms = {"nvmlDeviceGetUtilizationRates": 2000}
    fake_nvml.write(fast)
    source = CountingSource(LiveSource())
    sampler = Sampler(source, interval=0.1, history=50)
    before = sampler.tick_now()
    assert before.gpus[0].utilization.gpu == 11
    fake_nvml.write(slow)
    sampler.start()
    try:
        wait_for("a stale sampler", lambda: sampler.stale, timeout=10)
        started_while_stuck = source.started
        # Consumers never wait for the stuck tick.
        # (a consumer that waited would return the slow tick's snapshot, not ``before``)
        for _ in range(20):
            latest = sampler.latest()
            history = sampler.history()
            assert latest is before and history[-1] is before
        assert sampler.stale and source.started == started_while_stuck  # nothing stacked
        fake_nvml.write(fast)  # the call already sleeping still takes its 2 s
        wait_for("the slow tick", lambda: sampler.latest() is not before, timeout=10)
        history = sampler.history()
        slow_snap = history[history.index(before) + 1]
        assert slow_snap.tick_seconds is not None
        assert slow_snap.tick_seconds >= 1.9
        assert slow_snap.gpus[1].utilization.gpu in (12, 22)
        wait_for("fresh ticks", lambda: sampler.ticks >= 4, timeout=10)
        assert not sampler.stale
        # No burst to make up for the missed ticks: at most one per interval.
        n0, t0 = source.started, time.monotonic()
        wait_for("1 s of ticks", lambda: time.monotonic() - t0 >= 1.0, timeout=5)
        assert source.started - n0 <= 1.0 / 0.1 + 2
        assert source.max_in_flight == 1
    finally:
        sampler.stop()


# ---------------------------------------------------------------------------- safety


def test_nothing_listens_on_the_network(fake_nvml: FakeNvml) -> None:
    from gputop.sources.demo import DemoSource

    fake_nvml.write(Scenario(gpus=[FakeGpu(processes=[FakeProcess(os.getpid())])]))
    samplers = [
        Sampler(LiveSource(), interval=0.05),
        Sampler(DemoSource(0, clock=time.time), interval=0.05),
    ]
    try:
        for s in samplers:
            s.start()
        wait_for("ticks", lambda: all(s.ticks >= 3 for s in samplers))
        assert psutil.Process().net_connections(kind="inet") == []
    finally:
        for s in samplers:
            s.stop()


NETWORK_MODULES = re.compile(
    r"^\s*(?:import|from)\s+(?:socket|socketserver|ssl|http|urllib|xmlrpc|ftplib|smtplib|"
    r"telnetlib|asyncio\.streams|websockets|aiohttp|requests|httpx)\b",
    re.MULTILINE,
)


#: An HTTP client, used only when asked: ``gputop fleet --prometheus URL``.
PROMETHEUS_CLIENT = ROOT / "gputop" / "sources" / "prometheus.py"
#: The one place that listens on a socket, and only when asked: ``gputop export``.
ASKED_FOR = ROOT / "gputop" / "exporter"


def test_no_network_module_in_gputop() -> None:
    offenders = []
    for path in sorted((ROOT / "gputop").rglob("*.py")):
        if path.is_relative_to(ASKED_FOR):
            continue
        text = path.read_text(encoding="utf-8")
        imports = re.search(r"^\s*(?:import|from)\s+gputop\.sources\.prometheus\b", text, re.M)
        if imports and path != ROOT / "gputop" / "fleet.py":  # only --prometheus reaches it
            offenders.append(f"{path.relative_to(ROOT)} imports gputop.sources.prometheus")
        if path == PROMETHEUS_CLIENT:
            continue
        if NETWORK_MODULES.search(text) or re.search(r"\b(?:start_server|\.listen\()", text):
            offenders.append(str(path.relative_to(ROOT)))
        # Nothing reaches the exporter but the command line's subcommand table (by name).
        if re.search(r"^\s*(?:import|from)\s+gputop\.exporter\b", text, re.MULTILINE):
            offenders.append(f"{path.relative_to(ROOT)} imports gputop.exporter")
    assert offenders == []
