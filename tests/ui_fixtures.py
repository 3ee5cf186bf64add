"""Small builders of snapshots for the main-screen tests (built from gputop.model directly)."""

from __future__ import annotations

from collections.abc import Sequence

from gputop.model import (
    DriverInfo,
    GpuMemory,
    GpuProcess,
    GpuSample,
    HostSample,
    IoRate,
    MemoryStat,
    NetRate,
    Pcie,
    ProcessInfo,
    Snapshot,
    SwapStat,
    UnlistedHolder,
    Utilization,
)

GiB = 2**30
MiB = 2**20
T0 = 1_750_000_000.0
DRIVER = DriverInfo(available=True, driver_version="550.90.07", cuda_version="12.4")


def host_info(
    pid: int,
    *,
    user: str = "alice",
    command: str = "python train.py",
    cpu: float = 50.0,
    age: float = 600.0,
    now: float = T0,
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


def proc(
    pid: int,
    *,
    memory: int | None = 10 * GiB,
    sm: float | None = 50.0,
    info: ProcessInfo | None = None,
    visible: bool = True,
    **host_kw: object,
) -> GpuProcess:
    if not visible:
        info = ProcessInfo(pid=pid, visible=False)
    elif info is None:
        info = host_info(pid, **host_kw)  # type: ignore[arg-type]
    return GpuProcess(pid=pid, type="C", gpu_memory=memory, sm_percent=sm, host=info)


def gpu(
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


def host() -> HostSample:
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


def snapshot(
    gpus: Sequence[GpuSample] = (),
    *,
    time: float = T0,
    holders: Sequence[UnlistedHolder] = (),
    processes: Sequence[ProcessInfo] = (),
    driver: DriverInfo = DRIVER,
    source: str = "nvml",
) -> Snapshot:
    return Snapshot(
        time=time,
        hostname="node-1",
        driver=driver,
        host=host(),
        gpus=tuple(gpus),
        processes=tuple(processes),
        unlisted_holders=tuple(holders),
        source=source,
        tick_seconds=0.012,
        tick_cpu_seconds=0.004,
    )


def fleet(n: int = 4, *, time: float = T0) -> Snapshot:
    """``n`` GPUs, two processes each (pids 1000+10*i, 1001+10*i)."""
    gpus = [
        gpu(
            i,
            util=10.0 * i,
            processes=[
                proc(1000 + 10 * i, memory=(i + 1) * GiB, sm=5.0 * i, user=f"u{i}"),
                proc(1001 + 10 * i, memory=(i + 2) * GiB, sm=None, user=f"v{i}"),
            ],
        )
        for i in range(n)
    ]
    return snapshot(gpus, time=time)


def demo_snapshots(n: int, seed: int = 0) -> list[Snapshot]:
    """``n`` consecutive snapshots of the seeded demo fleet (virtual clock, no sleeping)."""
    from gputop.sources.demo import DemoSource

    source = DemoSource(seed)
    return [source.snapshot() for _ in range(n)]
