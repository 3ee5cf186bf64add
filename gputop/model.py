"""The immutable snapshot model every source produces and every view reads; an
unavailable metric is ``None``, never 0. The dict form is the ``--json`` schema
(docs/json.md). Imports nothing of gputop."""

from __future__ import annotations

import dataclasses
import functools
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

#: PIDs some drivers list that are never a real process: no stage shows, groups or
#: signals them.
INVALID_PIDS: frozenset[int] = frozenset({0, 2**32 - 1})

#: NVML's clock-event reason bits in bit order: (bit, name in the JSON, short word, effect
#: on a busy GPU: "hard" heat/hardware, "soft" the power cap, "" none).
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
CLOCK_EVENT_REASONS: tuple[tuple[int, str], ...] = tuple(
    (bit, name) for bit, name, _, _ in CLOCK_EVENT_REASON_TABLE
)
CLOCK_EVENT_WORDS: dict[str, str] = {name: word for _, name, word, _ in CLOCK_EVENT_REASON_TABLE}
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
    """The NVIDIA driver as NVML reports it; ``available`` False: the host part only."""

    available: bool  # False: host-only mode
    error: str | None = None  # why not available, in words
    driver_version: str | None = None
    cuda_version: str | None = None  # CUDA driver API version, e.g. "12.4"
    nvml_version: str | None = None
    compat: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MemoryStat:
    """The host's memory in bytes."""

    total: int | None = None
    used: int | None = None
    available: int | None = None


@dataclass(frozen=True, slots=True)
class SwapStat:
    """The host's swap in bytes."""

    total: int | None = None
    used: int | None = None


@dataclass(frozen=True, slots=True)
class IoRate:
    """The host's disk reads and writes in bytes per second."""

    read_bytes_per_s: float | None = None
    write_bytes_per_s: float | None = None


@dataclass(frozen=True, slots=True)
class NetRate:
    """The host's network traffic in bytes per second."""

    rx_bytes_per_s: float | None = None
    tx_bytes_per_s: float | None = None


@dataclass(frozen=True, slots=True)
class HostSample:
    """The host's CPUs, memory, swap, disk and network at one tick."""

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
    # Seconds every rate covers (host and processes); None on a first reading.
    rate_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class Owner:
    """Who a process belongs to, read from its cgroup (gputop.sources.owners); a field
    the cgroup, the kubelet's pod logs or the environment does not give is None."""

    kind: str  # one of gputop.sources.owners.OWNER_KINDS
    runtime: str | None = None  # "containerd", "cri-o", "docker", "podman"
    id: str | None = None  # the whole container id
    pod: str | None = None
    namespace: str | None = None
    container: str | None = None  # the container's name in its pod
    pod_uid: str | None = None
    slurm_job: str | None = None
    slurm_step: str | None = None  # "0", "batch", "extern", ...
    slurm_job_name: str | None = None  # SLURM_JOB_NAME: the process's claim, where readable
    # SLURM_JOB_USER, which older gputop recorded: the process's claim, never shown (the
    # process's real uid is its user); no longer read.
    slurm_user: str | None = None
    unit: str | None = None  # the systemd unit
    uid: str | None = None  # the user a trusted position names (user-UID.slice, uid_N)


@dataclass(frozen=True, slots=True)
class CudaMemory:
    """One CUDA device's caching allocator, as the training process's probe reads it
    (torch.cuda); bytes."""

    device: int  # the process's CUDA device index (after CUDA_VISIBLE_DEVICES)
    allocated: int | None = None  # held by live tensors
    reserved: int | None = None  # held by the caching allocator (what NVML counts as used)
    peak: int | None = None  # max allocated since the process started (or its last reset)


@dataclass(frozen=True, slots=True)
class Probe:
    """What a training process measured of itself (gputop.probe, opt-in) over its last
    window, as gputop read it from the probe's file (gputop.probefile)."""

    time: float  # epoch seconds the probe wrote it
    window_seconds: float | None = None
    steps: int | None = None  # batches taken in the window
    data_wait_ratio: float | None = None  # share of step time waiting for the next batch, 0-1
    step_seconds: float | None = None  # mean time between consecutive batches
    batches_per_second: float | None = None
    memory: tuple[CudaMemory, ...] = ()  # empty: no CUDA in that process


#: The environment variables of a process that gputop reads and shows (the process
#: screen): which GPUs it sees, and its place in a distributed job. The only other one read
#: is a Slurm step's job name, which names its owner (`sources.owners`).
ENVIRONMENT_NAMES: tuple[str, ...] = (
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "OMP_NUM_THREADS",
)
#: The most characters of one such value that are kept.
ENVIRONMENT_VALUE_MAX = 256


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    """What the host says about one pid; not ``visible`` (another PID namespace): the
    other fields are None."""

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
    owner: Owner | None = None  # None: no container, pod, Slurm job or unit recognised
    probe: Probe | None = None  # None: no probe runs in it (or none gputop may read)
    # (name, value) of the ENVIRONMENT_NAMES set in it, in that order; None: not read (the
    # kernel closes another user's environment to gputop, or there is no Linux /proc).
    environment: tuple[tuple[str, str], ...] | None = None


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """One process on one GPU: NVML's view joined with the host's (flattened in JSON)."""

    pid: int
    type: str = "C"  # "C" compute, "G" graphics, "C+G"
    gpu_memory: int | None = None  # bytes; None when NVML says "not available"
    sm_percent: float | None = None  # per-process SM utilization since the last tick
    memory_bandwidth_percent: float | None = None
    gpu_instance_id: int | None = None  # MIG
    compute_instance_id: int | None = None
    host: ProcessInfo | None = None


def with_host(p: GpuProcess, host: ProcessInfo | None) -> GpuProcess:
    """``replace(p, host=host)`` on a per-tick hot path (a test checks every field)."""
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
    """A GPU's framebuffer memory in bytes."""

    total: int | None = None
    used: int | None = None  # excludes reserved when reserved is known (memory v2)
    free: int | None = None
    reserved: int | None = None


@dataclass(frozen=True, slots=True)
class Utilization:
    """A GPU's utilization rates, in percent of the sample period."""

    gpu: float | None = None  # % of time a kernel ran (not SM occupancy)
    memory: float | None = None  # % of time memory was read or written


@dataclass(frozen=True, slots=True)
class Clocks:
    """A GPU's current and maximum SM and memory clocks in MHz."""

    sm_mhz: int | None = None
    memory_mhz: int | None = None
    sm_max_mhz: int | None = None
    memory_max_mhz: int | None = None


@dataclass(frozen=True, slots=True)
class Pcie:
    """A GPU's PCIe link: generation and width now and at most, traffic per direction."""

    gen: int | None = None
    width: int | None = None
    max_gen: int | None = None
    max_width: int | None = None
    link_max_bytes_per_s: float | None = None  # per direction, from max gen x max width
    tx_bytes_per_s: float | None = None  # GPU -> host
    rx_bytes_per_s: float | None = None  # host -> GPU


