"""Histories, tick after tick, on which the verdicts must stay exactly what they were.

``tests/verdict_golden.json`` holds a digest of every tick's diagnosis (GPU verdicts, job
verdicts, jobs) of each scenario here, made by the analysis as it was before the
diagnosis was made incremental (``python -m tests.verdict_scenarios --write`` run on
main at 06e4ae5 with this file). ``tests/analysis/test_verdict_exact.py`` recomputes them with the
code of today: the analyzer's path (what every consumer uses, carried from call to call)
and the plain functions (nothing carried), both against the digests.

The scenarios cover what the carried state has fast paths for and what must break them:
the demo (GPU-bound, input-bound, idle holders), MIG (no utilization), a busy node with
varied patterns (power cap, PCIe near the link's max, host CPU and iowait high, disk reads
near the peak), processes and GPUs coming and going (CPU readings missing, lost GPUs,
hard throttling, degraded links), the exporter's steady state (the same objects tick after
tick: jobs taken over, job tracks that do not change) with changes at known ticks, and
irregular histories (gaps, older histories, reversed order, cut lookbacks).

Added later, each written alone (``--add NAME``, which leaves every other digest as it
is): the H200 demo node and a busy node with GPM and NVLink (issue 30), the verdicts that
see inside utilization; the probe's demo node and a busy node whose ranks run the probe
(issue 31), the verdicts from measurement.

Only public model and source APIs are used, so that the digests can be made by older code.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from gputop.analysis.thresholds import DEFAULT, Thresholds
from gputop.model import Activity, CudaMemory, Nvlink, Pcie, Probe, Snapshot, replace
from gputop.pipeline import Feed
from gputop.sources.demo import DemoSource

GOLDEN = Path(__file__).with_name("verdict_golden.json")
START = 1_700_000_000.0

# A scenario: (thresholds, the history the diagnoser is given at each tick).
Scenario = tuple[Thresholds, Iterator[Sequence[Snapshot]]]


def _grow(snaps: Iterator[Snapshot], n: int, keep: int = 602) -> Iterator[list[Snapshot]]:
    """The sampler's history: one more snapshot each tick, the oldest ``keep`` dropped."""
    hist: list[Snapshot] = []
    for _ in range(n):
        hist.append(next(snaps))
        if len(hist) > keep:
            del hist[0]
        yield list(hist)


def _demo(seed: int, mig: bool = False, node: str | None = None) -> Iterator[Snapshot]:
    source = DemoSource(seed=seed, start_time=START, step=1.0, mig=mig, node=node)
    while True:
        yield source.snapshot()


def demo() -> Scenario:
    return DEFAULT, _grow(_demo(0), 360)


def demo_mig() -> Scenario:
    return DEFAULT, _grow(_demo(2, mig=True), 90)


def busy_node() -> Scenario:
    from tests.builders import busy_node_snapshots

    return DEFAULT, _grow(busy_node_snapshots(8, 16, seed=1), 60)


def coming_and_going() -> Scenario:
    """Processes vanish and come back, CPU readings go missing, GPUs are lost, throttle
    (hardware), run on a degraded link or near the link's maximum, lose utilization (now
    and then, for a while, in MIG mode)."""
    from tests.builders import busy_node_snapshots

    rng = random.Random(7)
    t = Thresholds.from_overrides({"window_seconds": 8})

    def snaps() -> Iterator[Snapshot]:
        for tick, snap in enumerate(busy_node_snapshots(4, 8, ranks=2, seed=4)):
            procs = []
            for p in snap.processes:
                r = rng.random()
                if r < 0.1:
                    continue
                procs.append(replace(p, cpu_percent=None) if r < 0.2 else p)
            gpus = []
            for g in snap.gpus:
                r = rng.random()
                if r < 0.03:
                    g = replace(g, lost=True, lost_reason="fell off the bus")
                else:
                    g = replace(g, processes=tuple(p for p in g.processes if rng.random() > 0.1))
                    if g.index == 1 and r < 0.6:
                        g = replace(g, clock_event_reasons=("hw slowdown", "sw thermal"))
                    if g.index == 2 and r < 0.7:
                        g = replace(
                            g,
                            pcie=replace(g.pcie, gen=3, width=8, rx_bytes_per_s=7e9),
                        )
                    if g.index == 3 and 0.15 <= r < 0.5:  # degraded otherwise than GPU 2
                        g = replace(g, pcie=replace(g.pcie, gen=4))
                    if g.index == 3 and r < 0.15:
                        g = replace(g, utilization=replace(g.utilization, gpu=None))
                    if g.index == 0 and r < 0.5:
                        g = replace(g, pcie=Pcie(rx_bytes_per_s=1e9))  # no link known
                    if g.index == 3 and 50 <= tick < 70:  # partitioned: MIG, no utilization
                        g = replace(g, mig_mode=True, utilization=replace(g.utilization, gpu=None))
                    if g.index == 0 and 85 <= tick < 100:  # no utilization (vGPU)
                        g = replace(g, utilization=replace(g.utilization, gpu=None))
                gpus.append(g)
            yield replace(snap, processes=tuple(procs), gpus=tuple(gpus))

    return t, _grow(snaps(), 120, keep=40)


