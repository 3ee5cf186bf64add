"""A seeded, simulated GPU server and its jobs, declared as data (:data:`NODES`): by
default ``gpu-node-07``, 8 x H100 (:data:`JOBS`); ``node="h200"``: ``gpu-node-12``, 8 x
H200 with GPM and NVLink, whose jobs show the verdicts that see inside utilization
(:data:`H200_JOBS`); ``node="h200-probe"``: ``gpu-node-14``, the same hardware, whose jobs
run gputop's probe and show the verdicts from measurement (:data:`PROBE_JOBS`). Same
snapshots and gaps as the live source; with ``clock=None`` a virtual clock advances
``step`` seconds per snapshot. Same seed and times: same snapshots.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gputop.model import (
    GPU_METRICS,
    Activity,
    Clocks,
    CudaMemory,
    DriverInfo,
    GpuMemory,
    GpuProcess,
    GpuSample,
    HostSample,
    IoRate,
    MemoryStat,
    MigDevice,
    NetRate,
    Nvlink,
    Pcie,
    Probe,
    ProcessInfo,
    Snapshot,
    SwapStat,
    UnlistedHolder,
    Utilization,
    replace,
)
from gputop.pcie import link_max_bytes_per_s
from gputop.probefile import WINDOW_SECONDS, WINDOW_STEPS
from gputop.sources.base import DEMO_NODES

MiB = 2**20
GiB = 2**30
MB = 1e6
GB = 1e9

#: 2025-06-02 09:00:00 UTC: the virtual clock's start when no start_time is given.
DEMO_EPOCH = 1_748_854_800.0

HOSTNAME = "gpu-node-07"
GPU_NAME = "NVIDIA H100 80GB HBM3"
GPU_COUNT = 8
MEMORY_TOTAL = 81_559 * MiB  # what an H100 80GB HBM3 reports
MEMORY_RESERVED = 579 * MiB  # memory v2: driver-reserved, not in used
POWER_LIMIT_W = 700.0
SM_MAX_MHZ = 1980
MEM_MAX_MHZ = 2619
CPU_COUNT = 64
HOST_MEMORY = 1024 * GiB
BUS_IDS = tuple(f"00000000:{bus}:00.0" for bus in ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"))
DRIVER = DriverInfo(
    available=True, driver_version="550.90.07", cuda_version="12.4", nvml_version="12.550.90.07"
)
#: What the demo does not simulate: each such metric as the metric table declares it.
DECLARED: dict[str, Any] = {m.field: m.demo for m in GPU_METRICS if m.demo is not None}


#: Per-direction capacity of the H100's gen5 x16 link: 63.0 GB/s.
LINK_MAX = link_max_bytes_per_s(5, 16) or 0.0

# Phases, in seconds since the simulation started (the first snapshot).
CYCLE_S = 600.0  # the scenario repeats every 10 minutes (as the checkpoint writes do)
LINK_FLAP = (150.0, 270.0)  # GPU 1's link runs at gen5 x8 in this part of each cycle
EPOCH_S = 300.0  # bob's epoch on GPU 2...
STREAM_S = 180.0  # ...streams from disk for this long, then reads from the page cache
_AMBIENT_C = 24.0  # inlet air


@dataclass
class _Walk:
    """A mean-reverting random walk (Ornstein-Uhlenbeck), clamped to [lo, hi]."""

    rng: random.Random
    mu: float
    sigma: float  # stationary standard deviation
    lo: float
    hi: float
    tau: float = 10.0  # seconds to forget
    value: float = field(init=False)

    def __post_init__(self) -> None:
        self.value = min(self.hi, max(self.lo, self.mu + self.rng.gauss(0.0, self.sigma)))

    def advance(self, dt: float) -> float:
        if dt > 0:
            a = math.exp(-dt / self.tau)
            noise = self.sigma * math.sqrt(1.0 - a * a) * self.rng.gauss(0.0, 1.0)
            self.value = min(self.hi, max(self.lo, self.mu + (self.value - self.mu) * a + noise))
        return self.value


@dataclass
class _Proc:
    """One simulated process: its fixed row and the walks of what changes."""

    row: ProcessInfo  # the fields that never change (pid, user, command, rss ...)
    cpu: _Walk
    read: _Walk | None = None  # bytes/s
    write: _Walk | None = None
    disk_sleep_chance: float = 0.0
    cores: tuple[int, ...] = ()
    probe: _ProbeWalks | None = None  # what its gputop probe measures


@dataclass
class _GpuProc:
    """One simulated process's use of a GPU."""

    pid: int
    memory: _Walk  # bytes
    sm: _Walk | None  # SM percent; None: the process accounts for all the GPU's util
    visible: bool = True


@dataclass
class _Gpu:
    """One simulated GPU: its identity and the walks of what changes."""

    index: int
    uuid: str
    util: _Walk
    power_idle: float
    thermal_r: float  # degrees C per watt above ambient
    rx: _Walk
    tx: _Walk
    mem_util_ratio: float = 0.5  # memory util as a share of gpu util
    power_gain: float = 600.0  # watts at 100 % util above idle
    busy_gen: int = 5
    busy_width: int = 16
    extra_memory: int = 0  # bytes used but not attributed to listed processes
    swing: tuple[float, float] | None = None  # (amplitude, period s) of a slow util swing
    temperature: float = 30.0
    power_noise: _Walk | None = None
    procs: list[_GpuProc] = field(default_factory=list)
    activity: dict[str, _Walk] | None = None  # Activity field -> its walk, while busy
    activity_spec: ActivitySpec | None = None
    nvlink: _Walk | None = None  # NVLink traffic, a share of the links' capacity


#: A random walk's parameters: (mean, standard deviation, low, high[, seconds to forget]).
Walk = tuple[float, ...]


@dataclass(frozen=True)
class ActivitySpec:
    """What GPM reports of a busy GPU (percent walks); SM active never exceeds util."""

    sm: Walk
    tensor: Walk
    dram: Walk
    fp32: Walk = (0.0, 0.0, 0.0, 0.0)
    fp16: Walk = (0.0, 0.0, 0.0, 0.0)
    fp64: Walk = (0.0, 0.0, 0.0, 0.0)
    occupancy: float = 0.55  # SM occupancy as a share of SM active


