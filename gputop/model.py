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
import math
import operator
import re
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import NoneType
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
    """``replace(p, host=host)`` without its generic machinery (it runs for every GPU
    process row that changed, every tick). ``tests/test_host_source.py`` checks that
    every field is passed."""
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
    def from_dict(cls, data: dict[str, Any], *, checked: bool = False) -> Snapshot:
        """The snapshot of its JSON form (``to_dict()``); unknown keys are ignored.
        ``checked``: untrusted input, each value checked (see :func:`decoder`); raises
        ValueError when even the time, hostname or driver is unusable."""
        snapshot: Snapshot = decoder(cls, checked=checked)(data)
        if snapshot is _INVALID:
            raise ValueError("not a snapshot: its time, hostname or driver is unusable")
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
#: Checked decoding (untrusted input) cuts lists longer than this (GPUs, processes...)...
MAX_ITEMS = 4096
#: ... and strings longer than this (command lines are the longest).
MAX_TEXT = 4096
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


# C0 and C1 control characters and DEL; ESC starts ANSI/OSC sequences, which are dropped whole.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# Bidirectional overrides and isolates can reorder what follows them on screen.
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")


def clean_text(text: str | bytes | None, limit: int | None = 4096) -> str | None:
    """Strip escape sequences, control characters and bidi overrides from untrusted text.

    Bytes are decoded as UTF-8 with replacement. Newlines, tabs and the Unicode line and
    paragraph separators become spaces.
    ``limit`` caps the length (a command line can be megabytes long).
    """
    if text is None:
        return None
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if limit is not None and len(text) > limit * 2:
        text = text[: limit * 2]
    text = _ANSI.sub("", text)
    text = text.replace("\t", " ").replace("\n", " ").replace("\r", " ")
    # Unicode line and paragraph separators break lines too (str.splitlines, some terminals).
    text = text.replace("\u2028", " ").replace("\u2029", " ")
    text = _CONTROL.sub("", text)
    text = _BIDI.sub("", text)
    # Lone surrogates (from surrogateescape decoding) cannot be encoded for the terminal.
    if any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        text = text.encode("utf-8", "replace").decode("utf-8", "replace")
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


# --- the one decoder --------------------------------------------------------------------
# ``decoder(tp)`` turns the JSON form of a value of model type ``tp`` back into it. It is
# compiled once per type from the type hints into closures, since a replay decodes
# hundreds of snapshots for one jump. Two modes:
# - plain, for what gputop itself wrote: an int where a float belongs becomes a float,
#   everything else is taken as it is;
# - checked, for untrusted input (a remote host's lines): each value must be of its
#   type (a number finite, an int within 64 bits, a string cleaned by clean_text and
#   capped at MAX_TEXT, a list capped at MAX_ITEMS items); a value that is not becomes
#   its field's default (n/a), and an object whose required field (a pid, an index, the
#   time) is unusable is dropped as a whole. The checks of a value live in
#   ``_checked_leaf``, the dropping in ``_dataclass_decoder``.

Decode = Callable[[Any], Any]
#: What a checked decoder returns for a value it refuses (the field's default applies).
_INVALID: Any = object()
_DECODERS: dict[tuple[Any, bool], Decode] = {}
_HOSTS: dict[bool, Decode] = {}


def decoder(tp: Any, *, checked: bool = False) -> Decode:
    """The function from the JSON form of a ``tp`` (a model class, a tuple, an optional,
    a scalar) to the value; in checked mode a refused optional value is None."""
    found = _DECODERS.get((tp, checked))
    if found is None:
        found = _DECODERS[(tp, checked)] = _compile(tp, checked)
    return found


def _identity(value: Any) -> Any:
    return value


def _to_float(value: Any) -> Any:
    return float(value) if isinstance(value, int) else value


