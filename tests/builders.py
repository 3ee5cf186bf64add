"""Builders of synthetic model values for the tests (built from gputop.model, no sources).

Two families, named by what they build:

- the plain builders (``process_info``, ``gpu_process``, ``gpu_sample``, ``host_sample``,
  ``snapshot``, ``trainer_processes``, ``snapshot_history``) fill what the analysis reads
  and leave the rest empty, at clock ``T0``;
- the ``full_`` builders fill every field a screen shows (uuid, temperature, power, PCIe
  rates, per-core CPU, memory, network...), at clock ``FULL_T0``; ``full_gpu_process`` is a
  GPU process joined with its host row, as the sampler hands it to the views.

``demo_snapshots`` and ``demo_host_lines`` come from the seeded demo source.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from gputop.actions import KillTarget
from gputop.analysis.jobs import Job
from gputop.analysis.thresholds import DEFAULT, Thresholds
from gputop.analysis.verdict import Analyzer, gpu_verdicts_of, job_verdict
from gputop.analysis.window import Context
from gputop.diagnosis import Diagnosis
from gputop.model import (
    Activity,
    Clocks,
    DriverInfo,
    GpuMemory,
    GpuProcess,
    GpuSample,
    HostSample,
    IoRate,
    MemoryStat,
    NetRate,
    Nvlink,
    Owner,
    Pcie,
    ProcessInfo,
    Snapshot,
    SwapStat,
    UnlistedHolder,
    Utilization,
    Verdict,
    replace,
)
from gputop.pipeline import Feed
from gputop.present import to_json_dict
from gputop.sources.demo import DemoSource
from gputop.sources.remote import parse_line

T0 = 1_700_000_000.0
GiB = 2**30
MiB = 2**20
GEN4_X16 = 16e9 * 128 / 130 / 8 * 16  # bytes/s per direction


def process_info(
    pid: int,
    ppid: int | None = 1,
    *,
    user: str | None = "alice",
    name: str | None = "python",
    command: str | None = None,
    cpu: float | None = 1.0,
    status: str | None = "sleeping",
    rss: int | None = 100 * MiB,
    read: float | None = 0.0,
    create_time: float | None = T0 - 1000,
    visible: bool = True,
) -> ProcessInfo:
    if not visible:
        return ProcessInfo(pid=pid, visible=False)
    return ProcessInfo(
        pid=pid,
        ppid=ppid,
        user=user,
        name=name,
        command=command if command is not None else (name or ""),
        status=status,
        cpu_percent=cpu,
        rss=rss,
        read_bytes_per_s=read,
        create_time=create_time,
    )


def gpu_process(pid: int, mem: int | None = 4 * GiB, sm: float | None = None) -> GpuProcess:
    return GpuProcess(pid=pid, gpu_memory=mem, sm_percent=sm)


def gpu_sample(
    index: int = 0,
    util: float | None = 0.0,
    processes: Sequence[GpuProcess] = (),
    *,
    used: int | None = None,
    total: int | None = 80 * GiB,
    reasons: tuple[str, ...] | None = (),
    pcie: Pcie | None = None,
    lost: bool = False,
) -> GpuSample:
    if lost:
        return GpuSample(index=index, lost=True, lost_reason="GPU is lost")
    if used is None:
        used = sum(p.gpu_memory or 0 for p in processes) + 500 * MiB
    return GpuSample(
        index=index,
        name="Fake H100",
        memory=GpuMemory(total=total, used=used, free=None if total is None else total - used),
        utilization=Utilization(gpu=util, memory=None if util is None else util / 2),
        clock_event_reasons=reasons,
        pcie=pcie
        if pcie is not None
        else Pcie(gen=4, width=16, max_gen=4, max_width=16, link_max_bytes_per_s=GEN4_X16),
        processes=tuple(processes),
    )


def host_sample(
    cpu: float | None = 20.0,
    iowait: float | None = 0.0,
    disk_read: float | None = 0.0,
    cpu_count: int = 32,
) -> HostSample:
    return HostSample(
        cpu_percent=cpu,
        cpu_count=cpu_count,
        iowait_percent=iowait,
        disk=IoRate(read_bytes_per_s=disk_read, write_bytes_per_s=0.0),
    )


def snapshot(
    time: float,
    gpus: Iterable[GpuSample],
    processes: Iterable[ProcessInfo] = (),
    *,
    host: HostSample | None = None,
    **kw: Any,
) -> Snapshot:
    return Snapshot(
        time=time,
        hostname="testhost",
        driver=DriverInfo(available=True, driver_version="550.00"),
        host=host if host is not None else host_sample(),
        gpus=tuple(gpus),
        processes=tuple(processes),
        **kw,
    )


def trainer_processes(
    root: int = 100,
    workers: int = 4,
    *,
    worker_cpu: float | None = 95.0,
    main_cpu: float | None = 30.0,
    user: str = "alice",
    ppid: int = 50,
    worker_status: str = "sleeping",
    worker_read: float | None = 0.0,
    create_time: float = T0 - 1000,
) -> list[ProcessInfo]:
    """python train.py (pid ``root``) with ``workers`` DataLoader workers root+1..."""
    rows = [
        process_info(root, ppid, user=user, command="python train.py", cpu=main_cpu,
             create_time=create_time)
    ]  # fmt: skip
    for i in range(workers):
        rows.append(
            process_info(
                root + 1 + i,
                root,
                user=user,
                command="python train.py",
                cpu=worker_cpu,
                status=worker_status,
                read=worker_read,
                create_time=create_time + 5,
            )
        )
    return rows


Maker = Callable[[int, float], Any]


def snapshot_history(
    utils: Sequence[float | None],
    *,
    interval: float = 1.0,
    start: float = T0,
    tree: Sequence[ProcessInfo] | Maker | None = None,
    gpu_pids: Sequence[int] = (100,),
    gpu_kw: dict[str, Any] | Maker | None = None,
    host_kw: dict[str, Any] | Maker | None = None,
) -> list[Snapshot]:
    """One snapshot per util value on GPU 0, ``interval`` seconds apart.

    ``tree``, ``gpu_kw`` and ``host_kw`` are either fixed or callables of (i, time).
    """
    snaps: list[Snapshot] = []
    for i, u in enumerate(utils):
        t = start + i * interval
        rows = tree(i, t) if callable(tree) else list(tree or [])
        gkw = gpu_kw(i, t) if callable(gpu_kw) else dict(gpu_kw or {})
        hkw = host_kw(i, t) if callable(host_kw) else dict(host_kw or {})
        g = gpu_sample(0, u, [gpu_process(p) for p in gpu_pids], **gkw)
        snaps.append(snapshot(t, [g], rows, host=host_sample(**hkw)))
    return snaps


# --- a busy node: many GPUs, jobs and workers, values wandering (seeded) ---

BUSY_USERS = ("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi")
BUSY_VARIANTS = 4  # value levels per process, shared between snapshots (keeps memory small)


def busy_node_snapshots(
    n_gpus: int = 16,
    n_procs: int = 64,
    workers: int = 2,
    ranks: int = 1,
    seed: int = 0,
    start: float = T0,
    step: float = 1.0,
) -> Iterator[Snapshot]:
    """Endless snapshots of a busy node, one per ``step`` seconds.

    ``n_gpus * n_procs / ranks`` jobs: job j's rank r runs on GPU ``(j * ranks + r) %
    n_gpus`` (so each GPU lists ``n_procs`` processes); a job with several ranks has a
    launcher process (``torchrun``) above them. Each GPU runs one of a few patterns
    (busy, starved and oscillating, moderate, idle while holding memory), each job's
    workers are busy or idle, and values wander from tick to tick (seeded).
    """
    assert (n_gpus * n_procs) % ranks == 0
    rng = random.Random(seed)
    n_jobs = n_gpus * n_procs // ranks
    shells = {
        u: ProcessInfo(
            pid=100 + i,
            ppid=50,
            user=u,
            name="bash",
            command="-bash",
            status="sleeping",
            cpu_percent=0.0,
            rss=4 * MiB,
            create_time=start - 86_400,
            num_threads=1,
        )
        for i, u in enumerate(BUSY_USERS)
    }
    sshd = ProcessInfo(
        pid=50,
        ppid=1,
        user="root",
        name="sshd",
        command="sshd: /usr/sbin/sshd",
        status="sleeping",
        cpu_percent=0.0,
        create_time=start - 90_000,
    )

    def variants(
        pid: int,
        ppid: int,
        user: str,
        name: str,
        command: str,
        cpu: float,
        status: str = "sleeping",
        rss: int = 512 * MiB,
    ) -> list[ProcessInfo]:
        return [
            ProcessInfo(
                pid=pid,
                ppid=ppid,
                user=user,
                name=name,
                command=command,
                status="disk-sleep" if status == "disk-sleep" and v % 2 else "sleeping",
                cpu_percent=max(0.0, cpu + rng.uniform(-8, 8)),
                rss=rss + v * MiB,
                read_bytes_per_s=float(rng.choice((0, 4 * MiB, 40 * MiB))),
                write_bytes_per_s=0.0,
                create_time=start - 3600 - pid % 977,
                num_threads=8,
            )
            for v in range(BUSY_VARIANTS)
        ]

    host_rows: list[list[ProcessInfo]] = [[sshd], *([s] for s in shells.values())]
    # per GPU: list of (pid, variants of its GPU process row)
    on_gpu: list[list[tuple[int, list[GpuProcess]]]] = [[] for _ in range(n_gpus)]
    pid = 10_000
    for j in range(n_jobs):
        user = BUSY_USERS[j % len(BUSY_USERS)]
        shell = shells[user].pid
        busy_workers = j % 5 == 0
        parent = shell
        if ranks > 1:
            launcher = variants(
                pid, shell, user, "torchrun", f"torchrun --nproc {ranks} train.py", 2.0
            )
            host_rows.append(launcher)
            parent = pid
            pid += 1
        for r in range(ranks):
            gpu = (j * ranks + r) % n_gpus
            main = variants(
                pid,
                parent,
                user,
                "python",
                f"python train.py --job {j} --rank {r}",
                95.0 if j % 7 == 0 else 40.0,
                "disk-sleep" if j % 11 == 0 else "sleeping",
                rss=4 * GiB,
            )
            host_rows.append(main)
            mem = (1 + j % 8) * GiB
            on_gpu[gpu].append(
                (
                    pid,
                    [
                        GpuProcess(pid=pid, gpu_memory=mem, sm_percent=10.0 * v, host=main[v])
                        for v in range(BUSY_VARIANTS)
                    ],
                )
            )
            main_pid = pid
            pid += 1
            for _ in range(workers):
                host_rows.append(
                    variants(
                        pid,
                        main_pid,
                        user,
                        "pt_data_worker",
                        "python train.py (worker)",
                        92.0 if busy_workers else 10.0,
                    )
                )
                pid += 1

    patterns = [("busy", "starved", "moderate", "idle")[g % 4] for g in range(n_gpus)]
    tick = 0
    while True:
        now = start + tick * step
        gpus = []
        for g in range(n_gpus):
            pattern = patterns[g]
            if pattern == "busy":
                util = rng.uniform(88, 100)
            elif pattern == "starved":
                util = rng.choice((5.0, 95.0)) + rng.uniform(0, 5)
            elif pattern == "moderate":
                util = rng.uniform(60, 70)
            else:
                util = 0.0
            procs = tuple(rows[(tick + p) % BUSY_VARIANTS] for p, rows in on_gpu[g])
            used = sum(p.gpu_memory or 0 for p in procs)
            gpus.append(
                GpuSample(
                    index=g,
                    name="NVIDIA H100 80GB HBM3",
                    uuid=f"GPU-{g:08x}",
                    memory=GpuMemory(total=80 * GiB * 8, used=used, free=80 * GiB * 8 - used),
                    utilization=Utilization(gpu=util, memory=util / 3),
                    temperature_c=60.0,
                    power_w=300.0,
                    power_limit_w=700.0,
                    clocks=Clocks(
                        sm_mhz=1980, memory_mhz=2619, sm_max_mhz=1980, memory_max_mhz=2619
                    ),
                    clock_event_reasons=("sw power cap",) if g % 3 == 0 else (),
                    pcie=Pcie(
                        gen=5,
                        width=16,
                        max_gen=5,
                        max_width=16,
                        link_max_bytes_per_s=63e9,
                        tx_bytes_per_s=1e9,
                        rx_bytes_per_s=rng.uniform(1e9, 5e10),
                    ),
                    processes=procs,
                )
            )
        rows = tuple(r[(tick + r[0].pid) % len(r)] for r in host_rows)
        yield Snapshot(
            time=now,
            hostname="bignode",
            driver=DriverInfo(available=True, driver_version="550.90.07"),
            host=HostSample(
                cpu_percent=rng.uniform(40, 95),
                iowait_percent=rng.uniform(0, 30),
                cpu_count=128,
                disk=IoRate(read_bytes_per_s=rng.uniform(0, 2e9)),
            ),
            gpus=tuple(gpus),
            processes=rows,
            source="demo",
        )
        tick += 1


# --- the full builders: every field a screen shows ---

FULL_T0 = 1_750_000_000.0
FULL_DRIVER = DriverInfo(available=True, driver_version="550.90.07", cuda_version="12.4")


def full_process_info(
    pid: int,
    *,
    user: str = "alice",
    command: str = "python train.py",
    cpu: float = 50.0,
    age: float = 600.0,
    now: float = FULL_T0,
) -> ProcessInfo:
    return ProcessInfo(
        pid=pid,
        ppid=1,
        user=user,
        name=command.split()[0] if command else None,
        command=command,
        status="running",
        cpu_percent=cpu,
        rss=2 * GiB,
        read_bytes_per_s=1.0 * MiB,
        write_bytes_per_s=0.0,
        create_time=now - age,
        num_threads=8,
    )


def full_gpu_process(
    pid: int,
    *,
    memory: int | None = 10 * GiB,
    sm: float | None = 50.0,
    info: ProcessInfo | None = None,
    visible: bool = True,
    **host_kw: object,
) -> GpuProcess:
    """A GPU process joined with its host row (``full_process_info`` unless ``info``)."""
    if not visible:
        info = ProcessInfo(pid=pid, visible=False)
    elif info is None:
        info = full_process_info(pid, **host_kw)  # type: ignore[arg-type]
    return GpuProcess(pid=pid, type="C", gpu_memory=memory, sm_percent=sm, host=info)


def with_inside(sample: GpuSample, *, sm: float = 45.0, links: int = 18) -> GpuSample:
    """``sample`` on a Hopper with GPM and NVLink: its ``activity`` and ``nvlink`` parts."""
    return replace(
        sample,
        activity=Activity(
            sm=sm, sm_occupancy=20.0, tensor=30.0, dram=40.0, fp64=1.0, fp32=10.0, fp16=2.0
        ),
        nvlink=Nvlink(
            links=links,
            version="4.0",
            rx_bytes_per_s=5e10,
            tx_bytes_per_s=6e10,
            max_bytes_per_s=links * 25e9,
            peers=("switch",) * links,
        ),
    )


def full_gpu_sample(
    index: int,
    *,
    util: float | None = 50.0,
    used: int | None = 40 * GiB,
    total: int = 80 * GiB,
    processes: Sequence[GpuProcess] = (),
    lost: bool = False,
    name: str = "NVIDIA H100 80GB HBM3",
    gen: int = 5,
    width: int = 16,
    reasons: tuple[str, ...] | None = (),
) -> GpuSample:
    if lost:
        return GpuSample(index=index, lost=True, lost_reason="GPU is lost")
    return GpuSample(
        index=index,
        name=name,
        uuid=f"GPU-{index:08d}-aaaa-bbbb-cccc-dddddddddddd",
        pci_bus_id=f"00000000:{index + 16:02X}:00.0",
        minor_number=index,
        memory=GpuMemory(total=total, used=used, free=None, reserved=512 * MiB),
        utilization=Utilization(gpu=util, memory=util),
        temperature_c=55.0,
        power_w=300.0,
        power_limit_w=700.0,
        fan_percent=None,
        clock_event_reasons=reasons,
        pcie=Pcie(
            gen=gen,
            width=width,
            max_gen=5,
            max_width=16,
            link_max_bytes_per_s=63e9,
            tx_bytes_per_s=1e9,
            rx_bytes_per_s=3e9,
        ),
        processes=tuple(processes),
    )


def full_host_sample() -> HostSample:
    return HostSample(
        cpu_percent=25.0,
        cpu_per_core=(0.0, 10.0, 50.0, 100.0, 30.0, 70.0, 5.0, 90.0),
        cpu_count=8,
        iowait_percent=2.0,
        load_average=(1.5, 1.25, 1.0),
        memory=MemoryStat(total=64 * GiB, used=16 * GiB, available=48 * GiB),
        swap=SwapStat(total=8 * GiB, used=0),
        disk=IoRate(read_bytes_per_s=10 * MiB, write_bytes_per_s=2 * MiB),
        net=NetRate(rx_bytes_per_s=5 * MiB, tx_bytes_per_s=1 * MiB),
    )


def full_snapshot(
    gpus: Sequence[GpuSample] = (),
    *,
    time: float = FULL_T0,
    holders: Sequence[UnlistedHolder] = (),
    processes: Sequence[ProcessInfo] = (),
    driver: DriverInfo = FULL_DRIVER,
    source: str = "nvml",
) -> Snapshot:
    return Snapshot(
        time=time,
        hostname="node-1",
        driver=driver,
        host=full_host_sample(),
        gpus=tuple(gpus),
        processes=tuple(processes),
        unlisted_holders=tuple(holders),
        source=source,
        tick_seconds=0.012,
        tick_cpu_seconds=0.004,
    )


def multi_gpu_snapshot(n: int = 4, *, time: float = FULL_T0) -> Snapshot:
    """A full snapshot of ``n`` GPUs, two processes each (pids 1000+10*i, 1001+10*i)."""
    gpus = [
        full_gpu_sample(
            i,
            util=10.0 * i,
            processes=[
                full_gpu_process(1000 + 10 * i, memory=(i + 1) * GiB, sm=5.0 * i, user=f"u{i}"),
                full_gpu_process(1001 + 10 * i, memory=(i + 2) * GiB, sm=None, user=f"v{i}"),
            ],
        )
        for i in range(n)
    ]
    return full_snapshot(gpus, time=time)


# --- from the seeded demo source ---


def demo_snapshots(n: int, seed: int = 0) -> list[Snapshot]:
    """``n`` consecutive snapshots of the seeded demo fleet (virtual clock, no sleeping)."""
    source = DemoSource(seed)
    return [source.snapshot() for _ in range(n)]


def demo_host_lines(
    seed: int, ticks: int, start: float = 1_800_000_000.0, mig: bool = False
) -> list[dict[str, Any]]:
    """``ticks`` stream lines of a demo host (parsed), one second apart."""
    source = DemoSource(seed, start_time=start, step=1.0, mig=mig)
    diagnoser = Feed()
    history = []
    out = []
    for _ in range(ticks):
        history.append(source.snapshot())
        line = json.dumps(to_json_dict(history[-1], diagnoser.frame(history).diagnosis))
        out.append(parse_line(line))
    return out


# --- one-shot verdicts (a fresh Analyzer per call: nothing carried) -------------------


def _context(history: Sequence[Snapshot], t: Thresholds) -> Context | None:
    return Analyzer(t).context(history, track=False)


def diagnose(history: Sequence[Snapshot], thresholds: Thresholds = DEFAULT) -> Diagnosis:
    """One-shot, as `gputop replay --once` judges: a fresh Feed's frame of ``history``."""
    diagnosis = Feed(thresholds).frame(history).diagnosis
    assert diagnosis is not None
    return diagnosis


