"""A fake ``libnvidia-ml.so.1`` for tests and benchmarks, and the scenarios it plays.

The library is C (``fakenvml.c``) compiled with gcc against NVIDIA's own ``nvml.h`` from
the ``nvidia-nvml-dev`` wheel, so every prototype is checked by the compiler. It exports
every function ``nvml.h`` declares: the ones ``fakenvml.c`` implements, and weak stubs
generated from the header (``gen_stubs.py``) that answer ``NVML_ERROR_NOT_SUPPORTED``.
It is built once into ``tests/fakenvml/build/`` (gitignored) and rebuilt when a source is
newer than it.

Using it
--------
In a subprocess (``python -m gputop --once``, ``nvitop -1``)::

    scenario = Scenario(gpus=[FakeGpu(), FakeGpu(util_gpu=97)])
    path = scenario.write(tmp_path / "scenario.txt")
    subprocess.run([...], env=subprocess_env(path))

In-process: ``load_in_process()`` loads the library once (``ctypes.CDLL`` by absolute
path; glibc then hands the same library to pynvml's ``CDLL("libnvidia-ml.so.1")`` by its
soname). Point ``FAKE_NVML_SCENARIO`` at a scenario file before ``nvmlInit``. The pytest
fixtures in ``tests/conftest.py`` (``fake_nvml``, ``fake_nvml_env``) do both.

Scenario file format (version 1)
--------------------------------
Plain text, one directive per line, words separated by spaces, ``#`` starts a comment
line. The path comes from ``FAKE_NVML_SCENARIO``, read at ``nvmlInit``: unset means "no
driver" (``nvmlInit`` answers ``DRIVER_NOT_LOADED``); a missing or malformed file makes
``nvmlInit`` answer ``UNKNOWN`` and prints the reason on stderr. The fake re-reads the
file whenever its inode, size or mtime changes (checked on every call), so a running
program sees edits; ``Scenario.write`` replaces the file atomically. A malformed edit is
ignored (the previous scenario stays).

``FAKE_NVML_LOG=PATH`` (optional): every ``nvmlInit*`` and ``nvmlShutdown`` call appends a
line ``nvmlInit RET PID`` / ``nvmlShutdown RET PID`` (RET the nvmlReturn_t answered) to
PATH, so a test can check that a program shut NVML down on its way out.

A value written ``-`` means "not supported": the call that reads it answers
``NVML_ERROR_NOT_SUPPORTED``. Numbers accept ``0x`` hex.

Global lines (before the first ``gpu``)::

    version 1
    driver 550.54.15          nvmlSystemGetDriverVersion
    nvml 12.550.54.15         nvmlSystemGetNVMLVersion
    cuda 12040                nvmlSystemGetCudaDriverVersion(_v2): 1000*major + 10*minor
    init 0                    what nvmlInit / nvmlInit_v2 / nvmlInitWithFlags answer
    err SYMBOL CODE           make SYMBOL answer nvmlReturn_t CODE (system calls and all GPUs)
    sleep SYMBOL MS           make SYMBOL sleep MS milliseconds (outside the library lock)

``gpu`` starts a GPU (index = order of appearance, up to 64); the lines after it
describe that GPU::

    name TEXT                 rest of the line;  name_hex 4e56...: raw bytes (non-UTF-8 names)
    uuid GPU-...     bus_id 00000000:18:00.0     minor 0
    memory TOTAL USED FREE RESERVED   bytes; USED excludes RESERVED (memory v2). The v1 call
                                      answers used = USED + RESERVED
    util GPU MEM              percent
    temp C
    power MW LIMIT_MW         nvmlDeviceGetPowerUsage, nvmlDeviceGetEnforcedPowerLimit
    fan PERCENT
    pstate N                  nvmlDeviceGetPerformanceState: 0-15 (P0-P15), 32 = unknown
    clocks SM MEM SM_MAX MEM_MAX      MHz
    reasons MASK              clock-event reasons bitmask
    pcie GEN WIDTH MAX_GEN MAX_WIDTH
    pcie_kbps TX RX           nvmlDeviceGetPcieThroughput, KB/s; on a driver 555 or later
                              (the ``driver`` line) also nvmlDeviceGetFieldValues 197/198:
                              cumulative bytes, grown by TX/RX x 1024 (one second's worth)
                              at every call, so one read a second gives TX/RX
    pcie_count TX0 RX0        the start of those byte counters (default 0; a re-read
                              scenario starts them again: a driver reset)
    field_err FIELD CODE      nvmlDeviceGetFieldValues answers CODE in FIELD's entry
    codec ENC DEC             encoder / decoder utilization percent
    mig CURRENT PENDING
    ecc VOLATILE AGGREGATE    uncorrected ECC error counts
    proc TYPE PID USED [GI CI [CC]]  TYPE C, G or CG (on both lists); USED bytes or -1
                                (NVML_VALUE_NOT_AVAILABLE); GI/CI MIG ids, - for none; CC
                                usedGpuCcProtectedMemory bytes (only the legacy _v3 layout
                                of the "r535-legacy" profile carries it)
    migdev SLOT GI CI PROFILE TOTAL USED [UUID]   a MIG device (slot 0-7) when ``mig 1 ..``:
                                its handle answers name (GPU name + " MIG " + PROFILE),
                                UUID, memory, GPU/compute instance ids, the parent handle
                                and the processes whose GI/CI match. In MIG mode the GPU's
                                utilization and per-process utilization answer NOT_SUPPORTED
    sample PID TS SM MEM ENC DEC  nvmlDeviceGetProcessUtilization sample; TS microseconds
                                  (epoch); negative TS: that long before each call, a
                                  sample that is always fresh (a process busy all along).
                                  Samples newer than the caller's timestamp are returned;
                                  none -> NVML_ERROR_NOT_FOUND
    gpm SUPPORT [SLOTS]       nvmlGpmQueryDeviceSupport's isSupportedDevice (no line: the
                              query answers NOT_SUPPORTED, a driver or GPU without GPM);
                              SLOTS: nvmlGpmMetricsGet refuses (INVALID_ARGUMENT) a request
                              of more metrics (default and at most nvml.h's
                              NVML_GPM_METRIC_MAX: the request's array length)
    gpm_metric ID VALUE       what nvmlGpmMetricsGet gives for metric ID (a double; "-": its
                              slot answers NOT_SUPPORTED, as does an ID not listed), whatever
                              the samples. MetricsGet checks the version, that both samples
                              were filled by nvmlGpmSampleGet / nvmlGpmMigSampleGet (the
                              same GPU and instance, the second newer); SampleAlloc/Free
                              check their sample. ``err nvmlGpmSampleGet 4``: a container
                              without the profiling capability (NO_PERMISSION)
    nvlink_version V          nvmlDeviceGetNvLinkVersion (the enum: 6 = 4.0, 7 = 5.0)
    nvlink LINK ACTIVE BUS TYPE   link LINK (0-based, links 0..max listed exist: past them
                              INVALID_ARGUMENT, no link at all NOT_SUPPORTED): its state,
                              the far end's bus id (nvmlDeviceGetNvLinkRemotePciInfo_v2)
                              and nvmlIntNvLinkDeviceType_t (0 GPU, 2 switch)
    nvlink_kib TX RX [TX0 RX0]  nvmlDeviceGetFieldValues 138/139 (any scope): cumulative KiB
                              from TX0/RX0, grown by TX/RX at every call; other fields
                              answer NOT_SUPPORTED in their entry
    err SYMBOL CODE / sleep SYMBOL MS   as above, for calls on this GPU only
                                        (nvmlDeviceGetHandleByIndex included)

A GPU without a line for a metric answers NOT_SUPPORTED for it.

``err``/``sleep`` rules match a C symbol exactly (``nvmlDeviceGetMemoryInfo_v2``), or by
its name without the ``_vN`` suffix (``nvmlDeviceGetComputeRunningProcesses`` matches
``..._v3``, ``..._v2`` and the unversioned one), or ``*`` (every call). The most specific
match wins, GPU rules before global ones; ``err SYMBOL 0`` cancels a broader rule.
``err * 15`` on a GPU is a GPU that fell off the bus. ``sleep nvmlInit MS`` delays init.

Driver profiles
---------------
``PROFILES`` names builds of the same source that behave like older driver branches: a
linker version script leaves out the symbols that branch lacks (pynvml then raises
``FunctionNotFound`` at the call, as with a real old library), and the ``r535-legacy``
build fills the ``_v3`` process arrays with the 32-byte entries of drivers 535.43-535.86.
``build(profile)`` builds ``build/<profile>/libnvidia-ml.so.1`` (the default profile
"current" stays ``build/libnvidia-ml.so.1``); ``subprocess_env(path, profile=...)`` points a
subprocess at it. One process can load one profile only (glibc reuses a library by its
soname), so tests of other profiles run gputop in a subprocess.
"""