@dataclass(frozen=True)
class ProbeSpec:
    """What a job's main process measures of itself with gputop's probe (walks): the
    share of each step it waits for the next batch, the step, and CUDA device 0's
    caching allocator (None: no CUDA figures)."""

    wait: Walk  # 0-1
    step: Walk  # seconds
    allocated: Walk | None = None  # bytes held by live tensors
    reserved: Walk | None = None  # bytes held by the caching allocator
    peak: int = 0  # bytes: max allocated


@dataclass
class _ProbeWalks:
    """What a simulated process's probe measures, as walks."""

    wait: _Walk
    step: _Walk
    allocated: _Walk | None
    reserved: _Walk | None
    peak: int


@dataclass(frozen=True)
class ProcSpec:
    """``count`` processes of one command, pids from ``pid`` on."""

    pid: int
    ppid: int
    age: float  # seconds before the simulation starts
    cpu: tuple[float, float, float, float]  # percent of a core: mean, sigma, low, high
    rss: int
    threads: int
    read: tuple[float, float] | None = None  # bytes/s: mean, sigma
    write: tuple[float, float] | None = None
    count: int = 1
    rss_step: int = 0  # each further process holds this much more
    disk_sleep: float = 0.0  # chance of being seen in disk-sleep
    command: str = ""  # "": the job's
    name: str = "python"


@dataclass(frozen=True)
class JobSpec:
    """One job of the scenario: its processes, and the load it puts on its GPU."""

    gpu: int
    user: str
    command: str
    main: ProcSpec  # the process that holds the GPU
    workers: ProcSpec | None
    util: Walk
    memory: Walk  # the main process's GPU memory, bytes
    rx: Walk | None = None  # PCIe bytes/s while busy (None: the idle GPU's)
    tx: Walk | None = None
    mem_util_ratio: float = 0.5
    power_gain: float = 600.0
    launcher: ProcSpec | None = None  # started before the main process
    streams: bool = False  # the workers read from disk, then from cache (_set_phase)
    swing: tuple[float, float] | None = None
    thermal_r: float | None = None  # None: the GPU's own
    extra_memory: int = 0
    busy_link: tuple[int, int] = (5, 16)
    # A process of another PID namespace: pid, its GPU memory and SM share.
    hidden: tuple[int, Walk, Walk] | None = None
    activity: ActivitySpec | None = None  # GPM (a node with GPM only)
    nvlink: Walk | None = None  # NVLink traffic, a share of the links' capacity
    probe: ProbeSpec | None = None  # the main process runs gputop's probe


_LLAMA = "configs/llama2_7b.yaml"

# The jobs in the order they are built (the order the seeded walks are drawn in).
# fmt: off
_TORCHRUN = ProcSpec(
    41187, 41010, 7980, (0.8, 0.4, 0.0, 3.0), 412 * MiB, 5, name="torchrun",
    command="/usr/bin/python3 /usr/local/bin/torchrun --nproc_per_node=2 "
    f"train.py --config {_LLAMA}",
)
JOBS: tuple[JobSpec, ...] = (
    # GPU 0-1: alice's torchrun job, GPU-bound, one rank per GPU (GPU 1's link flaps).
    *(
        JobSpec(
            rank, "alice", f"/usr/bin/python3 -u train.py --config {_LLAMA}",
            ProcSpec(41201 + rank, 41187, 7975, (96.0, 3.0, 80.0, 101.0),
                     18 * GiB + rank * 37 * MiB, 38, (4 * MB, 1 * MB), (1 * MB, 0.5 * MB)),
            ProcSpec(41260 + 4 * rank, 41201 + rank, 7950, (14.0, 4.0, 2.0, 30.0), 2150 * MiB,
                     3, (22 * MB, 6 * MB), count=4),
            util=(97.0, 1.2, 90.0, 100.0, 3.0),
            memory=(71_310 * MiB, 64 * MiB, 70_900 * MiB, 71_700 * MiB, 30.0),
            rx=(2.4 * GB, 0.6 * GB, 0.2 * GB, 6 * GB, 2.0),
            tx=(0.7 * GB, 0.2 * GB, 0.05 * GB, 2 * GB, 2.0),
            mem_util_ratio=0.55, power_gain=590.0,
            launcher=_TORCHRUN if rank == 0 else None,
        )
        for rank in range(2)
    ),
    # GPU 2: bob's data-starved trainer: input-bound on disk while its workers stream the
    # epoch's shards, then on the CPU workers (_set_phase).
    JobSpec(
        2, "bob",
        "python train.py --config configs/resnet152_imagenet.yaml --batch-size 512 --workers 8",
        ProcSpec(52840, 52811, 2830, (45.0, 10.0, 15.0, 80.0), 9800 * MiB, 24, (2 * MB, 1 * MB)),
        ProcSpec(52871, 52840, 2826, (95.0, 3.0, 80.0, 100.0), 3400 * MiB, 2, (130 * MB, 25 * MB),
                 count=8, rss_step=11 * MiB, disk_sleep=0.25),
        util=(40.0, 7.0, 5.0, 75.0, 2.0),
        memory=(38_912 * MiB, 128 * MiB, 38_400 * MiB, 39_400 * MiB, 20.0),
        rx=(1.1 * GB, 0.3 * GB, 0.05 * GB, 3 * GB, 2.0),
        tx=(0.08 * GB, 0.03 * GB, 0.0, 0.3 * GB, 2.0),
        mem_util_ratio=0.45, power_gain=520.0, streams=True, swing=(15.0, 23.0),
    ),
    # GPU 3: carol's idle Jupyter kernel holding most of the memory.
    JobSpec(
        3, "carol",
        "/home/carol/miniconda3/envs/llm/bin/python -m ipykernel_launcher -f "
        "/home/carol/.local/share/jupyter/runtime/kernel-5c1f0e2a.json",
        ProcSpec(30115, 30098, 9 * 3600 + 20 * 60, (0.2, 0.15, 0.0, 1.0), 22 * GiB, 12),
        None,
        util=(0.0, 0.0, 0.0, 0.0),
        memory=(76_800 * MiB, 0.0, 76_800 * MiB, 76_800 * MiB),
    ),
    # GPU 4: free (its idle link drops to gen1, as real GPUs do).
    # GPU 5: alice's offloading fine-tune, PCIe-bound.
    JobSpec(
        5, "alice",
        "python finetune.py --model llama-13b --zero-stage 3 --offload-optimizer cpu "
        "--offload-param cpu",
        ProcSpec(61022, 60990, 1560, (160.0, 20.0, 100.0, 240.0), 212 * GiB, 64, (3 * MB, 1 * MB),
                 (1 * MB, 0.5 * MB)),
        ProcSpec(61040, 61022, 1552, (4.0, 1.5, 0.0, 10.0), 1800 * MiB, 2, (1.5 * MB, 0.5 * MB),
                 count=2),
        util=(35.0, 6.0, 15.0, 55.0, 2.0),
        memory=(43_008 * MiB, 256 * MiB, 42_000 * MiB, 44_000 * MiB, 15.0),
        rx=(0.88 * LINK_MAX, 0.04 * LINK_MAX, 0.6 * LINK_MAX, 0.97 * LINK_MAX, 2.0),
        tx=(0.38 * LINK_MAX, 0.05 * LINK_MAX, 0.1 * LINK_MAX, 0.6 * LINK_MAX, 2.0),
        mem_util_ratio=0.6, power_gain=560.0,
    ),
    # GPU 6: carol's near-OOM Mixtral trainer on a hot, power-capped GPU, clocks slowed
    # (it wants more than the 700 W cap; poor cooling); the orphaned worker's context
    # (HOLDERS) uses memory no listed process accounts for.
    JobSpec(
        6, "carol", "python train_llm.py --model mixtral-8x7b --micro-batch 6 --grad-ckpt",
        ProcSpec(70533, 70502, 5 * 3600 + 2 * 60, (97.0, 2.0, 85.0, 101.0), 31 * GiB, 41,
                 (3 * MB, 1 * MB)),
        ProcSpec(70561, 70533, 18_100, (18.0, 5.0, 3.0, 40.0), 2900 * MiB, 3, (30 * MB, 8 * MB),
                 count=4),
        util=(99.0, 0.8, 94.0, 100.0, 3.0),
        memory=(78_410 * MiB, 96 * MiB, 78_100 * MiB, 78_700 * MiB, 8.0),
        rx=(1.6 * GB, 0.4 * GB, 0.1 * GB, 4 * GB, 2.0),
        tx=(0.5 * GB, 0.15 * GB, 0.02 * GB, 2 * GB, 2.0),
        mem_util_ratio=0.62, power_gain=700.0, thermal_r=0.091, extra_memory=1_518 * MiB,
    ),
    # GPU 7: bob's PPO trainer bound by its main process, on a degraded link; and a
    # process of another PID namespace.
    JobSpec(
        7, "bob", "python train_ppo.py --env ALE/Breakout-v5 --num-envs 64 --workers 4",
        ProcSpec(80412, 80377, 4700, (99.0, 0.8, 95.0, 100.0), 6200 * MiB, 9, (0.5 * MB, 0.2 * MB)),
        ProcSpec(80430, 80412, 4690, (0.4, 0.3, 0.0, 2.0), 1100 * MiB, 2, count=4),
        util=(24.0, 4.0, 10.0, 40.0, 2.0),
        memory=(11_264 * MiB, 32 * MiB, 11_100 * MiB, 11_400 * MiB, 20.0),
        rx=(2.2 * GB, 0.5 * GB, 0.2 * GB, 6 * GB, 2.0),
        tx=(0.9 * GB, 0.3 * GB, 0.05 * GB, 3 * GB, 2.0),
        mem_util_ratio=0.4, power_gain=560.0, busy_link=(4, 8),
        hidden=(2_210_457, (9_728 * MiB, 0.0, 9_728 * MiB, 9_728 * MiB),
                (6.0, 2.0, 1.0, 12.0, 3.0)),
    ),
)
# fmt: on