@dataclass(frozen=True, slots=True)
class Activity:
    """What the SMs did, from GPM (Hopper and later): percent like ``utilization.gpu``;
    all None where GPM is not there."""

    sm: float | None = None  # share of SMs busy (GPM 2), what utilization.gpu is not
    sm_occupancy: float | None = None  # active warps of the theoretical maximum (GPM 3)
    tensor: float | None = None  # any tensor pipe active (GPM 5)
    dram: float | None = None  # DRAM bandwidth used of its peak (GPM 10)
    fp64: float | None = None  # non-tensor FP64 pipe (GPM 11)
    fp32: float | None = None  # non-tensor FP32 pipe (GPM 12)
    fp16: float | None = None  # non-tensor FP16 pipe (GPM 13)


@dataclass(frozen=True, slots=True)
class Nvlink:
    """The GPU's NVLink links; all None (and no peers) on a GPU without NVLink."""

    links: int | None = None  # active links
    version: str | None = None  # NVLink version of the links, "4.0"
    rx_bytes_per_s: float | None = None  # all links, into the GPU
    tx_bytes_per_s: float | None = None  # all links, out of the GPU
    max_bytes_per_s: float | None = None  # per direction: links x the version's per-link rate
    # The far end of each active link in link order: "GPU 3" (a local GPU's index),
    # "switch" (an NVSwitch), "unknown".
    peers: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MigDevice:
    """One MIG device (a GPU instance with one compute instance) of a GPU in MIG mode."""

    index: int  # MIG device slot on the parent (nvmlDeviceGetMigDeviceHandleByIndex)
    uuid: str | None = None  # "MIG-..." (``--gpus`` accepts it)
    name: str | None = None  # NVML's name, e.g. "NVIDIA A100-SXM4-40GB MIG 1g.5gb"
    profile: str | None = None  # e.g. "1g.5gb", from the name
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    memory: GpuMemory = field(default_factory=GpuMemory)
    activity: Activity = field(default_factory=Activity)  # GPM of its GPU instance


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU at one tick: identity, memory, utilization, power, clocks, processes."""

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
    activity: Activity = field(default_factory=Activity)
    nvlink: Nvlink = field(default_factory=Nvlink)
    mig_mode: bool | None = None
    ecc_uncorrected: int | None = None
    processes: tuple[GpuProcess, ...] = ()
    # Why NVML's process list could not be read (``processes`` is then incomplete).
    processes_unavailable: str | None = None
    mig_devices: tuple[MigDevice, ...] = ()

    def processes_of(self, mig: MigDevice) -> tuple[GpuProcess, ...]:
        return tuple(
            p
            for p in self.processes
            if p.gpu_instance_id == mig.gpu_instance_id
            and p.compute_instance_id == mig.compute_instance_id
        )


#: Parts left out of the JSON form while they say nothing (a GPU without GPM or NVLink):
#: documents of such GPUs are those of before the parts existed (docs/json.md).
QUIET_PARTS: dict[type, dict[str, Any]] = {
    GpuSample: {"activity": Activity(), "nvlink": Nvlink()},
    MigDevice: {"activity": Activity()},
}


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
    """One tick of the whole machine: what every source read; what every stage reads."""

    time: float  # epoch seconds at the end of the tick
    hostname: str
    driver: DriverInfo
    host: HostSample | None = None
    gpus: tuple[GpuSample, ...] = ()
    # Every GPU process and its descendants (dataloader workers...), as the host sees them.
    processes: tuple[ProcessInfo, ...] = ()
    unlisted_holders: tuple[UnlistedHolder, ...] = ()
    errors: tuple[SampleError, ...] = ()
    source: str = "nvml"  # "nvml", "host-only", "demo", "replay"
    tick_seconds: float | None = None  # wall time the tick took
    tick_cpu_seconds: float | None = None  # CPU time the tick took
    schema: int = SCHEMA_VERSION

    def to_dict(self, *, whole: bool = False) -> dict[str, Any]:
        """The JSON form; ``whole``: with the :data:`QUIET_PARTS` that say nothing too (a
        recording's rows then all have the same columns)."""
        return _to_jsonable(self, not whole)  # type: ignore[no-any-return]

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, checked: bool = False) -> Snapshot:
        """The snapshot of its JSON form; ``checked``: a remote host's (see :func:`decoder`
        and :func:`check_values`), ValueError when even the time, hostname or driver is
        unusable."""
        snapshot: Snapshot = decoder(Snapshot, checked=checked)(data)
        if snapshot is _INVALID:
            raise ValueError("not a snapshot: its time, hostname or driver is unusable")
        return check_values(snapshot, "remote", "the remote host") if checked else snapshot

    def gpu(self, index: int) -> GpuSample | None:
        return next((g for g in self.gpus if g.index == index), None)

    def process_info(self, pid: int) -> ProcessInfo | None:
        return next((p for p in self.processes if p.pid == pid), None)


#: Among a snapshot's errors while its GPU processes' host side is not read yet (the rows'
#: owner, command, CPU and trees, the probes, the /dev/nvidia holders): the dashboard's
#: first frame, drawn from the GPUs and the host, before the sampler completes that same
#: snapshot (``Sampler.start``). No other consumer is handed such a snapshot.
PROCESSES_PENDING = SampleError("host", "reading processes…", metric="processes")


def processes_pending(snapshot: Snapshot) -> bool:
    """Whether ``snapshot``'s process rows are still to be read (:data:`PROCESSES_PENDING`)."""
    return PROCESSES_PENDING in snapshot.errors


# --- JSON codec -------------------------------------------------------------------------
# Generic over the dataclasses; GpuProcess.host is flattened into the process object.

HOST_FIELDS = tuple(f.name for f in dataclasses.fields(ProcessInfo) if f.name != "pid")
#: Checked decoding cuts longer lists and strings.
MAX_ITEMS = 4096
MAX_TEXT = 4096
T = TypeVar("T")


def _to_jsonable(obj: Any, quiet: bool = True) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {f.name: _to_jsonable(getattr(obj, f.name), quiet) for f in dataclasses.fields(obj)}
        if isinstance(obj, GpuProcess):  # the host's fields follow the process's own
            host = out.pop("host") or {}
            out.update({name: host.get(name) for name in HOST_FIELDS})
        elif quiet and type(obj) in QUIET_PARTS:
            for name, empty in QUIET_PARTS[type(obj)].items():
                if getattr(obj, name) == empty:
                    del out[name]
        return out
    if isinstance(obj, tuple | list):
        return [_to_jsonable(v, quiet) for v in obj]
    return obj


