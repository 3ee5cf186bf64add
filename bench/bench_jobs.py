#!/usr/bin/env python3
"""Grouping a snapshot into jobs, per tick: plain ``build_jobs`` against
``build_jobs_reusing`` (what the diagnosis runs), on busy fleets whose values move every
tick while their process tree does not (``tests/builders.py``'s ``busy_node_snapshots``).

    python bench/bench_jobs.py [--ticks 64] [--repeat 7]

For each fleet (GPUs x processes per GPU, ranks per job), microseconds per snapshot, the
best of ``--repeat`` passes over ``--ticks`` snapshots:

- ``plain``: ``build_jobs(snapshot)`` (the pid index, the structure, the values);
- ``index``: ``process_index(snapshot)`` alone (the diagnosis has it anyway: ``_Tick``);
- ``key``: the structure key of a snapshot (``_structure_key``) and its comparison with
  the one before: what every tick pays to know whether the structure can be reused;
- ``shapes``: the structure itself (``_shapes``): what a reuse saves;
- ``reuse``: ``build_jobs_reusing`` given the structure of the snapshot before (the index
  passed in, as ``_Tick`` does): key, comparison and the values;
- ``rebuild``: ``build_jobs_reusing`` with a structure that does not fit (a tick whose
  structure changed): key, structure and values.

It is not a test; on a busy machine run it twice.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gputop.analysis import jobs as jobs_mod  # noqa: E402
from gputop.model import Snapshot  # noqa: E402
from tests.builders import busy_node_snapshots  # noqa: E402

FLEETS = ((8, 16, 1), (16, 64, 1), (16, 64, 8))


def _best(snaps: list[Snapshot], repeat: int, work: Callable[[Snapshot], object]) -> float:
    """Microseconds per snapshot, the best pass."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for snap in snaps:
            work(snap)
        best = min(best, (time.perf_counter() - t0) / len(snaps))
    return 1e6 * best


def _figures(snaps: list[Snapshot], repeat: int) -> dict[str, float]:
    index = {id(s): jobs_mod.process_index(s) for s in snaps}
    _, structure = jobs_mod.build_jobs_reusing(snaps[0], None)
    stale = jobs_mod.JobStructure((*structure.key[:3], []), structure.shapes)  # GPUs differ

    def key(snap: Snapshot) -> bool:
        return jobs_mod._structure_key(snap, index[id(snap)]) == structure.key

    def reuse(snap: Snapshot) -> object:
        jobs, new = jobs_mod.build_jobs_reusing(snap, structure, index[id(snap)])
        assert new is structure
        return jobs

    def rebuild(snap: Snapshot) -> object:
        return jobs_mod.build_jobs_reusing(snap, stale, index[id(snap)])

    return {
        "plain": _best(snaps, repeat, jobs_mod.build_jobs),
        "index": _best(snaps, repeat, jobs_mod.process_index),
        "key": _best(snaps, repeat, key),
        "shapes": _best(snaps, repeat, lambda s: jobs_mod._shapes(s, index[id(s)])),
        "reuse": _best(snaps, repeat, reuse),
        "rebuild": _best(snaps, repeat, rebuild),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ticks", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    for gpus, procs, ranks in FLEETS:
        snaps = list(
            itertools.islice(busy_node_snapshots(gpus, procs, ranks=ranks, seed=1), args.ticks)
        )
        figures = _figures(snaps, args.repeat)
        print(
            f"{gpus}x{procs} ranks {ranks} ({len(jobs_mod.build_jobs(snaps[0]))} jobs, "
            f"{len(snaps[0].processes)} processes): "
            + ", ".join(f"{name} {us:.0f} us" for name, us in figures.items())
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
