"""The immutable snapshot model: what every source produces and every view reads.

Rules:
- Every metric that can be unavailable is ``None`` ("n/a" on screen), never 0.
- All objects are frozen; collections are tuples.
- ``Snapshot.to_dict()`` / ``Snapshot.from_dict()`` round-trip losslessly through JSON.
  The dict form is the ``--once --json`` schema (see README, "JSON schema").
- This module imports nothing of gputop.

Units: bytes, bytes per second, percent (0-100), watts, degrees Celsius, MHz,
seconds since the Unix epoch for times.
"""

from __future__ import annotations

import dataclasses
import operator
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

SCHEMA_VERSION = 1

# Process types as NVML reports them: compute, graphics, or both.
PROCESS_TYPES = ("C", "G", "C+G")

#: PIDs NVML may list that are never a real process (drivers 535.43-535.86 reported
#: them): no stage shows, groups or signals them.
INVALID_PIDS: frozenset[int] = frozenset({0, 2**32 - 1})

#: The names ``GpuSample.clock_event_reasons`` holds: NVML's nvmlClocksEventReasons bits
#: in bit order, each with the short word a view shows and what it says about a busy GPU:
#: "hard" (heat or the hardware cuts the clocks), "soft" (the power cap), "" (nothing).
CLOCK_EVENT_REASON_TABLE: tuple[tuple[int, str, str, str], ...] = (
    (0x1, "idle", "idle", ""),
    (0x2, "applications clocks", "app clocks", ""),
    (0x4, "sw power cap", "SW power cap", "soft"),
    (0x8, "hw slowdown", "HW slowdown", "hard"),
    (0x10, "sync boost", "sync boost", ""),
    (0x20, "sw thermal", "SW thermal", "hard"),
    (0x40, "hw thermal", "HW thermal", "hard"),
    (0x80, "hw power brake", "HW power brake", "hard"),
    (0x100, "display clocks", "display clocks", ""),
)
#: (bit, name), in bit order.
CLOCK_EVENT_REASONS: tuple[tuple[int, str], ...] = tuple(
    (bit, name) for bit, name, _, _ in CLOCK_EVENT_REASON_TABLE
)
#: name -> short word for people.
CLOCK_EVENT_WORDS: dict[str, str] = {name: word for _, name, word, _ in CLOCK_EVENT_REASON_TABLE}
#: name -> "hard" | "soft" | "".
CLOCK_EVENT_EFFECTS: dict[str, str] = {name: e for _, name, _, e in CLOCK_EVENT_REASON_TABLE}


@dataclass(frozen=True, slots=True)
class SampleError:
    """Something that went wrong while sampling; the tick still completed."""

    source: str  # "nvml", "host", "holders", "demo", ...
    message: str  # in words, for people
    gpu: int | None = None  # GPU index the error concerns, if any
    metric: str | None = None  # e.g. "processes", "pcie_throughput"


@dataclass(frozen=True, slots=True)
class DriverInfo:
    available: bool  # False: host-only mode
    error: str | None = None  # why not available, in words
    driver_version: str | None = None
    cuda_version: str | None = None  # CUDA driver API version, e.g. "12.4"
    nvml_version: str | None = None
    # What an older driver made gputop fall back to, in words ("compute process list read
    # with nvmlDeviceGetComputeRunningProcesses (v1)"); () on a current driver.
    compat: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MemoryStat:
    """Host RAM."""

    total: int | None = None
    used: int | None = None
    available: int | None = None


@dataclass(frozen=True, slots=True)
class SwapStat:
    total: int | None = None
    used: int | None = None


@dataclass(frozen=True, slots=True)
class IoRate:
    read_bytes_per_s: float | None = None
    write_bytes_per_s: float | None = None


@dataclass(frozen=True, slots=True)
class NetRate:
    rx_bytes_per_s: float | None = None
    tx_bytes_per_s: float | None = None