#: ``typing.get_type_hints(cls)``, resolved once per class.
type_hints: Callable[[type], dict[str, Any]] = functools.cache(typing.get_type_hints)


# C0 and C1 control characters and DEL; ESC starts ANSI/OSC sequences, which are dropped whole.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
#: Characters that show nothing yet change what a name is or how the line around it reads:
#: Unicode's format characters (category Cf: soft hyphen, zero-width space and joiners,
#: bidirectional marks, overrides and isolates, word joiner, BOM, tags, ...) and the blank
#: letters and marks that pass for nothing (combining grapheme joiner, Hangul fillers,
#: Khmer inherent vowels, variation selectors). A test holds this to unicodedata's Cf.
INVISIBLE = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U00013438\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f"
    "\u034f\u115f\u1160\u17b4\u17b5\u3164\uffa0\ufe00-\ufe0f\U000e0100-\U000e01ef"
)
_INVISIBLE = re.compile(f"[{INVISIBLE}]")
#: Any character :func:`clean_text` changes: a string without one (and short enough) is
#: already clean, found at C speed.
_UNCLEAN = re.compile(f"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff{INVISIBLE}]")


def clean_text(text: str | bytes | None, limit: int | None = 4096) -> str | None:
    """Untrusted text without escape sequences, control characters, invisible characters
    (zero-width, BOM, bidi marks and overrides), line breaks and tabs as spaces, at most
    ``limit`` characters. The one cleaner of every string shown: sources call it on what
    they read, recordings and remote lines on what they decode."""
    if text is None:
        return None
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if (limit is None or len(text) <= limit) and not _UNCLEAN.search(text):
        return text
    if limit is not None and len(text) > limit * 2:
        text = text[: limit * 2]
    text = _ANSI.sub("", text)
    text = text.replace("\t", " ").replace("\n", " ").replace("\r", " ")
    text = text.replace("\u2028", " ").replace("\u2029", " ")
    text = _CONTROL.sub("", text)
    text = _INVISIBLE.sub("", text)
    # Lone surrogates (from surrogateescape decoding) cannot be encoded for the terminal.
    if any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        text = text.encode("utf-8", "replace").decode("utf-8", "replace")
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def clean_texts(values: list[Any], limit: int = 4096) -> list[Any]:
    """``values`` with each string passed through :func:`clean_text` (the very list when
    none needs it: one search over them all)."""
    texts = [v for v in values if type(v) is str]
    if not texts or (max(map(len, texts)) <= limit and not _UNCLEAN.search("".join(texts))):
        return values
    return [clean_text(v, limit) if type(v) is str else v for v in values]


# --- the one decoder, compiled once per type. Plain mode trusts what gputop wrote; checked
# mode (a remote host's lines) cleans text and cuts long lists; inside an object it keeps
# a value of the wrong type or shape as it came, for the check by type (:func:`check_values`)
# to make n/a with an error.

Decode = Callable[[Any], Any]
#: A checked decoder's answer for a value it refuses.
_INVALID: Any = object()


class _Cut(tuple):  # type: ignore[type-arg]
    """A list checked decoding cut to :data:`MAX_ITEMS`: the check says how many went."""

    cut: int


def _identity(value: Any) -> Any:
    return value


def _to_float(value: Any) -> Any:
    if type(value) is not int:  # a bool stays a bool, which the check by type refuses
        return value
    try:
        return float(value)
    except OverflowError:  # past a float: inf, which the check by value refuses
        return math.inf if value > 0 else -math.inf


@functools.cache
def decoder(tp: Any, *, checked: bool = False) -> Decode:
    """The function from the JSON form of a ``tp`` (a field's type: ``X | None`` at most)
    to the value."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        (inner,) = (a for a in typing.get_args(tp) if a is not NoneType)
        member = decoder(inner, checked=checked)
        if not checked:
            return member

        def optional(value: Any) -> Any:
            out = None if value is None else member(value)
            return None if out is _INVALID else out  # n/a

        return optional
    if typing.get_origin(tp) is tuple:
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
    v = _to_float(value)  # an int of hundreds of digits: inf
    return v if math.isfinite(v) else _INVALID


def _tuple_decoder(args: tuple[Any, ...], checked: bool) -> Decode:
    if len(args) == 2 and args[1] is Ellipsis:
        item = decoder(args[0], checked=checked)
        if checked:

            def variadic(value: Any) -> Any:
                if not isinstance(value, list):
                    return _INVALID
                out = tuple(raw if (x := item(raw)) is _INVALID else x for raw in value[:MAX_ITEMS])
                if len(value) <= MAX_ITEMS:
                    return out
                cut = _Cut(out)
                cut.cut = len(value) - MAX_ITEMS
                return cut

            return variadic
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
    # (field, its decoder or None for the identity)
    plan: list[tuple[str, Decode | None]] = []
    host = host_decoder(checked=checked) if cls is GpuProcess else None
    for f in dataclasses.fields(cls):
        if host is not None and f.name == "host":
            continue
        tp = hints[f.name]
        if checked and NoneType in typing.get_args(tp):  # None is taken as it comes; the
            tp = next(a for a in typing.get_args(tp) if a is not NoneType)  # check says more
        conv = decoder(tp, checked=checked)
        plan.append((f.name, None if conv is _identity else conv))

    def build(value: Any) -> Any:
        if value is None:
            return None
        kwargs = {}
        for name, conv in plan:
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
        for name, conv in plan:
            if name in value:
                raw = value[name]
                v = None if raw is None else conv(raw)  # type: ignore[misc]
                kwargs[name] = raw if v is _INVALID else v
        if host is not None:
            kwargs["host"] = host(value)
        try:
            return cls(**kwargs)
        except TypeError:  # a required field is absent
            return _INVALID

    return build_checked if checked else build


@functools.cache
def host_decoder(*, checked: bool = False) -> Decode:
    """``GpuProcess.host`` from the process's flat JSON object (None: no ``visible``)."""
    visible = decoder(bool, checked=checked)
    info = decoder(ProcessInfo, checked=checked)

    def host(value: Any) -> Any:
        if value.get("visible") is None or (not checked and visible(value["visible"]) is None):
            return None
        out = info(value)  # reads the pid and the host fields only
        return value if out is _INVALID else out  # checked: the check says it is no host

    return host


def replace(obj: T, **changes: Any) -> T:
    return dataclasses.replace(obj, **changes)  # type: ignore[type-var]


def reuse_equal(new: T, last: T | None, parts: tuple[str, ...] = ()) -> T:
    """``last`` when it equals ``new``; else ``new`` with each field in ``parts`` that
    equals ``last``'s taken from ``last``: a history then shares what did not change."""
    if last is None or new is last:
        return new
    if new == last:
        return last
    olds = {name: getattr(last, name) for name in parts}
    same = {n: old for n, old in olds.items() if (v := getattr(new, n)) is not old and v == old}
    return dataclasses.replace(new, **same) if same else new  # type: ignore[type-var]


