"""Process trees -> jobs: what a user launched, across all the GPUs it uses (docs/verdicts.md).
Grouping is two steps, the structure (shapes) then the values, so an unchanged tree is reused.
"""

from __future__ import annotations

import dataclasses
import operator
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from gputop.model import INVALID_PIDS, GpuSample, Owner, ProcessInfo, Snapshot, Verdict

# Never a job's root: climbing stops below them (matched on ``process_name``).
_NEVER_ROOT_WORDS = (
    # shells
    "sh bash zsh fish dash ksh mksh tcsh csh ash busybox "
    # terminal multiplexers, remote sessions
    "tmux screen sshd sshd-session mosh-server login agetty "
    # init systems, container runtimes and their inits
    "init systemd containerd containerd-shim dockerd docker-init tini dumb-init conmon "
    "runc crun catatonit s6-svscan s6-supervise runsv runsvdir supervisord "
    # privilege and session wrappers
    "su sudo doas runuser setsid nohup "
    # schedulers
    "cron crond atd slurmstepd slurmd"
)
NEVER_ROOT: frozenset[str] = frozenset(_NEVER_ROOT_WORDS.split())
_NEVER_ROOT_PREFIXES = ("containerd-shim", "systemd-")

# Always a root: each Jupyter kernel is its own job though they share a server parent.
ROOT_COMMAND_MARKERS: tuple[str, ...] = ("ipykernel_launcher", "ipykernel")

# multiprocessing's helpers (spawn, forkserver contexts): children of a GPU process, never
# workers; matched in their command line "... from multiprocessing.<module> import main",
# which the fork server's children (the workers) inherit: a helper's child is no helper.
HELPER_MODULES: tuple[str, ...] = (
    "multiprocessing.resource_tracker",
    "multiprocessing.forkserver",
    "multiprocessing.semaphore_tracker",  # the resource tracker before Python 3.8
)


@dataclass(frozen=True, slots=True)
class JobProbe:
    """What the probes in a job's processes (its ranks, gputop.probe) measured: the mean
    over the ranks that measured a figure, and the worst rank's."""

    ranks: int  # processes of the job with a probe
    data_wait_ratio: float | None  # mean share of step time waiting for the next batch
    worst_data_wait_ratio: float | None
    worst_pid: int | None  # the rank that waits most (None: no rank measured the wait)
    step_seconds: float | None  # mean step time
    worst_step_seconds: float | None  # the slowest rank's
    batches_per_second: float | None  # mean over the ranks (each rank's own batches)


def job_probe(infos: Iterable[ProcessInfo]) -> JobProbe | None:
    """The :class:`JobProbe` of a job's processes; None when none has a probe."""
    probed = [(i.pid, i.probe) for i in infos if i.probe is not None]
    if not probed:
        return None
    waits = [(p.data_wait_ratio, pid) for pid, p in probed if p.data_wait_ratio is not None]
    steps = [p.step_seconds for _, p in probed if p.step_seconds is not None]
    rates = [p.batches_per_second for _, p in probed if p.batches_per_second is not None]
    worst = max(waits, key=lambda w: (w[0], -w[1])) if waits else None
    return JobProbe(
        ranks=len(probed),
        data_wait_ratio=sum(w for w, _ in waits) / len(waits) if waits else None,
        worst_data_wait_ratio=None if worst is None else worst[0],
        worst_pid=None if worst is None else worst[1],
        step_seconds=sum(steps) / len(steps) if steps else None,
        worst_step_seconds=max(steps) if steps else None,
        batches_per_second=sum(rates) / len(rates) if rates else None,
    )


