"""Issue 21, items 1 and 2, against the real commands: a remote host whose numbers are out
of range (``gputop fleet`` in tmux, the host and its GPU detail opened) and a recording
holding NaN (``gputop replay`` in tmux with the detail open, and ``replay --once`` in text
and JSON). Before: a traceback and exit 1, or nonsense on screen."""

from __future__ import annotations

import json
import math
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputop.model import replace
from gputop.record.store import Recorder
from gputop.sources.demo import DemoSource
from tests.helpers.hostile import NONSENSE
from tests.tmux_pane import TmuxPane, plain_shell, shell_env

ROOT = Path(__file__).resolve().parents[2]


class Pane(TmuxPane):
    def __init__(self, tmp: Path) -> None:
        self.status = tmp / "status"
        env = shell_env(tmp, PYTHONPATH=str(ROOT))
        super().__init__(plain_shell(env), width=140, height=45, prefix="gputop-values")

    def run(self, *argv: str) -> None:
        command = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "gputop", *argv))
        self.wait_text("PROMPT$")
        self.send_line(f"cd {shlex.quote(str(ROOT))} && {command}; echo EXIT=$? > {self.status}")

    def exit_status(self) -> str:
        self.wait_for(lambda _: self.status.exists(), "the command to end", timeout=20)
        return self.status.read_text().strip()


@pytest.fixture
def pane(tmp_path: Path) -> Iterator[Pane]:
    p = Pane(tmp_path)
    try:
        yield p
    finally:
        p.close()


def shown_values(screen: str) -> str:
    """The screen less the lines that quote a refused value."""
    return "\n".join(line for line in screen.splitlines() if "reported" not in line)


@pytest.mark.requires_tool("tmux")
def test_fleet_survives_a_host_with_out_of_range_numbers(pane: Pane) -> None:
    stream = f"{shlex.quote(sys.executable)} {ROOT / 'tests' / 'helpers' / 'hostile_stream.py'}"
    pane.run("fleet", "--local", "--remote-command", stream, "--interval", "1", "odd-host")
    pane.wait_text("odd-host", "live", timeout=30)
    pane.keys("Enter")  # the host's dashboard
    shown = pane.wait_text("load", "GPU-MEM", timeout=20)
    assert not NONSENSE.search(shown_values(shown)), shown
    assert "8192.0PiB" not in shown and "-42" not in shown
    pane.keys("Enter")  # GPU 0 in detail: plotext drew 1e308 here and crashed the fleet
    shown = pane.wait_text("GPU 0", "Esc back", "power (W)", timeout=20)
    assert not NONSENSE.search(shown_values(shown)), shown
    pane.keys("Escape")
    pane.keys("Escape")
    pane.wait_text("odd-host")
    pane.keys("q")
    assert pane.exit_status() == "EXIT=0"
    assert "Traceback" not in pane.scrollback()


@pytest.fixture
def nan_recording(tmp_path: Path) -> Path:
    source = DemoSource(seed=2, start_time=1_800_000_000.0, step=1.0)
    directory = tmp_path / "rec"
    rec = Recorder(directory, interval=1.0, retain=None, max_size=None)
    for _ in range(20):
        snap = source.snapshot()
        gpus = (replace(snap.gpus[0], utilization=replace(snap.gpus[0].utilization, gpu=math.nan)),)
        host = replace(snap.host, cpu_per_core=(math.nan, *snap.host.cpu_per_core[1:]))  # type: ignore[union-attr]
        rec.add(replace(snap, gpus=gpus + snap.gpus[1:], host=host))
    rec.close()
    return directory


@pytest.mark.parametrize("form", [[], ["--json"]], ids=["text", "json"])
def test_replay_once_of_a_recording_holding_nan(nan_recording: Path, form: list[str]) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "gputop", "replay", str(nan_recording), "--once", *form],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    if form:
        data = json.loads(r.stdout)
        assert data["gpus"][0]["utilization"]["gpu"] is None
        assert any(e["metric"] == "utilization.gpu" for e in data["errors"])
    else:
        before_errors = r.stdout.split("Errors while sampling")[0]
        assert not NONSENSE.search(before_errors.replace("Cores ", "")), r.stdout
        assert "the recording reported utilization.gpu = nan" in " ".join(r.stdout.split())


@pytest.mark.requires_tool("tmux")
def test_replay_tui_of_a_recording_holding_nan(pane: Pane, nan_recording: Path) -> None:
    pane.run("replay", str(nan_recording))
    shown = pane.wait_text("REPLAY", "H100", timeout=30)
    assert not NONSENSE.search(shown_values(shown)), shown
    pane.keys("Enter")  # GPU 0 in detail
    pane.wait_text("GPU 0", "Esc back", "power (W)", timeout=20)
    pane.keys("Escape")
    pane.keys("q")
    assert pane.exit_status() == "EXIT=0"
    assert "Traceback" not in pane.scrollback()