#: The orphaned dataloader worker of carol's previous (crashed) run on GPU 6.
HOLDERS = (
    UnlistedHolder(
        pid=69904,
        gpu=6,
        minor_number=6,
        user="carol",
        name="python",
        command="python train_llm.py --model mixtral-8x7b --micro-batch 8 --grad-ckpt",
    ),
)

# gpu-node-12: 8 x H200 on NVSwitch, with GPM. Each GPU's job shows one verdict that sees
# inside utilization (docs/verdicts.md).
H200_NAME = "NVIDIA H200"
H200_MEMORY = 143_771 * MiB
H200_LINKS = 18  # NVLink 4.0, each to an NVSwitch
H200_LINK_RATE = 25e9  # bytes/s a link carries a direction (model.NVLINK_VERSIONS, 4.0)
_LLAMA_TP = "configs/llama3_70b_tp2.yaml"
# fmt: off
_TORCHRUN_TP = ProcSpec(
    90101, 90002, 3600, (0.6, 0.3, 0.0, 2.0), 398 * MiB, 5, name="torchrun",
    command="/usr/bin/python3 /usr/local/bin/torchrun --nproc_per_node=2 "
    f"train.py --config {_LLAMA_TP}",
)
_QUIET_PCIE = (
    (0.3 * GB, 0.1 * GB, 0.01 * GB, 1 * GB, 2.0),
    (0.1 * GB, 0.03 * GB, 0.0, 0.5 * GB, 2.0),
)
H200_JOBS: tuple[JobSpec, ...] = (
    # GPU 0: dave's RL policy server, launch-bound: utilization high, few SMs active, the
    # Python main process at a full core launching tiny kernels.
    JobSpec(
        0, "dave", "python serve_policy.py --policy mlp-small --batch-size 4",
        ProcSpec(90311, 90290, 2400, (99.0, 0.8, 95.0, 100.0), 5 * GiB, 14, (0.5 * MB, 0.2 * MB)),
        None,
        util=(96.0, 1.5, 90.0, 100.0, 3.0),
        memory=(9_216 * MiB, 32 * MiB, 9_100 * MiB, 9_300 * MiB, 20.0),
        rx=_QUIET_PCIE[0], tx=_QUIET_PCIE[1], mem_util_ratio=0.1, power_gain=180.0,
        activity=ActivitySpec((21.0, 3.0, 10.0, 35.0), (3.0, 1.0, 0.0, 8.0), (6.0, 2.0, 1.0, 15.0),
                              fp32=(12.0, 3.0, 2.0, 25.0)),
    ),
    # GPU 1: erin's attention benchmark at short sequences: low SM activity, small kernels,
    # its main process not at a full core.
    JobSpec(
        1, "erin", "python bench_attention.py --seq-len 128 --heads 4",
        ProcSpec(90420, 90401, 900, (38.0, 6.0, 20.0, 60.0), 7 * GiB, 18, (0.3 * MB, 0.1 * MB)),
        None,
        util=(94.0, 2.0, 86.0, 100.0, 3.0),
        memory=(21_504 * MiB, 64 * MiB, 21_300 * MiB, 21_700 * MiB, 20.0),
        rx=_QUIET_PCIE[0], tx=_QUIET_PCIE[1], mem_util_ratio=0.2, power_gain=260.0,
        activity=ActivitySpec((30.0, 4.0, 15.0, 45.0), (11.0, 3.0, 2.0, 20.0),
                              (14.0, 3.0, 5.0, 25.0), fp16=(6.0, 2.0, 0.0, 12.0)),
    ),
    # GPU 2: frank's CNN in fp32: the SMs busy, the tensor cores idle.
    JobSpec(
        2, "frank", "python train_cnn.py --arch resnet50 --precision fp32 --workers 6",
        ProcSpec(90530, 90511, 5400, (62.0, 8.0, 40.0, 85.0), 11 * GiB, 30, (2 * MB, 1 * MB)),
        ProcSpec(90541, 90530, 5390, (38.0, 6.0, 15.0, 60.0), 2600 * MiB, 2, (6 * MB, 2 * MB),
                 count=6),
        util=(98.0, 1.0, 93.0, 100.0, 3.0),
        memory=(64_512 * MiB, 128 * MiB, 64_000 * MiB, 65_000 * MiB, 20.0),
        rx=(1.2 * GB, 0.3 * GB, 0.1 * GB, 3 * GB, 2.0), tx=_QUIET_PCIE[1],
        mem_util_ratio=0.5, power_gain=560.0,
        activity=ActivitySpec((91.0, 2.0, 84.0, 97.0), (0.2, 0.1, 0.0, 0.6),
                              (46.0, 4.0, 35.0, 60.0), fp32=(73.0, 4.0, 60.0, 85.0)),
    ),
    # GPU 3: grace's stencil solver: DRAM bandwidth at its top, the SMs moderately busy.
    JobSpec(
        3, "grace", "python stencil.py --grid 16384 --steps 200000 --dtype float64",
        ProcSpec(90640, 90622, 12_000, (55.0, 8.0, 30.0, 80.0), 6 * GiB, 12, (0.2 * MB, 0.1 * MB)),
        None,
        util=(97.0, 1.0, 92.0, 100.0, 3.0),
        memory=(96_256 * MiB, 64 * MiB, 96_000 * MiB, 96_500 * MiB, 20.0),
        rx=_QUIET_PCIE[0], tx=_QUIET_PCIE[1], mem_util_ratio=0.9, power_gain=480.0,
        activity=ActivitySpec((63.0, 3.0, 55.0, 74.0), (0.0, 0.0, 0.0, 0.0),
                              (88.0, 2.0, 82.0, 95.0), fp64=(34.0, 4.0, 20.0, 45.0),
                              occupancy=0.8),
    ),
    # GPU 4-5: heidi's tensor-parallel torchrun job, one rank per GPU: the GPUs wait while
    # NVLink runs near its capacity (communication-bound).
    *(
        JobSpec(
            4 + rank, "heidi", f"/usr/bin/python3 -u train.py --config {_LLAMA_TP}",
            ProcSpec(90111 + rank, 90101, 3590, (58.0, 8.0, 35.0, 80.0),
                     21 * GiB + rank * 41 * MiB, 36, (1 * MB, 0.5 * MB)),
            ProcSpec(90150 + 2 * rank, 90111 + rank, 3580, (9.0, 3.0, 1.0, 20.0), 1900 * MiB,
                     3, (1 * MB, 0.3 * MB), count=2),
            util=(41.0, 6.0, 20.0, 60.0, 2.0),
            memory=(118_784 * MiB, 96 * MiB, 118_400 * MiB, 119_200 * MiB, 30.0),
            rx=_QUIET_PCIE[0], tx=_QUIET_PCIE[1], mem_util_ratio=0.4, power_gain=420.0,
            launcher=_TORCHRUN_TP if rank == 0 else None,
            activity=ActivitySpec((27.0, 4.0, 12.0, 40.0), (19.0, 4.0, 5.0, 30.0),
                                  (22.0, 4.0, 8.0, 35.0)),
            nvlink=(0.9, 0.03, 0.8, 0.98, 2.0),
        )
        for rank in range(2)
    ),
    # GPU 6: ivan's bf16 fine-tune: GPU-bound, SMs and tensor cores busy.
    JobSpec(
        6, "ivan", "python finetune.py --model mistral-7b --bf16 --batch-size 32",
        ProcSpec(90760, 90741, 7200, (97.0, 2.0, 85.0, 101.0), 14 * GiB, 40, (3 * MB, 1 * MB)),
        ProcSpec(90771, 90760, 7190, (16.0, 5.0, 3.0, 35.0), 2300 * MiB, 3, (25 * MB, 8 * MB),
                 count=4),
        util=(99.0, 0.8, 94.0, 100.0, 3.0),
        memory=(131_072 * MiB, 96 * MiB, 130_700 * MiB, 131_500 * MiB, 10.0),
        rx=(1.5 * GB, 0.4 * GB, 0.1 * GB, 4 * GB, 2.0), tx=_QUIET_PCIE[1],
        mem_util_ratio=0.6, power_gain=610.0,
        activity=ActivitySpec((93.0, 2.0, 86.0, 99.0), (67.0, 5.0, 50.0, 80.0),
                              (58.0, 5.0, 40.0, 70.0), fp32=(9.0, 2.0, 2.0, 15.0),
                              fp16=(4.0, 1.0, 0.0, 8.0)),
    ),
    # GPU 7: free.
)
# fmt: on