def same_objects(a: Sequence[object], b: Sequence[object]) -> bool:
    """Whether ``a`` and ``b`` hold the very same objects, in order."""
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


# --- the GPU metric table: a new metric is a GpuSample field, a row here, its NVML read.


@dataclass(frozen=True, slots=True)
class ScalarRead:
    """One NVML call a tick (or once, when the GPU is attached), the first variant the
    driver has: each the function and the pynvml constants it takes after the handle."""

    metric: str  # the name its errors carry; rows that share it share the call
    calls: tuple[tuple[str, ...], ...]  # newest first
    note: str = ""  # which part of the answer, for people: " (SM)"
    once: bool = False  # static: read when the GPU is attached

    def says(self) -> str:
        first, *rest = self.calls
        return first[0] + self.note + "".join(f" (else {c[0]})" for c in rest)


@dataclass(frozen=True, slots=True)
class GpmRead:
    """A GPM metric (Hopper and later): computed by nvmlGpmMetricsGet from the previous
    tick's GPM sample and this tick's, which must be more than 100 ms apart."""

    metric_id: int  # nvmlGpmMetricId_t
    scale: float = 1.0  # the model's unit per GPM unit

    def says(self) -> str:
        return f"nvmlGpmMetricsGet (GPM metric {self.metric_id})"


@dataclass(frozen=True, slots=True)
class CounterRead:
    """A cumulative counter (nvmlDeviceGetFieldValues) turned into a rate across ticks;
    a counter that went back (wrapped or reset) gives n/a for that tick."""

    field_id: int  # NVML_FI_DEV_*
    scale: float = 1.0  # model units per counter unit (bytes per KiB: 1024)
    scope: int = 0xFFFFFFFF  # scopeId: a link, or UINT_MAX for all links

    def says(self) -> str:
        return f"nvmlDeviceGetFieldValues ({self.field_id}, all links), a rate across ticks"


@dataclass(frozen=True, slots=True)
class PerLinkRead:
    """A call asked for each NVLink link 0..NVML_NVLINK_MAX_LINKS-1 (once per attach),
    folded into a total: the links whose answer is true, counted."""

    call: str

    def says(self) -> str:
        return f"{self.call} per link, counted"


Read = ScalarRead | GpmRead | CounterRead | PerLinkRead


@dataclass(frozen=True, slots=True)
class GpuMetric:
    """One scalar of a :class:`GpuSample`, and how NVML reads it."""

    field: str  # the GpuSample attribute path ("utilization.gpu"), as in --json
    unit: str  # of the value in the model ("%", "°C", "W", "MHz", "bytes", "" for a count)
    # The values a GPU can truly report; anything else is n/a with an error. None: any.
    bounds: tuple[float, float] | None
    text: str  # the format of one value for people; "" for none of its own
    # Its word where it stands alone as "word value"; "": only inside a combined item.
    label: str
    export: str | None  # the exporter's gauge (None: not exported by itself)
    export_unit: str  # the gauge's unit; the value is converted from ``unit``
    # How it is read, in words, where ``reads`` does not say it (derived values, the memory
    # call's versions); "": the reads' own words.
    nvml: str
    about: str  # what it means, in words (the docs table; an exported metric's help)
    # What the demo's GPUs report when the demo does not simulate it (fields without dot).
    demo: float | None = None
    # How the NVML source reads it: the first read that gives a value (GPM before the
    # counters, say). (): read by hand (memory, derived capacities).
    reads: tuple[Read, ...] = ()
    dcgm: str = ""  # DCGM's field of the same quantity, for users of dcgm-exporter
    # (label, value) that tells this row's series apart in a family that several rows share
    # (``export``): ``("pipe", "fp64")``. None: the gauge is the row's own.
    export_label: tuple[str, str] | None = None
    get: Callable[[Any], Any] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "get", operator.attrgetter(self.field))
        if not self.nvml:
            object.__setattr__(self, "nvml", ", else ".join(r.says() for r in self.reads))


# Bounds admit every real card with headroom (issue 21): power 4x a GB200's 1200 W; memory
# clock 2x GDDR7's top (NVML says half the per-pin rate); SM clock 3x any boost; memory
# 3000x a B300's 288 GB; PCIe x1-x32 up to twice 7.0's 256 GB/s, gen 1 x1 at least.
_GPU_BYTES = (0, 1e15)
_MEM_MHZ = (0, 50_000)
_PCIE_GEN = (0, 16)
_PCIE_WIDTH = (0, 32)
_PCIE_RATE = (0, 2e12)
_PERCENT = (0, 100)
# NVLink: 18 links of NVLink 5 carry 0.9 TB/s a direction; 10 TB/s leaves headroom.
_NVLINK_RATE = (0, 1e13)
_MIB = 2**20


def _s(metric: str, *calls: tuple[str, ...], note: str = "", once: bool = False) -> tuple[Read]:
    return (ScalarRead(metric, calls, note, once),)


#: nvmlNvLinkVersion_t -> (the version's marketing number, the bytes/s one link carries a
#: direction). Per GPU, NVIDIA gives the total of both directions: P100 (1.0) 160 GB/s on 4
#: links (Tesla P100 whitepaper); V100 (2.0) 300 GB/s on 6, A100 (3.0) 600 GB/s on 12,
#: H100 (4.0) 900 GB/s on 18, B200 (5.0) 1.8 TB/s on 18 (nvidia.com/en-us/data-center/nvlink).
#: 2.2 and 3.1 are revisions at their base's rate; 6.0: not published per link, n/a.
NVLINK_VERSIONS: dict[int, tuple[str, float | None]] = {
    1: ("1.0", 20e9),
    2: ("2.0", 25e9),
    3: ("2.2", 25e9),
    4: ("3.0", 25e9),
    5: ("3.1", 25e9),
    6: ("4.0", 25e9),
    7: ("5.0", 50e9),
    8: ("6.0", None),
}


