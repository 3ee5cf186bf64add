"""``build_jobs_reusing``: a snapshot's jobs built from an earlier snapshot's structure
are exactly what plain ``build_jobs`` gives, whatever changed in between.

Compared on every tick of long sequences: the verdict scenarios, busy fleets whose values
move every tick, and fleets under random structural changes that come and go (pids, parents,
users, zombies, names and command lines, visibility, lost GPUs, duplicate and invalid GPU
entries, duplicate rows, unknown create times...). Equality is checked on ``repr`` (so an
int for a float, or -0.0 for 0.0, would show), and each sequence must both reuse and
rebuild structures, so that both paths are exercised.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable, Iterator

import pytest

from gputop.analysis.jobs import Job, JobStructure, build_jobs, build_jobs_reusing, process_index
from gputop.model import GpuProcess, ProcessInfo, Snapshot, replace
from tests.builders import (
    T0,
    GiB,
    busy_node_snapshots,
    gpu_process,
    gpu_sample,
    process_info,
    snapshot,
)
from tests.verdict_scenarios import SCENARIOS


def _check(snaps: Iterable[Snapshot]) -> tuple[int, int]:
    """Feed ``snaps`` to build_jobs_reusing, each with the structure of the one before,
    and compare with plain build_jobs on every tick: (ticks reused, ticks rebuilt)."""
    structure: JobStructure | None = None
    reused = rebuilt = 0
    for tick, snap in enumerate(snaps):
        index = process_index(snap) if tick % 2 else None  # with and without the caller's
        jobs, new = build_jobs_reusing(snap, structure, index)
        assert repr(jobs) == repr(build_jobs(snap)), f"tick {tick}"
        if structure is not None:
            reused += new is structure
            rebuilt += new is not structure
        structure = new
    return reused, rebuilt


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_tick_of_the_verdict_scenarios(name: str) -> None:
    _thresholds, hists = SCENARIOS[name]()
    reused, rebuilt = _check(hist[-1] for hist in hists)
    assert reused + rebuilt > 50
    if name == "coming_and_going":  # rows and entries drop out at random every tick
        assert rebuilt > reused
    else:
        assert reused > 0


@pytest.mark.parametrize(
    ("gpus", "procs", "workers", "ranks"), [(8, 16, 2, 1), (4, 8, 3, 2), (2, 4, 0, 4)]
)
def test_busy_fleets_reuse_every_tick(gpus: int, procs: int, workers: int, ranks: int) -> None:
    """Every value moves every tick, the structure never: built once, then reused."""
    snaps = itertools.islice(
        busy_node_snapshots(gpus, procs, workers=workers, ranks=ranks, seed=3), 40
    )
    assert _check(snaps) == (39, 0)


# --- random structural changes --------------------------------------------------------------

Change = Callable[[Snapshot], Snapshot]


def _rows(snap: Snapshot, pid: int, edit: Callable[[ProcessInfo], ProcessInfo | None]) -> Snapshot:
    """``snap`` with the row(s) of ``pid`` edited (None: dropped), in ``processes`` and as
    the GPU processes' host rows."""

    def gp(p: GpuProcess) -> GpuProcess:
        if p.pid != pid or p.host is None:
            return p
        return replace(p, host=edit(p.host))

    rows = (edit(r) if r.pid == pid else r for r in snap.processes)
    return replace(
        snap,
        processes=tuple(r for r in rows if r is not None),
        gpus=tuple(replace(g, processes=tuple(map(gp, g.processes))) for g in snap.gpus),
    )


def _gpu(
    snap: Snapshot, at: int, edit: Callable[[tuple[GpuProcess, ...]], Iterable[GpuProcess]]
) -> Snapshot:
    gpus = list(snap.gpus)
    at %= len(gpus)
    gpus[at] = replace(gpus[at], processes=tuple(edit(gpus[at].processes)))
    return replace(snap, gpus=tuple(gpus))


