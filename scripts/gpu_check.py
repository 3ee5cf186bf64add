#!/usr/bin/env python3
"""Check gputop against nvidia-smi on a real GPU, under a load of known size.

    python scripts/gpu_check.py [--gpu 0] [--memory-mib 2048] [--seconds 20] [--settle 3]

Needs nothing but the NVIDIA driver (libcuda.so.1, libnvidia-ml.so.1, nvidia-smi) and
gputop's own venv: no PyTorch, no package registry. It

1. starts a child process that loads the GPU through the CUDA driver API (ctypes):
   ``cuInit``, a context, ``cuMemAlloc`` of ``--memory-mib``, and a busy-loop kernel
   (inline PTX, ``cuModuleLoadData`` / ``cuLaunchKernel``) launched back to back for
   ``--seconds``;
2. once the load runs (and ``--settle`` seconds more), reads ``python -m gputop --once
   --json`` and ``nvidia-smi --query-gpu=... --format=csv,noheader,nounits`` /
   ``--query-compute-apps=pid,used_memory``, as close together as it can;
3. compares: memory used within 2 %, utilization within 10 points (the load keeps a kernel
   running all the time, so both should read ~100 %), the loading pid listed with its
   memory within 2 %, PCIe generation and width equal, power within 10 %;
4. prints a table and exits 1 on any disagreement (0: all agree; 2: bad arguments;
   3: the check could not run, e.g. no CUDA driver or no nvidia-smi).

Then, on a GPU with GPM (Hopper and later: gputop's JSON has ``activity``; ``--no-inside``
skips it), it looks inside utilization (issue 30) under each of these loads in turn:
``spin`` (the kernel above: one thread per SM), and with PyTorch where it is installed
``fp32`` (an fp32 matmul, TF32 off: FMA pipes, no tensor cores), ``bf16`` (a bf16 matmul:
tensor cores) and ``tiny`` (one-element kernels launched from Python: utilization high,
few SMs busy). For each it reads, over the same seconds, ``gputop --once --json`` (SM
active, tensor, DRAM; NVLink rx/tx), ``nvidia-smi dmon --gpm-metrics 2,5,10,60,61`` (the
same GPM metric ids NVML gives gputop) and ``nvidia-smi nvlink -gt d`` twice (cumulative
KiB per link, turned into a rate), and compares: activity within 15 points (the two read
different windows of a steady load), NVLink within 10 % or 1 GiB/s, and what each load is
expected to show (the premises of gputop's verdicts: spin and fp32 leave the tensor cores
idle, bf16 uses them, tiny leaves most SMs idle). A load that cannot start (no PyTorch)
is a row that says so, not a failure.

Last (``--no-probe`` skips it), where PyTorch sees a CUDA GPU: a tiny DataLoader loop on
the GPU under ``gputop run``; the CUDA memory figures its probe file holds must equal
torch's own (``memory_allocated``, ``memory_reserved``, ``max_memory_allocated``), and a
freed tensor must show as reserved above allocated. Without PyTorch or CUDA it says that
it was not checked.

The parts that need no GPU (arguments, parsing nvidia-smi's CSV, dmon and nvlink output,
the comparisons) are tested in tests/sources/test_gpu_check.py on nvidia-smi output in
its documented formats.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MiB = 1 << 20

#: nvidia-smi --query-gpu fields, in this order.
GPU_FIELDS = (
    "index",
    "uuid",
    "memory.used",
    "memory.total",
    "utilization.gpu",
    "pcie.link.gen.current",
    "pcie.link.width.current",
    "power.draw",
)
APP_FIELDS = ("pid", "used_memory")

MEMORY_TOLERANCE = 0.02  # relative
UTIL_TOLERANCE = 10.0  # percentage points
POWER_TOLERANCE = 0.10  # relative
#: nvidia-smi rounds to whole MiB: differences below this are rounding, not disagreement.
ROUNDING_BYTES = 2 * MiB

EXIT_OK, EXIT_DISAGREE, EXIT_USAGE, EXIT_CANNOT = 0, 1, 2, 3

#: The loads of the GPM comparison; all but "spin" need PyTorch.
LOADS = ("spin", "fp32", "bf16", "tiny")
#: nvmlGpmMetricId_t asked of ``nvidia-smi dmon --gpm-metrics``, in this order, and the key
#: of gputop's JSON each is compared with (docs/json.md: activity in percent, NVLink in
#: bytes/s; GPM gives 60/61 in MiB/s, as nvml.h says of NVML_GPM_METRIC_NVLINK_TOTAL_*).
GPM_COLUMNS: tuple[tuple[int, str], ...] = (
    (2, "activity.sm"),
    (5, "activity.tensor"),
    (10, "activity.dram"),
    (60, "nvlink.rx_bytes_per_s"),
    (61, "nvlink.tx_bytes_per_s"),
)
ACTIVITY_TOLERANCE = 15.0  # percentage points: two windows of one steady load
NVLINK_TOLERANCE = 0.10  # relative
NVLINK_FLOOR = float(1 << 30)  # bytes/s: below this, idle links read as noise
DMON_SAMPLES = 3  # dmon rows (1 s apart) averaged against gputop's reading
#: What each load should show, the premise of a verdict (issue 30, section 5): key, the
#: bound, whether the value must be above (True) or below it, and the words said.
EXPECT: dict[str, tuple[tuple[str, float, bool, str], ...]] = {
    "spin": (("activity.tensor", 5.0, False, "tensor idle"),),
    "fp32": (("activity.tensor", 5.0, False, "tensor idle (fp32, TF32 off)"),),
    "bf16": (("activity.tensor", 20.0, True, "tensor busy (bf16)"),),
    "tiny": (
        ("utilization.gpu", 50.0, True, "utilization high"),
        ("activity.sm", 50.0, False, "SM active low (tiny kernels)"),
    ),
}

# A kernel that spins until ``cycles`` SM clock cycles have passed (clock64): it uses no
# memory, so one launch per SM keeps "a kernel running" for as long as asked.
SPIN_PTX = b"""
.version 6.0
.target sm_50
.address_size 64

