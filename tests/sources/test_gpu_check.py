"""scripts/gpu_check.py: the parts that need no GPU (arguments, nvidia-smi's CSV, the
comparison), on recorded nvidia-smi output."""

from __future__ import annotations

import contextlib
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from tests.helpers.fuzz import SEED

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


# ---------------------------------------------------------------------------- GPM and NVLink
#
# No H200 was at hand: the samples below are written in the formats nvidia-smi documents,
# not captured. dmon: nvidia-smi(1), "DEVICE MONITORING" (two "#" header lines, names then
# units; one row per GPU per interval; "-" where there is no value; GPM columns after the
# -s ones, in the order --gpm-metrics asks them), as in the example of
# https://leimao.github.io/blog/NVIDIA-NVML-GPU-Statistics/ ("# gpu pwr gtemp ...",
# "# Idx W C ..."). nvlink -gt d: nvidia-smi nvlink -h, "-gt d: tx and rx data payload in
# KiB", printed per GPU then per link. Check them against a real H200 when one is lent.

#   nvidia-smi dmon --id=0 -s u -c 3 --gpm-metrics 2,5,10,60,61   (spin load: one thread per SM)
DMON_SPIN = """\
# gpu     sm    mem    enc    dec    jpg    ofa smutil mmaact   dram  nvlrx  nvltx
# Idx      %      %      %      %      %      %      %      %      %   MB/s   MB/s
    0    100      0      0      0      0      0      -      -      -      -      -
    0    100      0      0      0      0      0     99      0      1      0      0
    0    100      0      0      0      0      0     97      0      1      0      0
"""
#   nvidia-smi nvlink --id=0 -gt d, twice 2 s apart (18 links; two shown, the rest idle)
NVLINK_BEFORE = """\
GPU 0: NVIDIA H200 (UUID: GPU-5c1e2f0a-8d41-1c7e-2b3f-3f6a9e0d7b11)
\t Link 0: Data Tx: 1048576 KiB
\t Link 0: Data Rx: 524288 KiB
\t Link 1: Data Tx: 1048576 KiB
\t Link 1: Data Rx: 524288 KiB
"""
NVLINK_AFTER = """\
GPU 0: NVIDIA H200 (UUID: GPU-5c1e2f0a-8d41-1c7e-2b3f-3f6a9e0d7b11)
\t Link 0: Data Tx: 2097152 KiB
\t Link 0: Data Rx: 1048576 KiB
\t Link 1: Data Tx: 2097152 KiB
\t Link 1: Data Rx: 1048576 KiB
"""
GiB = 1 << 30
IDS = (2, 5, 10, 60, 61)


def test_parse_dmon_gpm_columns_by_position_from_the_end(gc: ModuleType) -> None:
    rows = gc.parse_dmon(DMON_SPIN, IDS)
    assert list(rows) == [0] and len(rows[0]) == 3
    assert rows[0][0] == dict.fromkeys(IDS)  # GPM's first row: one sample, no value
    assert rows[0][1] == {2: 99.0, 5: 0.0, 10: 1.0, 60: 0.0, 61: 0.0}
    means = gc.dmon_means(rows[0])
    assert means == {2: 98.0, 5: 0.0, 10: 1.0, 60: 0.0, 61: 0.0}
    assert gc.dmon_means([{2: None}]) == {2: None}


@pytest.mark.parametrize(
    "text",
    [
        "    0    100      0\n",  # a row before its header
        "# gpu sm a b c d e\n# Idx % % % % % %\n 0 100 1 2\n",  # too few columns
        "# gpu sm a b c d e\n x 1 2 3 4 5 6\n",  # no GPU index
        "# gpu a b\n 0 1 2\n",  # narrower than the metrics asked
    ],
)
def test_parse_dmon_refuses_what_it_cannot_read(gc: ModuleType, text: str) -> None:
    with pytest.raises(ValueError, match="nvidia-smi dmon"):
        gc.parse_dmon(text, IDS)


def test_parse_nvlink_counters_and_rates(gc: ModuleType) -> None:
    before = gc.parse_nvlink_counters(NVLINK_BEFORE)
    after = gc.parse_nvlink_counters(NVLINK_AFTER)
    assert before == {0: {"tx": 2 * 1048576, "rx": 2 * 524288}}
    assert gc.nvlink_rates(before, after, 2.0) == {0: {"tx": 1.0 * GiB, "rx": 0.5 * GiB}}
    # counters that went back (reset), a GPU missing before, no time: no rate
    assert gc.nvlink_rates(after, before, 2.0) == {0: {"tx": None, "rx": None}}
    assert gc.nvlink_rates({}, after, 2.0) == {0: {"tx": None, "rx": None}}
    assert gc.nvlink_rates(before, after, 0.0) == {0: {"tx": None, "rx": None}}
    assert gc.parse_nvlink_counters("") == {}
    with pytest.raises(ValueError, match="nvidia-smi nvlink"):
        gc.parse_nvlink_counters("\t Link 0: Data Tx: 5 KiB\n")