from __future__ import annotations

import ctypes
import fcntl
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUILD_DIR = HERE / "build"
LIB_NAME = "libnvidia-ml.so.1"
LIB_PATH = BUILD_DIR / LIB_NAME
SCENARIO_ENV = "FAKE_NVML_SCENARIO"
LOG_ENV = "FAKE_NVML_LOG"

GiB = 1 << 30
MiB = 1 << 20

# nvmlReturn_t values by name (same numbers as nvml.h / pynvml).
NVML_RETURN = {
    "SUCCESS": 0,
    "UNINITIALIZED": 1,
    "INVALID_ARGUMENT": 2,
    "NOT_SUPPORTED": 3,
    "NO_PERMISSION": 4,
    "ALREADY_INITIALIZED": 5,
    "NOT_FOUND": 6,
    "INSUFFICIENT_SIZE": 7,
    "INSUFFICIENT_POWER": 8,
    "DRIVER_NOT_LOADED": 9,
    "TIMEOUT": 10,
    "IRQ_ISSUE": 11,
    "LIBRARY_NOT_FOUND": 12,
    "FUNCTION_NOT_FOUND": 13,
    "CORRUPTED_INFOROM": 14,
    "GPU_IS_LOST": 15,
    "RESET_REQUIRED": 16,
    "OPERATING_SYSTEM": 17,
    "LIB_RM_VERSION_MISMATCH": 18,
    "IN_USE": 19,
    "MEMORY": 20,
    "NO_DATA": 21,
    "ARGUMENT_VERSION_MISMATCH": 25,
    "UNKNOWN": 999,
}