#: Every scalar GPU metric, in the order the exporter writes them and the docs list them.
# fmt: off
GPU_METRICS: tuple[GpuMetric, ...] = (
    #         field, unit, bounds, text, label, exporter gauge, its unit,
    #         NVML call, meaning
    GpuMetric("utilization.gpu", "%", (0, 100), "{:.0f}%", "",
              "gputop_gpu_utilization_ratio", "0-1", "",
              "Share of the last sample period a kernel ran (NVML utilization.gpu)",
              reads=_s("utilization", ("nvmlDeviceGetUtilizationRates",), note=" (.gpu)")),
    GpuMetric("utilization.memory", "%", (0, 100), "{:.0f}%", "", None, "",
              "",
              "Share of the last sample period in which memory was read or written",
              reads=_s("utilization", ("nvmlDeviceGetUtilizationRates",), note=" (.memory)")),
    GpuMetric("memory.used", "bytes", _GPU_BYTES, "", "",
              "gputop_gpu_memory_used_bytes", "bytes",
              "nvmlDeviceGetMemoryInfo (v2, else v1)", "GPU memory used"),
    GpuMetric("memory.total", "bytes", (1e6, 1e15), "", "",
              "gputop_gpu_memory_total_bytes", "bytes",
              "nvmlDeviceGetMemoryInfo (v2, else v1)", "GPU memory total"),
    GpuMetric("memory.reserved", "bytes", _GPU_BYTES, "", "",
              "gputop_gpu_memory_reserved_bytes", "bytes",
              "nvmlDeviceGetMemoryInfo (v2)", "GPU memory reserved by the driver (not in used)"),
    GpuMetric("memory.free", "bytes", _GPU_BYTES, "", "", None, "",
              "nvmlDeviceGetMemoryInfo (v2, else v1)", "GPU memory free"),
    GpuMetric("pcie.link_max_bytes_per_s", "bytes/s", (2e8, 2e12), "", "",
              "gputop_gpu_pcie_link_max_bytes_per_second", "bytes/s",
              "from the max PCIe generation and width",
              "PCIe link capacity per direction at its max generation and width"),
    GpuMetric("pcie.gen", "", _PCIE_GEN, "", "", "gputop_gpu_pcie_link_gen", "1",
              "", "PCIe link generation now",
              reads=_s("pcie_gen", ("nvmlDeviceGetCurrPcieLinkGeneration",))),
    GpuMetric("pcie.max_gen", "", _PCIE_GEN, "", "", "gputop_gpu_pcie_link_max_gen", "1",
              "", "PCIe link generation max",
              reads=_s("pcie_max_gen", ("nvmlDeviceGetMaxPcieLinkGeneration",), once=True)),
    GpuMetric("pcie.width", "lanes", _PCIE_WIDTH, "", "", "gputop_gpu_pcie_link_width", "lanes",
              "", "PCIe link width now",
              reads=_s("pcie_width", ("nvmlDeviceGetCurrPcieLinkWidth",))),
    GpuMetric("pcie.max_width", "lanes", _PCIE_WIDTH, "", "",
              "gputop_gpu_pcie_link_max_width", "lanes",
              "", "PCIe link width max",
              reads=_s("pcie_max_width", ("nvmlDeviceGetMaxPcieLinkWidth",), once=True)),
    GpuMetric("pcie.tx_bytes_per_s", "bytes/s", _PCIE_RATE, "", "", None, "",
              "nvmlDeviceGetFieldValues (197), a rate across ticks (drivers 555+); "
              "else nvmlDeviceGetPcieThroughput (TX)",
              'PCIe throughput GPU to host (gputop_gpu_pcie_bytes_per_second{direction="tx"})'),
    GpuMetric("pcie.rx_bytes_per_s", "bytes/s", _PCIE_RATE, "", "", None, "",
              "nvmlDeviceGetFieldValues (198), a rate across ticks (drivers 555+); "
              "else nvmlDeviceGetPcieThroughput (RX)",
              'PCIe throughput host to GPU (gputop_gpu_pcie_bytes_per_second{direction="rx"})'),
    GpuMetric("power_w", "W", (0, 5_000), "{:.0f}W", "", "gputop_gpu_power_watts", "watts",
              "", "Power draw",
              reads=_s("power", ("nvmlDeviceGetPowerUsage",))),
    GpuMetric("power_limit_w", "W", (1, 5_000), "{:.0f}W", "",
              "gputop_gpu_power_limit_watts", "watts",
              "", "Enforced power limit",
              reads=_s("power_limit", ("nvmlDeviceGetEnforcedPowerLimit",))),
    GpuMetric("temperature_c", "°C", (1, 150), "{:.0f}°C", "",
              "gputop_gpu_temperature_celsius", "°C",
              "", "GPU core temperature",
              reads=_s("temperature", ("nvmlDeviceGetTemperatureV", "NVML_TEMPERATURE_GPU"),
                       ("nvmlDeviceGetTemperature", "NVML_TEMPERATURE_GPU"))),
    GpuMetric("fan_percent", "%", (0, 200), "{:.0f}%", "fan", "gputop_gpu_fan_ratio", "0-1",
              "", "Fan speed, share of its maximum",
              reads=_s("fan", ("nvmlDeviceGetFanSpeed",))),
    GpuMetric("performance_state", "", (0, 15), "P{:.0f}", "perf",
              "gputop_gpu_performance_state", "1",
              "",
              "Performance state: 0 (P0, most performance) to 15 (P15, least)", demo=0,
              reads=_s("performance_state", ("nvmlDeviceGetPerformanceState",))),
    GpuMetric("clocks.sm_mhz", "MHz", (0, 10_000), "{:.0f}MHz", "",
              "gputop_gpu_sm_clock_hertz", "hertz",
              "", "SM clock",
              reads=_s("sm_clock", ("nvmlDeviceGetClockInfo", "NVML_CLOCK_SM"), note=" (SM)")),
    GpuMetric("clocks.memory_mhz", "MHz", _MEM_MHZ, "{:.0f}MHz", "", None, "",
              "", "Memory clock",
              reads=_s("memory_clock", ("nvmlDeviceGetClockInfo", "NVML_CLOCK_MEM"),
                       note=" (MEM)")),
    GpuMetric("clocks.sm_max_mhz", "MHz", (0, 10_000), "{:.0f}MHz", "", None, "",
              "", "SM clock max",
              reads=_s("sm_max_clock", ("nvmlDeviceGetMaxClockInfo", "NVML_CLOCK_SM"),
                       note=" (SM)", once=True)),
    GpuMetric("clocks.memory_max_mhz", "MHz", _MEM_MHZ, "{:.0f}MHz", "", None, "",
              "", "Memory clock max",
              reads=_s("memory_max_clock", ("nvmlDeviceGetMaxClockInfo", "NVML_CLOCK_MEM"),
                       note=" (MEM)", once=True)),
    GpuMetric("encoder_percent", "%", (0, 100), "{:.0f}%", "", None, "",
              "", "Video encoder utilization",
              reads=_s("encoder", ("nvmlDeviceGetEncoderUtilization",))),
    GpuMetric("decoder_percent", "%", (0, 100), "{:.0f}%", "", None, "",
              "", "Video decoder utilization",
              reads=_s("decoder", ("nvmlDeviceGetDecoderUtilization",))),
    GpuMetric("mig_mode", "0/1", None, "", "", "gputop_gpu_mig_mode", "0/1",
              "", "1 while MIG mode is enabled",
              reads=_s("mig_mode", ("nvmlDeviceGetMigMode",))),
    GpuMetric("ecc_uncorrected", "", (0, 2**63), "", "", None, "",
              "",
              "Uncorrected ECC errors since the driver loaded (n/a on consumer GPUs)",
              reads=_s("ecc", ("nvmlDeviceGetTotalEccErrors", "NVML_MEMORY_ERROR_TYPE_UNCORRECTED",
                               "NVML_VOLATILE_ECC"), note=" (uncorrected, volatile)")),
    # GPM (Hopper and later): what the SMs did, where utilization.gpu says only "a kernel ran"
    GpuMetric("activity.sm", "%", _PERCENT, "{:.0f}%", "",
              "gputop_gpu_sm_active_ratio", "0-1", "",
              "Share of SMs busy (NVML utilization.gpu counts a one-thread kernel as 100 %)",
              reads=(GpmRead(2),), dcgm="DCGM_FI_PROF_SM_ACTIVE (1002)"),
    GpuMetric("activity.sm_occupancy", "%", _PERCENT, "{:.0f}%", "",
              "gputop_gpu_sm_occupancy_ratio", "0-1", "",
              "Warps resident on the SMs, of the theoretical maximum",
              reads=(GpmRead(3),), dcgm="DCGM_FI_PROF_SM_OCCUPANCY (1003)"),
    GpuMetric("activity.tensor", "%", _PERCENT, "{:.0f}%", "",
              "gputop_gpu_tensor_active_ratio", "0-1", "",
              "Share of time any tensor pipe was active",
              reads=(GpmRead(5),), dcgm="DCGM_FI_PROF_PIPE_TENSOR_ACTIVE (1004)"),
    GpuMetric("activity.dram", "%", _PERCENT, "{:.0f}%", "",
              "gputop_gpu_dram_active_ratio", "0-1", "",
              "DRAM bandwidth used, of its peak (tops out near 80 %)",
              reads=(GpmRead(10),), dcgm="DCGM_FI_PROF_DRAM_ACTIVE (1005)"),
    GpuMetric("activity.fp64", "%", _PERCENT, "{:.0f}%", "",
              "gputop_gpu_pipe_active_ratio", "0-1", "",
              "Share of time the FP64 pipe (not tensor) was active",
              reads=(GpmRead(11),), dcgm="DCGM_FI_PROF_PIPE_FP64_ACTIVE (1006)",
              export_label=("pipe", "fp64")),
    GpuMetric("activity.fp32", "%", _PERCENT, "{:.0f}%", "",
              "gputop_gpu_pipe_active_ratio", "0-1", "",
              "Share of time the FP32 pipe (not tensor) was active",
              reads=(GpmRead(12),), dcgm="DCGM_FI_PROF_PIPE_FP32_ACTIVE (1007)",
              export_label=("pipe", "fp32")),
    GpuMetric("activity.fp16", "%", _PERCENT, "{:.0f}%", "",
              "gputop_gpu_pipe_active_ratio", "0-1", "",
              "Share of time the FP16 pipe (not tensor) was active",
              reads=(GpmRead(13),), dcgm="DCGM_FI_PROF_PIPE_FP16_ACTIVE (1008)",
              export_label=("pipe", "fp16")),
    # NVLink: GPM's rate where GPM is there, else the cumulative KiB counters
    GpuMetric("nvlink.links", "links", (0, 64), "", "", None, "", "",
              "Active NVLink links", reads=(PerLinkRead("nvmlDeviceGetNvLinkState"),)),
    GpuMetric("nvlink.rx_bytes_per_s", "bytes/s", _NVLINK_RATE, "", "",
              "gputop_gpu_nvlink_bytes_per_second", "bytes/s", "",
              "NVLink throughput into the GPU, all links",
              reads=(GpmRead(60, _MIB), CounterRead(139, 1024)),
              dcgm="DCGM_FI_PROF_NVLINK_RX_BYTES (1012)",
              export_label=("direction", "rx")),
    GpuMetric("nvlink.tx_bytes_per_s", "bytes/s", _NVLINK_RATE, "", "",
              "gputop_gpu_nvlink_bytes_per_second", "bytes/s", "",
              "NVLink throughput out of the GPU, all links",
              reads=(GpmRead(61, _MIB), CounterRead(138, 1024)),
              dcgm="DCGM_FI_PROF_NVLINK_TX_BYTES (1011)",
              export_label=("direction", "tx")),
    GpuMetric("nvlink.max_bytes_per_s", "bytes/s", _NVLINK_RATE, "", "",
              "gputop_gpu_nvlink_link_max_bytes_per_second", "bytes/s",
              "from the active links and their version (nvmlDeviceGetNvLinkVersion)",
              "NVLink capacity per direction: active links x the version's per-link rate"),
)
# fmt: on


