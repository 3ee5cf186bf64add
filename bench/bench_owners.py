#!/usr/bin/env python3
"""What reading owners (cgroups, the kubelet's pod logs) costs the sampler tick, at 16 GPUs
x 64 processes, every process in a pod (the worst case: every row carries an owner).

    sudo python bench/bench_owners.py [--ticks 30] [--rounds 3]

Forks 1,024 sleeping processes (bench_scale's ``16x64+host`` scenario on the fake NVML),
moves each GPU's 64 into its own kubepods cgroup (systemd driver, containerd) of this
machine's cgroup v2 hierarchy, at the kubelet's position (kubepods.slice at the root:
gputop reads owners only there), with a pod log tree in a temporary directory; the
cgroups are removed at the end. Needs root, and a machine without a kubepods tree.

Reported, alternating the two modes ``--rounds`` times: the sampler tick's process CPU
(mean over ``--ticks`` ticks after two warm-up ticks) with owners and with the owner
reader replaced by a pass-through (today's tick without owners), and the first tick's CPU
(every cgroup read once).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.bench_scale import Case, host_processes, scenario_for  # noqa: E402
from gputop.model import ProcessInfo  # noqa: E402
from tests import fakenvml  # noqa: E402

GPUS, PROCS = 16, 64


class Timed:
    """The owner reader, its CPU time counted."""

    def __init__(self, reader: object) -> None:
        self.reader = reader
        self.seconds = 0.0

    def attach(self, rows: Iterable[ProcessInfo]) -> tuple[ProcessInfo, ...]:
        c0 = time.process_time()
        out: tuple[ProcessInfo, ...] = self.reader.attach(rows)  # type: ignore[attr-defined]
        self.seconds += time.process_time() - c0
        return out


class PassThrough:
    """The owner reader's place without reading anything."""

    def attach(self, rows: Iterable[ProcessInfo]) -> tuple[ProcessInfo, ...]:
        return tuple(rows)


def _v2_mount_and_home() -> tuple[Path, Path]:
    """The cgroup v2 hierarchy's root (as this process sees it) and this process's cgroup."""
    mount = next(
        Path(line.split(" - ")[0].split()[4])
        for line in Path("/proc/self/mountinfo").read_text().splitlines()
        if line.partition(" - ")[2].startswith("cgroup2 ")
    )
    own = next(
        line.split(":", 2)[2]
        for line in Path("/proc/self/cgroup").read_text().splitlines()
        if line.startswith("0::")
    )
    return mount, mount / own.lstrip("/")


class RealPods(RuntimeError):
    """The hierarchy already has a kubepods tree: a Kubernetes node, not a bench machine."""