Code = int | str


def code(value: Code) -> int:
    """An nvmlReturn_t from a number or a name ("GPU_IS_LOST", "NVML_ERROR_NOT_SUPPORTED")."""
    if isinstance(value, int):
        return value
    name = value.upper().removeprefix("NVML_").removeprefix("ERROR_")
    return NVML_RETURN[name]


# ---------------------------------------------------------------------------- profiles

_PROCESS_V2_V3 = tuple(
    f"nvmlDeviceGet{kind}RunningProcesses_{v}"
    for kind in ("Compute", "Graphics", "MPSCompute")
    for v in ("v2", "v3")
)
_MIG = (
    "nvmlDeviceGetMigMode",
    "nvmlDeviceSetMigMode",
    "nvmlDeviceIsMigDeviceHandle",
    "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceGetMigDeviceHandleByIndex",
    "nvmlDeviceGetGpuInstanceId",
    "nvmlDeviceGetComputeInstanceId",
    "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
)
#: GPM appeared in R520 (Hopper).
_GPM = (
    "nvmlGpmQueryDeviceSupport",
    "nvmlGpmSampleAlloc",
    "nvmlGpmSampleFree",
    "nvmlGpmSampleGet",
    "nvmlGpmMigSampleGet",
    "nvmlGpmMetricsGet",
)
_R535_R550 = (
    "nvmlDeviceGetRunningProcessDetailList",
    "nvmlDeviceGetProcessesUtilizationInfo",
    "nvmlDeviceGetTemperatureV",
)
_R510_R535 = (
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetSupportedClocksEventReasons",
    "nvmlDeviceGetConfComputeMemSizeInfo",
)


@dataclass(frozen=True)
class DriverProfile:
    """A driver branch the fake imitates: the symbols it lacks, its _v3 layout."""

    name: str
    driver_version: str
    cuda_version: int
    hidden: tuple[str, ...] = ()  # symbols this branch's libnvidia-ml.so.1 lacks
    legacy_v3_stride: bool = False  # 535.43-535.86: _v3 fills 32-byte entries
    about: str = ""

    def scenario(self, **kwargs: object) -> Scenario:
        """A scenario that reports this branch's driver version."""
        return Scenario(
            driver_version=self.driver_version,
            cuda_version=self.cuda_version,
            nvml_version=f"{self.cuda_version // 1000}.{self.driver_version}",
            **kwargs,  # type: ignore[arg-type]
        )


