"""The analysis stays fast on a big node: a tick of the cached analyzer is not quadratic.

``fleet`` builds synthetic snapshots of a busy node (``gputop.model`` directly): N GPUs
with P processes each, every GPU process with a couple of DataLoader workers, launched
from per-user shells (never a job's root). ``bench/bench_analysis.py`` uses it too.

The tests count work (calls, lookups, items read), never wall-clock time: a regression
to quadratic or to rebuilding every window snapshot each tick fails them on any machine,
however loaded. The times are measured by ``bench/bench_analysis.py``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from gputop.analysis import jobs as jobs_mod
from gputop.analysis import verdict as vd
from gputop.analysis import window as analysis_window
from gputop.analysis.input_rules import Track
from gputop.analysis.jobs import build_jobs
from gputop.analysis.thresholds import DEFAULT
from gputop.analysis.verdict import Analyzer
from gputop.model import (
    Clocks,
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
from tests.helpers.counting import count_calls

GiB = 2**30
MiB = 2**20
START = 1_700_000_000.0
USERS = ("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi")
VARIANTS = 4  # value levels per process, shared between snapshots (keeps memory small)


def fleet(
    n_gpus: int = 16,
    n_procs: int = 64,
    workers: int = 2,
    ranks: int = 1,
    seed: int = 0,
    start: float = START,
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
        for i, u in enumerate(USERS)
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
            for v in range(VARIANTS)
        ]

    host_rows: list[list[ProcessInfo]] = [[sshd], *([s] for s in shells.values())]
    # per GPU: list of (pid, variants of its GPU process row)
    on_gpu: list[list[tuple[int, list[GpuProcess]]]] = [[] for _ in range(n_gpus)]
    pid = 10_000
    for j in range(n_jobs):
        user = USERS[j % len(USERS)]
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
                        for v in range(VARIANTS)
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
            procs = tuple(rows[(tick + p) % VARIANTS] for p, rows in on_gpu[g])
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


def take(n: int, **kwargs: object) -> list[Snapshot]:
    it = fleet(**kwargs)  # type: ignore[arg-type]
    return [next(it) for _ in range(n)]


def test_a_tick_at_16x64_does_the_new_snapshots_work_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """16 GPUs x 64 processes, 2 workers each: 1,024 jobs, ~3,100 processes, a full 20 s
    window plus some. Work counted, not timed (``bench/bench_analysis.py`` times it): a
    steady tick groups the new snapshot's processes into jobs once and pushes each of its
    jobs onto its track once; the plain path (every window snapshot rebuilt each tick,
    ~1 s a tick here) did that for all 21 window snapshots. The verdicts are exactly the
    plain path's."""
    snaps = fleet(16, 64)
    hist = [next(snaps) for _ in range(int(DEFAULT.window_seconds) + 10)]
    analyzer = Analyzer(DEFAULT)
    dict(analyzer.update(hist).job_verdicts)  # the first call builds the whole window
    builds = count_calls(monkeypatch, analysis_window, "build_jobs_reusing")  # the window cache's
    pushes = count_calls(monkeypatch, Track, "push")
    for tick in range(1, 4):
        hist = [*hist[1:], next(snaps)]
        result = analyzer.update(hist)
        job_verdicts = dict(result.job_verdicts)
        assert builds[0] == tick  # the new snapshot's jobs, built once
        assert len(result.jobs) == 16 * 64
        assert pushes[0] == tick * len(result.jobs)  # one track step per job
    monkeypatch.undo()
    plain_gpus, plain_jobs = vd.all_verdicts(hist, build_jobs(hist[-1]), DEFAULT)
    assert result.gpu_verdicts == plain_gpus
    assert job_verdicts == plain_jobs
    assert len(plain_gpus) == 16 and len(plain_jobs) == 16 * 64
    # the fleet's patterns are all judged: not 1,040 copies of one verdict
    assert len({v.kind for v in plain_gpus.values()}) >= 3, plain_gpus
    assert len({v.kind for v in plain_jobs.values()}) >= 2


class _CountingDict(dict[int, ProcessInfo]):
    """The pid index, counting its lookups."""

    lookups = 0

    def get(self, key: int, default: Any = None) -> Any:
        _CountingDict.lookups += 1
        return super().get(key, default)

    def __getitem__(self, key: int) -> ProcessInfo:
        _CountingDict.lookups += 1
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        _CountingDict.lookups += 1
        return super().__contains__(key)


class _CountingList(list[tuple[int, int, tuple[int, int]]]):
    """The GPU entries, counting the items read from them."""

    reads = 0

    def __iter__(self) -> Iterator[tuple[int, int, tuple[int, int]]]:
        for item in super().__iter__():
            _CountingList.reads += 1
            yield item


def test_build_jobs_is_linear_in_the_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Work counted, not timed: pid lookups and GPU entries read by one ``build_jobs``.
    Single-rank jobs: the GPU entries are grouped by root in one pass, not scanned once
    per root (that grouping was quadratic: 16x the processes cost ~45x the time)."""
    real_index, real_entries = jobs_mod.process_index, jobs_mod._gpu_entries
    monkeypatch.setattr(jobs_mod, "process_index", lambda s: _CountingDict(real_index(s)))
    monkeypatch.setattr(jobs_mod, "_gpu_entries", lambda s: _CountingList(real_entries(s)))

    def work(n_gpus: int) -> tuple[int, int, int]:
        snap = next(fleet(n_gpus, 64))
        _CountingDict.lookups = _CountingList.reads = 0
        jobs = build_jobs(snap)
        assert len(jobs) == n_gpus * 64
        assert all(len(j.pids) == 3 for j in jobs)  # the main process and its 2 workers
        return _CountingDict.lookups, _CountingList.reads, len(snap.processes)

    small_lookups, small_reads, small_procs = work(1)
    big_lookups, big_reads, big_procs = work(16)
    print(
        f"\nbuild_jobs: lookups {small_lookups} -> {big_lookups}, "
        f"entries read {small_reads} -> {big_reads}"
    )
    # A bounded number of lookups per process and reads per GPU entry, at any size.
    assert big_lookups <= 12 * big_procs and small_lookups <= 12 * small_procs
    assert small_reads <= 3 * 64 and big_reads <= 3 * 16 * 64, (small_reads, big_reads)


def test_the_analyzer_keeps_only_the_window() -> None:
    t = DEFAULT
    snaps = fleet(2, 4)
    hist = [next(snaps) for _ in range(5)]
    analyzer = Analyzer(t)
    for _ in range(80):
        hist = [*hist[-59:], next(snaps)]  # a 60 s lookback
        analyzer.update(hist)
    n_window = len(vd.window(hist, t))
    assert len(analyzer._ticks) == n_window  # per-snapshot work: the window's only
    assert analyzer._window[1][-1].snap is hist[-1]
    assert len(analyzer.memory.tracks) == 2 * 4  # one per job in the window
    # idle-holder runs: one per GPU and per job judged in the last two calls
    assert len(analyzer._runs.memo) <= 2 + 2 * 4
    # a history unrelated to the last one: nothing carried over wrongly
    other = [next(fleet(2, 4, seed=9, start=START + 1e6))]
    assert analyzer.update(other).gpu_verdicts == vd.gpu_verdicts(other, t)
