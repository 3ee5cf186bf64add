"""A real PyTorch (CPU) DDP rank for tests/probe/test_e2e_jobs.py that trains in a steady
state until told to stop, so gputop can look at it while it runs.

Usage: python steady_trainer.py OUT_DIR --dataset slow|fast --workers N
       --context fork|spawn --step SECONDS [--deadline SECONDS]

Each rank (``torch.distributed`` with gloo, launched by torchrun) iterates a DataLoader with
persistent workers epoch after epoch, timing its own ``next()`` calls: the truth the test
compares gputop's figures with. About once a second it replaces ``OUT_DIR/rank-PID.json``
with its pid, its parent's (torchrun's), its DataLoader workers' pids, the steps so far
and its last batches' times (epoch seconds: when the wait for the batch began, when the
batch was in hand). It stops
when ``OUT_DIR/stop`` exists, or after ``--deadline`` seconds (a test that died must not
leave it running).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset

ITEMS = 64
#: The batches each report keeps: more than the probe's window of steps.
KEEP = 400


class Slow(Dataset[torch.Tensor]):
    def __init__(self, load_seconds: float) -> None:
        self.load_seconds = load_seconds

    def __len__(self) -> int:
        return ITEMS

    def __getitem__(self, i: int) -> torch.Tensor:
        if self.load_seconds:
            time.sleep(self.load_seconds)
        return torch.tensor([float(i)])


#: What one item costs a worker: the input-bound job's workers sleep, the fast one's not.
LOAD_SECONDS = {"slow": 0.1, "fast": 0.0}


def report(path: str, out: dict[str, Any]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(out, f)
    os.replace(tmp, path)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("out_dir")
    p.add_argument("--dataset", choices=sorted(LOAD_SECONDS), default="slow")
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--context", default="fork")
    p.add_argument("--step", type=float, default=0.01, help="the 'GPU' part of a step")
    p.add_argument("--deadline", type=float, default=300.0)
    args = p.parse_args()
    dist.init_process_group("gloo")
    loader = DataLoader(
        Slow(LOAD_SECONDS[args.dataset]),
        batch_size=1,
        num_workers=args.workers,
        multiprocessing_context=args.context,
        persistent_workers=True,
    )
    path = os.path.join(args.out_dir, f"rank-{os.getpid()}.json")
    stop = os.path.join(args.out_dir, "stop")
    # perf_counter for the intervals; one offset turns them into the probe's epoch seconds
    offset = time.time() - time.perf_counter()
    batches: list[tuple[float, float]] = []
    steps = 0
    workers: list[int] = []
    last_report = 0.0
    end = time.monotonic() + args.deadline
    while not os.path.exists(stop) and time.monotonic() < end:
        it = iter(loader)
        workers = [w.pid for w in getattr(it, "_workers", [])]
        while True:
            t0 = time.perf_counter()
            try:
                next(it)
            except StopIteration:
                break
            batches.append((t0, time.perf_counter()))
            del batches[:-KEEP]
            steps += 1
            time.sleep(args.step)
            now = time.monotonic()
            if now - last_report >= 1.0:
                last_report = now
                report(path, {
                    "pid": os.getpid(), "ppid": os.getppid(), "rank": dist.get_rank(),
                    "workers": workers,
                    "steps": steps, "batches": [(a + offset, b + offset) for a, b in batches],
                })  # fmt: skip
            if os.path.exists(stop) or now > end:
                break
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