def jobs_to_judge(ctx: Context, jobs: Sequence[Job] | Mapping[str, Job] | None) -> list[Job]:
    """``jobs`` as a list (None: the newest snapshot's jobs)."""
    jobs = ctx.latest_jobs if jobs is None else jobs
    return list(jobs.values() if isinstance(jobs, Mapping) else jobs)


def gpu_verdicts(
    history: Sequence[Snapshot], thresholds: Thresholds = DEFAULT
) -> dict[int, Verdict]:
    """One verdict per GPU of the newest snapshot, keyed by GPU index."""
    ctx = _context(history, thresholds)
    return {} if ctx is None else gpu_verdicts_of(ctx)


def job_verdicts(
    history: Sequence[Snapshot],
    jobs: Sequence[Job] | Mapping[str, Job] | None = None,
    thresholds: Thresholds = DEFAULT,
) -> dict[str, Verdict]:
    """One verdict per job, keyed by job id. ``jobs`` defaults to the newest snapshot's."""
    ctx = _context(history, thresholds)
    return {} if ctx is None else {j.id: job_verdict(ctx, j) for j in jobs_to_judge(ctx, jobs)}


def all_verdicts(
    history: Sequence[Snapshot],
    jobs: Sequence[Job] | Mapping[str, Job] | None = None,
    thresholds: Thresholds = DEFAULT,
) -> tuple[dict[int, Verdict], dict[str, Verdict]]:
    """``(gpu_verdicts, job_verdicts)`` in one pass (the window's jobs are built once)."""
    ctx = _context(history, thresholds)
    if ctx is None:
        return {}, {}
    return gpu_verdicts_of(ctx), {j.id: job_verdict(ctx, j) for j in jobs_to_judge(ctx, jobs)}