def inside_gpu(**changes: Any) -> dict[str, Any]:
    """gputop --once --json's GPU under the spin load, NVLink idle."""
    gpu: dict[str, Any] = {
        "index": 0,
        "utilization": {"gpu": 100.0},
        "activity": {"sm": 96.0, "tensor": 0.0, "dram": 2.0},
        "nvlink": {"links": 18, "rx_bytes_per_s": 0.0, "tx_bytes_per_s": 0.0},
    }
    gpu.update(changes)
    return gpu


def test_inside_agreement_passes(gc: ModuleType) -> None:
    means = gc.dmon_means(gc.parse_dmon(DMON_SPIN, IDS)[0])
    checks = gc.compare_inside("spin", inside_gpu(), means, {"rx": 0.0, "tx": 0.0})
    assert all(c.ok for c in checks), gc.render(checks)
    names = [c.what for c in checks]
    assert "spin: activity.sm (GPM 2)" in names and "spin: expected tensor idle" in names
    assert "spin: nvlink.rx_bytes_per_s (nvlink -gt d)" in names


@pytest.mark.parametrize(
    ("load", "changes", "failing"),
    [
        (
            "spin",
            {"activity": {"sm": 60.0, "tensor": 0.0, "dram": 2.0}},
            "spin: activity.sm (GPM 2)",
        ),
        (
            "spin",
            {"activity": {"sm": None, "tensor": 0.0, "dram": 2.0}},
            "spin: activity.sm (GPM 2)",
        ),
        (
            "spin",
            {"activity": {"sm": 96.0, "tensor": 30.0, "dram": 2.0}},
            "spin: activity.tensor (GPM 5),spin: expected tensor idle",
        ),
        (
            "spin",
            {"nvlink": {"links": 18, "rx_bytes_per_s": 5.0 * GiB, "tx_bytes_per_s": 0.0}},
            "spin: nvlink.rx_bytes_per_s (GPM 60),spin: nvlink.rx_bytes_per_s (nvlink -gt d)",
        ),
        ("bf16", {}, "bf16: expected tensor busy (bf16)"),
        ("tiny", {}, "tiny: expected SM active low (tiny kernels)"),
    ],
)
def test_each_inside_disagreement_is_caught(
    gc: ModuleType, load: str, changes: dict[str, Any], failing: str
) -> None:
    means = gc.dmon_means(gc.parse_dmon(DMON_SPIN, IDS)[0])
    checks = gc.compare_inside(load, inside_gpu(**changes), means, {"rx": 0.0, "tx": 0.0})
    assert [c.what for c in checks if not c.ok] == failing.split(","), gc.render(checks)


def test_inside_without_nvlink_compares_activity_only(gc: ModuleType) -> None:
    means = {2: 96.0, 5: 0.0, 10: 2.0, 60: None, 61: None}
    checks = gc.compare_inside("fp32", inside_gpu(nvlink={}), means, None)
    assert [c.what for c in checks] == [
        "fp32: activity.sm (GPM 2)",
        "fp32: activity.tensor (GPM 5)",
        "fp32: activity.dram (GPM 10)",
        "fp32: expected tensor idle (fp32, TF32 off)",
    ]
    assert all(c.ok for c in checks)


def test_loads_argument(gc: ModuleType) -> None:
    assert gc.parse_args([]).loads == ["spin", "fp32", "bf16", "tiny"]
    assert gc.parse_args(["--loads", "bf16, tiny"]).loads == ["bf16", "tiny"]
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--loads", "fp8"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2 and "--loads" in out.stderr.splitlines()[-1]


@seed(SEED)
@settings(max_examples=300, deadline=None, database=None)
@given(text=st.text(alphabet=st.sampled_from("# 0123456789-.\nabcdeGPULinkDataTxRxKiB:\t")))
def test_parsers_raise_only_value_error_on_any_text(gc: ModuleType, text: str) -> None:
    """Seeded: GPUTOP_FUZZ_SEED replays it."""
    for parse in (lambda t: gc.parse_dmon(t, IDS), gc.parse_nvlink_counters):
        with contextlib.suppress(ValueError):
            parse(text)
