"""Long runs in compressed time: memory stays flat.

- The demo: an hour of ticks (3,600, virtual clock) through the Sampler.
- The live source on the fake NVML: hundreds of ticks with processes churning (real
  short-lived children, pids of this host coming and going, and never-repeating pids
  from "another namespace"), the /dev/nvidia holder scan included.

Memory is measured with tracemalloc after a warm-up (history full, caches primed) and
again after many more ticks, at the same phase of the churn cycle, so only growth that
scales with the number of ticks can exceed the bound. The size of every container the
readers keep between ticks is checked too: per-pid state must not grow with churned pids.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import subprocess
import sys
import threading
import tracemalloc
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gputop.sampler import Sampler
from gputop.sources.demo import DemoSource
from gputop.sources.host import HostReader, scan_processes
from gputop.sources.live import LiveSource
from gputop.sources.nvml import NvmlReader
from tests.fakenvml import FakeGpu, FakeNvml, FakeProcess, FakeSample, Scenario
from tests.pids import free_pids

KiB = 1024


def traced_now() -> int:
    gc.collect()
    current, _ = tracemalloc.get_traced_memory()
    return current


def growth_report(warm: tracemalloc.Snapshot, end: tracemalloc.Snapshot) -> str:
    """Where traced memory grew between two snapshots (top lines) and which threads run:
    tracemalloc sees every thread, so a failure says whether the growth is ours."""
    top = end.compare_to(warm, "lineno")[:8]
    threads = sorted(t.name for t in threading.enumerate())
    return "; ".join(str(d) for d in top) + f"; threads: {threads}"


def container_sizes(*objects: Any) -> dict[str, int]:
    """len() of every dict, set, list and deque attribute of the objects (one level)."""
    out: dict[str, int] = {}
    for i, obj in enumerate(objects):
        attrs = vars(obj) if hasattr(obj, "__dict__") else {}
        if hasattr(obj, "__slots__"):
            attrs = {**attrs, **{s: getattr(obj, s, None) for s in obj.__slots__}}
        for name, value in attrs.items():
            if isinstance(value, dict | set | list | deque | frozenset):
                out[f"{i}:{type(obj).__name__}.{name}"] = len(value)
    return out


@pytest.fixture
def tracing() -> Iterator[None]:
    tracemalloc.start(1)
    try:
        yield
    finally:
        tracemalloc.stop()


# ---------------------------------------------------------------------------- demo


def test_an_hour_of_demo_ticks_keeps_memory_flat() -> None:
    history = 100
    sampler = Sampler(DemoSource(0, step=1.0), interval=1.0, history=history)
    for _ in range(600):  # ten simulated minutes: history full, everything warm
        sampler.tick_now()
    gc.collect()
    blocks = sys.getallocatedblocks()
    for _ in range(2400):  # untraced (fast)
        sampler.tick_now()
    # Traced memory converges only once every block alive was allocated while tracing
    # (freelists recycle older blocks): trace a few histories' worth before measuring.
    tracemalloc.start(1)
    try:
        for _ in range(300):
            sampler.tick_now()
        warm = traced_now()
        for _ in range(300):  # up to the hour
            sampler.tick_now()
        end = traced_now()
    finally:
        tracemalloc.stop()
    gc.collect()
    snaps = sampler.history()
    assert len(snaps) == history  # bounded: a deque with maxlen
    assert snaps[-1].time - snaps[0].time == history - 1
    assert sampler.ticks == 3600
    print(f"demo: {(end - warm) / KiB:.1f} KiB, {sys.getallocatedblocks() - blocks} blocks")
    assert end - warm < 32 * KiB, f"grew {(end - warm) / KiB:.0f} KiB over 300 ticks"
    # Over the whole 50 minutes after the warm-up: the same number of memory blocks.
    assert sys.getallocatedblocks() - blocks < 2000


# ---------------------------------------------------------------------------- live


class Churn:
    """Processes coming and going under the fake NVML, one scenario per tick."""

    PERIOD = 25  # ticks: the rotation of host pids and of the children repeats

    def __init__(self, fake: FakeNvml) -> None:
        self.fake = fake
        # Leaf processes of this host (no children: a few rows each, not the whole tree).
        scan = scan_processes()
        parents = {st.ppid for st in scan.values()}
        self.host_pids = sorted(p for p in scan if p not in parents and p > 1)
        self.children: list[subprocess.Popen[bytes]] = []
        # invisible pids (another PID namespace), counting down from pid_max (a pid above it
        # cannot be a real process: gputop drops it); never repeats
        self.free = iter(free_pids(4000))
        self.ghosts: list[int] = []  # the last tick's
        self.spawned = 0

    def _replace_child(self) -> None:
        if len(self.children) >= 3:
            old = self.children.pop(0)
            old.kill()
            old.wait()
        self.children.append(subprocess.Popen(["sleep", "60"]))
        self.spawned += 1

    def tick(self, k: int) -> None:
        if k % 5 == 0:
            self._replace_child()
        phase = k % self.PERIOD
        gpus = []
        for g in range(4):
            pids = [self.host_pids[(phase * 3 + g * 7 + j) % len(self.host_pids)] for j in (0, 1)]
            pids += [c.pid for c in self.children[g % len(self.children) :][:1]]
            if g == 0:
                self.ghosts = []
            for _ in range(3):
                ghost = next(self.free)
                pids.append(ghost)
                self.ghosts.append(ghost)
            gpus.append(
                FakeGpu(
                    util_gpu=(k * 7 + g) % 101,
                    processes=[FakeProcess(p) for p in pids],
                    samples=[FakeSample(p, sm=(p + k) % 100) for p in pids],
                )
            )
        self.fake.write(Scenario(gpus=gpus))

    def close(self) -> None:
        for c in self.children:
            c.kill()
            c.wait()


def _start_elsewhere(n: int) -> list[int]:
    """``n`` processes outside this process tree (reparented away from the test, as another
    program's would be): their pids."""
    out = subprocess.run(
        ["sh", "-c", f"for i in $(seq {n}); do (sleep 120 >/dev/null 2>&1 & echo $!); done"],
        capture_output=True,
        text=True,
        check=True,
    )
    return [int(p) for p in out.stdout.split()]


@pytest.mark.parametrize("elsewhere", [0, 300], ids=["quiet", "busy-machine"])
def test_live_source_with_churning_processes_keeps_memory_flat(
    fake_nvml: FakeNvml, elsewhere: int
) -> None:
    """``busy-machine``: 300 processes of other programs start while it is measured (the
    cause of a failure seen once in a loaded run: the /proc pass grows with them)."""
    churn = Churn(fake_nvml)
    started: list[int] = []
    churn.tick(0)  # four GPUs before NVML starts (it counts them once)
    clock = iter(range(10**9))
    monotonic: Callable[[], float] = lambda: float(next(clock))  # noqa: E731
    nvml, host = NvmlReader(), HostReader()
    source = LiveSource(nvml, host, monotonic=monotonic)  # holder scan every 5 ticks
    sampler = Sampler(source, interval=1.0, history=10)
    try:
        k = 0

        def run(n: int) -> None:
            nonlocal k
            for _ in range(n):
                churn.tick(k)
                snap = sampler.tick_now()
                k += 1
                assert len(snap.gpus) == 4 and not snap.errors, snap.errors
                # Host cache: only what this tick read (given pids, descendants, ancestors).
                assert len(host._tracked) <= len(snap.processes)
                assert len(host._gone) <= 4 * 6

        run(2 * Churn.PERIOD)
        sizes = container_sizes(nvml, host, source, sampler, *nvml._gpus)
        blocks = sys.getallocatedblocks()
        tracemalloc.start(1)
        try:
            run(2 * Churn.PERIOD)
            warm_snap = tracemalloc.take_snapshot()  # before both measures: in both
            warm = traced_now()
            scanned = len(host._last_scan or ())
            started = _start_elsewhere(elsewhere)
            run(6 * Churn.PERIOD)
            end = traced_now()
            # The last pass over all of /proc keeps an entry per process on the machine
            # (its stat line, parent and start): other programs starting processes
            # meanwhile (another test suite, a benchmark's 128 `sleep`s) grow it, by
            # design (bounded by /proc, checked above). Allowed: 1 KiB and 8 blocks each.
            others = max(0, len(host._last_scan or ()) - scanned)
            bound = 64 * KiB + others * KiB
            grew = end - warm >= bound  # then say where (the snapshot costs blocks)
            report = growth_report(warm_snap, tracemalloc.take_snapshot()) if grew else ""
            del warm_snap
        finally:
            tracemalloc.stop()
        after = container_sizes(nvml, host, source, sampler, *nvml._gpus)
        snap = sampler.latest()
        assert snap is not None
        ghosts = [p for g in snap.gpus for p in g.processes if p.pid in churn.ghosts]
        assert len(ghosts) == 12 and all(p.host and p.host.visible is False for p in ghosts)
        children = {c.pid for c in churn.children}
        shown = {p.pid for g in snap.gpus for p in g.processes if p.host and p.host.visible}
        assert children & shown  # the real short-lived children are seen
    finally:
        sampler.stop()
        churn.close()
        for pid in started:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert k == 10 * Churn.PERIOD and churn.spawned == k // 5 + 1
    # Same phase of the churn cycle: the sets in the readers have the same size...
    # (the last pass over all of /proc holds what the host runs now, and other programs on
    # the machine start and end processes meanwhile: it is bounded by /proc, not by before)
    on_host = sum(1 for name in os.listdir("/proc") if name.isdigit())
    grown = {
        name: (sizes.get(name), n)
        for name, n in after.items()
        if n > sizes.get(name, 0) and not name.endswith("HostReader._last_scan")
    }
    assert all(n <= before + 8 for before, n in ((b or 0, n) for b, n in grown.values())), grown
    assert after.get("1:HostReader._last_scan", 0) <= on_host + 8, (after, on_host)
    # ...and the memory allocated after the warm-up did not grow with 150 more ticks
    # (1,800 more never-seen pids, 30 more real processes started and ended).
    print(
        f"live: {(end - warm) / KiB:.1f} KiB, {sys.getallocatedblocks() - blocks} blocks, "
        f"{others} more processes on the machine"
    )
    assert end - warm < bound, (
        f"grew {(end - warm) / KiB:.0f} KiB over 150 ticks ({others} more processes on the "
        f"machine): {report}"
    )
    assert sys.getallocatedblocks() - blocks < 4000 + 8 * others
