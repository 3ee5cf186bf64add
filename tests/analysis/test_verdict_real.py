"""Verdicts on real processes: a small "trainer" read by the real host source.

tests/helpers/trainer.py is listed on a fake GPU (the fake libnvidia-ml.so.1 through
pynvml, gputop.sources.live.LiveSource) with low utilization; the real HostReader reads
the trainer's tree a few times 0.4 s apart; the analysis must group the workers into
one job, sum their CPU, and name the cause.

This machine's few cores are shared with other test runs, so a spinning process may get
much less than a full core, and how much varies with the load: the test measures what
the spinning processes really got (their CPU time from the kernel, over the sampling)
and sets the CPU thresholds to half of that. The plumbing is under test here, not this
machine's speed; the thresholds themselves are tested on synthetic histories in
tests/analysis/test_verdict.py.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gputop.analysis.jobs import Job, build_jobs
from gputop.analysis.kinds import INPUT_CPU, INPUT_MAIN
from gputop.analysis.thresholds import Thresholds
from gputop.model import Snapshot, Verdict
from tests.builders import gpu_verdicts, job_verdicts
from tests.conftest import FakeNvml, missing
from tests.fakenvml import FakeGpu, FakeProcess, Scenario

TRAINER = str(Path(__file__).parents[1] / "helpers" / "trainer.py")
BURNERS = 2
TICKS = 6  # the first primes the CPU counters
INTERVAL = 0.4


def thresholds(busy: float) -> Thresholds:
    """Half of what the spinning processes got (% of a core) counts as busy; a sleeping
    process stays below 3 % (a jiffy's charge now and then)."""
    busy = max(6.0, busy / 2)
    return Thresholds.from_overrides(
        {
            "min_samples": TICKS - 1,
            "min_seconds": 1.5,
            "worker_busy_cpu": busy,
            "worker_idle_cpu": 3.0,
            "main_busy_cpu": busy,
            "host_cpu_saturated": 100.0,
        }
    )


def cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        times = psutil.Process(pid).cpu_times()
        total += times.user + times.system
    return total


@contextlib.contextmanager
def trainer(mode: str, data: Path) -> Iterator[tuple[int, list[int]]]:
    # Launched from a shell, as a user would: the shell stays the parent and is never a
    # job's root (without it, the job would climb to pytest, the trainer's real parent).
    argv = [sys.executable, TRAINER, mode, str(BURNERS), str(data)]
    proc = subprocess.Popen(
        ["/bin/sh", "-c", '"$@"; exit $?', "sh", *argv],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 10)
        line = proc.stdout.readline().decode() if ready else ""
        assert line.startswith("ready"), line
        (main,) = psutil.Process(proc.pid).children()
        yield main.pid, [int(x) for x in line.split()[1:]]
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def sample(
    fake_nvml: FakeNvml, pids: list[int], spinning: list[int]
) -> tuple[list[Snapshot], float]:
    """The snapshots, each of ``pids`` on a fake GPU of its own, and the mean CPU (% of one
    core) the ``spinning`` pids got over them, as the kernel counted it."""
    from gputop.sources.live import LiveSource

    gpus = [FakeGpu(util_gpu=20, processes=[FakeProcess(p, used_memory=2 << 30)]) for p in pids]
    fake_nvml.write(Scenario(gpus=gpus))
    source = LiveSource(holders=lambda minors, listed: ())
    try:
        snaps = []
        cpu0, t0 = cpu_seconds(spinning), time.monotonic()
        for i in range(TICKS):
            if i:
                time.sleep(INTERVAL)
            snaps.append(source.snapshot())
        got = 100 * (cpu_seconds(spinning) - cpu0) / (time.monotonic() - t0) / len(spinning)
        return snaps, got
    finally:
        source.close()


def judge(snaps: list[Snapshot], busy: float) -> tuple[Job, Verdict, Verdict]:
    jobs = build_jobs(snaps[-1])
    assert len(jobs) == 1, jobs
    job = jobs[0]
    t = thresholds(busy)
    return job, job_verdicts(snaps, jobs, t)[job.id], gpu_verdicts(snaps, t)[0]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "shard.bin"
    path.write_bytes(os.urandom(8 << 20))
    return path


def test_busy_workers_starve_the_gpu(fake_nvml: FakeNvml, data: Path) -> None:
    with trainer("workers", data) as (pid, workers):
        snaps, got = sample(fake_nvml, [pid], workers[:BURNERS])
    assert snaps[-1].source == "nvml"
    job, jv, gv = judge(snaps, got * BURNERS / (BURNERS + 1))  # the reader is a worker too
    assert job.root_pid == pid
    assert job.gpus == (0,)
    assert job.main_pids == (pid,)
    assert sorted(job.worker_pids) == sorted(workers)
    assert job.workers == BURNERS + 1
    assert job.user is not None and "trainer.py" in (job.command or "")
    # the tree's CPU is the sum of its members' as the host source measured them
    rows = {p.pid: p for p in snaps[-1].processes}
    assert job.cpu_percent == pytest.approx(sum(rows[p].cpu_percent or 0 for p in job.pids))
    assert job.cpu_percent is not None and job.main_cpu_percent is not None
    assert got > 3  # the workers spin (however slowly on a loaded machine)
    assert job.main_cpu_percent < max(10, got / 2)  # the main process sleeps
    assert job.read_bytes_per_s is not None
    for v in (jv, gv):
        assert v.kind == INPUT_CPU, v
        assert f"{BURNERS + 1} workers" in v.evidence


def test_busy_main_process_with_idle_workers(fake_nvml: FakeNvml, data: Path) -> None:
    with trainer("main", data) as (pid, workers):
        snaps, got = sample(fake_nvml, [pid], [pid])
    job, jv, gv = judge(snaps, got)
    assert job.root_pid == pid
    assert sorted(job.worker_pids) == sorted(workers)
    assert job.main_cpu_percent is not None and got > 3
    for v in (jv, gv):
        assert v.kind == INPUT_MAIN, v
        assert f"main process {pid} at" in v.evidence


# --- a real torchrun job: 2 ranks (gloo, CPU), 3 DataLoader workers each -----------------

DDP_TRAINER = str(Path(__file__).parents[1] / "helpers" / "ddp_trainer.py")
RANKS = 2
RANK_WORKERS = 3  # ddp_trainer.WORKERS
# What multiprocessing starts beside each rank's workers: none under fork, the resource
# tracker under spawn, the tracker and the fork server under forkserver.
HELPERS_PER_RANK = {"fork": 0, "spawn": 1, "forkserver": 2}
STARTUP = 180.0  # seconds: every worker imports torch under spawn, on a loaded machine


def torchrun_path() -> str:
    if importlib.util.find_spec("torch") is None:
        missing("torch is not installed (.ci/run installs the CPU wheel: pip install '.[torch]')")
    path = Path(sys.executable).with_name("torchrun")
    if not path.exists():
        missing(f"torch is installed but {path} is not")
    return str(path)


def _tree(pid: int) -> list[psutil.Process]:
    try:
        parent = psutil.Process(pid)
        return [parent, *parent.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _end(procs: list[psutil.Process]) -> None:
    """SIGKILL each process and its process group (torchrun starts each rank in a session
    of its own), then wait for them."""
    for proc in procs:
        with contextlib.suppress(psutil.Error, ProcessLookupError, PermissionError):
            if proc.is_running():  # the same process, not a reused pid
                pgid = os.getpgid(proc.pid)
                if pgid != os.getpgrp():
                    os.killpg(pgid, signal.SIGKILL)
            proc.kill()
    psutil.wait_procs(procs, timeout=10)


@contextlib.contextmanager
def torchrun(context: str, tmp: Path) -> Iterator[tuple[int, dict[int, list[int]]]]:
    """The torchrun launcher's pid and each rank's pid -> its workers' pids, once every
    worker has delivered an item; every process of the job is killed afterwards."""
    ready = tmp / "ready"
    ready.mkdir()
    log = tmp / "torchrun.log"
    argv = [torchrun_path(), "--standalone", "--nproc_per_node", str(RANKS)]
    argv += [DDP_TRAINER, context, str(ready)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with log.open("wb") as out:
        # from a shell, as a user would: the shell is never a job's root (see trainer())
        shell = subprocess.Popen(
            ["/bin/sh", "-c", '"$@"; exit $?', "sh", *argv],
            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
    seen: dict[int, psutil.Process] = {}
    try:
        deadline = time.monotonic() + STARTUP
        files = [ready / f"rank{r}" for r in range(RANKS)]
        while not all(f.exists() for f in files):
            seen.update((p.pid, p) for p in _tree(shell.pid))
            if shell.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"torchrun ({context}) never got ready:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        ranks = {}
        for f in files:
            rank, *workers = map(int, f.read_text().split())
            ranks[rank] = workers
        (launcher,) = psutil.Process(shell.pid).children()
        yield launcher.pid, ranks
    finally:
        seen.update((p.pid, p) for p in _tree(shell.pid))
        _end(list(seen.values()))
        shell.wait(timeout=10)


def helpers_of(pid: int) -> list[int]:
    """The children of ``pid`` started by multiprocessing itself (psutil, not gputop)."""
    return [
        p.pid
        for p in psutil.Process(pid).children()
        if any("import main" in a and "multiprocessing." in a for a in p.cmdline())
        and "spawn_main" not in " ".join(p.cmdline())
    ]


@pytest.mark.timeout(STARTUP + 60)
@pytest.mark.parametrize("context", ["fork", "spawn", "forkserver"])
def test_torchrun_dataloader_workers_are_counted_as_a_user_counts_them(
    fake_nvml: FakeNvml, tmp_path: Path, context: str
) -> None:
    with torchrun(context, tmp_path) as (launcher, ranks):
        workers = sorted(w for ws in ranks.values() for w in ws)
        helpers = sorted(h for r in ranks for h in helpers_of(r))
        snaps, got = sample(fake_nvml, sorted(ranks), workers)
    assert len(workers) == RANKS * RANK_WORKERS
    assert len(helpers) == RANKS * HELPERS_PER_RANK[context]
    job, jv, gv = judge(snaps, got)
    assert job.root_pid == launcher  # torchrun, below the shell
    assert job.main_pids == tuple(sorted(ranks))
    assert job.gpus == (0, 1)
    assert job.worker_pids == tuple(workers)
    assert job.workers == RANKS * RANK_WORKERS
    assert set(helpers) <= set(job.pids)  # members of the job, not workers
    assert got > 3  # the workers spin (however slowly on a loaded machine)
    for v in (jv, gv):
        assert v.kind == INPUT_CPU, v
        assert f"{RANKS * RANK_WORKERS} workers" in v.evidence