# --- owners (issue 22): who owns each process tree ------------------------------------------

#: A node of two pods, a Slurm job and a Docker container, on the demo's process trees
#: (each root's pid -> its owner; its descendants share it).
DEMO_OWNERS: dict[int, Owner] = {
    41187: Owner(
        "pod",
        runtime="containerd",
        id="3f2a9c1b4d5e" + "0" * 52,
        namespace="ml-research",
        pod="llama-pretrain-0",
        container="trainer",
        pod_uid="1f2e3d4c-5b6a-4789-8abc-def012345678",
    ),
    52840: Owner(
        "pod",
        runtime="cri-o",
        id="7d1e" * 16,
        namespace="vision",
        pod="resnet-ddp-7c9f",
        container="main",
        pod_uid="2a3b4c5d-6e7f-4081-9abc-def012345679",
    ),
    61022: Owner(
        "slurm",
        slurm_job="81234",
        slurm_step="0",
        slurm_job_name="llama13b-ft",
        slurm_user="alice",
    ),
    70533: Owner("container", runtime="docker", id="9c0ffee1" * 8),
}


def with_owners(snapshot: Snapshot, owners: dict[int, Owner] | None = None) -> Snapshot:
    """``snapshot`` with each listed process, and every process below it, owned as given."""
    owners = DEMO_OWNERS if owners is None else owners
    parent = {p.pid: p.ppid for p in snapshot.processes}

    def owner_of(pid: int) -> Owner | None:
        seen: set[int] = set()
        cur: int | None = pid
        while cur is not None and cur not in seen:
            if cur in owners:
                return owners[cur]
            seen.add(cur)
            cur = parent.get(cur)
        return None

    def own(info: ProcessInfo | None) -> ProcessInfo | None:
        if info is None or not info.visible:
            return info
        return replace(info, owner=owner_of(info.pid))

    processes = tuple(own(p) for p in snapshot.processes)
    gpus = tuple(
        replace(g, processes=tuple(replace(p, host=own(p.host)) for p in g.processes))
        for g in snapshot.gpus
    )
    return replace(snapshot, processes=processes, gpus=gpus)  # type: ignore[arg-type]


def kill_target(snapshot: Snapshot, pid: int, gpu: int | None = None) -> KillTarget:
    """The kill target of ``pid``'s row (on ``gpu``, else its first), built as the
    dashboard's kill key builds it from the process table's rows."""
    from gputop.views.process_view import process_rows

    r = next(r for r in process_rows(snapshot) if r.pid == pid and gpu in (None, r.gpu))
    return KillTarget(r.pid, r.create_time, r.user, r.command, r.gpu, r.gpu_memory)