@dataclass(frozen=True, slots=True)
class Job:
    """One launch: a root process and its tree, on one or more GPUs."""

    id: str  # "root_pid:create_time" (create_time "?" when unknown): stable across ticks
    root_pid: int
    user: str | None  # None: unknown (invisible pid, or not readable)
    command: str | None  # the root's command line (already cleaned by the source)
    name: str | None  # the root's process name
    visible: bool | None  # False: the root pid is not in this PID namespace; None: unknown
    gpus: tuple[int, ...]  # sorted GPU indices
    gpu_pids: tuple[tuple[int, int], ...]  # (gpu index, pid): one entry per GPU process
    main_pids: tuple[int, ...]  # distinct GPU pids, sorted
    worker_pids: tuple[int, ...]  # sorted
    pids: tuple[int, ...]  # every member, sorted
    gpu_memory: int | None  # bytes, summed over the GPU entries
    gpu_util: float | None  # mean utilization.gpu of its GPUs (known ones)
    sm_percent: float | None  # summed per-process SM % over the GPU entries
    cpu_percent: float | None  # % of one core, summed over every member
    main_cpu_percent: float | None  # % of one core, summed over the GPU processes
    rss: int | None  # bytes, summed over every member
    read_bytes_per_s: float | None  # summed over every member
    disk_sleep: int | None  # members in D state ("disk-sleep"); None: no status known
    create_time: float | None  # the root's
    age: float | None  # seconds: snapshot time - root create_time
    owner: Owner | None = None  # the root's pod, container, Slurm job or unit: one per job
    probe: JobProbe | None = None  # None: no process of the job runs gputop's probe

    @property
    def workers(self) -> int:
        return len(self.worker_pids)

    @property
    def cores(self) -> float | None:
        """CPU used by the whole tree, in cores."""
        return None if self.cpu_percent is None else self.cpu_percent / 100.0


# --- helpers -----------------------------------------------------------------------------


def is_never_root(info: ProcessInfo) -> bool:
    """Whether its name (lower case, no path, no ': suffix') is in NEVER_ROOT."""
    name = info.name or (info.command or "").split(" ", 1)[0]
    name = name.strip().lstrip("-").split(":", 1)[0].strip().rsplit("/", 1)[-1].lower()
    return bool(name) and (name in NEVER_ROOT or name.startswith(_NEVER_ROOT_PREFIXES))


_ROOT_MARKER_RE = re.compile(
    r"(?<![\w.])(?:" + "|".join(re.escape(m) for m in ROOT_COMMAND_MARKERS) + r")(?![\w])"
)


_HELPER_RE = re.compile(
    r"\bfrom (?:" + "|".join(re.escape(m) for m in HELPER_MODULES) + r") import main\b"
)


def _helper_command(info: ProcessInfo | None) -> bool:
    return info is not None and info.command is not None and bool(_HELPER_RE.search(info.command))


def is_helper(info: ProcessInfo, index: dict[int, ProcessInfo]) -> bool:
    """A multiprocessing helper (HELPER_MODULES), not a worker."""
    parent = None if info.ppid is None else index.get(info.ppid)
    return _helper_command(info) and not _helper_command(parent)


def process_index(snapshot: Snapshot) -> dict[int, ProcessInfo]:
    """pid -> ``Snapshot.processes``' row, else the GPU process's own ``host``."""
    index: dict[int, ProcessInfo] = {}
    for info in snapshot.processes:
        index.setdefault(info.pid, info)
    for gpu in snapshot.gpus:
        for proc in gpu.processes:
            if proc.host is not None and proc.pid not in index:
                index[proc.pid] = proc.host
    return index


def _find_root(pid: int, index: dict[int, ProcessInfo]) -> int:
    cur = index[pid]
    seen = {pid}
    while not (cur.command and _ROOT_MARKER_RE.search(cur.command)):
        ppid = cur.ppid
        if ppid is None or ppid <= 1 or ppid in seen:
            break
        parent = index.get(ppid)
        if parent is None or not parent.visible or parent.user is None:
            break
        if parent.user != cur.user or parent.owner != cur.owner or is_never_root(parent):
            break
        seen.add(ppid)
        cur = parent
    return cur.pid