@dataclass(frozen=True, slots=True)
class HostSample:
    cpu_percent: float | None = None  # all cores, 0-100
    cpu_per_core: tuple[float, ...] = ()  # each 0-100
    cpu_count: int | None = None  # logical CPUs
    cpu_freq_mhz: float | None = None
    iowait_percent: float | None = None  # share of CPU time waiting on I/O
    load_average: tuple[float, float, float] | None = None
    memory: MemoryStat = field(default_factory=MemoryStat)
    swap: SwapStat = field(default_factory=SwapStat)
    disk: IoRate = field(default_factory=IoRate)
    net: NetRate = field(default_factory=NetRate)
    # Seconds the rates and percentages cover (CPU, iowait, disk, network, and the
    # processes' CPU and I/O): the time since the previous reading. None: the first
    # reading, whose rates are not known yet (they are None too).
    rate_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    """What the host (psutil, /proc) says about one pid.

    ``visible`` is False when the pid does not exist in this PID namespace
    (a container without ``--pid=host``): every other field is then None.
    """

    pid: int
    visible: bool = True
    ppid: int | None = None
    user: str | None = None  # control characters stripped
    name: str | None = None  # control characters stripped
    command: str | None = None  # command line joined with spaces, control characters stripped
    status: str | None = None  # psutil status: "running", "sleeping", "disk-sleep", "zombie", ...
    cpu_percent: float | None = None  # of one core (may exceed 100 for multi-threaded)
    rss: int | None = None
    read_bytes_per_s: float | None = None  # None on AccessDenied
    write_bytes_per_s: float | None = None
    create_time: float | None = None  # epoch seconds; the identity check before a kill
    num_threads: int | None = None


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """One process on one GPU: what NVML says, joined with what the host says.

    Sources that read NVML leave ``host`` as None; the sampler fills it in.
    In JSON the host fields are flattened into the process object.
    """

    pid: int
    type: str = "C"  # one of PROCESS_TYPES
    gpu_memory: int | None = None  # bytes; None when NVML says "not available"
    sm_percent: float | None = None  # per-process SM utilization since the last tick
    memory_bandwidth_percent: float | None = None
    gpu_instance_id: int | None = None  # MIG
    compute_instance_id: int | None = None
    host: ProcessInfo | None = None

    @property
    def visible(self) -> bool | None:
        return None if self.host is None else self.host.visible


def with_host(p: GpuProcess, host: ProcessInfo | None) -> GpuProcess:
    """``replace(p, host=host)`` at a third of its cost (it runs for every GPU process
    row that changed, every tick). Every field is passed: ``tests/test_host_source.py``
    checks none is left out."""
    return GpuProcess(
        pid=p.pid,
        type=p.type,
        gpu_memory=p.gpu_memory,
        sm_percent=p.sm_percent,
        memory_bandwidth_percent=p.memory_bandwidth_percent,
        gpu_instance_id=p.gpu_instance_id,
        compute_instance_id=p.compute_instance_id,
        host=host,
    )


@dataclass(frozen=True, slots=True)
class GpuMemory:
    total: int | None = None
    used: int | None = None  # excludes reserved when reserved is known (memory v2)
    free: int | None = None
    reserved: int | None = None


@dataclass(frozen=True, slots=True)
class Utilization:
    gpu: float | None = None  # % of time a kernel ran (not SM occupancy)
    memory: float | None = None  # % of time memory was read or written


@dataclass(frozen=True, slots=True)
class Clocks:
    sm_mhz: int | None = None
    memory_mhz: int | None = None
    sm_max_mhz: int | None = None
    memory_max_mhz: int | None = None


@dataclass(frozen=True, slots=True)
class Pcie:
    gen: int | None = None
    width: int | None = None
    max_gen: int | None = None
    max_width: int | None = None
    link_max_bytes_per_s: float | None = None  # per direction, from max gen x max width
    tx_bytes_per_s: float | None = None  # GPU -> host
    rx_bytes_per_s: float | None = None  # host -> GPU


@dataclass(frozen=True, slots=True)
class MigDevice:
    """One MIG device (a GPU instance with one compute instance) of a GPU in MIG mode.

    Its processes are the parent GPU's processes whose ``gpu_instance_id`` and
    ``compute_instance_id`` match.
    """

    index: int  # MIG device slot on the parent (nvmlDeviceGetMigDeviceHandleByIndex)
    uuid: str | None = None  # "MIG-..." (``--gpus`` accepts it)
    name: str | None = None  # NVML's name, e.g. "NVIDIA A100-SXM4-40GB MIG 1g.5gb"
    profile: str | None = None  # e.g. "1g.5gb", from the name
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    memory: GpuMemory = field(default_factory=GpuMemory)


