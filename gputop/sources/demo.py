"""A seeded, simulated GPU server (``gpu-node-07``: 8 x H100) and its jobs, declared as
data in :data:`JOBS`. Same snapshots and gaps as the live source; with ``clock=None`` a
virtual clock advances ``step`` seconds per snapshot. Same seed and times: same snapshots.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gputop.model import (
    GPU_METRICS,
    Clocks,
    DriverInfo,
    GpuMemory,
    GpuProcess,
    GpuSample,
    HostSample,
    IoRate,
    MemoryStat,
    MigDevice,
    NetRate,
    Pcie,
    ProcessInfo,
    Snapshot,
    SwapStat,
    UnlistedHolder,
    Utilization,
    replace,
)
from gputop.pcie import link_max_bytes_per_s

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
    row: ProcessInfo  # the fields that never change (pid, user, command, rss ...)
    cpu: _Walk
    read: _Walk | None = None  # bytes/s
    write: _Walk | None = None
    disk_sleep_chance: float = 0.0
    cores: tuple[int, ...] = ()


@dataclass
class _GpuProc:
    pid: int
    memory: _Walk  # bytes
    sm: _Walk | None  # SM percent; None: the process accounts for all the GPU's util
    visible: bool = True


@dataclass
class _Gpu:
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


#: A random walk's parameters: (mean, standard deviation, low, high[, seconds to forget]).
Walk = tuple[float, ...]


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


#: With ``mig=True``: the GPU in MIG mode, and its MIG devices (profile, GI, CI, GiB).
MIG_GPU = 4
MIG_LAYOUT = (("3g.40gb", 1, 0, 40), ("2g.20gb", 5, 0, 20), ("1g.10gb", 13, 0, 10))


def _partitioned(g: GpuSample) -> GpuSample:
    """``g`` in MIG mode: NVML gives no utilization then; memory per MIG device."""
    devices = tuple(
        MigDevice(
            index=i,
            uuid=f"MIG-{(g.uuid or 'GPU-0')[4:12]}-0000-4000-8000-{i:012x}",
            name=f"{GPU_NAME} MIG {profile}",
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
    ) -> None:
        if step <= 0:
            raise ValueError("step must be > 0")
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
        for job in JOBS:
            self._add_job(job)

        for gpu in self._gpus:
            gpu.power_noise = self._walk(0.0, 6.0, -20.0, 20.0, 2.0)
            # Start in thermal equilibrium with the expected power.
            watts = gpu.power_idle + gpu.power_gain * gpu.util.mu / 100.0
            gpu.temperature = _AMBIENT_C + gpu.thermal_r * min(POWER_LIMIT_W, watts)

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
            gpus = tuple(_partitioned(g) if g.index == MIG_GPU else g for g in gpus)
        return Snapshot(
            time=now,
            hostname=HOSTNAME,
            driver=DRIVER,
            host=self._advance_host(dt, elapsed, procs, first),  # (before the tick's draws)
            gpus=gpus,
            processes=tuple(sorted(procs.values(), key=lambda p: p.pid)),
            unlisted_holders=HOLDERS,
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
                status=status,
                cpu_percent=None if first else round(cpu, 1),
                read_bytes_per_s=None if first else read,
                write_bytes_per_s=None if first else write,
            )
        hidden = (gp.pid for g in self._gpus for gp in g.procs if not gp.visible)
        out.update({pid: ProcessInfo(pid=pid, visible=False) for pid in hidden})
        return out

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
            used = min(used, MEMORY_TOTAL - MEMORY_RESERVED)
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
                    name=GPU_NAME,
                    uuid=g.uuid,
                    pci_bus_id=BUS_IDS[g.index],
                    minor_number=g.index,
                    memory=GpuMemory(
                        total=MEMORY_TOTAL,
                        used=used,
                        free=MEMORY_TOTAL - MEMORY_RESERVED - used,
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
                )
            )
        return tuple(out)

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
