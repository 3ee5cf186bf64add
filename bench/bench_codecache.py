#!/usr/bin/env python3
"""What the dataclasses' code cache (gputop.codecache) saves at a start, and what a first
start without its file costs.

    python bench/bench_codecache.py [--runs 9]

Each run is a fresh interpreter that imports what the dashboard has loaded once its first
frame is judged (the CLI, the live source's modules, the UI, the diagnosis, the footer),
then ends the start (``codecache.stop()``: the file written where the start compiled a
text), noting the milliseconds since its first line at each step. Three modes, alternated
run by run: ``off`` (``GPUTOP_NO_CODE_CACHE=1``: plain ``dataclasses``), ``cold`` (an
empty cache directory: every text compiled, the file written at the end) and ``warm``
(the file the previous runs wrote). Byte code is warmed first into a private cache, as an
installed package has it. Medians; also the file's size and the texts it holds.
Prints figures; not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROGRAM = """
import time; t0 = time.perf_counter(); marks = {}
def mark(name): marks[name] = round((time.perf_counter() - t0) * 1000, 2)
import gputop.cli
mark("cli imported")
import gputop.sources.live, gputop.sources.nvml
mark("sources imported")
import gputop.ui.app, gputop.diagnosis, textual.widgets._footer
mark("ui and diagnosis imported")
from gputop import codecache
codecache.stop()
mark("start over")
import json; print(json.dumps(marks))
"""

MODES = ("off", "cold", "warm")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from gputop import codecache

    runs: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory(prefix="gputop-codecache-") as tmp:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(PYTHONPATH=str(ROOT), PYTHONPYCACHEPREFIX=str(Path(tmp) / "pycache"))
        env.pop(codecache.ENV_OFF, None)
        warm_dir = Path(tmp) / "warm"
        warm_dir.mkdir()
        warm_up = dict(env, **{codecache.ENV_DIR: str(warm_dir)})
        for _ in range(2):  # byte code, then the file
            subprocess.run(
                [sys.executable, "-c", PROGRAM],
                env=warm_up, cwd=ROOT, check=True, capture_output=True,
            )  # fmt: skip
        for r in range(args.runs):
            for mode in MODES:
                cache = warm_dir if mode == "warm" else Path(tempfile.mkdtemp(dir=tmp))
                run_env = dict(env, **{codecache.ENV_DIR: str(cache)})
                if mode == "off":
                    run_env[codecache.ENV_OFF] = "1"
                out = subprocess.run(
                    [sys.executable, "-c", PROGRAM],
                    env=run_env, cwd=ROOT, capture_output=True, text=True, check=True,
                )  # fmt: skip
                runs[mode].append(json.loads(out.stdout.splitlines()[-1]))
            print(f"  round {r + 1}: load average {os.getloadavg()[0]:.2f}", file=sys.stderr)
        size = (warm_dir / codecache.file_name()).stat().st_size
        texts = len(codecache.read(warm_dir))
    print(f"milliseconds since the interpreter ran the first line, medians of {args.runs}:")
    for mode, got in runs.items():
        med = {k: statistics.median(m[k] for m in got) for k in got[0]}
        print(f"  {mode:>4}: " + ", ".join(f"{k} {v:.1f}" for k, v in med.items()))
    print(f"  the file: {size / 1024:.0f} KiB, {texts} texts")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