def steady_objects() -> Scenario:
    """The exporter's steady state: every tick the very objects of the tick before (the
    sources share unchanged ones), only the time moves; ages unknown, so jobs are taken
    over. At known ticks something changes: a process's CPU, a GPU's utilization, a job
    leaves, a GPU is lost and comes back; each change then stays for a while."""
    from tests.builders import busy_node_snapshots

    first = next(busy_node_snapshots(4, 6, seed=5))
    rows = tuple(replace(p, create_time=None) for p in first.processes)
    gpus = tuple(
        replace(g, processes=tuple(replace(p, host=None) for p in g.processes)) for g in first.gpus
    )

    def snaps() -> Iterator[Snapshot]:
        nonlocal rows, gpus
        for tick in range(10_000):
            if tick == 30:  # one process's CPU reading changes
                rows = tuple(
                    replace(p, cpu_percent=97.0) if i == 12 else p for i, p in enumerate(rows)
                )
            elif tick == 45:  # GPU 1's utilization changes
                gpus = tuple(
                    replace(g, utilization=replace(g.utilization, gpu=3.0)) if g.index == 1 else g
                    for g in gpus
                )
            elif tick == 60:  # a job leaves GPU 2
                gpus = tuple(
                    replace(g, processes=g.processes[1:]) if g.index == 2 else g for g in gpus
                )
            elif tick == 75:  # GPU 3 is lost...
                saved = gpus
                gpus = tuple(
                    replace(g, lost=True, lost_reason="fell off the bus") if g.index == 3 else g
                    for g in gpus
                )
            elif tick == 80:  # ...and back
                gpus = saved
            yield replace(first, time=START + tick, processes=rows, gpus=gpus)

    return DEFAULT, _grow(snaps(), 110)


def irregular() -> Scenario:
    """Short thresholds (idle holders show, the lookback cuts the history); gaps, older
    histories and reversed order make the carried state rebuild."""
    t = Thresholds.from_overrides(
        {"window_seconds": 8, "idle_holder_seconds": 30, "idle_holder_min_observed": 10}
    )
    source = DemoSource(seed=3, start_time=START, step=2.0)
    rng = random.Random(1)

    def hists() -> Iterator[list[Snapshot]]:
        hist: list[Snapshot] = []
        for _ in range(150):
            hist.append(source.snapshot())
            recent = [s for s in hist if s.time >= hist[-1].time - 60]
            r = rng.random()
            if r < 0.1 and len(recent) > 3:
                del recent[rng.randrange(1, len(recent) - 1)]  # a gap
            elif r < 0.15:
                recent = hist[: rng.randrange(1, len(hist) + 1)]  # an older history
            elif r < 0.2:
                recent.reverse()  # sorted by time anyway
            yield recent

    return t, hists()


def demo_h200() -> Scenario:
    """The H200 node: launch-bound, low SM activity, tensor cores idle, memory-bandwidth-
    bound, communication-bound: NVLink, GPU-bound with GPM."""
    return DEFAULT, _grow(_demo(1, node="h200"), 120)