@contextlib.contextmanager
def pods(pids: list[int], logs: Path) -> Iterator[None]:
    """Each GPU's processes in a pod's cgroup, and that pod's log directory. The pods are
    where the kubelet puts them, at the root of the hierarchy: gputop reads an owner
    only at its manager's anchored position (issue 29), so a kubepods tree below this
    process's own cgroup would name nobody. The bench makes the tree and removes it; it
    refuses to run where one exists already (a real node's pods)."""
    root, home = _v2_mount_and_home()
    top = root / "kubepods.slice"
    if top.exists():
        raise RealPods(f"{top} exists (a Kubernetes node?): run the bench elsewhere")
    made: list[Path] = []
    try:
        for g in range(GPUS):
            uid = str(uuid.UUID(int=g + 1))
            slice_ = f"kubepods-besteffort-pod{uid.replace('-', '_')}.slice"
            cg = top / "kubepods-besteffort.slice" / slice_
            cg = cg / f"cri-containerd-{g:064x}.scope"
            cg.mkdir(parents=True)
            made.append(cg)
            for pid in pids[1 + g * PROCS : 1 + (g + 1) * PROCS]:
                (cg / "cgroup.procs").write_text(str(pid))
            (logs / f"bench_pod-{g}_{uid}" / "trainer").mkdir(parents=True)
        yield
    finally:
        for cg in made:
            for pid in (cg / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    (home / "cgroup.procs").write_text(pid)
        for d in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            d.rmdir()
        if top.exists():
            top.rmdir()


def tick_cpu(owners: bool, ticks: int) -> tuple[float, float, float]:
    """(first tick's CPU ms, mean CPU ms of ``ticks`` ticks after two warm-up ticks, the
    owner reader's own share of those in ms)."""
    from gputop.sampler import Sampler
    from gputop.sources.live import LiveSource
    from gputop.sources.owners import OwnerReader

    clock = iter(range(10**9))
    source = LiveSource(monotonic=lambda: float(next(clock)))
    timed = Timed(OwnerReader() if owners else PassThrough())
    source._owners = timed  # type: ignore[assignment]
    sampler = Sampler(source, interval=1.0, history=3600)
    try:
        c0 = time.process_time()
        snap = sampler.tick_now()
        first = time.process_time() - c0
        owned = sum(1 for g in snap.gpus for p in g.processes if p.host and p.host.owner)
        if owned != (GPUS * PROCS if owners else 0):
            raise RuntimeError(f"{owned} GPU processes with an owner")
        sampler.tick_now()
        cpu = []
        timed.seconds = 0.0
        for _ in range(ticks):
            c0 = time.process_time()
            sampler.tick_now()
            cpu.append(time.process_time() - c0)
    finally:
        sampler.stop()
    return 1000 * first, 1000 * statistics.mean(cpu), 1000 * timed.seconds / ticks


def changed_rows_cost(pids: list[int], ticks: int) -> tuple[int, float]:
    """(rows, the owner reader's CPU ms per tick when every row is new: busy processes'
    CPU and I/O move every tick, so the host reader makes new rows)."""
    from gputop.model import replace
    from gputop.sources.host import HostReader
    from gputop.sources.owners import OwnerReader

    rows = HostReader().read_processes(pids, ancestors=True)
    reader = OwnerReader()
    reader.attach(rows)  # the first read of every cgroup is the first tick's
    spent = 0.0
    for t in range(ticks):
        fresh = [replace(r, cpu_percent=float(t)) for r in rows]
        c0 = time.process_time()
        out = reader.attach(fresh)
        spent += time.process_time() - c0
    if sum(1 for r in out if r.owner) < GPUS * PROCS:
        raise RuntimeError("rows without an owner")
    return len(rows), 1000 * spent / ticks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ticks", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_owners: needs root (it moves processes between cgroups)", file=sys.stderr)
        return 2
    existing = _v2_mount_and_home()[0] / "kubepods.slice"
    if existing.exists():
        print(f"bench_owners: {existing} exists (a Kubernetes node?): not here", file=sys.stderr)
        return 2
    case = Case(GPUS, PROCS, host=True)
    with tempfile.TemporaryDirectory(prefix="gputop-bench-owners-") as tmp:
        logs = Path(tmp) / "pods"
        logs.mkdir()
        os.environ["GPUTOP_POD_LOGS"] = str(logs)
        with host_processes(1 + GPUS * PROCS) as pids, pods(pids, logs):
            scenario = scenario_for(case, pids).write(Path(tmp) / "s.txt")
            os.environ[fakenvml.SCENARIO_ENV] = str(scenario)
            fakenvml.load_in_process()
            results: dict[bool, list[tuple[float, float, float]]] = {True: [], False: []}
            for _ in range(args.rounds):
                for owners in (False, True):
                    results[owners].append(tick_cpu(owners, args.ticks))
            n_rows, changed = changed_rows_cost(pids[1:], args.ticks)
    print(f"sampler tick CPU at {GPUS} GPUs x {PROCS} processes, every one in a pod")
    print("mode           first tick ms   tick ms (each round)        median   reader ms")
    for owners, label in ((False, "without owners"), (True, "with owners")):
        firsts = [f for f, _, _ in results[owners]]
        means = [m for _, m, _ in results[owners]]
        reader = statistics.median(r for _, _, r in results[owners])
        rounds = " ".join(f"{m:6.1f}" for m in means)
        print(
            f"{label:14} {statistics.median(firsts):9.1f}       {rounds:26} "
            f"{statistics.median(means):6.1f}   {reader:6.2f}"
        )
    base = statistics.median(m for _, m, _ in results[False])
    extra = statistics.median(m for _, m, _ in results[True]) - base
    share = statistics.median(r for _, _, r in results[True])
    print(f"tick difference: {extra:+.1f} ms ({100 * extra / base:+.1f} %; noise included)")
    print(f"owner reader per steady tick: {share:.2f} ms ({100 * share / base:.1f} % of the tick)")
    print(
        f"owner reader when all {n_rows} rows changed: {changed:.2f} ms "
        f"({100 * changed / base:.1f} % of the tick)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
