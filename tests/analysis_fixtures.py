"""Builders of synthetic snapshots and histories for the analysis tests (no sources)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from gputop.model import (
    DriverInfo,
    GpuMemory,
    GpuProcess,
    GpuSample,
    HostSample,
    IoRate,
    Pcie,
    ProcessInfo,
    Snapshot,
    Utilization,
)

T0 = 1_700_000_000.0
GiB = 2**30
MiB = 2**20
GEN4_X16 = 16e9 * 128 / 130 / 8 * 16  # bytes/s per direction


def proc(
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


def gproc(pid: int, mem: int | None = 4 * GiB, sm: float | None = None) -> GpuProcess:
    return GpuProcess(pid=pid, gpu_memory=mem, sm_percent=sm)


def gpu(
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


def host(
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
    host_sample: HostSample | None = None,
    **kw: Any,
) -> Snapshot:
    return Snapshot(
        time=time,
        hostname="testhost",
        driver=DriverInfo(available=True, driver_version="550.00"),
        host=host_sample if host_sample is not None else host(),
        gpus=tuple(gpus),
        processes=tuple(processes),
        **kw,
    )


def trainer(
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
        proc(root, ppid, user=user, command="python train.py", cpu=main_cpu,
             create_time=create_time)
    ]  # fmt: skip
    for i in range(workers):
        rows.append(
            proc(
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


def history(
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
        g = gpu(0, u, [gproc(p) for p in gpu_pids], **gkw)
        snaps.append(snapshot(t, [g], rows, host_sample=host(**hkw)))
    return snaps
