"""Latency of the one-shot paths, side by side with ``nvitop -1``, on the fake libnvidia-ml.

Not a timed test: a script that prints a table. Run from the repository root:

    python bench/bench_once.py [--runs 15] [--quick]

Each row is a fresh process on the same fake library and scenario (N GPUs x P
processes, nvmlDeviceGetPcieThroughput sleeping 20 ms per call like real hardware):

- ``gputop --once``, ``gputop --json``, ``nvitop -1``: wall time from start to exit,
  CPU time of the whole process (user + system, from wait4);
- ``gputop --stream`` first line: wall time from start until the first line has been
  read from its stdout (the process is then stopped); CPU is not measured there.

gputop's one-shot paths take two readings ONCE_WINDOW_S (0.1 s) apart so that rates
(CPU %, disk, network, per-process) exist; nvitop -1 takes one.
Median and max of ``--runs`` runs, after one warm-up run of each. The warm-up also
writes both tools' byte code into a private cache (``PYTHONPYCACHEPREFIX``), as an
installed package has it: with ``PYTHONDONTWRITEBYTECODE=1`` (set on some machines) a
checkout would compile gputop's sources again in every run and count that.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.bench_sampler import scenario_path  # noqa: E402
from tests import fakenvml  # noqa: E402

SIZES = [(8, 16), (16, 64)]


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall ms, CPU ms) of one whole process."""
    w0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = 1000 * (time.perf_counter() - w0)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{argv} failed: {err[-500:]}")
    return wall, 1000 * (usage.ru_utime + usage.ru_stime)


def _first_line(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall ms until the first stdout line arrived, nan)."""
    w0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    wall = 1000 * (time.perf_counter() - w0)
    proc.terminate()
    proc.wait()
    proc.stdout.close()
    if not line.startswith(b"{"):
        raise RuntimeError(f"{argv}: no JSON line")
    return wall, float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="5 runs, 8 GPUs only")
    args = parser.parse_args(argv)
    runs = 5 if args.quick else args.runs
    sizes = SIZES[:1] if args.quick else SIZES
    nvitop = shutil.which("nvitop") or str(Path(sys.executable).with_name("nvitop"))
    if not Path(nvitop).exists():
        raise SystemExit("nvitop is not installed: pip install -e '.[test]'")
    fakenvml.build()
    directory = fakenvml.BUILD_DIR / "bench"
    directory.mkdir(parents=True, exist_ok=True)
    gputop = [sys.executable, "-m", "gputop"]
    cases = [
        ("gputop --once", _run, [*gputop, "--once"]),
        ("gputop --json", _run, [*gputop, "--json"]),
        ("gputop --stream, 1st line", _first_line, [*gputop, "--stream"]),
        ("nvitop -1", _run, [nvitop, "-1"]),
    ]
    head = f"{'what':<26} {'GPUs':>4} {'procs':>5} {'wall med ms':>11} {'wall max ms':>11}"
    head += f" {'CPU med ms':>10}"
    print(f"fake NVML (PCIe throughput 20 ms per call), median and max of {runs} runs")
    print(head)
    print("-" * len(head))
    with tempfile.TemporaryDirectory(prefix="gputop-bench-pycache-") as pycache:
        for n_gpus, n_procs in sizes:
            env = fakenvml.subprocess_env(scenario_path(n_gpus, n_procs, directory))
            env["PYTHONPATH"] = str(ROOT)
            env["PYTHONPYCACHEPREFIX"] = pycache
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            for what, measure, cmd in cases:
                measure(cmd, env)  # warm-up: page cache, .pyc
                walls: list[float] = []
                cpus: list[float] = []
                for _ in range(runs):
                    wall, cpu = measure(cmd, env)
                    walls.append(wall)
                    cpus.append(cpu)
                cpu_text = "-" if cpus[0] != cpus[0] else f"{statistics.median(cpus):.0f}"
                print(
                    f"{what:<26} {n_gpus:>4} {n_procs:>5} {statistics.median(walls):>11.0f} "
                    f"{max(walls):>11.0f} {cpu_text:>10}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