def _compile(tp: Any, checked: bool) -> Decode:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        members = [decoder(a, checked=checked) for a in typing.get_args(tp) if a is not NoneType]
        if not checked:
            return members[0]

        def optional(value: Any) -> Any:
            if value is None:
                return None
            for member in members:
                out = member(value)
                if out is not _INVALID:
                    return out
            return None  # n/a

        return optional
    if origin is tuple:
        return _tuple_decoder(typing.get_args(tp), checked)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _dataclass_decoder(tp, checked)
    if checked:
        return _checked_leaf(tp)
    return _to_float if tp is float else _identity


def _checked_leaf(tp: Any) -> Decode:
    if tp is float:
        return _finite
    if tp is int:
        return lambda v: v if type(v) is int and -(2**63) <= v < 2**64 else _INVALID
    if tp is bool:
        return lambda v: v if isinstance(v, bool) else _INVALID
    if tp is str:
        return lambda v: clean_text(v, MAX_TEXT) if isinstance(v, str) else _INVALID
    return lambda v: _INVALID


def _finite(value: Any) -> Any:
    if type(value) not in (int, float):  # a bool is not a number here
        return _INVALID
    try:
        v = float(value)
    except OverflowError:  # an int of hundreds of digits
        return _INVALID
    return v if math.isfinite(v) else _INVALID


def _tuple_decoder(args: tuple[Any, ...], checked: bool) -> Decode:
    if len(args) == 2 and args[1] is Ellipsis:
        item = decoder(args[0], checked=checked)
        if checked:
            return lambda v: (
                tuple(x for x in map(item, v[:MAX_ITEMS]) if x is not _INVALID)
                if isinstance(v, list)
                else _INVALID
            )
        if item is _identity:
            return lambda v: None if v is None else tuple(v)
        return lambda v: None if v is None else tuple(map(item, v))
    items = [decoder(a, checked=checked) for a in args]
    if not checked:
        return lambda v: None if v is None else tuple(c(x) for c, x in zip(items, v, strict=True))

    def fixed(value: Any) -> Any:
        if not isinstance(value, list) or len(value) != len(items):
            return _INVALID
        out = tuple(c(x) for c, x in zip(items, value, strict=True))
        return _INVALID if any(x is _INVALID or x is None for x in out) else out

    return fixed


def _dataclass_decoder(cls: type, checked: bool) -> Decode:
    hints = type_hints(cls)
    # (field, its decoder or None when the JSON value is the value, required)
    plan: list[tuple[str, Decode | None, bool]] = []
    host = host_decoder(checked=checked) if cls is GpuProcess else None

    def build(value: Any) -> Any:
        if value is None:
            return None
        kwargs = {}
        for name, conv, _ in plan:
            if name in value:
                v = value[name]
                kwargs[name] = v if conv is None else conv(v)
        if host is not None:
            kwargs["host"] = host(value)
        return cls(**kwargs)

    def build_checked(value: Any) -> Any:
        if not isinstance(value, dict):
            return _INVALID
        kwargs = {}
        for name, conv, required in plan:
            if name in value:
                v = conv(value[name])  # type: ignore[misc]
                if v is not _INVALID:
                    kwargs[name] = v
                elif required:
                    return _INVALID
        if host is not None:
            kwargs["host"] = host(value)
        try:
            return cls(**kwargs)
        except TypeError:  # a required field is absent
            return _INVALID

    made = _DECODERS[(cls, checked)] = build_checked if checked else build
    for f in dataclasses.fields(cls):
        if host is not None and f.name == "host":
            continue
        conv = decoder(hints[f.name], checked=checked)
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        plan.append((f.name, None if conv is _identity else conv, required))
    return made


def host_decoder(*, checked: bool = False) -> Decode:
    """``GpuProcess.host`` from the process's own JSON object, which holds its fields
    (:data:`HOST_FIELDS`) beside the pid: no host when ``visible`` is absent or n/a."""
    found = _HOSTS.get(checked)
    if found is None:
        found = _HOSTS[checked] = _flat_host(checked)
    return found


