"""NVML (through pynvml) -> ``GpuSample`` tuples. Never raises: every metric optional.

Failure policy (NotSupported asked once per attach, other errors every tick, GpuIsLost and
the like mark the GPU lost) and units: docs/troubleshooting.md, docs/drivers.md,
docs/json.md; tests/sources/test_nvml_source.py holds it.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import queue
import select
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, cast

from gputop.fmt import clean_text
from gputop.model import (
    CLOCK_EVENT_REASONS,
    GPU_METRICS,
    INVALID_PIDS,
    NVLINK_VERSIONS,
    Activity,
    Clocks,
    CounterRead,
    DriverInfo,
    GpmRead,
    GpuMemory,
    GpuMetric,
    GpuProcess,
    GpuSample,
    MigDevice,
    Nvlink,
    Pcie,
    PerLinkRead,
    SampleError,
    ScalarRead,
    Utilization,
    check_gpu,
    replace,
    reuse_equal,
)
from gputop.pcie import link_max_bytes_per_s
from gputop.sources.procfs import pid_max, read_stat

SOURCE = "nvml"

#: Longest a tick waits for the concurrent PCIe throughput calls.
PCIE_WAIT_S = 0.5
#: On close(), how long to wait for PCIe calls still running before shutting NVML down.
CLOSE_WAIT_S = 1.0

#: Given out again when equal to the last read's.
_SHARED_PARTS = (
    "memory",
    "utilization",
    "clocks",
    "clock_event_reasons",
    "pcie",
    "activity",
    "nvlink",
    "processes",
    "mig_devices",
)

#: The GpuSample fields a _Gpu keeps: its sample has them even when nothing else was read.
_IDENTITY = ("index", "name", "uuid", "pci_bus_id", "minor_number")
_NO_ID = 0xFFFFFFFF  # gpuInstanceId / computeInstanceId when MIG is off

# nvmlReturn_t values (nvml.h); pynvml exposes the same numbers.
_NOT_SUPPORTED = 3
_NO_PERMISSION = 4
_INVALID_ARGUMENT = 2
_NOT_FOUND = 6
_FUNCTION_NOT_FOUND = 13
_ARGUMENT_VERSION_MISMATCH = 25
#: The answers after which the next (older) variant of a call is tried.
_FALL_BACK_ON = frozenset({_FUNCTION_NOT_FOUND, _ARGUMENT_VERSION_MISMATCH})

#: By nvmlReturn_t: GpuIsLost, Unknown, ResetRequired.
_LOST_REASONS = {
    15: "GPU is lost: it fell off the bus or became inaccessible (NVML GpuIsLost)",
    999: "NVML answered Unknown Error: the GPU may have fallen off the bus",
    16: "GPU requires a reset (NVML ResetRequired)",
}

#: Why a process list was not read, by nvmlReturn_t (any other: "the call failed").
_UNREADABLE: dict[int | None, str] = {
    _FUNCTION_NOT_FOUND: "the driver lacks the call",
    _NOT_SUPPORTED: "not supported",
    _NO_PERMISSION: "no permission",
}

_NO_BINDING = "The Python NVML binding (nvidia-ml-py) is not installed."
#: By nvmlReturn_t: LibraryNotFound, DriverNotLoaded, LibRmVersionMismatch, NoPermission.
_INIT_ERRORS = {
    12: (
        "NVIDIA driver library libnvidia-ml.so.1 not found: no NVIDIA driver is installed "
        "here, or it is not on the library path."
    ),
    9: (
        "NVIDIA driver is not loaded (the nvidia kernel module is not running; does "
        "nvidia-smi work?)."
    ),
    18: (
        "NVIDIA driver/library version mismatch: the loaded kernel module and "
        "libnvidia-ml.so differ, usually after a driver upgrade without a reboot. Reboot "
        "(or reload the nvidia kernel modules)."
    ),
    _NO_PERMISSION: "No permission to open the NVIDIA driver (/dev/nvidia*).",
}


#: What a tick reads, from the metric table: metric -> its NVML call variants, newest
#: first, each the function and the pynvml constants it takes after the handle (a newer one
#: pynvml lacks is skipped; the oldest is always called, and fails as any call does).
_SCALARS = tuple(r for m in GPU_METRICS for r in m.reads if isinstance(r, ScalarRead))
_READS: dict[str, tuple[tuple[str, ...], ...]] = {
    **{r.metric: r.calls for r in _SCALARS if not r.once},
    # a bitmask decoded into names, not a scalar of the table
    "clock_event_reasons": (
        ("nvmlDeviceGetCurrentClocksEventReasons",),
        ("nvmlDeviceGetCurrentClocksThrottleReasons",),
    ),
}
#: Read when a handle is (re-)acquired: _Gpu field -> (metric, NVML call, constants).
_STATIC: dict[str, tuple[str, ...]] = {
    "minor_number": ("minor_number", "nvmlDeviceGetMinorNumber"),
    **{
        m.field.removeprefix("clocks.").replace(".", "_"): (r.metric, *r.calls[-1])
        for m in GPU_METRICS
        for r in m.reads
        if isinstance(r, ScalarRead) and r.once
    },
}
#: The rows read from GPM samples or cumulative counters, by GpuSample part.
_INSIDE: tuple[GpuMetric, ...] = tuple(
    m for m in GPU_METRICS if any(isinstance(r, GpmRead | CounterRead) for r in m.reads)
)


def _gpm_ids(nvlink: bool) -> tuple[int, ...]:
    """The GPM metric ids of the NVLink rows (``nvlink``) or of the others."""
    return tuple(
        r.metric_id
        for m in _INSIDE
        if m.field.startswith("nvlink.") == nvlink
        for r in m.reads
        if isinstance(r, GpmRead)
    )


#: GPM metric ids of the whole GPU, and of its NVLink (asked only where links are up).
_GPM_IDS, _GPM_NVLINK_IDS = _gpm_ids(False), _gpm_ids(True)
#: The per-link call whose true answers count the active links (``nvlink.links``).
(_LINK_STATE,) = (r.call for m in GPU_METRICS for r in m.reads if isinstance(r, PerLinkRead))
_COUNTERS = tuple(
    (r.field_id, r.scope) for m in _INSIDE for r in m.reads if isinstance(r, CounterRead)
)
#: NVML_FI_DEV_PCIE_COUNT_TX_BYTES and _RX_BYTES (nvml.h, drivers 555 and later): cumulative
#: PCIe bytes, answered at once. Where a GPU gives both, its PCIe throughput is their rate
#: across ticks; elsewhere a thread asks nvmlDeviceGetPcieThroughput (``_PcieCall``).
_PCIE_TX, _PCIE_RX = _PCIE_COUNTERS = ((197, 0), (198, 0))
#: GPM computes a metric from two samples at least this far apart (nvml.h).
GPM_MIN_S = 0.1
#: Two readings for rates (``--once``, the first ``--stream`` line) start this far apart
#: where a GPU has GPM: GPM_MIN_S, and room for the first reading attaching the GPUs
#: before its sample (docs/json.md).
GPM_PAIR_WINDOW_S = 0.2
#: nvmlNvLinkDeviceType_t of an NVSwitch at a link's far end.
_NVLINK_SWITCH = 2


def counter_rate(
    before: tuple[int, float] | None, now: tuple[int, float], scale: float
) -> float | None:
    """The rate of a cumulative counter between two (value, monotonic seconds) readings,
    in model units (``scale`` per count); None on a first reading, and when the counter
    went back: a wrap and a driver reset look alike, and neither is traffic."""
    if before is None:
        return None
    count, seconds = now[0] - before[0], now[1] - before[1]
    if count < 0 or not 0 < seconds < math.inf:  # NaN too
        return None
    return count * scale / seconds


def same_bus(a: str | None, b: str | None) -> bool:
    """Whether two PCI bus ids name one device (domains written with 4 or 8 digits)."""
    if not a or not b:
        return False
    da, _, ra = a.lower().rpartition(":")
    db, _, rb = b.lower().rpartition(":")
    (dom_a, _, bus_a), (dom_b, _, bus_b) = da.rpartition(":"), db.rpartition(":")
    return ra == rb and bus_a == bus_b and int(dom_a or "0", 16) == int(dom_b or "0", 16)


def check_gpus(
    samples: Sequence[GpuSample],
    errors: list[SampleError],
    before: Mapping[int, GpuSample] | None = None,
) -> list[GpuSample]:
    """Each sample with every impossible value None (n/a), and an error for each in
    ``errors`` (the bounds are the model's: docs/drivers.md, "Values gputop refuses").
    ``before``: by GPU index, a sample this check gave out (the last read's); what a
    sample shares of it is whole, and is not walked again."""
    before = before or {}
    checked = [
        check_gpu(sample, SOURCE, "the driver", _checked_ids(before.get(sample.index)))
        for sample in samples
    ]
    errors.extend(error for _, found in checked for error in found)
    return [sample for sample, _ in checked]


def _checked_ids(sample: GpuSample | None) -> frozenset[int]:
    """The ids of a checked sample, its parts and its rows (what ``check_gpu`` walks)."""
    if sample is None:
        return frozenset()
    parts = [getattr(sample, name) for name in _SHARED_PARTS]
    return frozenset(map(id, (sample, *parts, *sample.processes, *sample.mig_devices)))


def _scaled(value: Any, scale: float = 1.0) -> float | None:
    return None if value is None else float(value) / scale


def decode_clock_event_reasons(mask: int) -> tuple[str, ...]:
    """Bitmask -> names in bit order; unknown bits as hex. 0 -> () (nothing holds clocks)."""
    names = [name for bit, name in CLOCK_EVENT_REASONS if mask & bit]
    known = {bit for bit, _ in CLOCK_EVENT_REASONS}
    unknown = (1 << k for k in range(mask.bit_length()) if mask & (1 << k))
    return (*names, *(hex(bit) for bit in unknown if bit not in known))


def cuda_version_string(version: int | None) -> str | None:
    """NVML's CUDA driver version integer (1000*major + 10*minor) -> "12.4"."""
    if version is None or version <= 0:
        return None
    return f"{version // 1000}.{(version % 1000) // 10}"


def _bytes_or_str(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _raw(fn: Callable[..., Any]) -> Callable[..., Any]:
    """pynvml's string getters decode UTF-8 strictly; the wrapped function returns bytes."""
    return cast("Callable[..., Any]", getattr(fn, "__wrapped__", fn))


class _ProcV1(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]


class _ProcV2(_ProcV1):
    """nvmlProcessInfo_v2_t; nvml.h's v3 (nvmlProcessInfo_t) has the same 24-byte layout."""

    _fields_ = [("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


class _ProcV3Legacy(_ProcV2):
    """What drivers 535.43-535.86 write through ``_v3``: 32-byte entries."""

    _fields_ = [("usedGpuCcProtectedMemory", ctypes.c_ulonglong)]


@dataclass(frozen=True)
class ProcessCall:
    """One variant of NVML's running-processes call: its symbol and the structure it fills."""

    symbol: str
    layout: type[ctypes.Structure]
    label: str  # "v3", "v3 (535.43-535.86 layout)", "v2", "v1"


def read_process_list(nv: Any, call: ProcessCall, handle: Any) -> list[ctypes.Structure]:
    """The list as pynvml reads it, with the entry layout ``call`` says."""
    fn = nv._nvmlGetFunctionPointer(call.symbol)
    count = ctypes.c_uint(0)
    ret = fn(handle, ctypes.byref(count), None)
    if ret == 0:  # NVML_SUCCESS: no processes
        return []
    if ret != 7:  # NVML_ERROR_INSUFFICIENT_SIZE is the normal answer
        raise nv.NVMLError(ret)
    count.value = count.value * 2 + 5  # room for processes that start meanwhile
    array = (call.layout * count.value)()
    ret = fn(handle, ctypes.byref(count), array)
    if ret != 0:
        raise nv.NVMLError(ret)
    return [array[i] for i in range(count.value)]


def _entries(entries: list[Any]) -> Iterator[tuple[int, int | None, int | None, int | None]]:
    """(pid, used memory, GPU instance, compute instance; None: not known) of each entry,
    read through the structure's own descriptors (see _process_utilization)."""
    if not entries:
        return
    layout = type(entries[0])
    pid_of, used_of = layout.pid.__get__, layout.usedGpuMemory.__get__
    v1 = not hasattr(layout, "gpuInstanceId")  # v1 entries have no instances
    gi_of = (lambda e: _NO_ID) if v1 else layout.gpuInstanceId.__get__
    ci_of = (lambda e: _NO_ID) if v1 else layout.computeInstanceId.__get__
    for e in entries:
        used, gi, ci = int(used_of(e)), int(gi_of(e)), int(ci_of(e))
        yield (
            int(pid_of(e)),
            None if used >= 2**64 - 1 else used,
            None if gi == _NO_ID else gi,
            None if ci == _NO_ID else ci,
        )


class PidCheck:
    """Is a pid NVML listed a process that holds an NVIDIA device open? (None: cannot
    tell.) A yes is remembered per (pid, start time); where the kernel has pidfds, one
    ``poll()`` a tick replaces a ``/proc/PID/stat`` read of each, with the same answers."""

    #: At most this many pidfds are held (past it, the start-time comparison alone).
    MAX_PIDFDS = 1024

    def __init__(self, device_prefix: str = "/dev/nvidia") -> None:
        self.device_prefix = device_prefix
        self._ok: dict[int, int] = {}  # pid -> its start time, found holding
        self._checkable: bool | None = None
        self._pidfds: dict[int, int] = {}  # pid -> pidfd, of pids in _ok
        self._use_pidfds = hasattr(os, "pidfd_open") and hasattr(select, "poll")
        self._poll = select.poll() if self._use_pidfds else None
        self._exited: set[int] | None = None  # pids whose pidfd reported an exit, this tick

    def checkable(self) -> bool:
        if self._checkable is None:
            directory, _, stem = self.device_prefix.rpartition("/")
            try:
                self._checkable = any(n.startswith(stem) for n in os.listdir(directory or "/"))
            except OSError:
                self._checkable = False
        return self._checkable

    def _start(self, pid: int) -> int | None:
        st = read_stat(pid)
        return None if st is None else st.starttime

    def _hold(self, pid: int) -> None:
        if self._poll is None or len(self._pidfds) >= self.MAX_PIDFDS:
            return
        try:
            fd = os.pidfd_open(pid)
        except OSError:  # no pidfds in this kernel, gone meanwhile, out of descriptors
            return
        self._pidfds[pid] = fd
        self._poll.register(fd, select.POLLIN)

    def _drop_pidfd(self, pid: int) -> None:
        fd = self._pidfds.pop(pid, None)
        if fd is not None and self._poll is not None:  # a pidfd is held only with a poll
            with contextlib.suppress(KeyError, ValueError):
                self._poll.unregister(fd)
            with contextlib.suppress(OSError):
                os.close(fd)

    def holds_device(self, pid: int) -> bool | None:
        if not self.checkable():
            return None
        if pid in self._pidfds and self._poll is not None:
            if self._exited is None:  # once a tick (forget_except ends the tick)
                ready = {fd for fd, _ in self._poll.poll(0)}
                self._exited = {p for p, fd in self._pidfds.items() if fd in ready}
            if pid not in self._exited:
                return True  # the process found holding, alive: as a start-time match says
            self._drop_pidfd(pid)  # it exited (a zombie too): the start-time comparison
        start = self._start(pid)
        if start is None:
            return None  # not in this PID namespace (or gone): cannot tell
        if self._ok.get(pid) == start:
            return True
        self._drop_pidfd(pid)  # another process now has this pid
        fd_dir = f"/proc/{pid}/fd"
        try:
            names = os.listdir(fd_dir)
        except OSError:
            return None  # another user's process: cannot tell
        for name in names:
            try:
                target = os.readlink(f"{fd_dir}/{name}")
            except OSError:
                continue
            if target.startswith(self.device_prefix):
                self._ok[pid] = start
                self._hold(pid)
                return True
        self._ok.pop(pid, None)
        return False

    def forget_except(self, pids: set[int]) -> None:
        """End of a tick."""
        for pid in [p for p in self._ok if p not in pids]:
            del self._ok[pid]
            self._drop_pidfd(pid)
        self._exited = None

    def close(self) -> None:
        self.forget_except(set())


class _Lost(Exception):
    """The GPU is lost; why, in words, is its one argument."""


@dataclass
class _Gpu:
    """One GPU's handle and static information, kept between ticks."""

    index: int
    handle: Any = None
    lost_reason: str | None = None  # set while the GPU is lost
    # static information, read when the handle is (re-)acquired
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    minor_number: int | None = None
    sm_max_mhz: int | None = None
    memory_max_mhz: int | None = None
    pcie_max_gen: int | None = None
    pcie_max_width: int | None = None
    # metric -> NotSupported or FunctionNotFound, what it answered: not asked again
    unsupported: dict[str, int] = field(default_factory=dict)
    variant: dict[str, int] = field(default_factory=dict)  # metric -> first working call
    last_sample_us: int = 0  # newest per-process utilization timestamp seen
    pcie_call: _PcieCall | None = None  # TX and RX of this handle
    # PCIe byte counters: both answered when asked at attach (then no PCIe thread); this
    # tick's (TX, RX) rates from them, taken by _pcie_rates
    pcie_counters: bool = False
    pcie_counter_rates: tuple[float | None, float | None] = (None, None)
    # last read's rows by pid: an unchanged row is given out again (snapshots share it)
    last_processes: dict[int, GpuProcess] = field(default_factory=dict)
    # GPM: supported (asked once per attach); the last sample, when it was taken, a spare
    gpm: bool = False
    gpm_ids: tuple[int, ...] = ()  # the metric ids still asked (NOT_SUPPORTED ones left out)
    # by GPU instance id (None: the whole GPU): [last sample, when it was taken, a spare]
    gpm_samples: dict[int | None, list[Any]] = field(default_factory=dict)
    # NVLink, read at attach: active links, their version, each active link's far end
    nvlink_links: int | None = None
    nvlink_version: int | None = None
    nvlink_remote: tuple[tuple[str | None, int | None], ...] = ()  # (bus id, device type)
    # each link's far end as said (``_peers``), with what it was worked out from
    nvlink_peers: tuple[object, tuple[str, ...]] | None = None
    counters: dict[tuple[int, int], tuple[int, float]] = field(default_factory=dict)

    def reset(self) -> None:
        self.handle = None
        self.gpm = False
        self.gpm_samples = {}  # freed by the reader (_free_gpm) first
        self.nvlink_links = self.nvlink_version = None
        self.nvlink_remote = ()
        self.nvlink_peers = None
        self.counters.clear()
        self.pcie_counters = False
        self.pcie_counter_rates = (None, None)
        self.last_processes = {}
        self.unsupported.clear()
        self.variant.clear()
        self.last_sample_us = 0
        if self.pcie_call is not None:  # bound to the old handle
            self.pcie_call.retire()
        self.pcie_call = None


class NvmlReader:
    """Reads every GPU through NVML. Call ``read()`` from one thread (the sampler's)."""

    def __init__(self, pid_check: PidCheck | None = None) -> None:
        self._nv: Any = None  # pynvml, while NVML is initialized
        # What this libnvidia-ml.so.1 offers, probed once: each tick makes only calls that exist
        self._symbols: dict[str, bool] = {}
        self._process_calls: dict[str, ProcessCall | None] = {}
        self._pid_check = pid_check if pid_check is not None else PidCheck()
        self._pid_max = pid_max()
        self._count: int | None = None
        self._gpus: list[_Gpu] = []
        self._pcie_calls: list[_PcieCall] = []  # every PCIe call thread still alive
        self._pcie_answers = _PcieAnswers()
        self._last_samples: dict[int, GpuSample] = {}  # the last read, by GPU index
        self._errors: list[SampleError] = []  # the running read's
        self._clock: Callable[[], float] = time.monotonic  # GPM spacing, counter rates
        self._gpm_request: Any = None  # one nvmlGpmMetricsGet_t, made on first use
        self._gpm_asked: tuple[int, ...] = ()  # the metric ids written in it last
        self._reads: tuple[tuple[str, tuple[tuple[str, tuple[Any, ...]], ...]], ...] | None = None
        self.driver: DriverInfo = self._init()

    @property
    def min_pair_window_s(self) -> float:
        """How far apart two readings must start for GPM to give its metrics (0: no GPU
        with GPM, as far as the readings so far tell)."""
        return GPM_PAIR_WINDOW_S if any(gpu.gpm for gpu in self._gpus) else 0.0

    def _init(self) -> DriverInfo:
        try:
            import pynvml as nv
        except ImportError:
            return DriverInfo(available=False, error=_NO_BINDING)
        try:
            nv.nvmlInit()
        except Exception as exc:
            why = f"NVML failed to initialize: {_describe(nv, exc)}."
            return DriverInfo(available=False, error=_INIT_ERRORS.get(_code(nv, exc) or 0, why))
        self._nv = nv
        self._ensure_count()
        return DriverInfo(
            available=True,
            driver_version=self._system_string(nv.nvmlSystemGetDriverVersion),
            cuda_version=cuda_version_string(self._cuda_version()),
            nvml_version=self._system_string(nv.nvmlSystemGetNVMLVersion),
            compat=self._notes(),
        )

    def _system_string(self, fn: Callable[[], Any]) -> str | None:
        try:
            return clean_text(_raw(fn)(), limit=80)
        except Exception:
            return None

    def _cuda_version(self) -> int | None:
        for name in ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"):
            with contextlib.suppress(Exception):  # missing, or failing: the older one
                return int(getattr(self._nv, name)())
        return None

    def _has(self, symbol: str) -> bool:
        # pynvml finds symbols lazily and raises FunctionNotFound only at the call
        if symbol not in self._symbols:
            try:
                self._nv._nvmlGetFunctionPointer(symbol)
                self._symbols[symbol] = True
            except Exception:  # FunctionNotFound (or NVML not loaded: nothing to call)
                self._symbols[symbol] = False
        return self._symbols[symbol]

    def _process_call(self, kind: str) -> ProcessCall | None:
        """The newest variant of the "Compute" or "Graphics" list call this library has."""
        if kind not in self._process_calls:
            base = f"nvmlDeviceGet{kind}RunningProcesses"
            variants = (
                ProcessCall(f"{base}_v3", _ProcV2, "v3"),
                ProcessCall(f"{base}_v2", _ProcV2, "v2"),
                ProcessCall(base, _ProcV1, "v1"),
            )
            call = next((c for c in variants if self._has(c.symbol)), None)
            # 535.43-535.86: _v3 fills 32-byte entries (docs/drivers.md)
            legacy = self._has("nvmlDeviceGetConfComputeMemSizeInfo") and not self._has(
                "nvmlDeviceGetRunningProcessDetailList"
            )
            if call is not None and call.label == "v3" and legacy:
                call = ProcessCall(call.symbol, _ProcV3Legacy, "v3 (535.43-535.86 layout)")
            self._process_calls[kind] = call
        return self._process_calls[kind]

    def _notes(self) -> tuple[str, ...]:
        """The fallbacks in use, in words (``DriverInfo.compat``); () when none."""
        out = []
        for kind in ("Compute", "Graphics"):
            call = self._process_call(kind)
            if call is None:
                out.append(
                    f"{kind.lower()} process list unavailable: driver lacks "
                    f"nvmlDeviceGet{kind}RunningProcesses (v1, v2 and v3)"
                )
            elif call.label != "v3":
                out.append(f"{kind.lower()} process list read with {call.symbol} ({call.label})")
        if not self._has("nvmlDeviceGetMemoryInfo_v2"):
            out.append("memory read with nvmlDeviceGetMemoryInfo v1: used includes reserved")
        if not self._has("nvmlDeviceGetCurrentClocksEventReasons"):
            out.append("clock-event reasons read with nvmlDeviceGetCurrentClocksThrottleReasons")
        if not self._has("nvmlDeviceGetMigMode"):
            out.append("driver lacks MIG calls (before R450): MIG not shown")
        return tuple(out)

    def close(self) -> None:
        """Shut NVML down (once); PCIe calls still running get ``CLOSE_WAIT_S`` in all,
        never a wait on a call NVML does not answer."""
        deadline = time.monotonic() + CLOSE_WAIT_S
        for call in self._pcie_calls:
            call.retire()
        for call in self._pcie_calls:
            call.thread.join(max(0.0, deadline - time.monotonic()))
        self._pcie_calls = []
        self._pid_check.close()
        for gpu in self._gpus:
            self._free_gpm(gpu)
        if self._nv is not None:
            with contextlib.suppress(Exception):
                self._nv.nvmlShutdown()
            self._nv = None

    def read(self) -> tuple[tuple[GpuSample, ...], tuple[SampleError, ...]]:
        """Sample every GPU once. Never raises."""
        if self._nv is None:
            return (), ()
        errors = self._errors = []
        last = self._last_samples
        try:
            # what did not change is the last read's object (the history holds one copy),
            # which the check gave out: it is not walked again
            read = [reuse_equal(g, last.get(g.index), _SHARED_PARTS) for g in self._read_all()]
            checked = check_gpus(read, errors, last)  # impossible values: n/a
        except Exception as exc:  # a bug of ours: say so, keep the app alive
            errors.append(SampleError(SOURCE, f"NVML read failed: {_describe(self._nv, exc)}"))
            return (), tuple(errors)
        shared = tuple(
            c if c is g else reuse_equal(c, last.get(c.index), _SHARED_PARTS)  # made n/a
            for c, g in zip(checked, read, strict=True)
        )
        self._last_samples = {g.index: g for g in shared}
        return shared, tuple(errors)

    def _read_all(self) -> list[GpuSample]:
        self._ensure_count()
        for gpu in self._gpus:
            if gpu.handle is None:
                self._attach(gpu)
        started = time.monotonic()
        self._start_pcie()
        # the values are read while the PCIe calls run; samples are made once they answer
        readings: list[dict[str, Any] | GpuSample] = []
        for gpu in self._gpus:
            if gpu.handle is not None:
                try:
                    readings.append(self._read_gpu(gpu))
                    continue
                except _Lost as lost:
                    self._mark_lost(gpu, str(lost))
                except Exception as exc:
                    self._report(gpu, "gpu", f"reading failed: {_describe(self._nv, exc)}")
            readings.append(self._identity(gpu))
        self._pid_check.forget_except(
            {p.pid for r in readings if isinstance(r, dict) for p in r["processes"]}
        )
        self._wait_pcie(started + PCIE_WAIT_S)
        samples: list[GpuSample] = []
        for gpu, reading in zip(self._gpus, readings, strict=True):
            try:
                tx, rx = self._pcie_rates(gpu)
            except _Lost as lost:
                self._mark_lost(gpu, str(lost))
                samples.append(self._identity(gpu))
                continue
            if isinstance(reading, GpuSample):  # identity only: no handle, or a reading failed
                if tx is not None or rx is not None:
                    reading = replace(reading, pcie=Pcie(tx_bytes_per_s=tx, rx_bytes_per_s=rx))
                samples.append(reading)
                continue
            reading["pcie"] = Pcie(
                gen=reading.pop("pcie_gen"),
                width=reading.pop("pcie_width"),
                max_gen=gpu.pcie_max_gen,
                max_width=gpu.pcie_max_width,
                link_max_bytes_per_s=link_max_bytes_per_s(gpu.pcie_max_gen, gpu.pcie_max_width),
                tx_bytes_per_s=tx,
                rx_bytes_per_s=rx,
            )
            samples.append(GpuSample(**reading))
        return samples

    def _ensure_count(self) -> None:
        if self._count is None:
            try:
                self._count = int(self._nv.nvmlDeviceGetCount())
                self._gpus = [_Gpu(i) for i in range(self._count)]
            except Exception as exc:
                message = f"cannot count GPUs: {_describe(self._nv, exc)}"
                self._errors.append(SampleError(SOURCE, message, metric="count"))

    def _attach(self, gpu: _Gpu) -> None:
        """Handle and static information; on failure the GPU stays detached."""
        nv, call = self._nv, self._call
        self._free_gpm(gpu)
        gpu.reset()
        try:
            try:
                h = nv.nvmlDeviceGetHandleByIndex(gpu.index)
            except Exception as exc:
                _raise_if_lost(nv, exc)
                self._report(gpu, "handle", f"cannot open the GPU: {_describe(nv, exc)}")
                return
            name = self._get(gpu, "name", lambda: _raw(nv.nvmlDeviceGetName)(h))
            uuid = self._get(gpu, "uuid", lambda: _raw(nv.nvmlDeviceGetUUID)(h))
            gpu.name, gpu.uuid = clean_text(name, 96), clean_text(uuid, 96)
            pci = self._get(gpu, "pci_bus_id", call(h, "nvmlDeviceGetPciInfo"))
            gpu.pci_bus_id = None if pci is None else clean_text(pci.busId, 32)
            for attr, (metric, fn, *consts) in _STATIC.items():
                setattr(gpu, attr, self._get(gpu, metric, call(h, fn, *consts)))
            self._attach_gpm(gpu, h)
            self._attach_nvlink(gpu, h)
            gpu.pcie_counters = self._has_pcie_counters(h)
            # the metric ids GPM is asked for: NVLink's only where links are up
            gpu.gpm_ids = (*_GPM_IDS, *(_GPM_NVLINK_IDS if gpu.nvlink_links else ()))
        except _Lost as lost:
            self._mark_lost(gpu, str(lost))
            return
        gpu.handle = h
        gpu.lost_reason = None

    def _mark_lost(self, gpu: _Gpu, reason: str) -> None:
        self._free_gpm(gpu)
        gpu.reset()
        gpu.lost_reason = reason
        self._report(gpu, "lost", reason)

    def _identity(self, gpu: _Gpu) -> GpuSample:
        """The GPU as last seen, and whether it is lost (a GPU without a handle is lost or
        not accessible; one whose reading failed is neither)."""
        identity = {name: getattr(gpu, name) for name in _IDENTITY}
        return GpuSample(**identity, lost=gpu.lost_reason is not None, lost_reason=gpu.lost_reason)

    def _report(self, gpu: _Gpu, metric: str, message: str) -> None:
        """Report ``message`` about ``gpu`` in this read's errors."""
        error = SampleError(SOURCE, f"GPU {gpu.index}: {message}", gpu=gpu.index, metric=metric)
        self._errors.append(error)

    def _call(self, h: Any, fn: str, *consts: str) -> Callable[[], Any]:
        """``nv.fn(h, nv.CONST, ...)``, looked up at each call."""
        nv = self._nv
        return lambda: getattr(nv, fn)(h, *(getattr(nv, c) for c in consts))

    def _scalar_reads(self) -> tuple[tuple[str, tuple[tuple[str, tuple[Any, ...]], ...]], ...]:
        """``_READS`` for this pynvml: the variants it has (the oldest always: it fails as any
        call does), each function's name and its constants' values; made once."""
        reads = self._reads
        if reads is None:
            nv = self._nv
            reads = self._reads = tuple(
                (
                    metric,
                    tuple(
                        (fn, tuple(getattr(nv, c) for c in consts))
                        for fn, *consts in calls
                        if (fn, *consts) == calls[-1] or hasattr(nv, fn)
                    ),
                )
                for metric, calls in _READS.items()
            )
        return reads

    def _get(
        self,
        gpu: _Gpu,
        metric: str,
        *calls: Callable[[], Any],
        fall_back_on: frozenset[int] = _FALL_BACK_ON,
    ) -> Any:
        """The value of the first call variant the driver has (newest first; the one that
        works is remembered), or None; raises _Lost for a lost GPU."""
        if metric in gpu.unsupported:
            return None
        for k in range(gpu.variant.get(metric, 0), len(calls)):
            try:
                return calls[k]()
            except Exception as exc:
                if not self._next_variant(gpu, metric, k, len(calls), exc, fall_back_on):
                    return None
        return None

    def _next_variant(
        self,
        gpu: _Gpu,
        metric: str,
        k: int,
        variants: int,
        exc: Exception,
        fall_back_on: frozenset[int] = _FALL_BACK_ON,
    ) -> bool:
        """After variant ``k`` of ``variants`` failed with ``exc``: whether the next one is
        to be tried (remembered from now on); if not, the failure is reported."""
        if _code(self._nv, exc) not in fall_back_on or k + 1 == variants:
            self._failed(gpu, metric, exc)
            return False
        gpu.variant[metric] = k + 1
        return True

    def _scalars(self, gpu: _Gpu, h: Any) -> dict[str, Any]:
        """Each of ``_READS``' values (None: not read), as ``_get`` reads it: the variant
        that worked is called directly, and only a failure goes through ``_get``'s list of
        calls (no callable made per value and tick)."""
        nv, unsupported, variant = self._nv, gpu.unsupported, gpu.variant
        out: dict[str, Any] = {}
        for metric, calls in self._scalar_reads():
            if metric in unsupported:
                out[metric] = None
                continue
            k = variant.get(metric, 0)
            fn, args = calls[k]
            try:
                out[metric] = getattr(nv, fn)(h, *args)  # looked up at each call
                continue
            except Exception as exc:
                value = None
                if self._next_variant(gpu, metric, k, len(calls), exc):
                    variants = [partial(getattr(nv, f), h, *a) for f, a in calls]
                    value = self._get(gpu, metric, *variants)  # from the next variant on
            out[metric] = value
        return out

    def _failed(self, gpu: _Gpu, metric: str, exc: Exception, denied: str = "") -> int | None:
        """Report the failure (or mark ``metric`` unsupported); its nvmlReturn_t."""
        code = _raise_if_lost(self._nv, exc)
        if code in (_NOT_SUPPORTED, _FUNCTION_NOT_FOUND):
            gpu.unsupported[metric] = code
        elif code == _NO_PERMISSION:
            self._report(gpu, metric, denied or f"no permission to read {metric}")
        else:
            self._report(gpu, metric, f"reading {metric} failed: {_describe(self._nv, exc)}")
        return code

    def _read_gpu(self, gpu: _Gpu) -> dict[str, Any]:
        """The fields of the GPU's GpuSample but ``pcie``."""
        nv = self._nv
        h = gpu.handle
        memory = self._memory(gpu, h)
        v = self._scalars(gpu, h)
        processes, unavailable = self._processes(gpu, h)
        util, enc, dec, mig, pstate = (
            v[m] for m in ("utilization", "encoder", "decoder", "mig_mode", "performance_state")
        )
        mig_on = mig is not None and mig[0] == nv.NVML_DEVICE_MIG_ENABLE
        return {
            **{name: getattr(gpu, name) for name in _IDENTITY},
            "memory": memory,
            "utilization": Utilization(
                gpu=None if util is None else float(util.gpu),
                memory=None if util is None else float(util.memory),
            ),
            "encoder_percent": None if enc is None else float(enc[0]),
            "decoder_percent": None if dec is None else float(dec[0]),
            "temperature_c": _scaled(v["temperature"]),
            "power_w": _scaled(v["power"], 1000.0),
            "power_limit_w": _scaled(v["power_limit"], 1000.0),
            "fan_percent": _scaled(v["fan"]),
            "clocks": Clocks(
                sm_mhz=v["sm_clock"],
                memory_mhz=v["memory_clock"],
                sm_max_mhz=gpu.sm_max_mhz,
                memory_max_mhz=gpu.memory_max_mhz,
            ),
            "clock_event_reasons": None
            if v["clock_event_reasons"] is None
            else decode_clock_event_reasons(v["clock_event_reasons"]),
            # NVML_PSTATE_UNKNOWN (32): the driver does not know it, n/a.
            "performance_state": None if pstate in (None, nv.NVML_PSTATE_UNKNOWN) else pstate,
            "pcie_gen": v["pcie_gen"],  # the Pcie part is made with the throughput (_read_all)
            "pcie_width": v["pcie_width"],
            **self._inside(gpu, h, mig_on),
            "mig_mode": None if mig is None else mig_on,
            "mig_devices": self._mig_devices(gpu, h) if mig_on else (),
            "ecc_uncorrected": v["ecc"],
            "processes": processes,
            "processes_unavailable": unavailable,
        }

    def _attach_gpm(self, gpu: _Gpu, h: Any) -> None:
        """Whether the GPU has GPM (Hopper and later), asked once per attach."""
        if not self._has("nvmlGpmQueryDeviceSupport"):
            return
        support = self._get(gpu, "gpm", lambda: self._nv.nvmlGpmQueryDeviceSupport(h))
        gpu.gpm = bool(support is not None and support.isSupportedDevice)

    def _attach_nvlink(self, gpu: _Gpu, h: Any) -> None:
        """The active links, their version and far ends; none: not an NVLink GPU."""
        nv = self._nv
        if not self._has(_LINK_STATE):
            return
        active: list[int] = []
        for link in range(int(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18))):
            try:
                if getattr(nv, _LINK_STATE)(h, link):
                    active.append(link)
            except Exception as exc:  # past the last link (or no NVLink at all)
                if _raise_if_lost(nv, exc) not in (_NOT_SUPPORTED, _INVALID_ARGUMENT):
                    self._failed(gpu, "nvlink", exc)
                break
        if not active:
            return
        gpu.nvlink_links = len(active)
        gpu.nvlink_version = self._get(
            gpu, "nvlink_version", lambda: nv.nvmlDeviceGetNvLinkVersion(h, active[0])
        )
        remote = []
        for link in active:
            pci = self._get(gpu, "nvlink_remote", self._call_link(h, "RemotePciInfo", link))
            far = self._call_link(h, "RemoteDeviceType", link)
            kind = self._get(gpu, "nvlink_remote_type", far)
            bus = None if pci is None else clean_text(_bytes_or_str(pci.busId), 32)
            remote.append((bus, None if kind is None else int(kind)))
        gpu.nvlink_remote = tuple(remote)

    def _call_link(self, h: Any, what: str, link: int) -> Callable[[], Any]:
        """``nv.nvmlDeviceGetNvLink<what>(h, link)``, looked up at the call."""
        nv = self._nv
        return lambda: getattr(nv, f"nvmlDeviceGetNvLink{what}")(h, link)

    def _free_gpm(self, gpu: _Gpu, keep: set[int | None] | None = None) -> None:
        """Free the GPU's GPM samples; ``keep``: but those of these instances (MIG devices
        still there)."""
        for instance in [i for i in gpu.gpm_samples if keep is None or i not in keep]:
            last, _, spare = gpu.gpm_samples.pop(instance)
            for sample in (last, spare):
                if sample is not None and self._nv is not None:
                    with contextlib.suppress(Exception):
                        self._nv.nvmlGpmSampleFree(sample)

    def _gpm(self, gpu: _Gpu, h: Any, instance: int | None = None) -> dict[int, float | None]:
        """GPM metric id -> value between the last sample of the GPU (or of its GPU
        ``instance``, MIG) and one taken now; {} on the first sample, when the last is
        under GPM_MIN_S old (it is kept for the next reading), or without GPM."""
        if not gpu.gpm or not gpu.gpm_ids:
            return {}
        nv = self._nv
        now = self._clock()
        slot = gpu.gpm_samples.setdefault(instance, [None, 0.0, None])
        last, last_s, spare = slot
        if last is not None and now - last_s < GPM_MIN_S:
            return {}  # too soon: n/a this reading, the older sample stays
        try:
            sample = spare if spare is not None else nv.nvmlGpmSampleAlloc()
            slot[2] = sample  # kept (and freed) whatever happens next
            if instance is None:
                nv.nvmlGpmSampleGet(h, sample)
            else:
                nv.nvmlGpmMigSampleGet(h, instance, sample)
        except Exception as exc:
            code = _raise_if_lost(nv, exc)
            if code in (_NO_PERMISSION, _NOT_SUPPORTED, _FUNCTION_NOT_FOUND):
                # said once; n/a from now on (a container without the profiling capability)
                why = "no permission" if code == _NO_PERMISSION else "not supported"
                self._report(gpu, "gpm", f"GPM samples: {why}; SM, tensor and DRAM activity n/a")
                self._free_gpm(gpu)
                gpu.gpm = False
            else:
                self._failed(gpu, "gpm", exc)
            return {}
        slot[:] = [sample, now, last]
        if last is None:
            return {}
        try:
            return self._gpm_metrics(gpu, last, sample, instance is None)
        except Exception as exc:
            self._failed(gpu, "gpm", exc)
            return {}

    def _gpm_metrics(
        self, gpu: _Gpu, first: Any, second: Any, whole: bool = True
    ) -> dict[int, float | None]:
        """nvmlGpmMetricsGet in requests of at most the binding's metrics[] length (it
        grew across nvml.h versions while the struct's version stayed 1)."""
        nv = self._nv
        request = self._gpm_request
        if request is None:
            request = self._gpm_request = nv.c_nvmlGpmMetricsGet_t()
            self._gpm_asked = ()
        # one view of the array: each attribute of the binding's structures costs a
        # Python call, and this runs per GPU per tick (bench/bench_sampler.py --gpm)
        metrics = request.metrics
        room = len(metrics)
        out: dict[int, float | None] = {}
        unsupported: set[int] = set()
        ids = gpu.gpm_ids if whole else tuple(i for i in gpu.gpm_ids if i in _GPM_IDS)
        for at in range(0, len(ids), room):
            chunk = ids[at : at + room]
            request.version = nv.NVML_GPM_METRICS_GET_VERSION
            request.numMetrics = len(chunk)
            request.sample1, request.sample2 = first, second
            if chunk != self._gpm_asked:  # the ids stay in the request from the last call
                for i, metric_id in enumerate(chunk):
                    metrics[i].metricId = metric_id
                self._gpm_asked = chunk
            try:
                nv.nvmlGpmMetricsGet(request)
            except Exception:
                self._gpm_asked = ()  # what the call left in the request is not known
                raise
            # each answer read through the structure's own descriptors (see _entries)
            layout = type(metrics[0])
            ret_of, value_of = layout.nvmlReturn.__get__, layout.value.__get__
            for i, metric_id in enumerate(chunk):
                slot = metrics[i]
                ret = int(ret_of(slot))
                if ret == 0:
                    out[metric_id] = float(value_of(slot))
                elif ret in (_NOT_SUPPORTED, _FUNCTION_NOT_FOUND):
                    unsupported.add(metric_id)  # n/a, not asked again
                else:
                    out[metric_id] = None
        if unsupported:
            gpu.gpm_ids = tuple(i for i in gpu.gpm_ids if i not in unsupported)
        return out

    def _has_pcie_counters(self, h: Any) -> bool:
        """Whether the GPU answers both PCIe byte counters (asked once per attach); any
        failure: no, silently (the PCIe thread reads the throughput, and its answers
        say whether the GPU is lost)."""
        try:
            values = self._nv.nvmlDeviceGetFieldValues(h, list(_PCIE_COUNTERS))
        except Exception:
            return False
        return len(values) == len(_PCIE_COUNTERS) and all(int(v.nvmlReturn) == 0 for v in values)

    def _counter_rates(self, gpu: _Gpu, h: Any) -> dict[tuple[int, int], float | None]:
        """(field id, scope) -> count per second since the last tick (None: not known): the
        NVLink counters where links are up and the PCIe byte counters where the GPU has
        them, in one call."""
        nvlink = bool(gpu.nvlink_links) and "nvlink_counters" not in gpu.unsupported
        pcie = gpu.pcie_counters and "pcie_counters" not in gpu.unsupported
        fields = (*(_COUNTERS if nvlink else ()), *(_PCIE_COUNTERS if pcie else ()))
        if not fields:
            return {}
        nv = self._nv
        metric = "nvlink_counters" if nvlink else "pcie_counters"
        values = self._get(gpu, metric, lambda: nv.nvmlDeviceGetFieldValues(h, list(fields)))
        if values is None:
            return {}
        now = self._clock()
        out: dict[tuple[int, int], float | None] = {}
        for key, value in zip(fields, values, strict=True):
            if int(value.nvmlReturn) != 0:
                gpu.counters.pop(key, None)
                continue
            reading = (int(value.value.ullVal), now)
            out[key] = counter_rate(gpu.counters.get(key), reading, 1.0)
            gpu.counters[key] = reading
        return out

    def _inside(self, gpu: _Gpu, h: Any, mig_on: bool) -> dict[str, Any]:
        """The ``activity`` and ``nvlink`` parts: each row of the table from its first read
        that gives a value. In MIG mode GPM is read per GPU instance (``_mig_devices``)."""
        gpm = {} if mig_on else self._gpm(gpu, h)
        rates = self._counter_rates(gpu, h)
        gpu.pcie_counter_rates = (rates.get(_PCIE_TX), rates.get(_PCIE_RX))
        parts = _from_reads(gpm, rates, bool(gpu.nvlink_links))
        nvlink = Nvlink()
        if gpu.nvlink_links:
            version, per_link = NVLINK_VERSIONS.get(gpu.nvlink_version or 0, (None, None))
            nvlink = Nvlink(
                links=gpu.nvlink_links,
                version=version,
                max_bytes_per_s=None if per_link is None else gpu.nvlink_links * per_link,
                peers=self._peers(gpu),
                **parts["nvlink"],
            )
        return {"activity": Activity(**parts["activity"]), "nvlink": nvlink}

    def _peers(self, gpu: _Gpu) -> tuple[str, ...]:
        """Each active link's far end, worked out again only when the links or the GPUs'
        bus ids change: matching every link against every GPU each tick cost more than
        all the GPM and NVLink reads together (bench/bench_sampler.py --gpm)."""
        key = (gpu.nvlink_remote, tuple((other.index, other.pci_bus_id) for other in self._gpus))
        if gpu.nvlink_peers is None or gpu.nvlink_peers[0] != key:
            peers = tuple(self._peer(bus, kind) for bus, kind in gpu.nvlink_remote)
            gpu.nvlink_peers = (key, peers)
        return gpu.nvlink_peers[1]

    def _peer(self, bus: str | None, kind: int | None) -> str:
        """A link's far end: the local GPU of its bus id, an NVSwitch, or unknown."""
        for other in self._gpus:
            if same_bus(bus, other.pci_bus_id):
                return f"GPU {other.index}"
        return "switch" if kind == _NVLINK_SWITCH else "unknown"

    def _memory(self, gpu: _Gpu, h: Any) -> GpuMemory:
        nv = self._nv
        calls: list[Callable[[], Any]] = []
        if hasattr(nv, "nvmlMemory_v2"):
            calls.append(lambda: nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2))
        calls.append(lambda: nv.nvmlDeviceGetMemoryInfo(h))
        fall_back_on = frozenset({_FUNCTION_NOT_FOUND, _ARGUMENT_VERSION_MISMATCH, _NOT_SUPPORTED})
        mem = self._get(gpu, "memory", *calls, fall_back_on=fall_back_on)
        if mem is None:
            return GpuMemory()
        reserved = getattr(mem, "reserved", None)  # v1 has no such field: used includes it
        return GpuMemory(
            total=int(mem.total),
            used=int(mem.used),
            free=int(mem.free),
            reserved=None if reserved is None else int(reserved),
        )

    def _processes(self, gpu: _Gpu, h: Any) -> tuple[tuple[GpuProcess, ...], str | None]:
        """The merged process rows, and why a list could not be read (None: both read)."""
        merged: dict[int, list[Any]] = {}  # pid -> [type, memory, gi, ci]
        dropped: dict[str, int] = {}  # why an entry cannot be a real process -> count
        unreadable: list[str] = []  # e.g. "compute list: no permission"
        listed = 0
        pid_max = self._pid_max
        for kind, what in (("C", "compute"), ("G", "graphics")):
            entries = self._read_list(gpu, h, what)
            if isinstance(entries, str):
                unreadable.append(f"{what} list: {entries}")
                continue
            listed += len(entries)
            seen: set[tuple[int, int | None, int | None]] = set()
            for pid, used, gi, ci in _entries(entries):
                if pid in INVALID_PIDS:
                    why = f"pid {pid}"
                elif pid > pid_max:
                    why = f"pid above pid_max {pid_max}"
                elif (pid, gi, ci) in seen:
                    why = "a pid listed twice"
                else:
                    seen.add((pid, gi, ci))
                    row = merged.setdefault(pid, [kind, None, gi, ci])
                    if kind not in row[0]:
                        row[0] = "C+G"
                    if used is not None and (row[1] is None or used > row[1]):
                        row[1] = used
                    continue
                dropped[why] = dropped.get(why, 0) + 1
        for pid in list(merged):  # where it cannot tell (None), the entry stays
            if self._pid_check.holds_device(pid) is False:
                del merged[pid]
                why = "a process holding no /dev/nvidia* device"
                dropped[why] = dropped.get(why, 0) + 1
        if dropped:
            n = sum(dropped.values())
            reasons = ", ".join(f"{count} x {why}" for why, count in dropped.items())
            message = (
                f"NVML listed {n} process entr{'y' if n == 1 else 'ies'} that cannot be a "
                f"real process ({reasons}); not shown, never signalled"
            )
            self._report(gpu, "processes", message)
            if not merged and not unreadable:
                unreadable.append(
                    f"process list unavailable: all {listed} entries NVML listed are "
                    f"implausible ({reasons})"
                )
        if len(unreadable) == 2 and all("driver lacks" in u for u in unreadable):
            unreadable = [
                "process list unavailable: driver lacks nvmlDeviceGetComputeRunningProcesses "
                "and nvmlDeviceGetGraphicsRunningProcesses (v1, v2 and v3)"
            ]
        unavailable = "; ".join(unreadable) if unreadable else None
        if not merged:
            gpu.last_processes = {}
            return (), unavailable
        usage = self._process_utilization(gpu, h)
        out = []
        last = gpu.last_processes
        for pid, (kind, memory, gi, ci) in merged.items():
            sm, bw = (None, None) if usage is None else usage.get(pid, (0.0, 0.0))
            before = last.get(pid)
            if before is not None:  # what did not change stays the same object
                pid = before.pid
                if before.gpu_memory == memory:
                    memory = before.gpu_memory
            made = GpuProcess(
                pid=pid,
                type=kind,
                gpu_memory=memory,
                sm_percent=_percent(sm),
                memory_bandwidth_percent=_percent(bw),
                gpu_instance_id=gi,
                compute_instance_id=ci,
            )
            out.append(reuse_equal(made, before))
        gpu.last_processes = {p.pid: p for p in out}
        return tuple(out), unavailable

    def _read_list(self, gpu: _Gpu, h: Any, what: str) -> list[Any] | str:
        """One process list with the newest call the library has, or why not in words."""
        metric, family = f"{what}_processes", what.capitalize()
        while True:
            call = self._process_call(family)
            if call is None:
                return f"driver lacks nvmlDeviceGet{family}RunningProcesses (v1, v2 and v3)"
            if metric in gpu.unsupported:
                return _UNREADABLE[gpu.unsupported[metric]]
            try:
                return read_process_list(self._nv, call, h)
            except Exception as exc:
                if _code(self._nv, exc) == _FUNCTION_NOT_FOUND:
                    # the symbol exists but answered "function not found": the next variant
                    self._symbols[call.symbol] = False
                    self._process_calls.clear()
                    continue
                denied = f"no permission to list {what} processes: they are not shown"
                return _UNREADABLE.get(self._failed(gpu, metric, exc, denied), "the call failed")

    def _mig_devices(self, gpu: _Gpu, h: Any) -> tuple[MigDevice, ...]:
        nv = self._nv

        def ask(fn: str, mh: Any, raw: bool = False) -> Any:
            try:  # looked up at each call, as every other NVML call is
                return (_raw(getattr(nv, fn)) if raw else getattr(nv, fn))(mh)
            except Exception as exc:
                _raise_if_lost(nv, exc)
                return None

        count = self._get(gpu, "mig_devices", lambda: nv.nvmlDeviceGetMaxMigDeviceCount(h))
        out = []
        for i in range(int(count or 0)):
            try:
                mh = nv.nvmlDeviceGetMigDeviceHandleByIndex(h, i)
            except Exception as exc:
                if _raise_if_lost(nv, exc) != _NOT_FOUND:  # NotFound: an empty slot
                    self._failed(gpu, "mig_devices", exc)
                    break
                continue
            name = clean_text(ask("nvmlDeviceGetName", mh, raw=True), 96)
            _, mig, profile = (name or "").rpartition(" MIG ")  # "A100... MIG 1g.5gb": 1g.5gb
            mem = ask("nvmlDeviceGetMemoryInfo", mh)
            gi = ask("nvmlDeviceGetGpuInstanceId", mh)
            ci = ask("nvmlDeviceGetComputeInstanceId", mh)
            out.append(
                MigDevice(
                    index=i,
                    uuid=clean_text(ask("nvmlDeviceGetUUID", mh, raw=True), 96),
                    name=name,
                    profile=(profile.strip() or None) if mig else None,
                    gpu_instance_id=None if gi is None else int(gi),
                    compute_instance_id=None if ci is None else int(ci),
                    memory=GpuMemory()
                    if mem is None
                    else GpuMemory(total=int(mem.total), used=int(mem.used), free=int(mem.free)),
                    activity=Activity() if gi is None else _activity(self._gpm(gpu, h, int(gi))),
                )
            )
        self._free_gpm(gpu, keep={m.gpu_instance_id for m in out})
        return tuple(out)

    def _process_utilization(self, gpu: _Gpu, h: Any) -> dict[int, tuple[float, float]] | None:
        """pid -> (mean SM %, mean memory-bandwidth %) since the last tick; None: unknown."""
        metric = "process_utilization"
        if metric in gpu.unsupported:
            return None
        try:
            samples = self._nv.nvmlDeviceGetProcessUtilization(h, gpu.last_sample_us)
        except Exception as exc:
            if _code(self._nv, exc) == _NOT_FOUND:
                return {}  # no sample newer than the last one: nothing ran
            denied = "no permission to read per-process utilization: SM % is not known (n/a)"
            self._failed(gpu, metric, exc, denied)
            return None
        if not samples:
            return {}
        # the structure's own descriptors: pynvml's structures override __getattribute__
        layout = type(samples[0])
        pid_of, time_of = layout.pid.__get__, layout.timeStamp.__get__
        sm_of, mem_of = layout.smUtil.__get__, layout.memUtil.__get__
        sums: dict[int, list[float]] = {}
        newest = gpu.last_sample_us
        for s in samples:
            newest = max(newest, int(time_of(s)))
            acc = sums.setdefault(int(pid_of(s)), [0.0, 0.0, 0.0])
            acc[0] += sm_of(s)
            acc[1] += mem_of(s)
            acc[2] += 1
        gpu.last_sample_us = newest
        return {pid: (sm / n, mem / n) for pid, (sm, mem, n) in sums.items()}

    def _start_pcie(self) -> None:
        nv = self._nv
        for gpu in self._gpus:
            if gpu.handle is None or gpu.pcie_counters or "pcie_throughput" in gpu.unsupported:
                continue
            call = gpu.pcie_call
            if call is None:
                self._pcie_calls = [c for c in self._pcie_calls if c.thread.is_alive()]
                counters = (nv.NVML_PCIE_UTIL_TX_BYTES, nv.NVML_PCIE_UTIL_RX_BYTES)
                call = gpu.pcie_call = _PcieCall(
                    nv, gpu.handle, counters, f"gpu{gpu.index}", self._pcie_answers
                )
                self._pcie_calls.append(call)
            if not call.pending:  # never while one is unanswered
                call.start()

    def _wait_pcie(self, deadline: float) -> None:
        """Until every PCIe call asked is answered, or ``deadline``: one wait for all."""
        asked = [gpu.pcie_call for gpu in self._gpus if gpu.pcie_call is not None]
        self._pcie_answers.wait([c for c in asked if c.pending], deadline - time.monotonic())

    def _pcie_rates(self, gpu: _Gpu) -> tuple[float | None, float | None]:
        """(TX, RX) bytes/s once ``_wait_pcie`` returned: from the counters (read with the
        GPU's values), or its PCIe call's answer; None each: not asked or not answered."""
        if gpu.pcie_counters:
            rates, gpu.pcie_counter_rates = gpu.pcie_counter_rates, (None, None)
            return rates
        call = gpu.pcie_call
        if call is None or not call.pending:  # no handle (reset), or not asked
            return None, None
        if call.answer is None:
            message = f"PCIe throughput: NVML has not answered within {PCIE_WAIT_S:g} s"
            self._report(gpu, "pcie_throughput", message)
            return None, None
        tx, rx = (
            self._get(gpu, "pcie_throughput", partial(_given, answer)) for answer in call.result()
        )
        return _scaled(tx, 1 / 1024), _scaled(rx, 1 / 1024)  # KiB/s -> bytes/s


#: What one PCIe call answered: (value, None), or (0, what it raised).
_Answer = tuple[int, BaseException | None]


def _given(answer: _Answer) -> int:
    """The value a PCIe call answered; raises what it raised."""
    value, error = answer
    if error is not None:
        raise error
    return int(value)


class _PcieAnswers:
    """Where the PCIe call threads hand in their answers. The sampler's thread waits once
    for all the calls it collects, and is woken once, by the last answer (not once per
    call: each wake-up is a hand-over of the GIL)."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._awaited: set[_PcieCall] = set()

    def put(self, call: _PcieCall, answer: tuple[_Answer, _Answer]) -> None:
        """On a call's thread."""
        with self._cond:
            call.answer = answer
            self._awaited.discard(call)
            if not self._awaited:
                self._cond.notify()  # a no-op when nobody waits

    def wait(self, calls: list[_PcieCall], timeout: float) -> None:
        """Until each of ``calls`` has an answer, or ``timeout`` seconds."""
        with self._cond:
            self._awaited = {c for c in calls if c.answer is None}
            if self._awaited and timeout > 0:
                self._cond.wait_for(lambda: not self._awaited, timeout)
            self._awaited = set()


class _PcieCall:
    """One GPU's PCIe throughput, TX then RX, on a thread that lives as long as the handle
    and sleeps on a queue between ticks (cheaper than a pool's futures; one thread per
    GPU, not per direction: half the hand-overs). ``pending``: asked and not collected,
    so a slow call is never asked twice at once; ``answer``: set by the thread."""

    def __init__(
        self,
        nv: Any,
        handle: Any,
        counters: tuple[int, int],
        name: str,
        answers: _PcieAnswers,
    ) -> None:
        self._go: queue.SimpleQueue[bool] = queue.SimpleQueue()  # True: call, False: end
        self.answer: tuple[_Answer, _Answer] | None = None
        self.pending = False
        self.thread = threading.Thread(
            target=self._run,
            args=(nv, handle, counters, answers),
            name=f"gputop-pcie-{name}",
            daemon=True,
        )
        self.thread.start()

    def _run(self, nv: Any, handle: Any, counters: tuple[int, int], answers: _PcieAnswers) -> None:
        while self._go.get():
            got: list[_Answer] = []
            for counter in counters:
                try:  # looked up at each call, as every other NVML call is
                    got.append((nv.nvmlDeviceGetPcieThroughput(handle, counter), None))
                except BaseException as exc:  # given to the sampler's thread by result()
                    got.append((0, exc))
            answers.put(self, (got[0], got[1]))

    def start(self) -> None:
        self.pending = True
        self._go.put(True)

    def result(self) -> tuple[_Answer, _Answer]:
        """(TX, RX) once ``answer`` is in; the call may be asked again."""
        assert self.answer is not None
        answer, self.answer = self.answer, None
        self.pending = False
        return answer

    def retire(self) -> None:
        """End the thread: at once when idle, else as soon as NVML answers its calls."""
        self._go.put(False)


def _from_reads(
    gpm: dict[int, float | None], rates: dict[tuple[int, int], float | None], nvlink: bool
) -> dict[str, dict[str, float]]:
    """Part -> field -> value of each row of the table read from GPM or a counter: its
    first read that gave a value (rows without one are left out: None)."""
    parts: dict[str, dict[str, float]] = {"activity": {}, "nvlink": {}}
    for m in _INSIDE:
        head, _, tail = m.field.partition(".")
        if head == "nvlink" and not nvlink:
            continue
        for r in m.reads:
            if isinstance(r, GpmRead):
                value = gpm.get(r.metric_id)
            else:
                assert isinstance(r, CounterRead)
                value = rates.get((r.field_id, r.scope))
            if value is not None:
                parts[head][tail] = value * r.scale
                break
    return parts


def _activity(gpm: dict[int, float | None]) -> Activity:
    """A MIG device's activity from its GPU instance's GPM values."""
    return Activity(**_from_reads(gpm, {}, False)["activity"]) if gpm else Activity()


_WHOLE_PERCENTS = tuple(float(k) for k in range(101))


def _percent(value: float | None) -> float | None:
    """The one shared float of a whole percentage (mostly the mean of one sample), so
    the history does not hold one object per process and tick."""
    if value is None or not value.is_integer() or not 0.0 <= value <= 100.0:
        return value
    return _WHOLE_PERCENTS[int(value)]


def _code(nv: Any, exc: BaseException) -> int | None:
    """The nvmlReturn_t behind an exception; a missing symbol counts as FunctionNotFound."""
    if isinstance(exc, nv.NVMLError):
        value = getattr(exc, "value", None)
        return value if isinstance(value, int) else None
    mismatch = getattr(nv, "NVMLLibraryMismatchError", None)
    if mismatch is not None and isinstance(exc, mismatch):
        return _FUNCTION_NOT_FOUND
    return None


def _raise_if_lost(nv: Any, exc: BaseException) -> int | None:
    code = _code(nv, exc)
    if code in _LOST_REASONS:
        raise _Lost(_LOST_REASONS[code]) from exc
    return code


def _describe(nv: Any, exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:
        text = ""
    if isinstance(exc, nv.NVMLError):
        name = type(exc).__name__.removeprefix("NVMLError_")
        if not text or text.replace(" ", "").lower() == name.lower():
            return clean_text(text or name, 200) or name
        return clean_text(f"{text} ({name})", 200) or name
    return clean_text(f"{type(exc).__name__}: {text}", 200) or type(exc).__name__