# gpu-node-14: the H200 node's hardware, its jobs run under `gputop run` (gputop's probe).
# Each shows a verdict from measurement (docs/verdicts.md).
# fmt: off
_TORCHRUN_PROBE = ProcSpec(
    70101, 70002, 2400, (0.7, 0.3, 0.0, 2.0), 401 * MiB, 5, name="torchrun",
    command="/usr/bin/python3 /usr/local/bin/torchrun --nproc_per_node=2 train_vit.py "
    "--data /mnt/datasets/imagenet --workers 3",
)
PROBE_JOBS: tuple[JobSpec, ...] = (
    # GPU 0-1: kim's ViT, 2 ranks: input-bound (measured), about 40 % of each step waiting
    # for the next batch; the workers at a full core say where (input-bound: CPU workers).
    *(
        JobSpec(
            rank, "kim", "/usr/bin/python3 -u train_vit.py --data /mnt/datasets/imagenet",
            ProcSpec(70111 + rank, 70101, 2390, (41.0, 6.0, 20.0, 60.0),
                     9 * GiB + rank * 37 * MiB, 24, (0.3 * MB, 0.1 * MB)),
            ProcSpec(70150 + 3 * rank, 70111 + rank, 2380, (98.0, 1.0, 94.0, 100.0), 2100 * MiB,
                     2, (1 * MB, 0.3 * MB), count=3),
            util=(38.0, 12.0, 5.0, 80.0, 2.0),
            memory=(41_984 * MiB, 64 * MiB, 41_700 * MiB, 42_300 * MiB, 20.0),
            rx=_QUIET_PCIE[0], tx=_QUIET_PCIE[1], mem_util_ratio=0.3, power_gain=380.0,
            launcher=_TORCHRUN_PROBE if rank == 0 else None,
            activity=ActivitySpec((30.0, 8.0, 3.0, 60.0), (18.0, 6.0, 0.0, 35.0),
                                  (15.0, 4.0, 2.0, 30.0)),
            probe=ProbeSpec((0.38 + 0.08 * rank, 0.03, 0.3, 0.55, 5.0),
                            (0.31, 0.02, 0.26, 0.38, 5.0)),
        )
        for rank in range(2)
    ),
    # GPU 2: lena's U-Net: its workers are busy, which alone would read as input-bound, but
    # the probe measures (almost) no wait: not input-bound (measured); DRAM bandwidth at its
    # top is what the GPU side says.
    JobSpec(
        2, "lena", "python train_unet.py --volume 256 --workers 4",
        ProcSpec(70230, 70211, 3000, (35.0, 5.0, 15.0, 55.0), 8 * GiB, 22, (1 * MB, 0.5 * MB)),
        ProcSpec(70241, 70230, 2990, (93.0, 2.0, 86.0, 100.0), 1800 * MiB, 2, (4 * MB, 1 * MB),
                 count=4),
        util=(66.0, 3.0, 55.0, 78.0, 3.0),
        memory=(73_728 * MiB, 64 * MiB, 73_400 * MiB, 74_000 * MiB, 20.0),
        rx=_QUIET_PCIE[0], tx=_QUIET_PCIE[1], mem_util_ratio=1.2, power_gain=420.0,
        activity=ActivitySpec((52.0, 3.0, 42.0, 62.0), (8.0, 2.0, 2.0, 15.0),
                              (87.0, 2.0, 81.0, 95.0), fp16=(20.0, 3.0, 10.0, 30.0)),
        probe=ProbeSpec((0.015, 0.005, 0.0, 0.04, 5.0), (0.84, 0.03, 0.75, 0.95, 5.0)),
    ),
    # GPU 3: mallory's LLM fine-tune: GPU-bound, memory nearly full, most of it held by the
    # caching allocator without tensors in it (after an evaluation phase).
    JobSpec(
        3, "mallory", "python finetune_llm.py --model llama3-8b --bf16 --eval-every 500",
        ProcSpec(70360, 70341, 6000, (96.0, 2.0, 85.0, 101.0), 12 * GiB, 38, (2 * MB, 1 * MB)),
        ProcSpec(70371, 70360, 5990, (14.0, 4.0, 3.0, 30.0), 2200 * MiB, 3, (10 * MB, 3 * MB),
                 count=2),
        util=(98.0, 1.0, 93.0, 100.0, 3.0),
        memory=(139_264 * MiB, 64 * MiB, 139_000 * MiB, 139_500 * MiB, 20.0),
        rx=(1.1 * GB, 0.3 * GB, 0.1 * GB, 3 * GB, 2.0), tx=_QUIET_PCIE[1],
        mem_util_ratio=0.6, power_gain=600.0,
        activity=ActivitySpec((90.0, 2.0, 83.0, 97.0), (62.0, 5.0, 45.0, 75.0),
                              (55.0, 5.0, 40.0, 70.0)),
        probe=ProbeSpec((0.012, 0.004, 0.0, 0.03, 5.0), (0.52, 0.02, 0.45, 0.6, 5.0),
                        allocated=(46 * GiB, 2 * GiB, 40 * GiB, 52 * GiB, 10.0),
                        reserved=(135 * GiB, 0.2 * GiB, 134 * GiB, 135.5 * GiB, 20.0),
                        peak=118 * GiB),
    ),
    # GPU 4-7: free.
)
# fmt: on