def _flat_host(checked: bool) -> Decode:
    visible = decoder(bool, checked=checked)
    info = decoder(ProcessInfo, checked=checked)

    def host(value: Any) -> Any:
        if visible(value.get("visible")) in (None, _INVALID):
            return None
        out = info(value)  # reads the pid and the host fields only
        return None if out is _INVALID else out

    return host


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
    unit: str  # of the value in the model ("%", "°C", "W", "MHz", "bytes", "" for a count)
    # The values a GPU can truly report (both ends included); anything else is the
    # driver's garbage: n/a, with an error (sources/bounds.py). None: not bounded here.
    bounds: tuple[float, float] | None
    # The format string of one value for people (fmt.shown); "" for none of its own.
    text: str
    # Its word where it stands on its own as "word value": the panel's second line,
    # --once's clock line (capitalized) and the detail screen's line of current values.
    # "": it shows only inside a combined item (power/limit, memory used/total, ...).
    label: str
    # The exporter's gauge (None: not exported by itself) and its unit for people; the
    # value is converted from ``unit`` to ``export_unit`` (exporter/metrics.py).
    export: str | None
    export_unit: str
    nvml: str  # the NVML call that reads it
    about: str  # what it means, in words (the docs table; an exported metric's help)
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
# fmt: off
GPU_METRICS: tuple[GpuMetric, ...] = (
    #         field, unit, bounds, text, label, exporter gauge, its unit,
    #         NVML call, meaning
    GpuMetric("utilization.gpu", "%", (0, 100), "{:.0f}%", "",
              "gputop_gpu_utilization_ratio", "0-1",
              "nvmlDeviceGetUtilizationRates",
              "Share of the last sample period a kernel ran (NVML utilization.gpu)"),
    GpuMetric("utilization.memory", "%", (0, 100), "{:.0f}%", "", None, "",
              "nvmlDeviceGetUtilizationRates",
              "Share of the last sample period in which memory was read or written"),
    GpuMetric("memory.used", "bytes", None, "", "", "gputop_gpu_memory_used_bytes", "bytes",
              "nvmlDeviceGetMemoryInfo (v2, else v1)", "GPU memory used"),
    GpuMetric("memory.total", "bytes", None, "", "", "gputop_gpu_memory_total_bytes", "bytes",
              "nvmlDeviceGetMemoryInfo (v2, else v1)", "GPU memory total"),
    GpuMetric("memory.reserved", "bytes", None, "", "", "gputop_gpu_memory_reserved_bytes", "bytes",
              "nvmlDeviceGetMemoryInfo (v2)", "GPU memory reserved by the driver (not in used)"),
    GpuMetric("memory.free", "bytes", None, "", "", None, "",
              "nvmlDeviceGetMemoryInfo (v2, else v1)", "GPU memory free"),
    GpuMetric("pcie.link_max_bytes_per_s", "bytes/s", None, "", "",
              "gputop_gpu_pcie_link_max_bytes_per_second", "bytes/s",
              "from the max PCIe generation and width",
              "PCIe link capacity per direction at its max generation and width"),
    GpuMetric("pcie.gen", "", None, "", "", "gputop_gpu_pcie_link_gen", "1",
              "nvmlDeviceGetCurrPcieLinkGeneration", "PCIe link generation now"),
    GpuMetric("pcie.max_gen", "", None, "", "", "gputop_gpu_pcie_link_max_gen", "1",
              "nvmlDeviceGetMaxPcieLinkGeneration", "PCIe link generation max"),
    GpuMetric("pcie.width", "lanes", None, "", "", "gputop_gpu_pcie_link_width", "lanes",
              "nvmlDeviceGetCurrPcieLinkWidth", "PCIe link width now"),
    GpuMetric("pcie.max_width", "lanes", None, "", "", "gputop_gpu_pcie_link_max_width", "lanes",
              "nvmlDeviceGetMaxPcieLinkWidth", "PCIe link width max"),
    GpuMetric("pcie.tx_bytes_per_s", "bytes/s", None, "", "", None, "",
              "nvmlDeviceGetPcieThroughput (TX)",
              'PCIe throughput GPU to host (gputop_gpu_pcie_bytes_per_second{direction="tx"})'),
    GpuMetric("pcie.rx_bytes_per_s", "bytes/s", None, "", "", None, "",
              "nvmlDeviceGetPcieThroughput (RX)",
              'PCIe throughput host to GPU (gputop_gpu_pcie_bytes_per_second{direction="rx"})'),
    GpuMetric("power_w", "W", (0, 5_000), "{:.0f}W", "", "gputop_gpu_power_watts", "watts",
              "nvmlDeviceGetPowerUsage", "Power draw"),
    GpuMetric("power_limit_w", "W", (0, 5_000), "{:.0f}W", "",
              "gputop_gpu_power_limit_watts", "watts",
              "nvmlDeviceGetEnforcedPowerLimit", "Enforced power limit"),
    GpuMetric("temperature_c", "°C", (1, 150), "{:.0f}°C", "",
              "gputop_gpu_temperature_celsius", "°C",
              "nvmlDeviceGetTemperatureV (else nvmlDeviceGetTemperature)", "GPU core temperature"),
    GpuMetric("fan_percent", "%", (0, 200), "{:.0f}%", "fan", "gputop_gpu_fan_ratio", "0-1",
              "nvmlDeviceGetFanSpeed", "Fan speed, share of its maximum"),
    GpuMetric("performance_state", "", (0, 15), "P{:.0f}", "perf",
              "gputop_gpu_performance_state", "1",
              "nvmlDeviceGetPerformanceState",
              "Performance state: 0 (P0, most performance) to 15 (P15, least)", demo=0),
    GpuMetric("clocks.sm_mhz", "MHz", (0, 10_000), "{:.0f}MHz", "",
              "gputop_gpu_sm_clock_hertz", "hertz",
              "nvmlDeviceGetClockInfo (SM)", "SM clock"),
    GpuMetric("clocks.memory_mhz", "MHz", (0, 10_000), "{:.0f}MHz", "", None, "",
              "nvmlDeviceGetClockInfo (MEM)", "Memory clock"),
    GpuMetric("clocks.sm_max_mhz", "MHz", (0, 10_000), "{:.0f}MHz", "", None, "",
              "nvmlDeviceGetMaxClockInfo (SM)", "SM clock max"),
    GpuMetric("clocks.memory_max_mhz", "MHz", (0, 10_000), "{:.0f}MHz", "", None, "",
              "nvmlDeviceGetMaxClockInfo (MEM)", "Memory clock max"),
    GpuMetric("encoder_percent", "%", (0, 100), "{:.0f}%", "", None, "",
              "nvmlDeviceGetEncoderUtilization", "Video encoder utilization"),
    GpuMetric("decoder_percent", "%", (0, 100), "{:.0f}%", "", None, "",
              "nvmlDeviceGetDecoderUtilization", "Video decoder utilization"),
    GpuMetric("mig_mode", "0/1", None, "", "", "gputop_gpu_mig_mode", "0/1",
              "nvmlDeviceGetMigMode", "1 while MIG mode is enabled"),
    GpuMetric("ecc_uncorrected", "", None, "", "", None, "",
              "nvmlDeviceGetTotalEccErrors (uncorrected, volatile)",
              "Uncorrected ECC errors since the driver loaded (n/a on consumer GPUs)"),
)
# fmt: on


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


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the analysis concluded about one GPU or job; ``to_dict`` is its JSON form,
    and a remote host's verdict is read back into the same class."""

    kind: str  # one of gputop.analysis.kinds.KINDS
    label: str  # for people
    evidence: str  # the numbers behind it, one line
    advice: str  # what to try, one line
    severity: str  # "ok" | "info" | "warn" | "bad"
    also: tuple[str, ...] = ()  # other kinds that apply, by rank

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "label": self.label,
            "severity": self.severity,
            "evidence": self.evidence,
            "advice": self.advice,
            "also": list(self.also),
        }
