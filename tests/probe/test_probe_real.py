"""The probe inside real PyTorch (CPU) training loops: what it measures against what the
loop measured of itself (tests/probe/trainer.py), under every launcher, with workers
forked and spawned, an IterableDataset and a loader made anew each epoch; and the
training's result with and without it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gputop import probefile
from tests.probe.harness import environ, items_sum, probe_lines, run_trainer

#: The accuracy the probe owes: its data-wait share within this of the loop's own.
POINTS = 0.10


def check_measured(out: dict[str, object]) -> dict[str, object]:
    probe = out["probe"]
    assert isinstance(probe, dict), f"no probe file read: {out}"
    assert list(probe) == list(probefile.FIELDS)
    assert probe[probefile.MARK] == probefile.VERSION
    assert probe["pid"] == out["pid"]
    assert probe["start_ticks"] == out["start_ticks"]
    assert probe["memory"] == []  # no CUDA here
    assert (out["dir_mode"], out["file_mode"]) == (0o700, 0o600)
    truth = out["truth"]
    assert isinstance(truth, dict)
    assert probe["steps"] == truth["steps"]
    assert abs(probe["data_wait_ratio"] - truth["data_wait_ratio"]) <= POINTS, (probe, truth)
    return probe


CASES = [
    # dataset, workers, context, launcher
    ("slow", 0, "fork", "gputop run"),
    ("slow", 3, "fork", "python -m gputop.probe"),
    ("slow", 3, "spawn", "gputop run"),
    ("slow", 2, "forkserver", "import"),
    ("fast", 0, "fork", "import"),
    ("fast", 3, "fork", "gputop run"),
    ("iterable", 2, "fork", "gputop run"),
]


@pytest.mark.timeout(400)
@pytest.mark.parametrize(("dataset", "workers", "context", "launcher"), CASES)
def test_the_measured_wait_is_the_loops_own(
    tmp_path: Path, dataset: str, workers: int, context: str, launcher: str
) -> None:
    proc, out = run_trainer(
        tmp_path,
        "--dataset", dataset, "--workers", str(workers), "--context", context, "--expect-file",
        launcher=launcher,
    )  # fmt: skip
    check_measured(out)
    assert out["result"] == items_sum()
    assert out["patched"] is True
    assert "gputop-probe" in out["threads"]
    # the workers took no batch: they wrote nothing, and there is no temporary file left
    assert out["dir"] == [probefile.file_name(out["pid"])]
    # at exit the probe removed its own file
    assert os.listdir(tmp_path / "probes") == []
    assert probe_lines(proc.stderr) == []


@pytest.mark.timeout(400)
def test_a_loader_made_anew_each_epoch(tmp_path: Path) -> None:
    _, out = run_trainer(tmp_path, "--workers", "2", "--epochs", "3", "--recreate", "--expect-file")
    check_measured(out)
    assert out["result"] == items_sum(3)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("how", ["GPUTOP_PROBE=0", "never imported"])
def test_a_probe_not_started_patches_nothing_and_starts_nothing(tmp_path: Path, how: str) -> None:
    if how == "GPUTOP_PROBE=0":
        env = environ(tmp_path / "probes", GPUTOP_PROBE="0")
        _, out = run_trainer(tmp_path, "--workers", "2", launcher="import", env=env)
    else:
        _, out = run_trainer(tmp_path, "--workers", "2", launcher="none")
    assert out["patched"] is False
    assert "gputop-probe" not in out["threads"]
    assert out["dir"] is None  # not even its directory was made
    assert out["result"] == items_sum()


@pytest.mark.timeout(300)
def test_gputop_run_overrides_an_inherited_off_switch(tmp_path: Path) -> None:
    """``gputop run`` asks for the probe: an inherited ``GPUTOP_PROBE=0`` (the switch for
    an ``import gputop.probe`` left in the code) does not turn it off."""
    env = environ(tmp_path / "probes", GPUTOP_PROBE="0")
    _, out = run_trainer(tmp_path, "--expect-file", env=env)
    check_measured(out)