GPU_METRIC: dict[str, GpuMetric] = {m.field: m for m in GPU_METRICS}
LABELLED_METRICS: tuple[GpuMetric, ...] = tuple(m for m in GPU_METRICS if m.label)


# --- values checked by value: the one check of every number that comes from outside (the
# driver's GPU metrics, a remote host's line, a recording). Out of bounds: n/a and an error.

_PID = (0, 2**32 - 1)  # NVML's pid is 32-bit unsigned
_BYTES = (0, 2**60)  # 1 EiB: above any host's memory or disk
_RATE = (0, 1e13)  # 10 TB/s: above any disk or network
_PCT = (0, 100)
_EPOCH = (0, 1e10)  # epoch seconds up to the year 2286
_SECONDS = (0, 1e6)
#: (class, field) -> (low, high, unit) of every number that is not a GPU metric; a tuple's
#: bounds hold for each of its items.
# fmt: off
LIMITS: dict[tuple[type, str], tuple[float, float, str]] = {
    (Snapshot, "time"): (*_EPOCH, "s"), (Snapshot, "tick_seconds"): (*_SECONDS, "s"),
    (Snapshot, "tick_cpu_seconds"): (*_SECONDS, "s"),
    (HostSample, "cpu_percent"): (*_PCT, "%"), (HostSample, "cpu_per_core"): (*_PCT, "%"),
    (HostSample, "iowait_percent"): (*_PCT, "%"), (HostSample, "cpu_count"): (1, 2**20, ""),
    (HostSample, "cpu_freq_mhz"): (0, 100_000, "MHz"),
    (HostSample, "load_average"): (0, 1e6, ""),  # runnable tasks: at most pid_max (2^22)
    (HostSample, "rate_seconds"): (*_SECONDS, "s"),
    **{(c, n): (*_BYTES, "bytes") for c in (MemoryStat, SwapStat) for n in ("total", "used")},
    (MemoryStat, "available"): (*_BYTES, "bytes"),
    **{(c, f.name): (*_RATE, "bytes/s") for c in (IoRate, NetRate) for f in dataclasses.fields(c)},
    (ProcessInfo, "pid"): (*_PID, ""), (ProcessInfo, "ppid"): (*_PID, ""),
    (ProcessInfo, "cpu_percent"): (0, 1e8, "%"), (ProcessInfo, "rss"): (*_BYTES, "bytes"),
    (ProcessInfo, "read_bytes_per_s"): (*_RATE, "bytes/s"),
    (ProcessInfo, "write_bytes_per_s"): (*_RATE, "bytes/s"),
    (ProcessInfo, "create_time"): (*_EPOCH, "s"), (ProcessInfo, "num_threads"): (0, 2**22, ""),
    (GpuProcess, "pid"): (*_PID, ""), (GpuProcess, "gpu_memory"): (*_GPU_BYTES, "bytes"),
    (GpuProcess, "sm_percent"): (*_PCT, "%"),
    (GpuProcess, "memory_bandwidth_percent"): (*_PCT, "%"),
    (GpuProcess, "gpu_instance_id"): (*_PID, ""), (GpuProcess, "compute_instance_id"): (*_PID, ""),
    (GpuSample, "index"): (0, 2**16, ""), (GpuSample, "minor_number"): (0, 2**20, ""),
    (MigDevice, "index"): (0, 2**16, ""), (MigDevice, "gpu_instance_id"): (*_PID, ""),
    (MigDevice, "compute_instance_id"): (*_PID, ""),
    (UnlistedHolder, "pid"): (*_PID, ""), (UnlistedHolder, "gpu"): (0, 2**16, ""),
    (UnlistedHolder, "minor_number"): (0, 2**20, ""),
    (SampleError, "gpu"): (0, 2**16, ""),
    (Probe, "time"): (*_EPOCH, "s"), (Probe, "window_seconds"): (*_SECONDS, "s"),
    (Probe, "steps"): (0, 2**40, ""), (Probe, "data_wait_ratio"): (0, 1, ""),
    (Probe, "step_seconds"): (*_SECONDS, "s"), (Probe, "batches_per_second"): (0, 1e9, "/s"),
    (CudaMemory, "device"): (0, 2**16, ""),
    **{(CudaMemory, n): (*_GPU_BYTES, "bytes") for n in ("allocated", "reserved", "peak")},
    **{  # the GPU metrics' own bounds
        (type_hints(GpuSample)[head] if tail else GpuSample, tail or head): (*m.bounds, m.unit)
        for m in GPU_METRICS if m.bounds is not None
        for head, _, tail in [m.field.partition(".")]
    },
}
# fmt: on