@dataclass(frozen=True, slots=True)
class GpuSample:
    index: int
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    minor_number: int | None = None
    lost: bool = False  # fell off the bus (GpuIsLost / Unknown); only identity fields kept
    lost_reason: str | None = None
    memory: GpuMemory = field(default_factory=GpuMemory)
    utilization: Utilization = field(default_factory=Utilization)
    encoder_percent: float | None = None
    decoder_percent: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    fan_percent: float | None = None
    clocks: Clocks = field(default_factory=Clocks)
    clock_event_reasons: tuple[str, ...] | None = None  # decoded names; None: unknown
    performance_state: int | None = None  # 0 (P0, most performance) to 15 (P15, least)
    pcie: Pcie = field(default_factory=Pcie)
    mig_mode: bool | None = None
    ecc_uncorrected: int | None = None
    processes: tuple[GpuProcess, ...] = ()
    # Why NVML's process list (compute or graphics) could not be read: "not supported",
    # "no permission"... ``processes`` is then incomplete or unknown, not "no processes".
    # None: both lists were read.
    processes_unavailable: str | None = None
    # The MIG devices when ``mig_mode`` is on (empty otherwise, or when NVML lacks MIG).
    mig_devices: tuple[MigDevice, ...] = ()

    def processes_of(self, mig: MigDevice) -> tuple[GpuProcess, ...]:
        """The processes on one MIG device: those with its GPU and compute instance ids."""
        return tuple(
            p
            for p in self.processes
            if p.gpu_instance_id == mig.gpu_instance_id
            and p.compute_instance_id == mig.compute_instance_id
        )


@dataclass(frozen=True, slots=True)
class UnlistedHolder:
    """A process holding /dev/nvidia<N> open that NVML does not list."""

    pid: int
    gpu: int | None  # index of the GPU whose minor number is N; None if no GPU matches
    minor_number: int | None = None
    user: str | None = None
    name: str | None = None
    command: str | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    time: float  # epoch seconds at the end of the tick
    hostname: str
    driver: DriverInfo
    host: HostSample | None = None
    gpus: tuple[GpuSample, ...] = ()
    # Host view of every GPU process and of their descendants (dataloader workers, ...),
    # keyed implicitly by pid; the analysis builds process trees from it.
    processes: tuple[ProcessInfo, ...] = ()
    unlisted_holders: tuple[UnlistedHolder, ...] = ()
    errors: tuple[SampleError, ...] = ()
    source: str = "nvml"  # "nvml", "host-only", "demo", "replay"
    tick_seconds: float | None = None  # wall time the tick took
    tick_cpu_seconds: float | None = None  # CPU time the tick took
    schema: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return _to_jsonable(self)  # type: ignore[no-any-return]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Snapshot:
        snapshot: Snapshot = _from_jsonable(cls, data)
        return snapshot

    def gpu(self, index: int) -> GpuSample | None:
        for g in self.gpus:
            if g.index == index:
                return g
        return None

    def process_info(self, pid: int) -> ProcessInfo | None:
        for p in self.processes:
            if p.pid == pid:
                return p
        return None


# --- JSON codec -------------------------------------------------------------------------
# Generic over the dataclasses above. One special case: GpuProcess.host is flattened into
# the process object (scripts read ``proc["user"]``, not ``proc["host"]["user"]``), with
# ``visible`` at the top.

#: The ProcessInfo fields flattened into a GPU process's JSON object (all but the pid).
HOST_FIELDS = tuple(f.name for f in dataclasses.fields(ProcessInfo) if f.name != "pid")
T = TypeVar("T")


def _to_jsonable(obj: Any) -> Any:
    if isinstance(obj, GpuProcess):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(obj):
            if f.name != "host":
                out[f.name] = _to_jsonable(getattr(obj, f.name))
        host = obj.host
        for name in HOST_FIELDS:
            out[name] = None if host is None else _to_jsonable(getattr(host, name))
        return out
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, tuple | list):
        return [_to_jsonable(v) for v in obj]
    return obj


