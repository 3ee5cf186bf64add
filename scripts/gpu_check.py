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

The parts that need no GPU (arguments, parsing nvidia-smi's CSV, the comparison) are
tested in tests/sources/test_gpu_check.py on recorded nvidia-smi output.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
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
    p.add_argument("--load", action="store_true", help=argparse.SUPPRESS)  # the child
    args = p.parse_args(argv)
    if args.gpu < 0:
        p.error("--gpu must be 0 or more")
    if args.memory_mib < 1:
        p.error("--memory-mib must be at least 1")
    if args.seconds <= 0 or args.settle < 0:
        p.error("--seconds must be positive and --settle not negative")
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


def render(checks: Sequence[Check]) -> str:
    rows = [("check", "gputop", "nvidia-smi", "tolerance", "result")]
    rows += [(c.what, c.gputop, c.smi, c.tolerance, "ok" if c.ok else "DISAGREE") for c in checks]
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


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


# ---------------------------------------------------------------------------- the check


def _run(cmd: Sequence[str], env: dict[str, str] | None = None) -> str:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {out.returncode}: {out.stderr.strip()}")
    return out.stdout


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.load:
        return run_load(args.gpu, args.memory_mib, args.seconds)
    env = dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID")
    child = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--load",
            "--gpu",
            str(args.gpu),
            "--memory-mib",
            str(args.memory_mib),
            "--seconds",
            str(args.seconds),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
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
    if args.json:
        print(json.dumps([c.__dict__ for c in checks]))
    return EXIT_OK if all(c.ok for c in checks) else EXIT_DISAGREE


if __name__ == "__main__":
    raise SystemExit(main())
