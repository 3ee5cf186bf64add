"""scripts/gpu_check.py: the parts that need no GPU (arguments, nvidia-smi's CSV, the
comparison), on recorded nvidia-smi output."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_check.py"
MiB = 1 << 20

# Recorded on an 8x H100 node (driver 550.90.07) while a 2 GiB load ran on GPU 0:
#   nvidia-smi --query-gpu=index,uuid,memory.used,memory.total,utilization.gpu,\
#     pcie.link.gen.current,pcie.link.width.current,power.draw --format=csv,noheader,nounits
SMI_GPUS = """\
0, GPU-5c1e2f0a-8d41-1c7e-2b3f-3f6a9e0d7b11, 2561, 81559, 100, 5, 16, 312.45
1, GPU-0b8e8c3d-6a1f-4d2e-9c7b-5e4f3a2d1c00, 4, 81559, 0, 1, 16, 69.80
2, GPU-7f3a2b1c-0d9e-4f8a-b7c6-d5e4f3a2b1c0, 4, 81559, 0, 1, 16, [N/A]
"""
#   nvidia-smi --id=0 --query-compute-apps=pid,used_memory --format=csv,noheader,nounits
SMI_APPS = """\
48213, 2552
"""


@pytest.fixture(scope="module")
def gc() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module
    spec.loader.exec_module(module)
    return module


def gputop_gpu(**changes: Any) -> dict[str, Any]:
    """gputop --once --json's object for GPU 0 taken at the same moment."""
    gpu: dict[str, Any] = {
        "index": 0,
        "memory": {"used": 2561 * MiB, "total": 81559 * MiB, "reserved": 531 * MiB},
        "utilization": {"gpu": 100.0, "memory": 0.0},
        "pcie": {"gen": 5, "width": 16},
        "power_w": 309.1,
        "processes": [{"pid": 48213, "gpu_memory": 2552 * MiB}],
    }
    gpu.update(changes)
    return gpu


def test_parse_recorded_nvidia_smi(gc: ModuleType) -> None:
    gpus = gc.parse_smi_gpus(SMI_GPUS)
    assert sorted(gpus) == [0, 1, 2]
    g0 = gpus[0]
    assert g0["memory.used"] == 2561 * MiB and g0["memory.total"] == 81559 * MiB
    assert (g0["utilization.gpu"], g0["pcie.link.gen.current"], g0["power.draw"]) == (
        100.0,
        5.0,
        312.45,
    )
    assert gpus[2]["power.draw"] is None  # [N/A]
    assert gc.parse_smi_apps(SMI_APPS) == {48213: 2552 * MiB}
    assert gc.parse_smi_apps("No running processes found\n") == {}
    with pytest.raises(ValueError, match="expected 8 fields"):
        gc.parse_smi_gpus("0, GPU-x, 12\n")


def test_agreement_passes(gc: ModuleType) -> None:
    smi = gc.parse_smi_gpus(SMI_GPUS)[0]
    checks = gc.compare(gputop_gpu(), smi, gc.parse_smi_apps(SMI_APPS), 48213)
    assert [c.ok for c in checks] == [True] * 7, gc.render(checks)
    table = gc.render(checks)
    assert "memory used" in table and "DISAGREE" not in table


@pytest.mark.parametrize(
    ("changes", "failing"),
    [
        ({"memory": {"used": 2700 * MiB, "total": 0, "reserved": None}}, "memory used"),
        ({"utilization": {"gpu": 85.0}}, "utilization (loaded)"),
        ({"utilization": {"gpu": None}}, "utilization (loaded)"),
        ({"processes": []}, "load pid 48213 listed,load pid 48213 memory"),
        ({"processes": [{"pid": 48213, "gpu_memory": 2000 * MiB}]}, "load pid 48213 memory"),
        ({"pcie": {"gen": 4, "width": 16}}, "PCIe generation"),
        ({"pcie": {"gen": 5, "width": 8}}, "PCIe width"),
        ({"power_w": 250.0}, "power"),
    ],
)
def test_each_disagreement_is_caught(gc: ModuleType, changes: dict[str, Any], failing: str) -> None:
    smi = gc.parse_smi_gpus(SMI_GPUS)[0]
    checks = gc.compare(gputop_gpu(**changes), smi, gc.parse_smi_apps(SMI_APPS), 48213)
    bad = [c.what for c in checks if not c.ok]
    assert bad == failing.split(",")
    assert "DISAGREE" in gc.render(checks)


def test_reserved_memory_counted_as_used_by_older_nvidia_smi(gc: ModuleType) -> None:
    """gputop's used excludes reserved (memory v2); an nvidia-smi that counts it still
    agrees once reserved is added back."""
    smi = gc.parse_smi_gpus(SMI_GPUS)[0]
    gpu = gputop_gpu(memory={"used": 2030 * MiB, "total": 81559 * MiB, "reserved": 531 * MiB})
    (mem, *_) = gc.compare(gpu, smi, gc.parse_smi_apps(SMI_APPS), 48213)
    assert mem.ok and "+reserved" in mem.gputop


@pytest.mark.parametrize(
    "argv",
    [
        ["--gpu", "-1"],
        ["--memory-mib", "0"],
        ["--seconds", "0"],
        ["--seconds", "4", "--settle", "3"],
        ["--gpu", "x"],
        ["--nosuch"],
    ],
)
def test_bad_arguments_exit_2_with_one_line(argv: list[str]) -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2
    assert out.stdout == ""
    assert "error:" in out.stderr.splitlines()[-1]


def test_defaults(gc: ModuleType) -> None:
    args = gc.parse_args([])
    assert (args.gpu, args.memory_mib, args.seconds, args.settle) == (0, 2048, 20.0, 3.0)


def test_without_a_driver_it_says_it_cannot_run(tmp_path: Path) -> None:
    """No libcuda.so.1 here: exit 3 with the reason, not a traceback."""
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--seconds", "6", "--settle", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": str(tmp_path)},
    )
    assert out.returncode == 3, out.stderr
    assert "libcuda.so.1" in out.stderr
    assert "Traceback" not in out.stderr
