"""A real ``torchrun --nproc-per-node 2`` job (gloo, 3 DataLoader workers per rank, fork
and spawn) under ``gputop run``: each rank writes its own file (its pid, its start time),
measured within the accuracy the probe owes; the torchrun agent and the workers write none."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gputop import probefile
from tests.probe.harness import BOUND, TRAINER, environ, items_sum, torchrun_path
from tests.probe.test_probe_real import check_measured

RANKS = 2


@pytest.mark.timeout(BOUND + 60)
@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_each_rank_writes_its_own_file(tmp_path: Path, context: str) -> None:
    torchrun = torchrun_path()
    argv = [sys.executable, "-m", "gputop", "run", "--", torchrun, "--standalone",
            "--nproc-per-node", str(RANKS), TRAINER, str(tmp_path / "out.json"), "--ddp",
            "--workers", "3", "--context", context, "--expect-file"]  # fmt: skip
    proc = subprocess.Popen(
        argv, env=environ(tmp_path / "probes"), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        log, _ = proc.communicate(timeout=BOUND)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
    assert proc.returncode == 0, log[-3000:]
    outs = [json.loads((tmp_path / f"out-{r}.json").read_text()) for r in range(RANKS)]
    pids = {out["pid"] for out in outs}
    assert len(pids) == RANKS
    for out in outs:
        check_measured(out)
        assert out["result"] == items_sum()
        # the agent (torchrun, exec'd in gputop run's place) took no batch: no file
        assert out["ppid"] == proc.pid
        assert out["dir"] == sorted(probefile.file_name(pid) for pid in pids)
    assert os.listdir(tmp_path / "probes") == []  # each rank removed its own
    assert "gputop probe:" not in log