#: The driver generations the fake can be built as, oldest first. The symbol lists follow
#: nvml.h's history (when each call appeared); they are what matters to a client, not a
#: complete inventory of each branch. The PCIe byte counters follow the scenario's driver
#: line (fakenvml.c: PCIE_COUNTERS_SINCE): the r560 build has the current symbols.
PROFILES: dict[str, DriverProfile] = {
    p.name: p
    for p in (
        DriverProfile(
            "r418",
            "418.226.00",
            10010,
            hidden=(
                *_PROCESS_V2_V3,
                "nvmlDeviceGetMemoryInfo_v2",
                *_MIG,
                *_R510_R535,
                *_R535_R550,
                "nvmlDeviceGetGpuMaxPcieLinkGeneration",
                "nvmlSystemGetCudaDriverVersion_v2",
                *_GPM,
            ),
            about="R418-R440: process lists v1 only, memory v1, no MIG, throttle reasons",
        ),
        DriverProfile(
            "r470",
            "470.256.02",
            11040,
            hidden=(
                *(n for n in _PROCESS_V2_V3 if n.endswith("_v3")),
                "nvmlDeviceGetMemoryInfo_v2",
                *_R510_R535,
                *_R535_R550,
                *_GPM,
            ),
            about="R450-R470: process lists v2, memory v1, MIG, throttle reasons",
        ),
        DriverProfile(
            "r535-legacy",
            "535.54.03",
            12020,
            hidden=_R535_R550,
            legacy_v3_stride=True,
            about="535.43-535.86: _v3 with 32-byte entries, no RunningProcessDetailList",
        ),
        DriverProfile(
            "current",
            "550.54.15",
            12040,
            about="R550: every symbol; no PCIe byte counters (fields 197/198)",
        ),
        DriverProfile(
            "r560",
            "560.35.03",
            12060,
            about="R555+: the PCIe byte counters too (fields 197/198, the fake's driver line)",
        ),
    )
}
DEFAULT_PROFILE = "current"


# ---------------------------------------------------------------------------- building


class FakeNvmlUnavailable(RuntimeError):
    """No C compiler or no nvml.h: tests that need the fake library skip."""


def nvml_header() -> Path:
    """NVIDIA's nvml.h from the nvidia-nvml-dev wheel, wherever the venv keeps it."""
    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations or []) if spec else []
    for root in roots:
        found = sorted(Path(root).glob("*/include/nvml.h")) + sorted(Path(root).glob("**/nvml.h"))
        if found:
            return found[0]
    raise FakeNvmlUnavailable("nvml.h not found: install nvidia-nvml-dev (pip)")


def _sources() -> list[Path]:
    return [HERE / "fakenvml.c", HERE / "gen_stubs.py", HERE / "__init__.py"]


def lib_path(profile: str | DriverProfile = DEFAULT_PROFILE) -> Path:
    """Where the library of ``profile`` is built."""
    name = profile if isinstance(profile, str) else profile.name
    return LIB_PATH if name == DEFAULT_PROFILE else BUILD_DIR / name / LIB_NAME


def _is_fresh(header: Path, target: Path) -> bool:
    if not target.exists():
        return False
    built = target.stat().st_mtime
    return all(p.stat().st_mtime <= built for p in [*_sources(), header])


