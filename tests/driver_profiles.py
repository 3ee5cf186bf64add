"""One machine, played by the fake NVML built as each driver profile (tests/fakenvml).

``profile_scenario(profile, pids)``: GPU 0 has three compute processes (the third on both
lists), and on the legacy-stride profile the first one's ``usedGpuCcProtectedMemory`` is
``phantom``: a reader that takes the 32-byte entries for 24-byte ones then reads that value
as a pid (a real host process that does not use the GPU). GPU 1 is an A100 in MIG mode with
three MIG devices and one process on each of two of them (on r418, a V100: no MIG then).

``python -m tests.driver_profiles`` runs ``gputop --once --json`` on every profile and
prints what it shows, one line per GPU (the before/after table of the issue-10 note).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests import fakenvml
from tests.fakenvml import FakeGpu, FakeMig, FakeProcess, GiB, Scenario

ROOT = Path(__file__).resolve().parent.parent
PROFILE_NAMES = tuple(fakenvml.PROFILES)


def profile_scenario(profile: str, pids: Sequence[int], phantom: int = 0) -> Scenario:
    """pids: 5 pids (3 on GPU 0, one on each of two MIG devices of GPU 1)."""
    a, b, c, d, e = pids
    gpu0 = FakeGpu(
        name="NVIDIA A100-SXM4-80GB",
        processes=[
            FakeProcess(a, 1 * GiB, cc_protected_memory=phantom),
            FakeProcess(b, 2 * GiB),
            FakeProcess(c, 3 * GiB, type="C+G"),
        ],
    )
    if profile == "r418":
        gpu1 = FakeGpu(
            name="Tesla V100-SXM2-32GB",
            memory_total=32 * GiB,
            mig_mode=None,
            processes=[FakeProcess(d, 4 * GiB), FakeProcess(e, 5 * GiB)],
        )
    else:
        gpu1 = FakeGpu(
            name="NVIDIA A100-SXM4-80GB",
            util_gpu=None,
            util_mem=None,
            mig_mode=(1, 1),
            memory_used=7 * GiB,
            migs=[
                FakeMig(0, 1, 0, "3g.40gb", 40 * GiB, 5 * GiB),
                FakeMig(1, 2, 0, "2g.20gb", 20 * GiB, 2 * GiB),
                FakeMig(2, 3, 0, "1g.10gb", 10 * GiB, 0),
            ],
            processes=[
                FakeProcess(d, 4 * GiB, gpu_instance_id=1, compute_instance_id=0),
                FakeProcess(e, 2 * GiB, gpu_instance_id=2, compute_instance_id=0),
            ],
        )
    return fakenvml.PROFILES[profile].scenario(gpus=[gpu0, gpu1])


@contextmanager
def sleepers(n: int) -> Iterator[list[int]]:
    """n real host processes (``sleep``), ended on the way out."""
    procs = [subprocess.Popen(["sleep", "120"]) for _ in range(n)]
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait()


def once_json(
    profile: str, scenario: Scenario, directory: Path, *extra: str
) -> tuple[int, dict[str, Any] | None, str]:
    """``python -m gputop --once --json`` on the fake built as ``profile``."""
    path = scenario.write(directory / f"scenario-{profile}.txt")
    env = fakenvml.subprocess_env(path, profile=profile)
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-m", "gputop", "--once", "--json", *extra],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=60,
    )
    data = json.loads(proc.stdout) if proc.stdout.strip() else None
    return proc.returncode, data, proc.stderr


def summary(data: dict[str, Any], names: dict[int, str]) -> list[str]:
    """What a user reads per GPU: processes, why the list is incomplete, MIG, errors."""
    out = []
    for g in data["gpus"]:
        procs = [
            f"{names.get(p['pid'], p['pid'])}:{p['type']}:"
            f"{'n/a' if p['gpu_memory'] is None else p['gpu_memory'] // GiB}G"
            for p in g["processes"]
        ]
        line = f"GPU {g['index']}: processes [{', '.join(procs)}]"
        if g.get("processes_unavailable"):
            line += f"; unavailable: {g['processes_unavailable']}"
        line += f"; util {g['utilization']['gpu']}; mig_mode {g['mig_mode']}"
        migs = g.get("mig_devices")
        if migs:
            line += "; mig_devices " + ", ".join(
                f"{m['profile']} gi{m['gpu_instance_id']} ci{m['compute_instance_id']} "
                f"{(m['memory']['used'] or 0) // GiB}/{(m['memory']['total'] or 0) // GiB}G"
                for m in migs
            )
        out.append(line)
    for e in data["errors"]:
        if e["source"] == "nvml":
            out.append(f"error: {e['message']}")
    return out


def main() -> int:
    with sleepers(6) as pids, tempfile.TemporaryDirectory() as tmp:
        names = {pid: "abcde"[i] if i < 5 else "PHANTOM" for i, pid in enumerate(pids)}
        for profile in PROFILE_NAMES:
            scenario = profile_scenario(profile, pids[:5], phantom=pids[5])
            rc, data, err = once_json(profile, scenario, Path(tmp))
            print(f"## {profile} (exit {rc})")
            if data is None:
                print(err.strip())
                continue
            for line in summary(data, names):
                print("  " + line)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    raise SystemExit(main())