def _gpu_entries(snapshot: Snapshot) -> list[tuple[int, int, tuple[int, int]]]:
    """Sorted (GPU index, pid, (GPU position, process position)), no lost GPU or invalid pid."""
    entries: dict[tuple[int, int], tuple[int, int]] = {}
    for at_gpu, gpu in enumerate(snapshot.gpus):
        for at, proc in enumerate(() if gpu.lost else gpu.processes):
            if proc.pid not in INVALID_PIDS:
                entries.setdefault((gpu.index, proc.pid), (at_gpu, at))
    return [(g, pid, at) for (g, pid), at in sorted(entries.items())]


# --- the grouping: the shapes (the structure step), then the jobs (their values) ----------


class _Shape(NamedTuple):
    """A job without its values, and where its values are read in the snapshot."""

    root_pid: int
    gpus: tuple[int, ...]
    gpu_pids: tuple[tuple[int, int], ...]
    main_pids: tuple[int, ...]
    worker_pids: tuple[int, ...]
    pids: tuple[int, ...]
    entries_at: tuple[tuple[int, int], ...]  # each GPU entry's (GPU, process) position
    known: tuple[int, ...]  # the members the pid index knows: their values are summed
    known_mains: tuple[int, ...]  # the GPU pids the pid index knows


def build_jobs(snapshot: Snapshot) -> tuple[Job, ...]:
    """Group the snapshot's GPU processes into jobs, sorted by (first GPU, root pid)."""
    index = process_index(snapshot)
    return _jobs(snapshot, index, _shapes(snapshot, index))


def _shapes(snapshot: Snapshot, index: dict[int, ProcessInfo]) -> tuple[_Shape, ...]:
    """The jobs without their values; reads only what ``_structure_key`` holds."""
    entries = _gpu_entries(snapshot)
    gpu_pids = {pid for _, pid, _ in entries}

    # A pid the host knows nothing about, or that is not visible, is its own root.
    root_of: dict[int, int] = {}
    for pid in sorted(gpu_pids):
        info = index.get(pid)
        root_of[pid] = pid if info is None or not info.visible else _find_root(pid, index)
    roots = set(root_of.values())

    # Members: nearest job-root ancestor (or self).
    owner: dict[int, int | None] = {}

    def owner_of(pid: int) -> int | None:
        chain: list[int] = []
        cur: int | None = pid
        found: int | None = None
        while cur is not None:
            if cur in owner:
                found = owner[cur]
                break
            chain.append(cur)
            if cur in roots:
                found = cur
                break
            info = index.get(cur)
            nxt = None if info is None or not info.visible else info.ppid
            cur = None if nxt is None or nxt <= 0 or nxt in chain else nxt
        for c in chain:
            owner[c] = found
        return found

    members: dict[int, set[int]] = {r: set() for r in roots}
    for pid in set(index) | gpu_pids:
        root = owner_of(pid)
        if root is None:
            continue
        info, root_info = index.get(pid), index.get(root)
        if pid != root and pid not in gpu_pids and info is not None and root_info is not None:
            users = (info.user, root_info.user)
            if info.owner != root_info.owner or (users[0] != users[1] and None not in users):
                continue  # two users, or two pods, containers or Slurm jobs, never merge
        members[root].add(pid)

    # A GPU process always belongs to its own root's job.
    for pid, root in root_of.items():
        members[root].add(pid)

    # The GPU entries of each root, in entry order (one pass: linear in the entries).
    entries_of: dict[int, list[tuple[int, int, tuple[int, int]]]] = {r: [] for r in roots}
    for entry in entries:
        entries_of[root_of[entry[1]]].append(entry)

    shapes = [_shape(r, sorted(members[r]), entries_of[r], index, gpu_pids) for r in roots]
    shapes.sort(key=lambda s: (s.gpus[0] if s.gpus else -1, s.root_pid))
    return tuple(shapes)