def build(force: bool = False, profile: str | DriverProfile = DEFAULT_PROFILE) -> Path:
    """Build the fake library (of ``profile``) if needed; returns its path. Safe to call
    from parallel runs. A ``DriverProfile`` not in ``PROFILES`` builds under its own name."""
    prof = PROFILES[profile] if isinstance(profile, str) else profile
    target = lib_path(prof)
    header = nvml_header()
    if not force and _is_fresh(header, target):
        return target
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise FakeNvmlUnavailable("no C compiler (gcc) to build the fake libnvidia-ml.so.1")
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    with open(BUILD_DIR / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not force and _is_fresh(header, target):
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        stubs = target.parent / "stubs.c"
        subprocess.run(
            [sys.executable, str(HERE / "gen_stubs.py"), str(header), str(stubs)], check=True
        )
        extra: list[str] = []
        if prof.hidden:
            # An anonymous version script: every symbol global except the hidden ones, which
            # stay out of the dynamic symbol table (dlsym does not find them).
            script = target.parent / "hidden.map"
            script.write_text(
                "{\n  global: *;\n  local:\n"
                + "".join(f"    {name};\n" for name in sorted(set(prof.hidden)))
                + "};\n",
                encoding="ascii",
            )
            extra.append(f"-Wl,--version-script={script}")
        if prof.legacy_v3_stride:
            extra.append("-DFAKE_V3_LEGACY_STRIDE")
        tmp = target.parent / f"{LIB_NAME}.tmp{os.getpid()}"
        cmd = [
            cc,
            "-shared",
            "-fPIC",
            "-O2",
            "-std=gnu11",
            "-Wall",
            "-Wextra",
            "-Wno-unused-parameter",
            "-Wmissing-prototypes",  # an exported function must be declared in nvml.h
            "-Werror",
            f"-I{header.parent}",
            f"-Wl,-soname,{LIB_NAME}",
            "-Wl,--no-undefined",
            *extra,
            "-o",
            str(tmp),
            str(HERE / "fakenvml.c"),
            str(stubs),
            "-lpthread",
        ]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"building the fake NVML failed:\n{' '.join(cmd)}\n{result.stderr}")
        os.replace(tmp, target)
    return target


_loaded: ctypes.CDLL | None = None


def load_in_process() -> ctypes.CDLL:
    """Load the fake into this process (once) so that pynvml's nvmlInit finds it."""
    global _loaded
    if _loaded is None:
        _loaded = ctypes.CDLL(str(build()))
    return _loaded


def subprocess_env(
    scenario_path: Path | str,
    base: Mapping[str, str] | None = None,
    profile: str | DriverProfile = DEFAULT_PROFILE,
) -> dict[str, str]:
    """Environment for a subprocess that should load the fake (built as ``profile``)
    instead of a real driver."""
    env = dict(os.environ if base is None else base)
    lib_dir = str(build(profile=profile).parent)
    old = env.get("LD_LIBRARY_PATH")
    env["LD_LIBRARY_PATH"] = lib_dir if not old else f"{lib_dir}:{old}"
    env[SCENARIO_ENV] = str(scenario_path)
    return env


# ---------------------------------------------------------------------------- scenarios


@dataclass
class FakeProcess:
    pid: int
    used_memory: int | None = GiB  # None: NVML_VALUE_NOT_AVAILABLE
    type: str = "C"  # "C", "G" or "C+G" (on both lists)
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    cc_protected_memory: int = 0  # usedGpuCcProtectedMemory (legacy _v3 layout only)


@dataclass
class FakeMig:
    """A MIG device (GPU instance + compute instance) of a GPU in MIG mode."""

    slot: int
    gpu_instance_id: int
    compute_instance_id: int
    profile: str = "1g.10gb"
    memory_total: int | None = 10 * GiB
    memory_used: int | None = 0
    uuid: str | None = None  # default: derived from the GPU index and slot

    def default_uuid(self, gpu_index: int) -> str:
        return self.uuid or f"MIG-fa4e{gpu_index:04x}-0000-4000-8000-{self.slot:012x}"


@dataclass
class FakeSample:
    """One nvmlProcessUtilizationSample_t."""

    pid: int
    timestamp_us: int = -100_000  # negative: that long before each call (always fresh)
    sm: int = 0
    mem: int = 0
    enc: int = 0
    dec: int = 0


@dataclass
class FakeLink:
    """One NVLink link of a GPU."""

    remote_bus: str = "00000000:00:00.0"  # the far end's bus id (a GPU's, or a switch's)
    remote_type: int = 2  # nvmlIntNvLinkDeviceType_t: 0 GPU, 2 NVSwitch, 255 unknown
    active: bool = True


