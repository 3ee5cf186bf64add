"""The live source: NVML + host (psutil, /proc) + the /dev/nvidia holder scan, one
snapshot per call. Never raises: a reader's exception becomes a ``SampleError``.
``kind`` is "nvml", or "host-only" when NVML could not start (``driver.error`` says why).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING

from gputop.fmt import clean_text
from gputop.model import (
    INVALID_PIDS,
    PROCESSES_PENDING,
    DriverInfo,
    GpuProcess,
    GpuSample,
    HostSample,
    ProcessInfo,
    SampleError,
    Snapshot,
    UnlistedHolder,
    processes_pending,
    replace,
    reuse_equal,
    same_objects,
    with_host,
)
from gputop.sources.holders import RECOMMENDED_INTERVAL_S, scan_holders

if TYPE_CHECKING:  # imported when used: a test injects its own readers
    from gputop.sources.host import HostReader
    from gputop.sources.nvml import NvmlReader
    from gputop.sources.owners import OwnerReader
    from gputop.sources.probes import ProbeReader

_HOST_PARTS = ("cpu_per_core", "load_average", "memory", "swap", "disk", "net")

#: The holder scan waits ``holder_interval`` seconds between two runs, or this many times
#: the CPU time the last scan took when longer: its share of one core stays fixed.
HOLDER_SCAN_COST_FACTOR = 400.0


HOLDERS_OF_OTHERS = SampleError(
    "holders",
    "holders of other users not visible (run as root to see them)",
    metric="unlisted_holders",
)

HolderScan = Callable[[Mapping[int, int], Collection[int]], tuple[UnlistedHolder, ...]]


def _describe(exc: BaseException) -> str:
    text = clean_text(str(exc), 300) or ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


#: (NVML's row, the host's row, the joined row)
_Joined = tuple[GpuProcess, ProcessInfo | None, GpuProcess]
_JoinedGpu = tuple[GpuSample, GpuSample, dict[int, _Joined]]


class LiveSource:
    """Implements :class:`gputop.sources.base.Source`. Readers can be injected (tests)."""

    #: Its pids are this machine's live processes: the only source that may signal.
    can_signal = True

    def __init__(
        self,
        nvml: NvmlReader | None = None,
        host: HostReader | None = None,
        holders: HolderScan | None = None,
        *,
        probes: ProbeReader | None = None,
        holder_interval: float = RECOMMENDED_INTERVAL_S,
        hostname: str | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        cpu_clock: Callable[[], float] = time.thread_time,
    ) -> None:
        if nvml is None:
            from gputop.sources.nvml import NvmlReader

            nvml = NvmlReader()
        if host is None:
            from gputop.sources.host import HostReader

            host = HostReader()
        self._nvml = nvml
        self._host = host
        self._holders: HolderScan = holders or (lambda m, pids: scan_holders(m, pids).holders)
        self._holder_interval = holder_interval
        self.holder_wait = holder_interval
        self._last_scan: float | None = None
        self._cpu_clock = cpu_clock
        self._clock = clock
        self._monotonic = monotonic
        self._hostname = clean_text(hostname or os.uname().nodename, 255) or "?"
        self._last_holders: tuple[UnlistedHolder, ...] = ()
        self._holder_error: SampleError | None = None
        #: When not, the snapshot says so: an empty holder list must not read as "nobody".
        self.sees_all_holders = os.geteuid() == 0
        # GPU index -> (NVML's sample, joined, its rows by pid): last tick's, and this tick's
        self._gpus_out: dict[int, _JoinedGpu] = {}
        self._gpus_out_next: dict[int, _JoinedGpu] = {}
        self._last_processes: tuple[ProcessInfo, ...] = ()
        self._last_host: HostSample | None = None
        self._owners: OwnerReader | None = None  # made with the first GPU process
        self._probes = probes
        self.kind = "nvml" if self.driver.available else "host-only"

    @property
    def driver(self) -> DriverInfo:
        return self._nvml.driver  # set once, when the reader starts NVML

    @property
    def min_pair_window_s(self) -> float:
        """The NVML reader's (``pair_window``): GPM needs its two samples apart."""
        need = getattr(self._nvml, "min_pair_window_s", 0.0)
        return float(need) if isinstance(need, int | float) else 0.0

    def snapshot(self, *, processes: bool = True) -> Snapshot:
        """``processes`` False: the GPUs (NVML's process lists included) and the host only,
        the errors saying the rest is being read (``PROCESSES_PENDING``): the dashboard's
        first frame needs no more; :meth:`complete` then reads the rest into it."""
        wall0 = time.perf_counter()
        cpu0 = time.thread_time()
        errors: list[SampleError] = []
        driver = self.driver

        gpus: tuple[GpuSample, ...] = ()
        if driver.available:
            try:
                gpus, gpu_errors = self._nvml.read()
                errors.extend(gpu_errors)
            except Exception as exc:
                errors.append(SampleError("nvml", f"reading the GPUs failed: {_describe(exc)}"))

        host: HostSample | None = None
        try:
            host = self._host.read_host()
        except Exception as exc:
            errors.append(SampleError("host", f"reading the host failed: {_describe(exc)}"))
        errors.extend(self._host_errors())
        if host is not None:
            host = reuse_equal(host, self._last_host, _HOST_PARTS)
            self._last_host = host

        readings = Snapshot(
            time=self._clock(),
            hostname=self._hostname,
            driver=driver,
            host=host,
            gpus=gpus,
            errors=(*errors, PROCESSES_PENDING),
            source=self.kind,
            tick_seconds=time.perf_counter() - wall0,
            tick_cpu_seconds=time.thread_time() - cpu0,
        )
        return self.complete(readings) if processes else readings

    def complete(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` (one of ``snapshot(processes=False)``) with its GPU processes' rows,
        their trees, owners and probes, and the /dev/nvidia holders read now: the same
        time and readings, the rest of the same tick. Any other snapshot as it is."""
        if not processes_pending(snapshot):
            return snapshot
        wall0 = time.perf_counter()
        cpu0 = time.thread_time()
        errors = [e for e in snapshot.errors if e != PROCESSES_PENDING]
        gpus = snapshot.gpus

        gpu_pids = sorted({p.pid for g in gpus for p in g.processes if p.pid not in INVALID_PIDS})
        infos: tuple[ProcessInfo, ...] = ()
        if gpu_pids:
            owners, probes = self._process_readers()
            try:
                # Ancestors too: a torchrun/mpirun launcher is the root of its ranks' job.
                infos = self._host.read_processes(gpu_pids, ancestors=True)
                infos = owners.attach(infos)  # who owns each: container, pod, job
            except Exception as exc:
                message = f"reading the GPU processes failed: {_describe(exc)}"
                errors.append(SampleError("host", message, metric="processes"))
            errors.extend(self._host_errors("processes"))
            infos = probes.attach(infos)  # what a training process measured (opt-in)
            errors.extend(probes.errors)
        by_pid = {info.pid: info for info in infos}
        if by_pid:
            gpus = tuple(self._joined_gpu(g, by_pid) if g.processes else g for g in gpus)
        self._gpus_out, self._gpus_out_next = self._gpus_out_next, {}
        listed = set(gpu_pids) | set(by_pid)
        holders = self._scan_holders(gpus, listed)
        if self._holder_error is not None:
            errors.append(self._holder_error)
        elif gpus and not self.sees_all_holders:
            errors.append(HOLDERS_OF_OTHERS)

        processes = tuple(sorted(infos, key=lambda i: i.pid))
        if same_objects(processes, self._last_processes):
            processes = self._last_processes  # the same rows: the same tuple (shared)
        self._last_processes = processes

        return replace(
            snapshot,
            gpus=gpus,
            processes=processes,
            unlisted_holders=holders,
            errors=tuple(errors),
            tick_seconds=(snapshot.tick_seconds or 0.0) + time.perf_counter() - wall0,
            tick_cpu_seconds=(snapshot.tick_cpu_seconds or 0.0) + time.thread_time() - cpu0,
        )

    def _process_readers(self) -> tuple[OwnerReader, ProbeReader]:
        """Made with the first GPU process (their modules too: none before a first frame)."""
        if self._owners is None:
            from gputop.sources.owners import OwnerReader

            self._owners = OwnerReader()
        if self._probes is None:
            from gputop.sources.probes import ProbeReader

            self._probes = ProbeReader()
        return self._owners, self._probes

    def _joined_gpu(self, g: GpuSample, by_pid: Mapping[int, ProcessInfo]) -> GpuSample:
        """A row, or the sample, equal to last tick's is that same object (the history
        shares it)."""
        before = self._gpus_out.get(g.index)
        last_rows = {} if before is None else before[2]
        rows: dict[int, _Joined] = {}
        joined_rows = []
        for p in g.processes:
            info = by_pid.get(p.pid)
            joined = last_rows.get(p.pid)
            if joined is None or joined[0] is not p or joined[1] is not info:  # else: the same
                row = reuse_equal(with_host(p, info), None if joined is None else joined[2])
                joined = (p, info, row)
            rows[p.pid] = joined
            joined_rows.append(joined[2])
        processes = tuple(joined_rows)
        if before is not None and before[0] is g and same_objects(processes, before[1].processes):
            out = before[1]
        else:
            out = reuse_equal(
                replace(g, processes=processes),
                None if before is None else before[1],
                ("processes",),
            )
        self._gpus_out_next[g.index] = (g, out, rows)
        return out

    def _scan_holders(
        self, gpus: tuple[GpuSample, ...], listed: set[int]
    ) -> tuple[UnlistedHolder, ...]:
        now = self._monotonic()
        if self._last_scan is None or now - self._last_scan >= self.holder_wait:
            self._last_scan = now
            minor_to_gpu = {g.minor_number: g.index for g in gpus if g.minor_number is not None}
            cpu0 = self._cpu_clock()
            try:
                self._last_holders = tuple(self._holders(minor_to_gpu, listed))
                self._holder_error = None
            except Exception as exc:
                self._last_holders = ()
                self._holder_error = SampleError(
                    "holders", f"scanning /proc for /dev/nvidia holders failed: {_describe(exc)}"
                )
            cost = self._cpu_clock() - cpu0
            self.holder_wait = max(self._holder_interval, HOLDER_SCAN_COST_FACTOR * cost)
        return tuple(h for h in self._last_holders if h.pid not in listed)

    def _host_errors(self, metric: str | None = None) -> list[SampleError]:
        return [
            SampleError("host", clean_text(str(m), 300) or "?", metric=metric)
            for m in getattr(self._host, "last_errors", None) or ()
        ]

    def close(self) -> None:
        for reader in (self._nvml, self._host):
            with contextlib.suppress(Exception):
                reader.close()