def _has_gpu_ancestor(
    pid: int, index: dict[int, ProcessInfo], gpu_pids: set[int], stop: int
) -> bool:
    seen = {pid}
    info = index.get(pid)
    while info is not None and info.ppid is not None and info.ppid not in seen:
        if info.ppid in gpu_pids:
            return True
        if info.pid == stop:
            return False
        seen.add(info.ppid)
        info = index.get(info.ppid)
    return False


def _shape(
    root: int,
    pids: list[int],
    entries: list[tuple[int, int, tuple[int, int]]],
    index: dict[int, ProcessInfo],
    all_gpu_pids: set[int],
) -> _Shape:
    gpus = tuple(sorted({g for g, _, _ in entries}))
    mains = tuple(sorted({pid for _, pid, _ in entries}))
    main_set = set(mains)
    known: list[int] = []
    workers: list[int] = []  # in pid order: ``pids`` is sorted
    for pid in pids:
        info = index.get(pid)
        if info is None:
            continue
        known.append(pid)
        if pid in all_gpu_pids or info.status == "zombie" or is_helper(info, index):
            continue
        if _has_gpu_ancestor(pid, index, main_set, root):
            workers.append(pid)
    return _Shape(
        root_pid=root,
        gpus=gpus,
        gpu_pids=tuple([(g, pid) for g, pid, _ in entries]),
        main_pids=mains,
        worker_pids=tuple(workers),
        pids=tuple(pids),
        entries_at=tuple([at for _, _, at in entries]),
        known=tuple(known),
        known_mains=tuple([p for p in mains if p in index]),
    )


def _jobs(
    snapshot: Snapshot, index: dict[int, ProcessInfo], shapes: tuple[_Shape, ...]
) -> tuple[Job, ...]:
    """The jobs of ``shapes`` (of this snapshot's structure) with this snapshot's values."""
    gpus = snapshot.gpus
    gpu_util = {g.index: g.utilization.gpu for g in gpus if not g.lost}
    return tuple([_job(s, snapshot.time, gpus, index, gpu_util) for s in shapes])


def _job(
    shape: _Shape,
    now: float,
    gpus: tuple[GpuSample, ...],
    index: dict[int, ProcessInfo],
    gpu_util: dict[int, float | None],
) -> Job:
    root = shape.root_pid
    root_info = index.get(root)
    entries = [gpus[at_gpu].processes[at] for at_gpu, at in shape.entries_at]
    infos = list(map(index.__getitem__, shape.known))
    utils = [u for u in map(gpu_util.get, shape.gpus) if u is not None]
    statuses = [i.status for i in infos if i.status is not None]
    create_time = None if root_info is None else root_info.create_time
    memory = [p.gpu_memory for p in entries if p.gpu_memory is not None]
    sm = [p.sm_percent for p in entries if p.sm_percent is not None]
    cpu = [i.cpu_percent for i in infos if i.cpu_percent is not None]
    mains = map(index.__getitem__, shape.known_mains)
    main_cpu = [i.cpu_percent for i in mains if i.cpu_percent is not None]
    rss = [i.rss for i in infos if i.rss is not None]
    read = [i.read_bytes_per_s for i in infos if i.read_bytes_per_s is not None]
    return Job(
        id=f"{root}:{'?' if create_time is None else f'{create_time:.2f}'}",
        root_pid=root,
        user=None if root_info is None else root_info.user,
        command=None if root_info is None else root_info.command,
        name=None if root_info is None else root_info.name,
        visible=None if root_info is None else root_info.visible,
        gpus=shape.gpus,
        gpu_pids=shape.gpu_pids,
        main_pids=shape.main_pids,
        worker_pids=shape.worker_pids,
        pids=shape.pids,
        gpu_memory=sum(memory) if memory else None,
        gpu_util=sum(utils) / len(utils) if utils else None,
        sm_percent=sum(sm) if sm else None,
        cpu_percent=sum(cpu) if cpu else None,
        main_cpu_percent=sum(main_cpu) if main_cpu else None,
        rss=sum(rss) if rss else None,
        read_bytes_per_s=sum(read) if read else None,
        disk_sleep=statuses.count("disk-sleep") if statuses else None,
        create_time=create_time,
        age=None if create_time is None else max(0.0, now - create_time),
        owner=None if root_info is None else root_info.owner,
        probe=job_probe(infos),
    )