#: What a Hopper GPU's GPM gives in :func:`hopper` (percent; 60/61 MiB/s), by metric id.
HOPPER_GPM: dict[int, float | None] = {
    2: 45.0,  # SM active
    3: 20.0,  # SM occupancy
    5: 30.0,  # any tensor
    10: 40.0,  # DRAM bandwidth
    11: 1.0,  # FP64
    12: 10.0,  # FP32
    13: 2.0,  # FP16
    60: 1024.0,  # NVLink RX, MiB/s
    61: 2048.0,  # NVLink TX, MiB/s
}


@dataclass
class FakeGpu:
    """One GPU. ``None`` for a metric: the call answers NOT_SUPPORTED.

    uuid, bus_id and minor default from the GPU's index when written.
    """

    name: str | bytes = "NVIDIA H100 80GB HBM3"
    uuid: str | None = None
    bus_id: str | None = None
    minor: int | None = -1  # -1: the index; None: not supported
    memory_total: int | None = 80 * GiB
    memory_used: int | None = 10 * GiB  # excludes reserved (memory v2 meaning)
    memory_reserved: int | None = 512 * MiB
    memory_free: int | None = -1  # -1: total - used - reserved
    util_gpu: int | None = 50
    util_mem: int | None = 20
    temperature: int | None = 45
    power_mw: int | None = 250_000
    power_limit_mw: int | None = 700_000
    fan: int | None = 30
    pstate: int | None = 0  # 0-15 (P0-P15); 32: NVML_PSTATE_UNKNOWN
    sm_clock: int | None = 1755
    mem_clock: int | None = 2619
    sm_clock_max: int | None = 1980
    mem_clock_max: int | None = 2619
    clock_event_reasons: int | None = 0
    pcie_gen: int | None = 5
    pcie_width: int | None = 16
    pcie_max_gen: int | None = 5
    pcie_max_width: int | None = 16
    pcie_tx_kbps: int | None = 1000
    pcie_rx_kbps: int | None = 2000
    encoder: int | None = 0
    decoder: int | None = 0
    mig_mode: tuple[int, int] | None = (0, 0)  # (current, pending)
    ecc_uncorrected: int | None = 0  # volatile
    ecc_uncorrected_aggregate: int | None = 0
    processes: list[FakeProcess] = field(default_factory=list)
    samples: list[FakeSample] = field(default_factory=list)
    migs: list[FakeMig] = field(default_factory=list)
    # GPM: None, the support query answers NOT_SUPPORTED; else isSupportedDevice
    gpm: bool | None = None
    gpm_slots: int | None = None  # nvmlGpmMetricsGet refuses more metrics than this
    gpm_metrics: dict[int, float | None] = field(default_factory=dict)  # None: NOT_SUPPORTED
    nvlink_version: int | None = None  # nvmlNvLinkVersion_t: 6 = NVLink 4.0
    nvlinks: list[FakeLink] = field(default_factory=list)
    nvlink_kib_step: tuple[int, int] | None = None  # (TX, RX) KiB added at each read
    nvlink_kib_start: tuple[int, int] = (0, 0)
    pcie_count_start: tuple[int, int] | None = None  # PCIe byte counters (197/198); None: 0
    field_errors: dict[int, Code] = field(default_factory=dict)  # field id -> its entry's
    errors: dict[str, Code] = field(default_factory=dict)  # symbol (or "*") -> nvmlReturn
    sleeps_ms: dict[str, int] = field(default_factory=dict)  # symbol (or "*") -> ms

    def lines(self, index: int) -> list[str]:
        def v(x: int | None) -> str:
            return "-" if x is None else str(x)

        out = ["gpu"]
        name = self.name
        raw = name if isinstance(name, bytes) else name.encode("utf-8")
        if isinstance(name, str) and name.isprintable() and name == name.strip() and name:
            out.append(f"name {name}")
        else:
            out.append(f"name_hex {raw.hex()}")
        out.append(f"uuid {self.uuid or f'GPU-fa4e0000-0000-4000-8000-{index:012x}'}")
        out.append(f"bus_id {self.bus_id or f'00000000:{(0x18 + index) & 0xFF:02X}:00.0'}")
        out.append(f"minor {index if self.minor == -1 else v(self.minor)}")
        free = self.memory_free
        if free == -1:
            if None in (self.memory_total, self.memory_used):
                free = None
            else:
                assert self.memory_total is not None and self.memory_used is not None
                free = self.memory_total - self.memory_used - (self.memory_reserved or 0)
        out.append(
            f"memory {v(self.memory_total)} {v(self.memory_used)} {v(free)} "
            f"{v(self.memory_reserved)}"
        )
        out.append(f"util {v(self.util_gpu)} {v(self.util_mem)}")
        out.append(f"temp {v(self.temperature)}")
        out.append(f"power {v(self.power_mw)} {v(self.power_limit_mw)}")
        out.append(f"fan {v(self.fan)}")
        out.append(f"pstate {v(self.pstate)}")
        out.append(
            f"clocks {v(self.sm_clock)} {v(self.mem_clock)} {v(self.sm_clock_max)} "
            f"{v(self.mem_clock_max)}"
        )
        out.append(f"reasons {v(self.clock_event_reasons)}")
        out.append(
            f"pcie {v(self.pcie_gen)} {v(self.pcie_width)} {v(self.pcie_max_gen)} "
            f"{v(self.pcie_max_width)}"
        )
        out.append(f"pcie_kbps {v(self.pcie_tx_kbps)} {v(self.pcie_rx_kbps)}")
        out.append(f"codec {v(self.encoder)} {v(self.decoder)}")
        mig = self.mig_mode
        out.append("mig - -" if mig is None else f"mig {mig[0]} {mig[1]}")
        out.append(f"ecc {v(self.ecc_uncorrected)} {v(self.ecc_uncorrected_aggregate)}")
        for p in self.processes:
            kind = {"C": "C", "G": "G", "C+G": "CG", "CG": "CG"}[p.type]
            used = -1 if p.used_memory is None else p.used_memory
            out.append(
                f"proc {kind} {p.pid} {used} {v(p.gpu_instance_id)} {v(p.compute_instance_id)} "
                f"{p.cc_protected_memory}"
            )
        for m in self.migs or ():
            out.append(
                f"migdev {m.slot} {m.gpu_instance_id} {m.compute_instance_id} {m.profile} "
                f"{v(m.memory_total)} {v(m.memory_used)} {m.default_uuid(index)}"
            )
        for s in self.samples:
            out.append(f"sample {s.pid} {s.timestamp_us} {s.sm} {s.mem} {s.enc} {s.dec}")
        if self.gpm is not None:
            out.append(f"gpm {int(self.gpm)} {v(self.gpm_slots)}")
        for metric_id, value in (self.gpm_metrics or {}).items():
            out.append(f"gpm_metric {metric_id} {'-' if value is None else repr(float(value))}")
        if self.nvlink_version is not None:
            out.append(f"nvlink_version {self.nvlink_version}")
        for k, link in enumerate(self.nvlinks or ()):
            out.append(f"nvlink {k} {int(link.active)} {link.remote_bus} {link.remote_type}")
        if self.nvlink_kib_step is not None:
            (tx, rx), (tx0, rx0) = self.nvlink_kib_step, self.nvlink_kib_start or (0, 0)
            out.append(f"nvlink_kib {tx} {rx} {tx0} {rx0}")
        if self.pcie_count_start:  # None (a GPU of nothing optional): from 0
            out.append("pcie_count {} {}".format(*self.pcie_count_start))
        out += [f"field_err {fid} {code(c)}" for fid, c in (self.field_errors or {}).items()]
        out += [f"err {sym} {code(c)}" for sym, c in self.errors.items()]
        out += [f"sleep {sym} {ms}" for sym, ms in self.sleeps_ms.items()]
        return out