def _random_change(first: Snapshot, rng: random.Random) -> Change:
    """One structural change (or a value change that must not break the reuse), chosen at
    random against ``first``'s pids; applied to every later snapshot alike."""
    pids = [r.pid for r in first.processes]
    gpu_pids = sorted({p.pid for g in first.gpus for p in g.processes})
    rows = process_index(first)
    parents = sorted({r.ppid for p in gpu_pids if (r := rows.get(p)) and r.ppid is not None})
    # most rows are workers: the GPU processes and their parents are chosen as often
    pid = rng.choice(rng.choice([p for p in (pids, gpu_pids, parents) if p]))
    other = rng.choice(pids)
    at = rng.randrange(len(first.gpus))
    kind = rng.randrange(26)
    if kind == 0:  # a process ends (a GPU pid's host row still knows it)
        return lambda s: replace(s, processes=tuple(r for r in s.processes if r.pid != pid))
    if kind == 1:  # ...and nothing knows it any more
        return lambda s: _rows(s, pid, lambda r: None)
    if kind == 2:  # a new parent: another process, init, itself, an unknown pid
        ppid = rng.choice((other, 1, 0, pid, 999_999, None))
        return lambda s: _rows(s, pid, lambda r: replace(r, ppid=ppid))
    if kind == 3:  # another user, or an unknown one
        user = rng.choice(("mallory", "alice", "bob", None))
        return lambda s: _rows(s, pid, lambda r: replace(r, user=user))
    if kind == 4:  # a zombie (never a worker)
        return lambda s: _rows(s, pid, lambda r: replace(r, status="zombie"))
    if kind == 5:  # a value: the status moves between the living ones (no rebuild needed)
        status = rng.choice(("running", "disk-sleep", None))
        return lambda s: _rows(s, pid, lambda r: replace(r, status=status))
    if kind == 6:  # in another PID namespace: every other field unknown
        return lambda s: _rows(s, pid, lambda r: ProcessInfo(pid=r.pid, visible=False))
    if kind == 7:  # a name: a shell, a multiplexer, sudo, a shim, none; or not those
        never_root = ("bash", "tmux: server", "-zsh", "/usr/bin/sudo", "containerd-shim-x")
        name = rng.choice((*never_root, None, "", "python", "torchrun", "accelerate"))
        return lambda s: _rows(s, pid, lambda r: replace(r, name=name))
    if kind == 8:  # a command line: a Jupyter kernel (a root marker), a shell, none
        kernel = "python -m ipykernel_launcher -f k.json"
        command = rng.choice((kernel, kernel, "ipykernel", "x.ipykernel_launcher", "bash", None))
        return lambda s: _rows(s, pid, lambda r: replace(r, command=command))
    if kind == 9:  # no name, and a command whose first word is a shell
        return lambda s: _rows(s, pid, lambda r: replace(r, name=None, command="/bin/sh -c run"))
    if kind == 10:  # the start unknown, or another (a value: the job's id and age)
        start = rng.choice((None, T0 - 5, T0 - 5.004))
        return lambda s: _rows(s, pid, lambda r: replace(r, create_time=start))
    if kind == 11:  # a GPU is lost (its process list kept, or not)
        keep = rng.random() < 0.5

        def lose(s: Snapshot) -> Snapshot:
            gpus = list(s.gpus)
            g = gpus[at % len(gpus)]
            gpus[at % len(gpus)] = replace(g, lost=True, processes=g.processes if keep else ())
            return replace(s, gpus=tuple(gpus))

        return lose
    if kind == 12:  # a duplicate (gpu, pid) entry with other values: the first counts
        return lambda s: _gpu(
            s, at, lambda ps: (*ps, *(replace(p, gpu_memory=GiB, sm_percent=1.0) for p in ps[:1]))
        )
    if kind == 13:  # the same entry listed first, with other values
        return lambda s: _gpu(
            s, at, lambda ps: (*(replace(p, gpu_memory=None) for p in ps[-1:]), *ps)
        )
    if kind == 14:  # NVML's invalid pids
        bad = rng.choice((0, 2**32 - 1))
        return lambda s: _gpu(s, at, lambda ps: (*ps, GpuProcess(pid=bad, gpu_memory=GiB)))
    if kind == 15:  # a host process starts using a GPU (a worker becomes a GPU process)
        return lambda s: _gpu(s, at, lambda ps: (*ps, GpuProcess(pid=pid, gpu_memory=GiB)))
    if kind == 16:  # a GPU process leaves its GPU
        return lambda s: _gpu(s, at, lambda ps: ps[1:])
    if kind == 17:  # a GPU pid the host knows nothing of
        return lambda s: _gpu(s, at, lambda ps: (*ps, GpuProcess(pid=888_000 + at, gpu_memory=GiB)))
    if kind == 18:  # a second row for a pid, after the first (the first counts) or before
        before = rng.random() < 0.5
        ppid = rng.choice((other, 1))

        def dup(s: Snapshot) -> Snapshot:
            rows = [r for r in s.processes if r.pid == pid][:1]
            extra = tuple(replace(r, ppid=ppid, user="mallory", cpu_percent=3.0) for r in rows)
            return replace(
                s, processes=(*extra, *s.processes) if before else (*s.processes, *extra)
            )

        return dup
    if kind == 19:  # a new child process (a worker of someone, or of nobody known)
        new_pid = 700_000 + rng.randrange(1000)
        user = rng.choice(("alice", "bob", None))
        row = process_info(
            new_pid, rng.choice((other, 999_999)), user=user, name="pt_data_worker", cpu=5.0
        )
        return lambda s: replace(s, processes=(*s.processes, row))
    if kind == 20:  # the rows in another order (same structure, another index order)
        return lambda s: replace(s, processes=s.processes[::-1])
    if kind == 21:  # two GPU samples with one index
        return lambda s: replace(
            s,
            gpus=tuple(
                replace(g, index=s.gpus[0].index) if i == at else g for i, g in enumerate(s.gpus)
            ),
        )
    if kind == 22:  # a value: a GPU's utilization unknown
        return lambda s: replace(
            s,
            gpus=tuple(
                replace(g, utilization=replace(g.utilization, gpu=None)) if i == at else g
                for i, g in enumerate(s.gpus)
            ),
        )
    if kind == 23:  # invisible, and nothing else changed
        return lambda s: _rows(s, pid, lambda r: replace(r, visible=False))
    # A GPU process without a row in ``processes`` (its host row counts): its host row
    # says another parent, or names another pid, or moves to the next process on its GPU.
    # (Where every GPU pid has a row: one row fewer.)
    rowless = sorted(set(gpu_pids) - set(pids))
    if not rowless:
        target = rng.choice(gpu_pids or pids)
        return lambda s: replace(s, processes=tuple(r for r in s.processes if r.pid != target))
    target = rng.choice(rowless)
    edit = rng.choice(("ppid", "pid", "move"))
    if edit != "move":
        return lambda s: _rows(s, target, _setting(edit, other))

    def move(ps: tuple[GpuProcess, ...]) -> list[GpuProcess]:
        hosts = [p.host if p.pid == target else None for p in ps]
        return [replace(p, host=h) for p, h in zip(ps, hosts[-1:] + hosts[:-1], strict=True)]

    return lambda s: replace(
        s, gpus=tuple(replace(g, processes=tuple(move(g.processes))) for g in s.gpus)
    )