.visible .entry spin(.param .u64 cycles)
{
    .reg .pred p;
    .reg .u64 start, now, limit, elapsed;
    ld.param.u64 limit, [cycles];
    mov.u64 start, %clock64;
LOOP:
    mov.u64 now, %clock64;
    sub.u64 elapsed, now, start;
    setp.lt.u64 p, elapsed, limit;
    @p bra LOOP;
    ret;
}
\x00"""


# ---------------------------------------------------------------------------- arguments


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="gpu_check.py",
        description="Compare gputop --once --json with nvidia-smi under a known GPU load.",
    )
    p.add_argument(
        "--gpu",
        type=int,
        default=0,
        help="GPU index (CUDA and NVML order agree "
        "when CUDA_DEVICE_ORDER=PCI_BUS_ID, which the load sets)",
    )
    p.add_argument("--memory-mib", type=int, default=2048, help="memory the load allocates")
    p.add_argument("--seconds", type=float, default=20.0, help="how long the load runs")
    p.add_argument("--settle", type=float, default=3.0, help="wait after the load starts")
    p.add_argument("--smi", default="nvidia-smi", help="the nvidia-smi to compare with")
    p.add_argument("--json", action="store_true", help="print the table as JSON too")
    p.add_argument(
        "--no-inside",
        action="store_true",
        help="skip the GPM and NVLink comparison (SM, tensor, DRAM activity; NVLink traffic)",
    )
    p.add_argument(
        "--loads",
        default=",".join(LOADS),
        help=f"the loads of the GPM comparison, of {','.join(LOADS)} (default: all)",
    )
    p.add_argument(
        "--no-probe",
        action="store_true",
        help="skip the probe's CUDA memory figures against torch's own (needs PyTorch)",
    )
    p.add_argument("--load", action="store_true", help=argparse.SUPPRESS)  # the child
    p.add_argument("--kind", default="spin", choices=LOADS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.gpu < 0:
        p.error("--gpu must be 0 or more")
    if args.memory_mib < 1:
        p.error("--memory-mib must be at least 1")
    if args.seconds <= 0 or args.settle < 0:
        p.error("--seconds must be positive and --settle not negative")
    args.loads = [k.strip() for k in args.loads.split(",") if k.strip()]
    unknown = [k for k in args.loads if k not in LOADS]
    if unknown or not args.loads:
        p.error(f"--loads: choose among {','.join(LOADS)} (got {','.join(unknown) or 'none'})")
    if not args.load and args.settle + 2 >= args.seconds:
        p.error("--seconds must exceed --settle by more than 2 s (the readings take time)")
    return args


# ---------------------------------------------------------------------------- nvidia-smi


def _num(text: str) -> float | None:
    text = text.strip()
    if not text or text.startswith("[") or text.upper() in ("N/A", "NA"):
        return None  # "[N/A]", "[Not Supported]"
    try:
        return float(text)
    except ValueError:
        return None


def parse_smi_gpus(csv: str) -> dict[int, dict[str, Any]]:
    """``--query-gpu=GPU_FIELDS --format=csv,noheader,nounits`` -> {index: values}; memory
    in bytes (nvidia-smi says MiB), power in W, the rest as numbers (None: N/A)."""
    out: dict[int, dict[str, Any]] = {}
    for line in csv.splitlines():
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(GPU_FIELDS):
            raise ValueError(f"nvidia-smi: expected {len(GPU_FIELDS)} fields, got {line!r}")
        row: dict[str, Any] = dict(zip(GPU_FIELDS, cells, strict=True))
        for key in GPU_FIELDS[2:]:
            row[key] = _num(row[key])
        for key in ("memory.used", "memory.total"):
            if row[key] is not None:
                row[key] = int(row[key] * MiB)
        out[int(cells[0])] = row
    return out


def parse_smi_apps(csv: str) -> dict[int, int | None]:
    """``--query-compute-apps=pid,used_memory`` -> {pid: bytes or None}."""
    out: dict[int, int | None] = {}
    for line in csv.splitlines():
        if not line.strip() or line.lower().startswith("no running"):
            continue
        pid, used = (c.strip() for c in line.split(",", 1))
        value = _num(used)
        out[int(pid)] = None if value is None else int(value * MiB)
    return out


# ---------------------------------------------------------------------------- comparison


@dataclass(frozen=True)
class Check:
    what: str
    gputop: str
    smi: str
    tolerance: str
    ok: bool


def _mib(value: float | None) -> str:
    return "n/a" if value is None else f"{value / MiB:.0f} MiB"


def _close(a: float | None, b: float | None, rel: float, floor: float = 0.0) -> bool:
    if a is None or b is None:
        return False
    return abs(a - b) <= max(rel * abs(b), floor)


def compare(
    gpu: dict[str, Any],
    smi: dict[str, Any],
    apps: dict[int, int | None],
    load_pid: int,
) -> list[Check]:
    """gputop's JSON for one GPU against nvidia-smi's row and compute apps."""
    checks: list[Check] = []
    mem = gpu.get("memory") or {}
    used = mem.get("used")
    reserved = mem.get("reserved")
    smi_used = smi.get("memory.used")
    ok = _close(used, smi_used, MEMORY_TOLERANCE, ROUNDING_BYTES)
    note = ""
    if not ok and used is not None and reserved is not None:
        # drivers whose nvidia-smi counts reserved memory as used (memory v1 meaning)
        ok = _close(used + reserved, smi_used, MEMORY_TOLERANCE, ROUNDING_BYTES)
        note = " (+reserved)" if ok else ""
    checks.append(Check("memory used", _mib(used) + note, _mib(smi_used), "2 %", ok))
    util = (gpu.get("utilization") or {}).get("gpu")
    smi_util = smi.get("utilization.gpu")
    checks.append(
        Check(
            "utilization (loaded)",
            "n/a" if util is None else f"{util:.0f} %",
            "n/a" if smi_util is None else f"{smi_util:.0f} %",
            "10 points",
            util is not None and smi_util is not None and abs(util - smi_util) <= UTIL_TOLERANCE,
        )
    )
    procs = {p["pid"]: p for p in gpu.get("processes") or ()}
    mine = procs.get(load_pid)
    smi_mine = apps.get(load_pid)
    checks.append(
        Check(
            f"load pid {load_pid} listed",
            "yes" if mine is not None else "no",
            "yes" if load_pid in apps else "no",
            "both yes",
            mine is not None and load_pid in apps,
        )
    )
    mine_used = None if mine is None else mine.get("gpu_memory")
    checks.append(
        Check(
            f"load pid {load_pid} memory",
            _mib(mine_used),
            _mib(smi_mine),
            "2 %",
            _close(mine_used, smi_mine, MEMORY_TOLERANCE, ROUNDING_BYTES),
        )
    )
    pcie = gpu.get("pcie") or {}
    for key, smi_key, label in (
        ("gen", "pcie.link.gen.current", "PCIe generation"),
        ("width", "pcie.link.width.current", "PCIe width"),
    ):
        mine_v, smi_v = pcie.get(key), smi.get(smi_key)
        checks.append(
            Check(
                label,
                "n/a" if mine_v is None else str(mine_v),
                "n/a" if smi_v is None else f"{smi_v:.0f}",
                "equal",
                mine_v is not None and smi_v is not None and int(mine_v) == int(smi_v),
            )
        )
    power, smi_power = gpu.get("power_w"), smi.get("power.draw")
    checks.append(
        Check(
            "power",
            "n/a" if power is None else f"{power:.1f} W",
            "n/a" if smi_power is None else f"{smi_power:.1f} W",
            "10 %",
            _close(power, smi_power, POWER_TOLERANCE),
        )
    )
    return checks


def render(checks: Sequence[Check], heads: tuple[str, str] = ("gputop", "nvidia-smi")) -> str:
    rows = [("check", *heads, "tolerance", "result")]
    rows += [(c.what, c.gputop, c.smi, c.tolerance, "ok" if c.ok else "DISAGREE") for c in checks]
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# ---------------------------------------------------------------------------- GPM and NVLink


def parse_dmon(text: str, ids: Sequence[int]) -> dict[int, list[dict[int, float | None]]]:
    """``nvidia-smi dmon --gpm-metrics IDS`` -> {gpu index: [{metric id: value}, one per
    row]}. dmon prints two ``#`` lines (names, units) and then one row per GPU per
    interval, blank-separated, ``-`` where it has no value (GPM's first row: one sample);
    the GPM columns come after the ``-s`` ones, in the order asked (nvidia-smi(1),
    "DEVICE MONITORING"). Names vary across drivers, so they are taken by position from
    the end; the header's width is checked against every row."""
    width = 0
    out: dict[int, list[dict[int, float | None]]] = {}
    for line in text.splitlines():
        cells = line.split()
        if not cells:
            continue
        if cells[0].startswith("#"):
            names = [c for c in (cells[0][1:], *cells[1:]) if c]
            if names and names[0].lower() == "gpu":
                width = len(names)
            continue
        if not width:
            raise ValueError(f"nvidia-smi dmon: a row before its header: {line!r}")
        if len(cells) != width or width < len(ids) + 1:
            raise ValueError(f"nvidia-smi dmon: expected {width} columns, got {line!r}")
        try:
            gpu = int(cells[0])
        except ValueError:
            raise ValueError(f"nvidia-smi dmon: no GPU index in {line!r}") from None
        values = cells[len(cells) - len(ids) :]
        out.setdefault(gpu, []).append(
            {i: _num(v) if v != "-" else None for i, v in zip(ids, values, strict=True)}
        )
    return out


def dmon_means(rows: Sequence[dict[int, float | None]]) -> dict[int, float | None]:
    """The mean of each metric over the rows that have it (None: no row has it)."""
    means: dict[int, float | None] = {}
    for metric in {k for row in rows for k in row}:
        got = [v for row in rows if (v := row.get(metric)) is not None and math.isfinite(v)]
        means[metric] = sum(got) / len(got) if got else None
    return means


_NVLINK_GPU = re.compile(r"^GPU (\d+):")
_NVLINK_DATA = re.compile(r"^\s*Link (\d+): Data (Tx|Rx): (\d+) KiB\s*$")


def parse_nvlink_counters(text: str) -> dict[int, dict[str, int]]:
    """``nvidia-smi nvlink -gt d`` -> {gpu index: {"tx": KiB, "rx": KiB}}, summed over the
    links. Its output is a ``GPU N: name (UUID: ...)`` line and then, per link, ``Link L:
    Data Tx: K KiB`` and ``Link L: Data Rx: K KiB`` (cumulative payload, nvidia-smi(1),
    "NVLINK": ``-gt d``, "tx and rx data payload in KiB")."""
    out: dict[int, dict[str, int]] = {}
    gpu: int | None = None
    for line in text.splitlines():
        if m := _NVLINK_GPU.match(line):
            gpu = int(m.group(1))
            out[gpu] = {"tx": 0, "rx": 0}
        elif m := _NVLINK_DATA.match(line):
            if gpu is None:
                raise ValueError(f"nvidia-smi nvlink: a link before its GPU: {line!r}")
            out[gpu][m.group(2).lower()] += int(m.group(3))
    return out


def nvlink_rates(
    before: dict[int, dict[str, int]], after: dict[int, dict[str, int]], seconds: float
) -> dict[int, dict[str, float | None]]:
    """Bytes per second each way between two counter readings (None: a counter that went
    back, reset or wrapped, or a GPU missing from one reading)."""
    out: dict[int, dict[str, float | None]] = {}
    for gpu, now in after.items():
        then = before.get(gpu)
        rates: dict[str, float | None] = {}
        for way in ("tx", "rx"):
            grew = None if then is None else now[way] - then[way]
            ok = grew is not None and grew >= 0 and seconds > 0
            rates[way] = grew * 1024 / seconds if ok and grew is not None else None
        out[gpu] = rates
    return out


def _get(doc: dict[str, Any], dotted: str) -> float | None:
    part, _, key = dotted.partition(".")
    value = (doc.get(part) or {}).get(key)
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f} %"


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value / (1 << 30):.2f} GiB/s"


