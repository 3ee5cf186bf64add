"""Snapshots with probe figures for the screens' tests and screenshots, built here (the
demo has no probes on this branch): ``with_probes`` puts a ``Probe`` on chosen pids.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from gputop.model import CudaMemory, Probe, ProcessInfo, Snapshot, replace
from tests import builders as fx

GiB = fx.GiB
#: The seeded demo's torchrun ranks (GPU 0 and 1) and its ResNet job (GPU 2).
RANKS = (41201, 41202)
RESNET = 52840

ProbeOf = Callable[[int, float], Probe | None]  # (pid, time) -> the probe then


def with_probes(snapshot: Snapshot, probes: Mapping[int, Probe | None]) -> Snapshot:
    """``snapshot`` with the listed pids' processes carrying the given probe."""

    def probed(info: ProcessInfo | None) -> ProcessInfo | None:
        if info is None or not info.visible or info.pid not in probes:
            return info
        return replace(info, probe=probes[info.pid])

    processes = tuple(probed(p) for p in snapshot.processes)
    gpus = tuple(
        replace(g, processes=tuple(replace(p, host=probed(p.host)) for p in g.processes))
        for g in snapshot.gpus
    )
    return replace(snapshot, processes=processes, gpus=gpus)  # type: ignore[arg-type]


def probe(
    time: float,
    wait: float | None,
    step: float | None,
    *,
    memory: Sequence[CudaMemory] = (),
) -> Probe:
    rate = None if not step else 1.0 / step
    return Probe(
        time=time,
        window_seconds=20.0,
        steps=100,
        data_wait_ratio=wait,
        step_seconds=step,
        batches_per_second=rate,
        memory=tuple(memory),
    )


def cuda(device: int, allocated: float, reserved: float, peak: float) -> CudaMemory:
    return CudaMemory(device, int(allocated * GiB), int(reserved * GiB), int(peak * GiB))


def demo_probes(t: float, i: int) -> dict[int, Probe | None]:
    """The demo's torchrun ranks measured (rank 1 waits far longer: a straggler) and its
    ResNet job input-bound; the data wait wanders so the charts have a shape."""
    swing = 0.08 * math.sin(i / 6.0)
    return {
        RANKS[0]: probe(t, 0.14 + swing, 0.31 + swing / 4, memory=[cuda(0, 31.2, 74.5, 38.0)]),
        RANKS[1]: probe(t, 0.41 + swing, 0.34 + swing / 4, memory=[cuda(0, 30.8, 73.9, 37.5)]),
        RESNET: probe(t, 0.62 - swing, 1.42 - swing, memory=[cuda(0, 9.1, 21.0, 12.4)]),
    }


def demo_with_probes(n: int) -> tuple[Snapshot, ...]:
    """``n`` seeded demo snapshots with ``demo_probes`` attached."""
    return tuple(with_probes(s, demo_probes(s.time, i)) for i, s in enumerate(fx.demo_snapshots(n)))
