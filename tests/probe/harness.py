"""Running tests/probe/trainer.py (real PyTorch on CPU) under the probe's launchers."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import missing

TRAINER = str(Path(__file__).with_name("trainer.py"))
#: Seconds one trainer may take: spawned workers import torch each, on a loaded machine.
BOUND = 300


def require_torch() -> None:
    if importlib.util.find_spec("torch") is None:
        missing("torch is not installed (.ci/run installs the CPU wheel: pip install '.[torch]')")


def torchrun_path() -> str:
    require_torch()
    path = Path(sys.executable).with_name("torchrun")
    if not path.exists():
        missing(f"torch is installed but {path} is not")
    return str(path)


def environ(probe_dir: Path | str, **extra: str) -> dict[str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GPUTOP_PROBE_DIR": str(probe_dir)}
    env.pop("GPUTOP_PROBE", None)
    env.update(extra)
    return env


#: How each launcher runs ``python trainer.py ...``.
LAUNCHERS: dict[str, list[str]] = {
    "gputop run": [sys.executable, "-m", "gputop", "run", "--", sys.executable],
    "python -m gputop.probe": [sys.executable, "-m", "gputop.probe"],
    "import": [sys.executable],  # with --import-probe
    "none": [sys.executable],  # no probe at all
}


def run_trainer(
    tmp: Path,
    *args: str,
    launcher: str = "gputop run",
    env: dict[str, str] | None = None,
    prefix: tuple[str, ...] = (),
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """Run the trainer to its end; its process and what it wrote to OUT_JSON."""
    require_torch()
    out = tmp / "out.json"
    out.unlink(missing_ok=True)
    argv = [*prefix, *LAUNCHERS[launcher], TRAINER, str(out), *args]
    if launcher == "import":
        argv.append("--import-probe")
    proc = subprocess.run(
        argv,
        env=env if env is not None else environ(tmp / "probes"),
        capture_output=True,
        text=True,
        timeout=BOUND,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, json.loads(out.read_text())


def probe_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("gputop probe:")]


def items_sum(epochs: int = 1) -> float:
    """What the trainer's result must be: every item once per epoch."""
    return float(sum(range(40)) * epochs)