def compare_inside(
    load: str,
    gpu: dict[str, Any],
    dmon: dict[int, float | None],
    nvlink: dict[str, float | None] | None,
) -> list[Check]:
    """gputop's activity and NVLink for one GPU under ``load`` against dmon's GPM means and
    nvlink's counter rates (None: no NVLink counters read), then the load's expectations."""
    checks: list[Check] = []
    for metric, key in GPM_COLUMNS:
        mine, smi = _get(gpu, key), dmon.get(metric)
        if key.startswith("activity."):
            ok = mine is not None and smi is not None and abs(mine - smi) <= ACTIVITY_TOLERANCE
            checks.append(
                Check(f"{load}: {key} (GPM {metric})", _pct(mine), _pct(smi), "15 points", ok)
            )
            continue
        if not (gpu.get("nvlink") or {}).get("links"):
            continue  # no NVLink: nothing to compare
        smi_bytes = None if smi is None else smi * MiB  # GPM 60/61: MiB/s
        checks.append(
            Check(
                f"{load}: {key} (GPM {metric})",
                _rate(mine),
                _rate(smi_bytes),
                "10 % or 1 GiB/s",
                _close(mine, smi_bytes, NVLINK_TOLERANCE, NVLINK_FLOOR),
            )
        )
        if nvlink is not None:
            way = "rx" if metric == 60 else "tx"
            counted = nvlink.get(way)
            checks.append(
                Check(
                    f"{load}: {key} (nvlink -gt d)",
                    _rate(mine),
                    _rate(counted),
                    "10 % or 1 GiB/s",
                    _close(mine, counted, NVLINK_TOLERANCE, NVLINK_FLOOR),
                )
            )
    for key, bound, above, words in EXPECT.get(load, ()):
        mine = _get(gpu, key)
        ok = mine is not None and (mine > bound if above else mine < bound)
        sign = ">" if above else "<"
        checks.append(
            Check(f"{load}: expected {words}", _pct(mine), "", f"{sign} {bound:.0f} %", ok)
        )
    return checks


