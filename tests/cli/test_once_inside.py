"""``gputop --once`` (text) on the fake NVML: a Hopper's SM/TC line and NVL line from the
real read (GPM's two samples, NVLink's field values), in 80 ASCII columns; a driver
without GPM (R470) shows the NVL line and no activity line (issue 30, section 4)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import fakenvml
from tests.fakenvml import hopper

ROOT = Path(__file__).resolve().parents[2]
#: The activity line (not "SM clock ...").
ACTIVITY = re.compile(r"^     SM (\d+%|n/a)  TC ")


def once_text(profile: str, tmp_path: Path) -> str:
    scenario = fakenvml.PROFILES[profile].scenario(
        gpus=[hopper(0, 2, links=2), hopper(1, 2, links=2)]
    )
    path = scenario.write(tmp_path / f"scenario-{profile}.txt")
    env = fakenvml.subprocess_env(path, profile=profile)
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-m", "gputop", "--once"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.usefixtures("fake_nvml_lib")
def test_once_text_on_a_hopper_shows_sm_tc_and_nvl(tmp_path: Path) -> None:
    out = once_text("current", tmp_path)
    lines = out.splitlines()
    activity = [line for line in lines if ACTIVITY.match(line)]
    nvl = [line for line in lines if line.startswith("     NVL rx ")]
    assert len(activity) == 2, out  # one per GPU
    assert activity[0].startswith("     SM 45%  TC "), out
    assert len(nvl) == 2 and all(" of " in line and "2 links v4.0" in line for line in nvl), out
    assert all(len(line) <= 80 for line in lines) and out.isascii()


@pytest.mark.usefixtures("fake_nvml_lib")
def test_once_text_without_gpm_has_no_activity_line(tmp_path: Path) -> None:
    out = once_text("r470", tmp_path)
    lines = out.splitlines()
    assert not [line for line in lines if ACTIVITY.match(line)], out
    assert len([line for line in lines if line.startswith("     NVL rx ")]) == 2, out