@dataclass
class Scenario:
    gpus: list[FakeGpu] = field(default_factory=lambda: [FakeGpu()])
    driver_version: str = "550.54.15"
    cuda_version: int = 12040  # 1000*major + 10*minor: "12.4"
    nvml_version: str = "12.550.54.15"
    init_result: Code = 0
    errors: dict[str, Code] = field(default_factory=dict)  # global: system calls + every GPU
    sleeps_ms: dict[str, int] = field(default_factory=dict)

    def to_text(self) -> str:
        lines = [
            "# fake NVML scenario (format: tests/fakenvml/__init__.py)",
            "version 1",
            f"driver {self.driver_version}",
            f"nvml {self.nvml_version}",
            f"cuda {self.cuda_version}",
            f"init {code(self.init_result)}",
        ]
        lines += [f"err {sym} {code(c)}" for sym, c in self.errors.items()]
        lines += [f"sleep {sym} {ms}" for sym, ms in self.sleeps_ms.items()]
        for i, gpu in enumerate(self.gpus):
            lines += gpu.lines(i)
        return "\n".join(lines) + "\n"

    def write(self, path: Path | str) -> Path:
        """Write atomically (a running fake sees either the old or the new file)."""
        path = Path(path)
        tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
        tmp.write_text(self.to_text(), encoding="utf-8")
        os.replace(tmp, path)
        return path