@dataclass(frozen=True)
class DemoNode:
    """One simulated server: what it is, its jobs, and whether it has GPM and NVLink."""

    hostname: str
    gpu_name: str
    memory_total: int
    jobs: tuple[JobSpec, ...]
    holders: tuple[UnlistedHolder, ...] = ()
    bus_ids: tuple[str, ...] = BUS_IDS
    gpm: bool = False  # GPM activity (Hopper and later, where permitted)
    nvlink: Nvlink | None = None  # each GPU's links (traffic is simulated)


H200_NVLINK = Nvlink(
    links=H200_LINKS,
    version="4.0",
    max_bytes_per_s=H200_LINKS * H200_LINK_RATE,
    peers=("switch",) * H200_LINKS,
)

#: The demo's servers by ``--demo-node`` name; the first is the default.
NODES: dict[str, DemoNode] = dict(
    zip(
        DEMO_NODES,  # h100, h200, h200-probe: the names' one home (the parser's choices)
        (
            DemoNode(HOSTNAME, GPU_NAME, MEMORY_TOTAL, JOBS, HOLDERS),
            DemoNode(
                "gpu-node-12", H200_NAME, H200_MEMORY, H200_JOBS, gpm=True, nvlink=H200_NVLINK
            ),
            DemoNode(
                "gpu-node-14", H200_NAME, H200_MEMORY, PROBE_JOBS, gpm=True, nvlink=H200_NVLINK
            ),
        ),
        strict=True,
    )
)


#: With ``mig=True``: the GPU in MIG mode, and its MIG devices (profile, GI, CI, GiB).
MIG_GPU = 4
MIG_LAYOUT = (("3g.40gb", 1, 0, 40), ("2g.20gb", 5, 0, 20), ("1g.10gb", 13, 0, 10))