def _changing(snaps: Iterator[Snapshot], seed: int, ticks: int) -> Iterator[Snapshot]:
    """``snaps`` under changes that come and go: each stays for a while (so the changed
    structure is reused too), several at once."""
    rng = random.Random(seed)
    active: list[Change] = []
    for _, snap in zip(range(ticks), snaps, strict=False):
        r = rng.random()
        if r < 0.2 and active:
            del active[rng.randrange(len(active))]
        for change in active:
            snap = change(snap)
        if r > 0.7 and len(active) < 8:  # chosen against what the snapshot is now
            active.append(_random_change(snap, rng))
            snap = active[-1](snap)
        yield snap


@pytest.mark.parametrize("seed", range(6))
def test_random_structural_changes(seed: int) -> None:
    shapes = [(3, 4, 2, 1), (4, 4, 1, 2), (2, 6, 3, 3)][seed % 3]
    gpus, procs, workers, ranks = shapes
    snaps = busy_node_snapshots(gpus, procs, workers=workers, ranks=ranks, seed=seed)
    reused, rebuilt = _check(_changing(snaps, seed, 1000))
    assert reused > 100 and rebuilt > 40, (reused, rebuilt)


# --- each structural field alone --------------------------------------------------------------


def _tree(**changes: object) -> Snapshot:
    """A launcher (pid 20) under a shell, two ranks on GPUs 0 and 1, two workers each."""
    rows = [
        process_info(10, 5, name="bash", command="-bash"),
        process_info(20, 10, name="torchrun", command="torchrun train.py"),
        process_info(21, 20, command="python train.py"),
        process_info(22, 20, command="python train.py"),
        process_info(31, 21, name="pt_data_worker"),
        process_info(32, 21, name="pt_data_worker"),
        process_info(41, 22, name="pt_data_worker"),
        process_info(42, 22, name="pt_data_worker"),
    ]
    gpus = [
        gpu_sample(0, 90.0, [gpu_process(21, sm=50.0)]),
        gpu_sample(1, 80.0, [gpu_process(22, sm=40.0)]),
    ]
    snap = snapshot(T0, gpus, rows)
    for field_pid, value in changes.items():  # "user_41": the user of pid 41
        field, pid = field_pid.rsplit("_", 1)
        snap = _rows(snap, int(pid), _setting(field, value))
    return snap