@dataclass
class FakeNvml:
    """What the ``fake_nvml`` fixture gives a test: the scenario file the fake plays."""

    path: Path

    def write(self, scenario: Scenario) -> Path:
        return scenario.write(self.path)


def hopper(index: int, n_gpus: int = 1, *, links: int = 18, **kwargs: object) -> FakeGpu:
    """An H100 SXM with GPM (:data:`HOPPER_GPM`) and ``links`` NVLink 4.0 links; with
    ``n_gpus`` > 1 its links go round the other GPUs (bus ids as ``FakeGpu`` writes
    them), else to NVSwitches; NVLink counters grow by 1 GiB TX and 512 MiB RX a read."""
    others = [k for k in range(n_gpus) if k != index]
    nvlinks = [
        FakeLink(f"00000000:{(0x18 + others[k % len(others)]) & 0xFF:02X}:00.0", 0)
        if others
        else FakeLink(f"00000000:{0xA0 + k:02X}:00.0", 2)
        for k in range(links)
    ]
    made = FakeGpu(
        name="NVIDIA H100 80GB HBM3",
        gpm=True,
        gpm_metrics=dict(HOPPER_GPM),
        nvlink_version=6,
        nvlinks=nvlinks,
        nvlink_kib_step=(1 << 20, 1 << 19),
    )
    for key, value in kwargs.items():
        setattr(made, key, value)
    return made


def many_gpus(
    n_gpus: int,
    n_procs: int,
    pcie_sleep_ms: int = 0,
    first_pid: int = 10_000,
    timestamp_us: int = -100_000,
    pids: Sequence[int] | None = None,
) -> Scenario:
    """A busy node: ``n_gpus`` GPUs with ``n_procs`` compute processes and one utilization
    sample per process each; PCIe throughput calls sleep like real hardware if asked.
    ``pids``: the pids to use (``n_gpus * n_procs`` of them) instead of counting up from
    ``first_pid``."""
    gpus = []
    for g in range(n_gpus):
        mine = (
            [first_pid + g * n_procs + k for k in range(n_procs)]
            if pids is None
            else list(pids[g * n_procs : (g + 1) * n_procs])
        )
        gpus.append(
            FakeGpu(
                util_gpu=(g * 7) % 101,
                processes=[
                    FakeProcess(pid, used_memory=(k + 1) * 64 * MiB) for k, pid in enumerate(mine)
                ],
                samples=[
                    FakeSample(pid, timestamp_us, sm=k % 101, mem=k % 50)
                    for k, pid in enumerate(mine)
                ],
                sleeps_ms={"nvmlDeviceGetPcieThroughput": pcie_sleep_ms} if pcie_sleep_ms else {},
            )
        )
    return Scenario(gpus=gpus)


__all__ = [
    "BUILD_DIR",
    "DEFAULT_PROFILE",
    "HOPPER_GPM",
    "LIB_PATH",
    "LOG_ENV",
    "NVML_RETURN",
    "PROFILES",
    "SCENARIO_ENV",
    "DriverProfile",
    "FakeGpu",
    "FakeLink",
    "FakeMig",
    "FakeNvml",
    "FakeNvmlUnavailable",
    "FakeProcess",
    "FakeSample",
    "GiB",
    "MiB",
    "Scenario",
    "build",
    "code",
    "hopper",
    "lib_path",
    "load_in_process",
    "many_gpus",
    "nvml_header",
    "subprocess_env",
]