def _partitioned(g: GpuSample, gpu_name: str = GPU_NAME) -> GpuSample:
    """``g`` in MIG mode: NVML gives no utilization then; memory per MIG device."""
    devices = tuple(
        MigDevice(
            index=i,
            uuid=f"MIG-{(g.uuid or 'GPU-0')[4:12]}-0000-4000-8000-{i:012x}",
            name=f"{gpu_name} MIG {profile}",
            profile=profile,
            gpu_instance_id=gi,
            compute_instance_id=ci,
            memory=GpuMemory(total=gib * GiB, used=0, free=gib * GiB, reserved=0),
        )
        for i, (profile, gi, ci, gib) in enumerate(MIG_LAYOUT)
    )
    return replace(
        g, mig_mode=True, mig_devices=devices, utilization=Utilization(gpu=None, memory=None)
    )


class DemoSource:
    """Simulated fleet; implements :class:`gputop.sources.base.Source`."""

    kind = "demo"
    #: Simulated pids: a signal would reach whichever real process has that number.
    can_signal = False

    def __init__(
        self,
        seed: int = 0,
        clock: Callable[[], float] | None = None,
        *,
        start_time: float | None = None,
        step: float = 1.0,
        mig: bool = False,
        node: str | None = None,
    ) -> None:
        if step <= 0:
            raise ValueError("step must be > 0")
        if node is not None and node not in NODES:
            raise ValueError(f"unknown demo node {node!r}; known: {', '.join(NODES)}")
        self.node = NODES[node or next(iter(NODES))]  # None: the first, gpu-node-07
        self.seed = seed
        self.mig = mig  # GPU 4 (the free one) partitioned into MIG devices
        self._clock = clock
        self._step = step
        if start_time is None:
            start_time = clock() if clock is not None else DEMO_EPOCH
        self._start = self._now = start_time
        self._ticks = 0
        self._rng = random.Random(seed)
        self._build()

    # --- construction ------------------------------------------------------------------

    def _walk(self, mu: float, sigma: float, lo: float, hi: float, tau: float = 10.0) -> _Walk:
        return _Walk(self._rng, mu, sigma, lo, hi, tau)

    def _uuid(self) -> str:
        h = f"{self._rng.getrandbits(128):032x}"
        return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def _proc(self, spec: ProcSpec, i: int, user: str, command: str) -> _Proc:
        """The ``i``-th process of ``spec``."""
        read, write = spec.read, spec.write
        row = ProcessInfo(
            pid=spec.pid + i,
            ppid=spec.ppid,
            user=user,
            name=spec.name,
            command=spec.command or command,
            rss=spec.rss + i * spec.rss_step,
            create_time=self._start - spec.age,
            num_threads=spec.threads,
        )
        return _Proc(
            row,
            cpu=self._walk(*spec.cpu, tau=5.0),
            read=None if read is None else self._walk(read[0], read[1], 0.0, 4 * read[0], 4.0),
            write=None if write is None else self._walk(write[0], write[1], 0.0, 4 * write[0]),
            disk_sleep_chance=spec.disk_sleep,
        )

    def _build(self) -> None:
        r = self._rng
        self._gpus: list[_Gpu] = [
            _Gpu(
                index=i,
                uuid=self._uuid(),
                util=self._walk(0.0, 0.0, 0.0, 0.0),
                power_idle=68.0 + r.uniform(0, 6),
                thermal_r=0.062 + r.uniform(0, 0.006),
                rx=self._walk(0.0, 0.0, 0.0, 0.0),
                tx=self._walk(0.0, 0.0, 0.0, 0.0),
            )
            for i in range(GPU_COUNT)
        ]
        self._procs: list[_Proc] = []
        self._streamers: list[_Proc] = []  # bob's workers: read from disk, then from cache
        for job in self.node.jobs:
            self._add_job(job)

        for gpu in self._gpus:
            gpu.power_noise = self._walk(0.0, 6.0, -20.0, 20.0, 2.0)
            # Start in thermal equilibrium with the expected power.
            watts = gpu.power_idle + gpu.power_gain * gpu.util.mu / 100.0
            gpu.temperature = _AMBIENT_C + gpu.thermal_r * min(POWER_LIMIT_W, watts)
            if self.node.gpm and gpu.activity is None:  # a free GPU: GPM reads 0
                gpu.activity = {}

        # Pin busy processes to cores (the scheduler keeps them roughly in place).
        free_cores = list(range(CPU_COUNT))
        r.shuffle(free_cores)
        for p in self._procs:
            n = max(1, math.ceil(p.cpu.hi / 100.0))
            p.cores = tuple(free_cores.pop() for _ in range(n)) if len(free_cores) > n else ()
        self._core_idle = [self._walk(1.2, 0.8, 0.0, 6.0, 3.0) for _ in range(CPU_COUNT)]
        self._iowait = self._walk(3.5, 1.0, 0.5, 9.0, 3.0)
        self._load = self._walk(16.5, 1.5, 10.0, 24.0, 20.0)
        self._load5 = self._walk(16.0, 0.6, 12.0, 20.0, 120.0)
        self._load15 = self._walk(15.6, 0.3, 13.0, 18.0, 400.0)
        self._net_rx = self._walk(95 * MB, 25 * MB, 10 * MB, 400 * MB, 3.0)
        self._net_tx = self._walk(14 * MB, 5 * MB, 1 * MB, 80 * MB, 3.0)
        self._freq = self._walk(2950.0, 60.0, 2400.0, 3200.0, 5.0)

    def _add_job(self, job: JobSpec) -> None:
        if job.launcher is not None:
            self._procs.append(self._proc(job.launcher, 0, job.user, job.command))
        self._procs.append(self._proc(job.main, 0, job.user, job.command))
        if job.workers is not None:
            for i in range(job.workers.count):
                worker = self._proc(job.workers, i, job.user, job.command)
                self._procs.append(worker)
                if job.streams:
                    self._streamers.append(worker)
        gpu = self._gpus[job.gpu]
        gpu.util = self._walk(*job.util)
        gpu.mem_util_ratio = job.mem_util_ratio
        gpu.power_gain = job.power_gain
        if job.rx is not None and job.tx is not None:
            gpu.rx = self._walk(*job.rx)
            gpu.tx = self._walk(*job.tx)
        if job.thermal_r is not None:
            gpu.thermal_r = job.thermal_r
        gpu.swing = job.swing
        gpu.extra_memory = job.extra_memory
        gpu.busy_gen, gpu.busy_width = job.busy_link
        gpu.procs.append(_GpuProc(job.main.pid, self._walk(*job.memory), None))
        spec = job.activity
        if spec is not None:  # drawn after the rest: nodes without GPM draw as before
            gpu.activity = {
                "sm": self._walk(*spec.sm),
                "tensor": self._walk(*spec.tensor),
                "dram": self._walk(*spec.dram),
                "fp32": self._walk(*spec.fp32),
                "fp16": self._walk(*spec.fp16),
                "fp64": self._walk(*spec.fp64),
            }
            gpu.activity_spec = spec
        if job.nvlink is not None:
            gpu.nvlink = self._walk(*job.nvlink)
        if job.probe is not None:  # drawn last: nodes without probes draw as before
            spec_p = job.probe
            main = next(p for p in self._procs if p.row.pid == job.main.pid)
            main.probe = _ProbeWalks(
                self._walk(*spec_p.wait),
                self._walk(*spec_p.step),
                None if spec_p.allocated is None else self._walk(*spec_p.allocated),
                None if spec_p.reserved is None else self._walk(*spec_p.reserved),
                spec_p.peak,
            )
        if job.hidden is not None:
            pid, memory, sm = job.hidden
            gpu.procs.append(_GpuProc(pid, self._walk(*memory), self._walk(*sm), visible=False))

    # --- Source ------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        first = self._ticks == 0
        now = self._clock() if self._clock is not None else self._now + (0 if first else self._step)
        dt = 0.0 if first else max(0.0, now - self._now)
        self._now = now
        self._ticks += 1
        elapsed = now - self._start

        self._set_phase(elapsed)
        procs = self._advance_processes(dt, first)
        gpus = self._advance_gpus(dt, elapsed, procs)
        if self.mig:
            gpus = tuple(
                _partitioned(g, self.node.gpu_name) if g.index == MIG_GPU else g for g in gpus
            )
        return Snapshot(
            time=now,
            hostname=self.node.hostname,
            driver=DRIVER,
            host=self._advance_host(dt, elapsed, procs, first),  # (before the tick's draws)
            gpus=gpus,
            processes=tuple(sorted(procs.values(), key=lambda p: p.pid)),
            unlisted_holders=self.node.holders,
            errors=(),
            source=self.kind,
            tick_seconds=0.004 + 0.001 * self._rng.random(),
            tick_cpu_seconds=0.003 + 0.0005 * self._rng.random(),
        )

    def close(self) -> None:
        pass

    # --- simulation --------------------------------------------------------------------

    def _set_phase(self, elapsed: float) -> None:
        """Scripted changes over time (LINK_FLAP, EPOCH_S)."""
        self._gpus[1].busy_width = 8 if LINK_FLAP[0] <= elapsed % CYCLE_S < LINK_FLAP[1] else 16
        streaming = elapsed % EPOCH_S < STREAM_S
        for p in self._streamers:
            assert p.read is not None
            # From the page cache, reads hardly reach the disk (psutil's read_bytes).
            p.read.mu, p.read.sigma = (130 * MB, 25 * MB) if streaming else (0.3 * MB, 0.1 * MB)
            p.disk_sleep_chance = 0.25 if streaming else 0.0

    def _advance_processes(self, dt: float, first: bool) -> dict[int, ProcessInfo]:
        out: dict[int, ProcessInfo] = {}
        for p in self._procs:
            cpu = p.cpu.advance(dt)
            read = p.read.advance(dt) if p.read is not None else 0.0
            write = p.write.advance(dt) if p.write is not None else 0.0
            status = "sleeping"
            if p.disk_sleep_chance and self._rng.random() < p.disk_sleep_chance:
                status = "disk-sleep"
            elif p.cpu.mu >= 50 and self._rng.random() < 0.85:
                status = "running"
            out[p.row.pid] = replace(
                p.row,
                probe=None if p.probe is None else self._probe(p.probe, dt),
                status=status,
                cpu_percent=None if first else round(cpu, 1),
                read_bytes_per_s=None if first else read,
                write_bytes_per_s=None if first else write,
            )
        hidden = (gp.pid for g in self._gpus for gp in g.procs if not gp.visible)
        out.update({pid: ProcessInfo(pid=pid, visible=False) for pid in hidden})
        return out

    def _probe(self, w: _ProbeWalks, dt: float) -> Probe:
        """What the probe publishes now, over its window."""
        step = w.step.advance(dt)
        memory: tuple[CudaMemory, ...] = ()
        if w.allocated is not None and w.reserved is not None:
            allocated = int(w.allocated.advance(dt))
            reserved = max(allocated, int(w.reserved.advance(dt)))
            memory = (CudaMemory(0, allocated, reserved, max(allocated, w.peak)),)
        return Probe(
            time=self._now,
            window_seconds=WINDOW_SECONDS,
            steps=min(WINDOW_STEPS, int(WINDOW_SECONDS / step)),
            data_wait_ratio=round(w.wait.advance(dt), 3),
            step_seconds=round(step, 3),
            batches_per_second=round(1 / step, 2),
            memory=memory,
        )

    def _advance_gpus(
        self, dt: float, elapsed: float, procs: dict[int, ProcessInfo]
    ) -> tuple[GpuSample, ...]:
        out = []
        for g in self._gpus:
            if g.swing is not None:
                amp, period = g.swing
                g.util.mu = 40.0 + amp * math.sin(2 * math.pi * elapsed / period)
            util = g.util.advance(dt)
            shares = {gp.pid: gp.sm.advance(dt) for gp in g.procs if gp.sm is not None}
            own = util
            # Processes with their own SM share (a container's job) add to the GPU util.
            util = round(min(100.0, util + 0.8 * sum(shares.values())))
            busy = bool(g.procs) and util > 0.5
            mem_util = round(util * g.mem_util_ratio)

            assert g.power_noise is not None
            demand = g.power_idle + g.power_gain * util / 100.0 + g.power_noise.advance(dt)
            if g.index == 3:  # a context holding memory keeps clocks up a bit
                demand += 45.0
            power = min(POWER_LIMIT_W, demand)
            target = _AMBIENT_C + g.thermal_r * power
            g.temperature += (target - g.temperature) * (1.0 - math.exp(-dt / 20.0))
            temp = round(g.temperature)

            reasons: list[str] = []
            sm_clock = SM_MAX_MHZ
            if not busy:
                reasons.append("idle")
                sm_clock = 345
            if demand >= POWER_LIMIT_W * 0.98:
                reasons.append("sw power cap")
                sm_clock = int(SM_MAX_MHZ * min(1.0, POWER_LIMIT_W / demand) * 0.92)
            if temp >= 85:
                reasons.append("sw thermal")
                sm_clock = min(sm_clock, 1410 + int(self._rng.random() * 60))
            sm_clock = int(round(sm_clock / 15.0) * 15)

            processes = []
            used = g.extra_memory
            for gp in g.procs:
                mem = int(gp.memory.advance(dt)) // MiB * MiB
                used += mem
                sm = shares.get(gp.pid, own)
                processes.append(
                    GpuProcess(
                        pid=gp.pid,
                        type="C",
                        gpu_memory=mem,
                        sm_percent=float(round(min(sm, util))),
                        memory_bandwidth_percent=float(round(min(sm, util) * g.mem_util_ratio)),
                        host=procs[gp.pid],
                    )
                )
            total = self.node.memory_total
            used = min(used, total - MEMORY_RESERVED)
            if busy:
                rx = g.rx.advance(dt)
                tx = g.tx.advance(dt)
                gen, width = g.busy_gen, g.busy_width
            else:
                rx = 1e5 * self._rng.random()
                tx = 1e5 * self._rng.random()
                gen, width = 1, 16
            link = link_max_bytes_per_s(gen, width) or 0.0  # (every gen here is known)
            out.append(
                GpuSample(
                    index=g.index,
                    name=self.node.gpu_name,
                    uuid=g.uuid,
                    pci_bus_id=self.node.bus_ids[g.index],
                    minor_number=g.index,
                    memory=GpuMemory(
                        total=total,
                        used=used,
                        free=total - MEMORY_RESERVED - used,
                        reserved=MEMORY_RESERVED,
                    ),
                    utilization=Utilization(gpu=float(util), memory=float(mem_util)),
                    encoder_percent=0.0,
                    decoder_percent=0.0,
                    temperature_c=float(temp),
                    power_w=round(power, 1),
                    power_limit_w=POWER_LIMIT_W,
                    fan_percent=None,  # SXM modules have no fan of their own
                    clocks=Clocks(
                        sm_mhz=sm_clock,
                        memory_mhz=MEM_MAX_MHZ if busy or g.procs else 1593,
                        sm_max_mhz=SM_MAX_MHZ,
                        memory_max_mhz=MEM_MAX_MHZ,
                    ),
                    clock_event_reasons=tuple(reasons),
                    pcie=Pcie(
                        gen=gen,
                        width=width,
                        max_gen=5,
                        max_width=16,
                        link_max_bytes_per_s=LINK_MAX,
                        tx_bytes_per_s=min(tx, link),
                        rx_bytes_per_s=min(rx, link),
                    ),
                    mig_mode=False,
                    ecc_uncorrected=0,
                    processes=tuple(processes),
                    **DECLARED,
                    **self._inside(g, dt, util if busy else 0.0),
                )
            )
        return tuple(out)

    def _inside(self, g: _Gpu, dt: float, util: float) -> dict[str, Any]:
        """GPM's activity and the NVLink links of ``g`` (nothing on a node without)."""
        node = self.node
        out: dict[str, Any] = {}
        if node.gpm and g.activity is not None:
            values = {name: w.advance(dt) for name, w in g.activity.items()}
            if util <= 0:
                values = dict.fromkeys(("sm", "tensor", "dram", "fp32", "fp16", "fp64"), 0.0)
            sm = min(values.get("sm", 0.0), util)  # SMs are busy only while a kernel runs
            occupancy = g.activity_spec.occupancy if g.activity_spec is not None else 0.0
            out["activity"] = Activity(
                sm=round(sm, 1),
                sm_occupancy=round(sm * occupancy, 1),
                tensor=round(min(values.get("tensor", 0.0), sm), 1),
                dram=round(values.get("dram", 0.0), 1),
                fp64=round(min(values.get("fp64", 0.0), sm), 1),
                fp32=round(min(values.get("fp32", 0.0), sm), 1),
                fp16=round(min(values.get("fp16", 0.0), sm), 1),
            )
        if node.nvlink is not None:
            cap = node.nvlink.max_bytes_per_s or 0.0
            share = g.nvlink.advance(dt) if g.nvlink is not None and util > 0 else 0.0
            traffic = max(share * cap, 2e5)  # idle links still carry a little
            out["nvlink"] = replace(node.nvlink, rx_bytes_per_s=traffic, tx_bytes_per_s=traffic)
        return out

    def _advance_host(
        self, dt: float, elapsed: float, procs: dict[int, ProcessInfo], first: bool
    ) -> HostSample:
        cores = [w.advance(dt) for w in self._core_idle]
        read = write = 0.0
        for p in self._procs:
            info = procs[p.row.pid]
            read += info.read_bytes_per_s or 0.0
            write += info.write_bytes_per_s or 0.0
            left = p.cpu.value
            for c in p.cores:
                take = min(left, 100.0 - cores[c])
                cores[c] += take
                left -= take
        # A checkpoint every 10 minutes: 15 s of heavy writes.
        if elapsed % CYCLE_S < 15.0 and elapsed >= 15.0:
            write += 1.6 * GB
        write += 12 * MB * self._rng.random()
        read += 4 * MB * self._rng.random()
        per_core = tuple(round(min(100.0, c), 1) for c in cores)
        used = sum(info.rss or 0 for info in procs.values()) + 41 * GiB
        walks = (self._load, self._load5, self._load15, self._net_rx, self._net_tx, self._iowait)
        load1, load5, load15, net_rx, net_tx, iowait, freq = (
            w.advance(dt) for w in (*walks, self._freq)
        )
        return HostSample(
            cpu_percent=None if first else round(sum(per_core) / CPU_COUNT, 1),
            cpu_per_core=() if first else per_core,
            cpu_count=CPU_COUNT,
            cpu_freq_mhz=round(freq),
            iowait_percent=None if first else round(iowait, 1),
            load_average=(round(load1, 2), round(load5, 2), round(load15, 2)),
            memory=MemoryStat(
                total=HOST_MEMORY, used=used, available=HOST_MEMORY - used - 37 * GiB
            ),
            swap=SwapStat(total=8 * GiB, used=256 * MiB),
            disk=IoRate() if first else IoRate(read, write),
            net=NetRate() if first else NetRate(net_rx, net_tx),
            rate_seconds=None if first else dt,
        )