_HINTS: dict[type, dict[str, Any]] = {}


def type_hints(cls: type) -> dict[str, Any]:
    """``typing.get_type_hints(cls)``, resolved once per class (the decoders' hot path)."""
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _from_jsonable(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(tp) if a is not type(None)]
        return _from_jsonable(members[0], value)
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_from_jsonable(args[0], v) for v in value)
        return tuple(_from_jsonable(a, v) for a, v in zip(args, value, strict=True))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = type_hints(tp)
        data = dict(value)
        kwargs: dict[str, Any] = {}
        if tp is GpuProcess:
            host_data = {name: data.pop(name, None) for name in HOST_FIELDS}
            if host_data.get("visible") is None:
                kwargs["host"] = None
            else:
                kwargs["host"] = _from_jsonable(ProcessInfo, {"pid": data["pid"], **host_data})
            data.pop("host", None)
        for f in dataclasses.fields(tp):
            if f.name in data:
                kwargs[f.name] = _from_jsonable(hints[f.name], data[f.name])
        return tp(**kwargs)
    if tp is float and isinstance(value, int):
        return float(value)
    return value


def replace(obj: T, **changes: Any) -> T:
    """``dataclasses.replace`` with a name that reads well at call sites."""
    return dataclasses.replace(obj, **changes)  # type: ignore[type-var]


def reuse_equal(new: T, last: T | None, parts: tuple[str, ...] = ()) -> T:
    """``last`` when it equals ``new``; else ``new`` with each field named in ``parts``
    that equals ``last``'s taken from ``last``.

    Snapshots are immutable, so consecutive ones may share what did not change: a
    history of hundreds of snapshots then holds one copy of an unchanged GPU sample,
    memory reading or process list instead of one per tick (the values are equal, so
    nothing reported changes)."""
    if last is None or new is last:
        return new
    if new == last:
        return last
    same = {}
    for name in parts:
        old = getattr(last, name)
        value = getattr(new, name)
        if value is not old and value == old:
            same[name] = old
    return dataclasses.replace(new, **same) if same else new  # type: ignore[type-var]


def same_objects(a: Sequence[object], b: Sequence[object]) -> bool:
    """Whether ``a`` and ``b`` hold the very same objects, in order (no comparison of
    values: what :func:`reuse_equal` shared stays shared)."""
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


# --- the GPU metric table ---------------------------------------------------------------
# Each scalar GPU metric declared once, as data (as nvitop's SNAPSHOT_KEYS and dolphie's
# MetricDefinitions do): the bounds check (sources/bounds.py), the exporter's per-GPU
# series (exporter/metrics.py), the metrics that stand on their own in the panel, --once
# and the detail screen, and the table in docs/metrics.md all read it. Adding a metric:
# a GpuSample field, a row here, its NVML read (sources/nvml.py).


@dataclass(frozen=True, slots=True)
class GpuMetric:
    """One scalar of a :class:`GpuSample`: where it is, how NVML gives it, which values
    can be true, how people and Prometheus see it."""

    field: str  # the GpuSample attribute path ("utilization.gpu"), as in --json
    nvml: str  # the NVML call that reads it
    unit: str  # of the value in the model ("%", "°C", "W", "MHz", "bytes", "" for a count)
    about: str  # what it means, in words (the docs table; an exported metric's help)
    # The values a GPU can truly report (both ends included); anything else is the
    # driver's garbage: n/a, with an error (sources/bounds.py). None: not bounded here.
    bounds: tuple[float, float] | None = None
    # The format string of one value for people (fmt.shown); "" for none of its own.
    text: str = ""
    # Its word where it stands on its own as "word value": the panel's second line,
    # --once's clock line (capitalized) and the detail screen's line of current values.
    # "": it shows only inside a combined item (power/limit, memory used/total, ...).
    label: str = ""
    # The exporter's gauge (None: not exported by itself) and its unit for people; the
    # value is converted from ``unit`` to ``export_unit`` (exporter/metrics.py).
    export: str | None = None
    export_unit: str = ""
    # What the demo's GPUs report for a metric the demo does not simulate (None: the
    # demo sets it, or leaves it n/a). Only for fields of GpuSample itself (no dot).
    demo: float | None = None
    get: Callable[[Any], Any] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "get", operator.attrgetter(self.field))

    def of(self, gpu: GpuSample) -> Any:
        """This metric's value in ``gpu`` (None: n/a)."""
        return self.get(gpu)


