"""The probe's writer (gputop.probe, in a real training-like process) and gputop's reader
agree on the file (issue 31): what the probe publishes counts, with nothing refused.
Needs gputop.probe (the probe's own branch); without it the test is ``missing``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from gputop.model import ProcessInfo
from gputop.sources.probes import ProbeReader
from tests.conftest import missing
from tests.helpers.probe_files import make_dir

ROOT = Path(__file__).resolve().parents[2]

LOOP = """
import sys, time, gputop.probe
for i in range(200):
    with gputop.probe.waiting():
        time.sleep(0.002)
    gputop.probe.step()
print("looped", flush=True)
sys.stdin.read()  # until the test closes it: the probe keeps its file while running
"""


def test_what_the_probe_publishes_the_reader_takes(tmp_path: Path) -> None:
    if not (ROOT / "gputop" / "probe" / "__init__.py").exists():
        missing("gputop.probe is not in this tree")
    probe_dir = make_dir(tmp_path / "probes")
    env = dict(os.environ, PYTHONPATH=str(ROOT), GPUTOP_PROBE_DIR=str(probe_dir))
    env.pop("GPUTOP_PROBE", None)
    child = subprocess.Popen(
        [sys.executable, "-c", LOOP],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "looped\n"
        # the publisher writes within about a second: wait for the file to exist
        path = probe_dir / f"probe-{child.pid}.json"
        for _ in range(600):
            if path.exists():
                break
            time.sleep(0.05)
        assert path.exists(), os.listdir(probe_dir)
        r = ProbeReader(own_dir=str(probe_dir), dirs_of=lambda _uid: ())
        (row,) = r.attach([ProcessInfo(pid=child.pid, create_time=1.0)])
        assert r.errors == ()
        probe = row.probe
        assert probe is not None and probe.steps is not None and probe.steps > 0
        assert probe.data_wait_ratio is not None and 0 < probe.data_wait_ratio <= 1
        assert probe.memory == ()  # no CUDA here
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)
        assert child.stdout is not None
        child.stdout.close()