def inside() -> Scenario:
    """A busy node whose GPUs report GPM and NVLink, varied so that each verdict that sees
    inside utilization comes and goes: SM active low or high, tensor pipes idle, DRAM at
    its top, NVLink full; GPM lost for a while (NO_PERMISSION: n/a) and back."""
    from tests.builders import busy_node_snapshots

    rng = random.Random(11)
    links = 18
    cap = links * 25e9

    def snaps() -> Iterator[Snapshot]:
        for tick, snap in enumerate(busy_node_snapshots(4, 8, ranks=2, seed=6)):
            phase = (tick // 20) % 4
            gpus = []
            for g in snap.gpus:
                util = g.utilization.gpu or 0.0
                case = (g.index + phase) % 4  # busy, hollow, tensor idle, DRAM at its top
                sm = util * (rng.uniform(0.15, 0.35) if case == 1 else 0.65 if case == 3 else 0.95)
                tensor = 0.0 if case == 2 else sm * 0.6
                dram = 90.0 if case == 3 else 40.0
                share = 0.9 if case == 1 and g.index % 2 == 0 else 0.1  # NVLink full
                if g.index == 1 and 40 <= tick < 55:  # GPM refused for a while
                    activity = Activity()
                else:
                    activity = Activity(
                        sm=round(sm, 1), tensor=round(tensor, 1), dram=dram, sm_occupancy=sm / 2
                    )
                nvlink = Nvlink(
                    links=links,
                    version="4.0",
                    rx_bytes_per_s=share * cap,
                    tx_bytes_per_s=share * cap * 0.9,
                    max_bytes_per_s=cap,
                    peers=("switch",) * links,
                )
                gpus.append(replace(g, activity=activity, nvlink=nvlink))
            yield replace(snap, gpus=tuple(gpus))

    return Thresholds.from_overrides({"window_seconds": 8}), _grow(snaps(), 120)


def demo_probe() -> Scenario:
    """The H200 node whose jobs run gputop's probe (issue 31): input-bound (measured), not
    input-bound (measured) over an inferred CPU-worker cause, the caching allocator."""
    return DEFAULT, _grow(_demo(3, node="h200-probe"), 90)


def probed() -> Scenario:
    """A busy node whose ranks run gputop's probe, in phases: a high wait, a moderate one
    with one rank far worse, (almost) none, no probe at all, a probe that measured no wait
    yet; the caching allocator holding most of a nearly full GPU in some phases."""
    from tests.builders import busy_node_snapshots

    rng = random.Random(31)
    waits = (0.42, 0.12, 0.02, None, "none measured")

    def snaps() -> Iterator[Snapshot]:
        for tick, snap in enumerate(busy_node_snapshots(4, 8, ranks=2, seed=9)):
            phase = (tick // 15) % len(waits)
            ranks = {p.pid: g for g in snap.gpus for p in g.processes}
            procs = []
            for p in snap.processes:
                g = ranks.get(p.pid)
                wait = waits[(phase + (0 if g is None else g.index)) % len(waits)]
                if g is None or wait is None:
                    procs.append(p)
                    continue
                total = g.memory.total or 0
                full = g.index % 2 == 0 and phase % 2 == 0
                memory = (CudaMemory(0, total // 5, int(total * 0.97), total // 2),) if full else ()
                ratio = None if isinstance(wait, str) else wait
                if ratio is not None and p.pid % 2:
                    ratio = min(1.0, ratio * rng.uniform(1.0, 2.5))  # a worse rank
                probe = Probe(
                    time=snap.time,
                    window_seconds=20.0,
                    steps=60,
                    data_wait_ratio=ratio,
                    step_seconds=round(rng.uniform(0.2, 0.4), 3),
                    batches_per_second=3.0,
                    memory=memory,
                )
                procs.append(replace(p, probe=probe))
            gpus = []
            for g in snap.gpus:
                if g.index % 2 == 0 and phase % 2 == 0 and g.memory.total:
                    g = replace(g, memory=replace(g.memory, used=int(g.memory.total * 0.97)))
                gpus.append(g)
            yield replace(snap, processes=tuple(procs), gpus=tuple(gpus))

    return DEFAULT, _grow(snaps(), 150)


SCENARIOS: dict[str, Callable[[], Scenario]] = {
    "demo": demo,
    "demo_mig": demo_mig,
    "busy_node": busy_node,
    "coming_and_going": coming_and_going,
    "steady_objects": steady_objects,
    "irregular": irregular,
    "demo_h200": demo_h200,
    "inside": inside,
    "demo_probe": demo_probe,
    "probed": probed,
}


def digest(gpus: Any, job_verdicts: Any, jobs: Sequence[Any]) -> str:
    """A short digest of one tick's diagnosis: every verdict in full, the jobs in order."""
    doc = {
        "gpus": {str(i): v.to_dict() for i, v in sorted(gpus.items())},
        "job_verdicts": {j: v.to_dict() for j, v in sorted(job_verdicts.items())},
        # Job.owner (issue 22) and Job.probe (issue 31) came after the golden: digested
        # only where a job has one.
        "jobs": [
            {
                k: v
                for k, v in dataclasses.asdict(j).items()
                if k not in ("owner", "probe") or v is not None
            }
            for j in jobs
        ],
    }
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def kinds(gpus: Any, job_verdicts: Any) -> set[str]:
    return {v.kind for v in gpus.values()} | {v.kind for v in job_verdicts.values()}


def run(name: str) -> tuple[list[str], set[str]]:
    """The digest of each tick of scenario ``name`` through the analyzer's path (a
    Diagnoser fed tick after tick, as every consumer does), and the kinds seen."""

    thresholds, hists = SCENARIOS[name]()
    diagnoser = Feed(thresholds)
    out: list[str] = []
    seen: set[str] = set()
    for hist in hists:
        d = diagnoser.frame(hist).diagnosis
        assert d.error is None, d.traceback
        out.append(digest(d.gpus, d.job_verdicts, d.jobs))
        seen |= kinds(d.gpus, d.job_verdicts)
    return out, seen


def main(argv: Sequence[str]) -> int:
    """``--write``: every scenario's digests afresh; ``--add NAME...``: only those (a new
    scenario), every other digest kept as it is."""
    if argv[:1] == ["--add"] and argv[1:] and all(name in SCENARIOS for name in argv[1:]):
        golden = json.loads(GOLDEN.read_text())
        names = argv[1:]
    elif argv == ["--write"]:
        golden, names = {}, list(SCENARIOS)
    else:
        print("usage: python -m tests.verdict_scenarios --write | --add NAME...", file=sys.stderr)
        return 2
    for name in names:
        ticks, seen = run(name)
        golden[name] = {"ticks": ticks, "kinds": sorted(seen)}
        print(f"{name}: {len(ticks)} ticks, kinds {sorted(seen)}")
    GOLDEN.write_text(json.dumps(golden, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