#: Every scalar GPU metric, in the order the exporter writes them and the docs list them.
GPU_METRICS: tuple[GpuMetric, ...] = (
    GpuMetric(
        "utilization.gpu",
        "nvmlDeviceGetUtilizationRates",
        "%",
        "Share of the last sample period a kernel ran (NVML utilization.gpu)",
        bounds=(0, 100),
        text="{:.0f}%",
        export="gputop_gpu_utilization_ratio",
        export_unit="0-1",
    ),
    GpuMetric(
        "utilization.memory",
        "nvmlDeviceGetUtilizationRates",
        "%",
        "Share of the last sample period in which memory was read or written",
        bounds=(0, 100),
        text="{:.0f}%",
    ),
    GpuMetric(
        "memory.used",
        "nvmlDeviceGetMemoryInfo (v2, else v1)",
        "bytes",
        "GPU memory used",
        export="gputop_gpu_memory_used_bytes",
        export_unit="bytes",
    ),
    GpuMetric(
        "memory.total",
        "nvmlDeviceGetMemoryInfo (v2, else v1)",
        "bytes",
        "GPU memory total",
        export="gputop_gpu_memory_total_bytes",
        export_unit="bytes",
    ),
    GpuMetric(
        "memory.reserved",
        "nvmlDeviceGetMemoryInfo (v2)",
        "bytes",
        "GPU memory reserved by the driver (not in used)",
        export="gputop_gpu_memory_reserved_bytes",
        export_unit="bytes",
    ),
    GpuMetric("memory.free", "nvmlDeviceGetMemoryInfo (v2, else v1)", "bytes", "GPU memory free"),
    GpuMetric(
        "pcie.link_max_bytes_per_s",
        "from the max PCIe generation and width",
        "bytes/s",
        "PCIe link capacity per direction at its max generation and width",
        export="gputop_gpu_pcie_link_max_bytes_per_second",
        export_unit="bytes/s",
    ),
    GpuMetric(
        "pcie.gen",
        "nvmlDeviceGetCurrPcieLinkGeneration",
        "",
        "PCIe link generation now",
        export="gputop_gpu_pcie_link_gen",
        export_unit="1",
    ),
    GpuMetric(
        "pcie.max_gen",
        "nvmlDeviceGetMaxPcieLinkGeneration",
        "",
        "PCIe link generation max",
        export="gputop_gpu_pcie_link_max_gen",
        export_unit="1",
    ),
    GpuMetric(
        "pcie.width",
        "nvmlDeviceGetCurrPcieLinkWidth",
        "lanes",
        "PCIe link width now",
        export="gputop_gpu_pcie_link_width",
        export_unit="lanes",
    ),
    GpuMetric(
        "pcie.max_width",
        "nvmlDeviceGetMaxPcieLinkWidth",
        "lanes",
        "PCIe link width max",
        export="gputop_gpu_pcie_link_max_width",
        export_unit="lanes",
    ),
    GpuMetric(
        "pcie.tx_bytes_per_s",
        "nvmlDeviceGetPcieThroughput (TX)",
        "bytes/s",
        'PCIe throughput GPU to host (gputop_gpu_pcie_bytes_per_second{direction="tx"})',
    ),
    GpuMetric(
        "pcie.rx_bytes_per_s",
        "nvmlDeviceGetPcieThroughput (RX)",
        "bytes/s",
        'PCIe throughput host to GPU (gputop_gpu_pcie_bytes_per_second{direction="rx"})',
    ),
    GpuMetric(
        "power_w",
        "nvmlDeviceGetPowerUsage",
        "W",
        "Power draw",
        bounds=(0, 5000),
        text="{:.0f}W",
        export="gputop_gpu_power_watts",
        export_unit="watts",
    ),
    GpuMetric(
        "power_limit_w",
        "nvmlDeviceGetEnforcedPowerLimit",
        "W",
        "Enforced power limit",
        bounds=(0, 5000),
        text="{:.0f}W",
        export="gputop_gpu_power_limit_watts",
        export_unit="watts",
    ),
    GpuMetric(
        "temperature_c",
        "nvmlDeviceGetTemperatureV (else nvmlDeviceGetTemperature)",
        "°C",
        "GPU core temperature",
        bounds=(1, 150),
        text="{:.0f}°C",
        export="gputop_gpu_temperature_celsius",
        export_unit="°C",
    ),
    GpuMetric(
        "fan_percent",
        "nvmlDeviceGetFanSpeed",
        "%",
        "Fan speed, share of its maximum",
        bounds=(0, 200),
        text="{:.0f}%",
        label="fan",
        export="gputop_gpu_fan_ratio",
        export_unit="0-1",
    ),
    GpuMetric(
        "performance_state",
        "nvmlDeviceGetPerformanceState",
        "",
        "Performance state: 0 (P0, most performance) to 15 (P15, least)",
        bounds=(0, 15),
        text="P{:.0f}",
        label="perf",
        export="gputop_gpu_performance_state",
        export_unit="1",
        demo=0,
    ),
    GpuMetric(
        "clocks.sm_mhz",
        "nvmlDeviceGetClockInfo (SM)",
        "MHz",
        "SM clock",
        bounds=(0, 10_000),
        text="{:.0f}MHz",
        export="gputop_gpu_sm_clock_hertz",
        export_unit="hertz",
    ),
    GpuMetric(
        "clocks.memory_mhz",
        "nvmlDeviceGetClockInfo (MEM)",
        "MHz",
        "Memory clock",
        bounds=(0, 10_000),
        text="{:.0f}MHz",
    ),
    GpuMetric(
        "clocks.sm_max_mhz",
        "nvmlDeviceGetMaxClockInfo (SM)",
        "MHz",
        "SM clock max",
        bounds=(0, 10_000),
        text="{:.0f}MHz",
    ),
    GpuMetric(
        "clocks.memory_max_mhz",
        "nvmlDeviceGetMaxClockInfo (MEM)",
        "MHz",
        "Memory clock max",
        bounds=(0, 10_000),
        text="{:.0f}MHz",
    ),
    GpuMetric(
        "encoder_percent",
        "nvmlDeviceGetEncoderUtilization",
        "%",
        "Video encoder utilization",
        bounds=(0, 100),
        text="{:.0f}%",
    ),
    GpuMetric(
        "decoder_percent",
        "nvmlDeviceGetDecoderUtilization",
        "%",
        "Video decoder utilization",
        bounds=(0, 100),
        text="{:.0f}%",
    ),
    GpuMetric(
        "mig_mode",
        "nvmlDeviceGetMigMode",
        "0/1",
        "1 while MIG mode is enabled",
        export="gputop_gpu_mig_mode",
        export_unit="0/1",
    ),
    GpuMetric(
        "ecc_uncorrected",
        "nvmlDeviceGetTotalEccErrors (uncorrected, volatile)",
        "",
        "Uncorrected ECC errors since the driver loaded (n/a on consumer GPUs)",
    ),
)


#: field -> its row.
GPU_METRIC: dict[str, GpuMetric] = {m.field: m for m in GPU_METRICS}
#: The metrics with a ``label``: each stands on its own as "label value".
LABELLED_METRICS: tuple[GpuMetric, ...] = tuple(m for m in GPU_METRICS if m.label)


def _cell(text: str) -> str:
    return text.replace("|", "\\|") or "—"


def gpu_metrics_markdown() -> str:
    """:data:`GPU_METRICS` as a markdown table (docs/metrics.md, generated)."""
    lines = [
        "| field (`--json`) | NVML call | unit | bounds | Prometheus | meaning |",
        "|---|---|---|---|---|---|",
    ]
    for m in GPU_METRICS:
        bounds = "" if m.bounds is None else f"{m.bounds[0]:g}-{m.bounds[1]:g}"
        export = f"`{m.export}`" if m.export else ""
        cells = (f"`{m.field}`", m.nvml, m.unit, bounds, export, m.about)
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"