def said(value: Any) -> str:
    """A value from outside, as an error message quotes it: short, and never raising (a
    number of hundreds of digits, a NaN, a deep list)."""
    if type(value) is int and abs(value) >= 10**300:
        return f"a number of {len(str(abs(value)))} digits"
    if type(value) is int and abs(value) < 10**10:
        return str(value)
    if type(value) in (int, float):
        return f"{value:g}"
    if value is None or type(value) is bool:
        return {None: "null", True: "true", False: "false"}[value]
    if type(value) is str:
        return clean_text(repr(value[:40]), 48) or "''"
    if isinstance(value, list | tuple):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return f"an object of {len(value)} keys"
    return "nothing" if type(value) is object else f"a {type(value).__name__}"  # object: absent


def _what(tp: Any) -> str:
    """A field's type in words, for an error message."""
    args = typing.get_args(tp)
    if NoneType in args:
        tp = next(a for a in args if a is not NoneType)
    if typing.get_origin(tp) is tuple:
        items = typing.get_args(tp)
        one = _what(items[0]).removeprefix("a ")
        many = one + ("es" if one.endswith("s") else "s")
        if len(items) == 2 and items[1] is Ellipsis:
            return f"a list of {many}"
        return f"a list of {len(items)} {many}"
    words = {int: "a whole number", float: "a number", str: "a text", bool: "true or false"}
    return words.get(tp) or f"a {getattr(tp, '__name__', tp)}"


def _fits(tp: Any) -> Callable[[Any], bool]:
    """The check by type and shape of a value of ``tp`` (a field's type): what the
    model's annotations declare, nothing else."""
    args = typing.get_args(tp)
    if NoneType in args:
        inner = _fits(next(a for a in args if a is not NoneType))
        return lambda v: v is None or inner(v)
    if typing.get_origin(tp) is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            item = _fits(args[0])
            return lambda v: type(v) is tuple and all(map(item, v))
        items = [_fits(a) for a in args]
        return lambda v: (
            type(v) is tuple and len(v) == len(items) and all(f(x) for f, x in zip(items, v))  # noqa: B905
        )
    if tp is float:  # an int is a number too (JSON does not tell 1 from 1.0); a bool is not
        return lambda v: type(v) in (int, float)
    return lambda v: type(v) is tp