# --- the same structure, new values -------------------------------------------------------

# What of a pid index row the shapes read (status apart: only zombies matter).
_ROW_STRUCTURE = operator.attrgetter("pid", "visible", "ppid", "user", "name", "command", "owner")
_STATUS = operator.attrgetter("status")
_PID = operator.attrgetter("pid")

# (the index's pids, its rows' structure, the zombies' pids, each GPU's (index, lost, pids))
_StructureKey = tuple[list[int], list[Any], list[int], list[tuple[int, bool, tuple[int, ...]]]]


def _structure_key(snapshot: Snapshot, index: dict[int, ProcessInfo]) -> _StructureKey:
    """Everything ``_shapes`` reads (equal keys: the same shapes); runs every tick."""
    rows = index.values()
    statuses = list(map(_STATUS, rows))
    zombies = (
        [pid for pid, status in zip(index, statuses, strict=True) if status == "zombie"]
        if "zombie" in statuses
        else []
    )
    return (
        list(index),
        list(map(_ROW_STRUCTURE, rows)),
        zombies,
        [(g.index, g.lost, tuple(map(_PID, g.processes))) for g in snapshot.gpus],
    )


@dataclass(frozen=True, slots=True, eq=False)
class JobStructure:
    """What the grouping read of a snapshot (the key) and the jobs it made, without values."""

    key: _StructureKey
    shapes: tuple[_Shape, ...]


def build_jobs_reusing(
    snapshot: Snapshot,
    before: JobStructure | None,
    index: dict[int, ProcessInfo] | None = None,
) -> tuple[tuple[Job, ...], JobStructure]:
    """``build_jobs(snapshot)`` and its structure, reusing ``before``'s shapes if they fit."""
    index = process_index(snapshot) if index is None else index
    key = _structure_key(snapshot, index)
    if before is not None and before.key == key:
        structure = before
    else:
        structure = JobStructure(key, _shapes(snapshot, index))
    return _jobs(snapshot, index, structure.shapes), structure


def _rounded(value: float | None, digits: int = 2) -> float | None:
    """Sums of floats carry noise (298.59999999999997): scripts get 298.6."""
    return None if value is None else round(value, digits)


def job_to_dict(job: Job, verdict: Verdict | None = None) -> dict[str, Any]:
    """The JSON form of one job (``jobs`` list of ``--once --json``)."""
    return {
        "id": job.id,
        "user": job.user,
        "command": job.command,
        "name": job.name,
        "root_pid": job.root_pid,
        "visible": job.visible,
        "gpus": list(job.gpus),
        "gpu_pids": [{"gpu": g, "pid": p} for g, p in job.gpu_pids],
        "pids": list(job.pids),
        "worker_pids": list(job.worker_pids),
        "workers": job.workers,
        "gpu_memory": job.gpu_memory,
        "gpu_util": _rounded(job.gpu_util),
        "sm_percent": _rounded(job.sm_percent),
        "cpu_percent": _rounded(job.cpu_percent),
        "cores": _rounded(job.cores, 3),
        "main_cpu_percent": _rounded(job.main_cpu_percent),
        "rss": job.rss,
        "read_bytes_per_s": _rounded(job.read_bytes_per_s),
        "disk_sleep": job.disk_sleep,
        "create_time": job.create_time,
        "age": job.age,
        "owner": None if job.owner is None else dataclasses.asdict(job.owner),
        "probe": None if job.probe is None else dataclasses.asdict(job.probe),
        "verdict": None if verdict is None else verdict.to_dict(),
    }