def _setting(field: str, value: object) -> Callable[[ProcessInfo], ProcessInfo]:
    return lambda row: replace(row, **{field: value})


@pytest.mark.parametrize(
    "change",
    [
        {"ppid_31": 10},  # a worker moves under the shell: out of the job
        {"ppid_22": 10},  # a rank leaves the launcher: two jobs
        {"user_41": "bob"},  # a worker of another user: not a member
        {"user_20": None},  # the launcher's user unknown: the ranks stop below it
        {"status_32": "zombie"},  # a zombie is a member, not a worker
        {"visible_20": False},  # the launcher invisible
        {"name_20": "sudo"},  # a launcher named as a wrapper: never a root
        {"name_20": None, "command_20": "bash -c train"},  # no name: the command's first word
        {"command_22": "python -m ipykernel_launcher -f k.json"},  # a kernel is its own root
        {"pid_42": 43},  # another pid
    ],
)
def test_a_change_of_one_structural_field_builds_the_structure_again(
    change: dict[str, object],
) -> None:
    """Between two snapshots of one tree only this field changes (and every value moves):
    the structure is not reused, and the jobs are plain build_jobs's."""
    before = _tree()
    after = replace(_tree(**change), time=T0 + 1)
    after = replace(after, processes=tuple(replace(r, cpu_percent=7.0) for r in after.processes))
    _, structure = build_jobs_reusing(before, None)
    jobs, new = build_jobs_reusing(after, structure)
    assert new is not structure
    assert repr(jobs) == repr(build_jobs(after))
    # the change matters: the structure reused would have given other jobs
    assert [_structure_of(j) for j in jobs] != [_structure_of(j) for j in build_jobs(before)]


def _structure_of(job: Job) -> tuple[object, ...]:
    return (
        job.root_pid,
        job.user,
        job.name,
        job.command,
        job.visible,
        job.gpu_pids,
        job.pids,
        job.worker_pids,
    )


def test_values_alone_reuse_the_structure() -> None:
    """Every value moves (CPU, RSS, reads, GPU memory, SM, utilization, states between
    running and disk-sleep, the time, a create time): the structure is reused."""
    before = _tree()
    after = replace(
        before,
        time=T0 + 5,
        processes=tuple(
            replace(r, cpu_percent=r.pid / 3, rss=r.pid, read_bytes_per_s=None, status="disk-sleep")
            for r in before.processes
        ),
        gpus=tuple(
            replace(
                g,
                utilization=replace(g.utilization, gpu=None),
                processes=tuple(replace(p, gpu_memory=None, sm_percent=9.5) for p in g.processes),
            )
            for g in before.gpus
        ),
    )
    after = _rows(after, 20, lambda r: replace(r, create_time=None))
    _, structure = build_jobs_reusing(before, None)
    jobs, new = build_jobs_reusing(after, structure)
    assert new is structure
    assert repr(jobs) == repr(build_jobs(after))
    (job,) = jobs
    assert job.id == "20:?" and job.age is None and job.disk_sleep == 7


def test_a_host_row_that_moves_or_names_another_pid_builds_the_structure_again() -> None:
    """GPU processes without a row in ``Snapshot.processes`` are known by their own host
    row. The host row moves to the other GPU process (the rows are the same, the pids they
    are indexed under are not), or names another pid than its GPU process's."""
    row = process_info(50, 1, command="python train.py")

    def snap(host_at: int, host_pid: int) -> Snapshot:
        procs = [
            GpuProcess(pid=21 + i, gpu_memory=GiB, host=replace(row, pid=host_pid))
            if i == host_at
            else GpuProcess(pid=21 + i, gpu_memory=GiB)
            for i in range(2)
        ]
        return snapshot(T0, [gpu_sample(0, 50.0, procs)], [])

    for before, after in [(snap(0, 21), snap(1, 21)), (snap(0, 21), snap(0, 50))]:
        _, structure = build_jobs_reusing(before, None)
        jobs, new = build_jobs_reusing(after, structure)
        assert new is not structure
        assert repr(jobs) == repr(build_jobs(after))
        assert [_structure_of(j) for j in jobs] != [_structure_of(j) for j in build_jobs(before)]