# ---------------------------------------------------------------------------- the load


class CudaError(RuntimeError):
    pass


def run_load(gpu: int, memory_mib: int, seconds: float) -> int:
    """The child: allocate, then launch the spin kernel back to back for ``seconds``."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        print(f"cannot load libcuda.so.1 (no NVIDIA driver?): {exc}", file=sys.stderr)
        return EXIT_CANNOT

    def check(ret: int, what: str) -> None:
        if ret != 0:
            name = ctypes.c_char_p()
            cuda.cuGetErrorName(ret, ctypes.byref(name))
            raise CudaError(f"{what} failed: {ret} {(name.value or b'?').decode()}")

    try:
        check(cuda.cuInit(0), "cuInit")
        dev = ctypes.c_int()
        check(cuda.cuDeviceGet(ctypes.byref(dev), gpu), "cuDeviceGet")
        ctx = ctypes.c_void_p()
        check(cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev), "cuCtxCreate")
        ptr = ctypes.c_uint64()
        check(
            cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(memory_mib * MiB)), "cuMemAlloc"
        )
        check(cuda.cuMemsetD8_v2(ptr, 0, ctypes.c_size_t(memory_mib * MiB)), "cuMemsetD8")
        module = ctypes.c_void_p()
        check(cuda.cuModuleLoadData(ctypes.byref(module), SPIN_PTX), "cuModuleLoadData (PTX)")
        fn = ctypes.c_void_p()
        check(cuda.cuModuleGetFunction(ctypes.byref(fn), module, b"spin"), "cuModuleGetFunction")
        sms, khz = ctypes.c_int(), ctypes.c_int()
        check(
            cuda.cuDeviceGetAttribute(ctypes.byref(sms), 16, dev), "SM count"
        )  # MULTIPROCESSOR_COUNT
        check(cuda.cuDeviceGetAttribute(ctypes.byref(khz), 13, dev), "clock rate")  # CLOCK_RATE
        cycles = ctypes.c_uint64(max(1, khz.value) * 20)  # ~20 ms per launch
        param = ctypes.c_void_p(ctypes.addressof(cycles))
        params = (ctypes.c_void_p * 1)(param)
        end = time.monotonic() + seconds
        first = True
        while time.monotonic() < end:
            for _ in range(5):
                check(
                    cuda.cuLaunchKernel(
                        fn, max(1, sms.value), 1, 1, 1, 1, 1, 0, None, params, None
                    ),
                    "cuLaunchKernel",
                )
            check(cuda.cuCtxSynchronize(), "cuCtxSynchronize")
            if first:
                print("ready", flush=True)
                first = False
        cuda.cuMemFree_v2(ptr)
        cuda.cuCtxDestroy_v2(ctx)
    except CudaError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_CANNOT
    return EXIT_OK


def run_torch_load(gpu: int, kind: str, seconds: float) -> int:
    """The child for the PyTorch loads: fp32 or bf16 matmuls back to back, or one-element
    additions launched from Python (each a kernel on one SM)."""
    try:
        import torch  # the venv may lack it: the load is then said to be skipped
    except ImportError as exc:
        print(f"no PyTorch for the {kind} load: {exc}", file=sys.stderr)
        return EXIT_CANNOT
    try:
        if not torch.cuda.is_available():
            print(f"PyTorch sees no CUDA GPU for the {kind} load", file=sys.stderr)
            return EXIT_CANNOT
        dev = torch.device("cuda", gpu)
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 stays off the tensor cores
        if kind == "tiny":
            x = torch.zeros(1, device=dev)
            step: Any = lambda: x.add_(1.0)  # noqa: E731
            per_sync = 1000
        else:
            dtype = torch.float32 if kind == "fp32" else torch.bfloat16
            a = torch.randn(8192, 8192, device=dev, dtype=dtype)
            b = torch.randn(8192, 8192, device=dev, dtype=dtype)
            step = lambda: torch.mm(a, b)  # noqa: E731
            per_sync = 4
        end = time.monotonic() + seconds
        first = True
        while time.monotonic() < end:
            for _ in range(per_sync):
                step()
            torch.cuda.synchronize(dev)
            if first:
                print("ready", flush=True)
                first = False
    except RuntimeError as exc:  # CUDA errors
        print(f"the {kind} load failed: {exc}", file=sys.stderr)
        return EXIT_CANNOT
    return EXIT_OK


# ---------------------------------------------------------------------------- the check


def _run(cmd: Sequence[str], env: dict[str, str] | None = None) -> str:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {out.returncode}: {out.stderr.strip()}")
    return out.stdout


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.load:
        if args.kind != "spin":
            return run_torch_load(args.gpu, args.kind, args.seconds)
        return run_load(args.gpu, args.memory_mib, args.seconds)
    child = _start_load(args, "spin")
    try:
        assert child.stdout is not None
        if child.stdout.readline().strip() != "ready":
            child.wait(30)
            print(f"the load did not start (exit {child.returncode})", file=sys.stderr)
            return EXIT_CANNOT
        time.sleep(args.settle)
        try:
            query = ",".join(GPU_FIELDS)
            smi_gpus = parse_smi_gpus(
                _run([args.smi, f"--query-gpu={query}", "--format=csv,noheader,nounits"])
            )
            gputop = json.loads(_run([sys.executable, "-m", "gputop", "--once", "--json"]))
            apps = parse_smi_apps(
                _run(
                    [
                        args.smi,
                        f"--id={args.gpu}",
                        "--query-compute-apps=pid,used_memory",
                        "--format=csv,noheader,nounits",
                    ]
                )
            )
        except (OSError, RuntimeError, ValueError) as exc:
            print(f"cannot read gputop or nvidia-smi: {exc}", file=sys.stderr)
            return EXIT_CANNOT
    finally:
        child.terminate()
        child.wait(30)
    gpu = next((g for g in gputop["gpus"] if g["index"] == args.gpu), None)
    if gpu is None or args.gpu not in smi_gpus:
        print(f"GPU {args.gpu}: not found by gputop or nvidia-smi", file=sys.stderr)
        return EXIT_CANNOT
    checks = compare(gpu, smi_gpus[args.gpu], apps, child.pid)
    print(f"GPU {args.gpu} {gpu.get('name')} driver {gputop['driver'].get('driver_version')}")
    print(f"load: pid {child.pid}, {args.memory_mib} MiB, spin kernel on every SM")
    print(render(checks))
    if not args.no_inside:
        if not any(v is not None for v in (gpu.get("activity") or {}).values()):
            print("\nno GPM activity in gputop's reading (not Hopper or later, or no")
            print("profiling permission): the GPM and NVLink comparison is skipped")
        else:
            inside = check_inside(args)
            print()
            print("inside utilization: gputop against nvidia-smi dmon --gpm-metrics and nvlink")
            print(render(inside))
            checks += inside
    if not args.no_probe:
        print()
        probe, why_not = check_probe(args)
        if why_not:
            print(f"the probe's CUDA memory figures: not checked ({why_not})")
        else:
            print("the probe's CUDA memory figures (gputop run) against torch's own")
            print(render(probe, ("probe file", "torch")))
            checks += probe
    if args.json:
        print(json.dumps([c.__dict__ for c in checks]))
    return EXIT_OK if all(c.ok for c in checks) else EXIT_DISAGREE


def _start_load(args: argparse.Namespace, kind: str) -> subprocess.Popen[str]:
    env = dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID")
    argv = [sys.executable, __file__, "--load", "--kind", kind, "--gpu", str(args.gpu)]
    argv += ["--memory-mib", str(args.memory_mib), "--seconds", str(args.seconds)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)


def _nvlink_counters(smi: str, gpu_id: str) -> dict[int, dict[str, int]]:
    """The GPU's NVLink counters; {} where nvidia-smi has none for it (no NVLink)."""
    try:
        return parse_nvlink_counters(_run([smi, "nvlink", gpu_id, "-gt", "d"]))
    except (OSError, RuntimeError, subprocess.TimeoutExpired):
        return {}


