"""What gputop's probe costs a training loop, per step, on a real PyTorch DataLoader.

Not a timed test: a script that prints a table. Run from the repository root (torch
installed: ``pip install -e '.[torch]'``):

    python bench/bench_probe.py [--steps 20000] [--rounds 7]

Each round iterates a DataLoader over a tiny TensorDataset (batch size 1, ``--steps``
batches) once without the probe and once with it (the order alternates between rounds),
for ``num_workers`` 0 and 2, in one process; ``gputop.probe.stop()`` puts torch's own
``__next__`` back between the two. The loop does nothing but take batches, so the per-step
difference is the probe's whole cost (its wrapper, and its publisher thread competing for
the interpreter once a second). Reported: the median per-step time of each side, their
difference, and that difference as a share of a 10 ms and a 1 ms training step.

The DataLoader's own time varies more between rounds on a loaded machine than the probe
costs (with workers, by hundreds of microseconds), so the last row isolates the wrapper:
the probe's own ``__next__`` wrapper around a ``__next__`` that returns at once, against
that bare ``__next__`` (``--calls`` calls, median of the rounds).
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

REALISTIC_STEPS = (0.010, 0.001)  # seconds: a small model's step, and a very fast one


def loop_seconds(loader: object, steps: int) -> float:
    t0 = time.perf_counter()
    n = 0
    for _ in loader:  # type: ignore[attr-defined]
        n += 1
    assert n == steps
    return (time.perf_counter() - t0) / steps


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--workers", default="0,2", help="num_workers values, comma-separated")
    p.add_argument("--calls", type=int, default=1_000_000)
    args = p.parse_args(argv)
    os.environ["GPUTOP_PROBE_DIR"] = tempfile.mkdtemp(prefix="gputop-bench-probe-")
    atexit.register(shutil.rmtree, os.environ["GPUTOP_PROBE_DIR"], ignore_errors=True)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    import gputop.probe

    gputop.probe.stop()
    data = TensorDataset(torch.arange(args.steps, dtype=torch.float32))
    print(f"{args.steps} steps x {args.rounds} rounds, torch {torch.__version__}, "
          f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
    print("| workers | without (µs/step) | with (µs/step) | probe (µs/step) | "
          "of a 10 ms step | of a 1 ms step | rounds without, min-max (µs) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for workers in [int(w) for w in args.workers.split(",") if w.strip()]:
        loader = DataLoader(data, batch_size=1, num_workers=workers)
        loop_seconds(loader, args.steps)  # warm-up
        without: list[float] = []
        with_probe: list[float] = []
        for r in range(args.rounds):
            for probed in (r % 2 == 0, r % 2 == 1):
                if probed:
                    gputop.probe.start()
                    with_probe.append(loop_seconds(loader, args.steps))
                    gputop.probe.stop()
                else:
                    without.append(loop_seconds(loader, args.steps))
        a, b = statistics.median(without), statistics.median(with_probe)
        cost = b - a
        shares = " | ".join(f"{100 * cost / s:.3f} %" for s in REALISTIC_STEPS)
        spread = f"{min(without) * 1e6:.1f}-{max(without) * 1e6:.1f}"
        print(
            f"| {workers} | {a * 1e6:.1f} | {b * 1e6:.1f} | {cost * 1e6:+.2f} | {shares} "
            f"| {spread} |"
        )
    bare, wrapped = wrapper_cost(args.calls, args.rounds)
    cost = wrapped - bare
    shares = " | ".join(f"{100 * cost / s:.3f} %" for s in REALISTIC_STEPS)
    print(f"| wrapper alone | {bare * 1e6:.2f} | {wrapped * 1e6:.2f} | {cost * 1e6:+.2f} "
          f"| {shares} | |")  # fmt: skip
    return 0


def wrapper_cost(calls: int, rounds: int) -> tuple[float, float]:
    """Seconds per call of a bare ``__next__`` and of the probe's wrapper around it."""
    from gputop.probe import core

    class Bare:
        def __next__(self) -> int:
            return 1

    class Wrapped:
        def __next__(self) -> int:
            return 1

    core._make_wrappers(Wrapped.__next__)
    Wrapped.__next__ = core._fast_next  # type: ignore[method-assign]
    out: tuple[list[float], list[float]] = ([], [])
    for r in range(rounds):
        for side, cls in ((0, Bare), (1, Wrapped)) if r % 2 == 0 else ((1, Wrapped), (0, Bare)):
            it = cls()
            t0 = time.perf_counter()
            for _ in range(calls):
                next(it)
            out[side].append((time.perf_counter() - t0) / calls)
            core._batches.clear()
    return statistics.median(out[0]), statistics.median(out[1])


if __name__ == "__main__":
    raise SystemExit(main())