class _Check:
    """One walk over a snapshot (or one GPU): every field by type and shape, every number
    against :data:`LIMITS`."""

    def __init__(self, source: str, who: str) -> None:
        self.source, self.who = source, who
        self.errors: list[SampleError] = []
        self.gpu: int | None = None
        self.ok: set[int] = set()  # ids of objects found whole (shared objects: checked once)

    def bad(
        self, path: str, value: Any, why: str, shown: str = "shown as n/a", quoted: str = ""
    ) -> None:
        where = "" if self.gpu is None else f"GPU {self.gpu}: "
        text = f"{where}{self.who} reported {path} = {quoted or said(value)}, {why}: {shown}"
        self.errors.append(SampleError(self.source, text, gpu=self.gpu, metric=path))

    def walk(self, obj: Any, path: str) -> Any:
        """``obj`` with its bad fields n/a (None, or the field's default); _INVALID when a
        required one is bad."""
        if id(obj) in self.ok:
            return obj
        changes: dict[str, Any] = {}
        cls: Any = type(obj)
        for name, kind, low, high, numbers, optional, inner, fits, default in _plan(cls):
            value = getattr(obj, name)
            # the common cases first, as the branches below judge them: an allowed n/a (a
            # list's None is said below), a number within its limits
            if value is None:
                if optional and kind != _PARTS:
                    continue
            elif kind == _NUMBER and type(value) in numbers and low <= value <= high:
                continue
            if kind <= _NUMBERS:  # a number, or a tuple of them: each within its limit
                items = value if kind == _NUMBERS else (value,)
                if (value is None and optional) or (
                    type(items) is tuple
                    and all(type(v) in numbers and low <= v <= high for v in items)
                    and (kind == _NUMBER or fits(value))
                ):
                    continue
                if kind == _NUMBERS and not (type(value) is tuple and fits(value)):
                    why = f"not {_what(type_hints(cls)[name])}"
                elif type(items) is tuple and all(type(v) in numbers for v in items):
                    # the first item out of range says it
                    value = next(v for v in items if not within(v, low, high))
                    unit = LIMITS[cls, name][2]
                    why = f"outside {said(low)}-{said(high)}" + (f" {unit}" if unit else "")
                else:
                    value = next((v for v in items if type(v) not in numbers), value)
                    why = f"not {_what(inner)}"
            elif kind == _LEAF:
                if fits(value):
                    continue
                why = f"not {_what(type_hints(cls)[name])}"
            elif kind == _PART:
                if value is None and optional:
                    continue
                made = self.item(value, path + name, inner, optional or default is not _INVALID)
                if made is not _INVALID:
                    if made is not value:
                        changes[name] = made
                    continue
                if default is _INVALID and not optional:
                    return _INVALID
                changes[name] = None if optional else default
                continue
            else:  # _PARTS
                where = path + name
                if type(value) is _Cut:  # the rows past MAX_ITEMS were not read
                    why = f"more than {MAX_ITEMS}"
                    rows = f"a list of {len(value) + value.cut}"
                    self.bad(where, None, why, f"the last {value.cut} left out", rows)
                elif type(value) is not tuple:
                    why = f"not {_what(type_hints(cls)[name])}"
                    self.bad(where, value, why)
                    changes[name] = None if optional else ()
                    continue
                if not value:
                    continue
                made = tuple(self.item(v, where, inner, False, True) for v in value)
                if type(value) is not tuple or any(a is not b for a, b in zip(made, value)):  # noqa: B905
                    changes[name] = tuple(v for v in made if v is not _INVALID)
                continue
            kept = optional or default is not _INVALID  # else the object is left out
            self.bad(path + name, value, why, "shown as n/a" if kept else "left out")
            if not kept:
                return _INVALID
            changes[name] = None if optional else default
        if cls is GpuMemory:
            changes.update(self.memory(obj if not changes else replace(obj, **changes), path))
        if not changes:
            self.ok.add(id(obj))
            return obj
        return replace(obj, **changes)

    def item(self, obj: Any, path: str, cls: type, optional: bool, row: bool = False) -> Any:
        """``walk`` of a part that must be a ``cls`` (``row``: an item of a list); a GPU's
        parts say its index."""
        if type(obj) is not cls:
            why = f"not {_what(cls)}"
            self.bad(path, obj, why, "shown as n/a" if optional else "left out")
            return _INVALID
        if not isinstance(obj, GpuSample):
            made = self.walk(obj, f"{path}.")
            pid = getattr(made, "pid", None) if row else None
            if type(pid) is int and pid in INVALID_PIDS:  # dropped as from the driver's lists
                self.bad(f"{path}.pid", pid, "never a real process", "left out")
                return _INVALID
            return made
        low, high, _ = LIMITS[GpuSample, "index"]
        if type(obj.index) is not int or not within(obj.index, low, high):
            self.bad(f"{path}.index", obj.index, f"not a whole number {low}-{high}", "left out")
            return _INVALID
        self.gpu = obj.index
        try:
            return self.walk(obj, "")
        finally:
            self.gpu = None

    def memory(self, memory: GpuMemory, path: str) -> dict[str, Any]:
        """Used, free and reserved are at most the total."""
        changes: dict[str, Any] = {}
        total = memory.total
        for name in ("used", "free", "reserved"):
            value = getattr(memory, name)
            if value is not None and total is not None and value > total:
                self.bad(f"{path}{name}", value, f"more than the total {total}")
                changes[name] = None
        if "used" in changes:
            changes["free"] = None  # derived from the same broken reading
        return changes


def within(value: Any, low: float, high: float, *_: str) -> bool:
    """Whether ``value`` is a number within ``low``-``high`` (``*LIMITS[key]``)."""
    return type(value) in (int, float) and low <= value <= high  # NaN: False


_NUMBER, _NUMBERS, _PART, _PARTS, _LEAF = range(5)


@functools.cache
def _plan(
    cls: type,
) -> tuple[tuple[str, int, float, float, Any, bool, Any, Callable[[Any], bool], Any], ...]:
    """(field, its kind, low, high, the number types it takes, optional, its (items')
    type, its check by type, its default (_INVALID: none)) of every field: a number or a
    tuple of them with LIMITS, a part (a tuple of parts), or any other value (a leaf)."""
    plan = []
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for name, tp in type_hints(cls).items():
        f = fields[name]
        if f.default is not dataclasses.MISSING:
            default: Any = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = _INVALID
        args = typing.get_args(tp)
        optional = NoneType in args
        bare = next((a for a in args if a is not NoneType), tp) if optional else tp
        many = typing.get_origin(bare) is tuple
        inner = typing.get_args(bare)[0] if many else bare
        limit = LIMITS.get((cls, name))
        numbers = frozenset({int} if inner is int else {int, float})
        nested = isinstance(inner, type) and dataclasses.is_dataclass(inner)
        if limit is not None:
            kind, low, high = (_NUMBERS if many else _NUMBER), limit[0], limit[1]
        else:
            kind, low, high = (_PARTS if many else _PART) if nested else _LEAF, 0, 0
        plan.append((name, kind, low, high, numbers, optional, inner, _fits(tp), default))
    return tuple(plan)


def check_gpu(
    sample: GpuSample, source: str, who: str, given: frozenset[int] = frozenset()
) -> tuple[GpuSample, list[SampleError]]:
    """``sample`` with every impossible value None, and an error for each (``who``: the
    sender in the message, "the driver"). ``given``: the ids of objects, alive, that this
    check gave out before (a sample made whole, or any of its parts): passed as they are,
    not walked again, as a check gives out what it finds whole (it finds its own output
    whole: tests/sources/test_check_values.py)."""
    check = _Check(source, who)
    check.ok.update(given)
    made = check.item(sample, "gpus", GpuSample, False)
    return (sample if made is _INVALID else made), check.errors


def check_values(snapshot: Snapshot, source: str, who: str) -> Snapshot:
    """Untrusted ``snapshot`` with every number out of bounds n/a (or its row left out) and
    an error for each; ValueError when its time is unusable."""
    check = _Check(source, who)
    made = check.walk(snapshot, "")
    if made is _INVALID:
        raise ValueError(f"not a snapshot: {check.errors[-1].message}")
    if check.errors:
        made = replace(made, errors=(*made.errors, *check.errors))
    return made  # type: ignore[no-any-return]


#: A verdict's severities, mildest first.
SEVERITIES = ("ok", "info", "warn", "bad")


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the analysis concluded about one GPU or job (a remote host's too)."""

    kind: str  # one of gputop.analysis.kinds.KINDS
    label: str  # for people
    evidence: str  # the numbers behind it, one line
    advice: str  # what to try, one line
    severity: str  # one of SEVERITIES
    also: tuple[str, ...] = ()  # other kinds that apply, by rank

    def to_dict(self) -> dict[str, Any]:
        keys = ("kind", "label", "severity", "evidence", "advice")
        return {**{k: getattr(self, k) for k in keys}, "also": list(self.also)}