def check_inside(args: argparse.Namespace) -> list[Check]:
    """Each load in turn: dmon's GPM rows and two nvlink counter readings over the same
    seconds as one ``gputop --once --json``."""
    ids = [metric for metric, _ in GPM_COLUMNS]
    checks: list[Check] = []
    for kind in args.loads:
        child = _start_load(args, kind)
        try:
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                child.wait(60)
                # no PyTorch, or no GPU for it: said, not a disagreement
                checks.append(Check(f"{kind}: load", "did not start", "", "", True))
                continue
            time.sleep(args.settle)
            try:
                gpu_id = f"--id={args.gpu}"
                before = _nvlink_counters(args.smi, gpu_id)
                t0 = time.monotonic()
                dmon_argv = [args.smi, "dmon", gpu_id, "-s", "u", "-c", str(DMON_SAMPLES)]
                dmon = subprocess.Popen(
                    [*dmon_argv, "--gpm-metrics", ",".join(map(str, ids))],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                doc = json.loads(_run([sys.executable, "-m", "gputop", "--once", "--json"]))
                dmon_out, dmon_err = dmon.communicate(timeout=60)
                if dmon.returncode != 0:
                    raise RuntimeError(f"nvidia-smi dmon exited {dmon.returncode}: {dmon_err}")
                after = _nvlink_counters(args.smi, gpu_id)
                rates = nvlink_rates(before, after, time.monotonic() - t0)
                rows = parse_dmon(dmon_out, ids)
            except (OSError, RuntimeError, ValueError, subprocess.TimeoutExpired) as exc:
                checks.append(Check(f"{kind}: read", str(exc)[:60], "", "", False))
                continue
        finally:
            child.terminate()
            child.wait(30)
        gpu: dict[str, Any] = next((g for g in doc["gpus"] if g["index"] == args.gpu), {})
        nvlink = rates.get(args.gpu) if after else None
        checks += compare_inside(kind, gpu, dmon_means(rows.get(args.gpu, [])), nvlink)
    return checks


# ---------------------------------------------------------------------------- the probe

#: The job ``gputop run`` probes: a tiny DataLoader loop moving batches to the GPU, with
#: 256 MiB held by a live tensor and 512 MiB freed back to torch's caching allocator
#: (reserved, not allocated). Once the probe has written after the loop's end, it prints
#: the file and torch's own figures, read with nothing allocated in between.
PROBE_JOB = """
import json, os, sys, time
gpu = int(sys.argv[1])
try:
    import torch
except ImportError as exc:
    print(json.dumps({"skip": f"no PyTorch: {exc}"}))
    raise SystemExit(0)
if not torch.cuda.is_available():
    print(json.dumps({"skip": "PyTorch sees no CUDA GPU"}))
    raise SystemExit(0)
from torch.utils.data import DataLoader, TensorDataset
from gputop import probefile
dev = torch.device("cuda", gpu)
torch.cuda.set_device(dev)
keep = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
gone = torch.empty(512 << 20, dtype=torch.uint8, device=dev)
del gone
w = torch.randn(256, 256, device=dev)
for (x,) in DataLoader(TensorDataset(torch.randn(300, 256)), batch_size=1):
    y = x.to(dev) @ w
    torch.cuda.synchronize(dev)
end = time.time()
path = os.path.join(probefile.own_dir(), probefile.file_name(os.getpid()))
doc, deadline = None, time.monotonic() + 30
while time.monotonic() < deadline:
    try:
        with open(path) as f:
            doc = json.load(f)
        if doc.get("time", 0) > end:
            break
    except (OSError, ValueError):
        pass
    time.sleep(0.1)
own = [{"device": d, "allocated": torch.cuda.memory_allocated(d),
        "reserved": torch.cuda.memory_reserved(d), "peak": torch.cuda.max_memory_allocated(d)}
       for d in range(torch.cuda.device_count())]
print(json.dumps({"probe": doc, "torch": own, "device": gpu}))
"""


def compare_probe(found: dict[str, Any]) -> list[Check]:
    """The probe file's CUDA memory against torch's own, read after it with nothing
    allocated in between: equal, per device the job used; and the freed tensor shows as
    reserved above allocated."""
    probe = found.get("probe")
    if not isinstance(probe, dict) or not isinstance(probe.get("memory"), list):
        return [Check("probe file", "not written", "", "", False)]
    device = found.get("device")
    files = {m.get("device"): m for m in probe["memory"] if isinstance(m, dict)}
    checks: list[Check] = []
    for own in found.get("torch", []):
        d = own.get("device")
        if d != device and not own.get("reserved"):
            continue  # a device the job never used
        got = files.get(d, {})
        for key in ("allocated", "reserved", "peak"):
            a, b = got.get(key), own.get(key)
            checks.append(Check(f"cuda:{d} {key}", _mib(a), _mib(b), "equal", a == b))
        a, r = got.get("allocated"), got.get("reserved")
        held = isinstance(a, int) and isinstance(r, int) and r - a >= 512 * MiB
        checks.append(Check(f"cuda:{d} cached", _mib(None if not held else r - a),
                            "512 MiB freed", ">= 512 MiB", held))  # fmt: skip
    return checks or [Check("probe: the job's device", "not listed", "", "", False)]


def check_probe(args: argparse.Namespace) -> tuple[list[Check], str]:
    """Run PROBE_JOB under ``gputop run``; (checks, "") or ([], why it was not checked)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="gpu-check-probe-") as tmp:
        env = dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID", GPUTOP_PROBE_DIR=f"{tmp}/p")
        argv = [sys.executable, "-m", "gputop", "run", "--", sys.executable, "-c", PROBE_JOB]
        try:
            out = subprocess.run(
                [*argv, str(args.gpu)], capture_output=True, text=True, timeout=180, env=env
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return [Check("probe job", str(exc)[:60], "", "", False)], ""
    lines = out.stdout.strip().splitlines()
    try:
        found = json.loads(lines[-1]) if out.returncode == 0 and lines else None
    except ValueError:
        found = None
    if not isinstance(found, dict):
        why = (out.stderr.strip().splitlines() or ["no output"])[-1][:60]
        return [Check("probe job", f"exit {out.returncode}", why, "", False)], ""
    if "skip" in found:
        return [], str(found["skip"])
    return compare_probe(found), ""


if __name__ == "__main__":
    raise SystemExit(main())
