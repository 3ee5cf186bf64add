"""A small real DDP job for tests/analysis/test_verdict_real.py, run by torchrun.

Usage: torchrun --nproc_per_node 2 ddp_trainer.py CONTEXT READY_DIR

Each rank joins a gloo process group and trains a tiny DDP model on CPU from a DataLoader
with WORKERS workers started in the multiprocessing CONTEXT (fork, spawn or forkserver).
Each worker spins on the CPU for every item, the rank waits for batches (a starved GPU).
Once every worker of the rank has delivered an item, the rank writes "PID WORKER_PID..." to
READY_DIR/rank<N>. A rank exits after 240 s or when torchrun goes; its workers follow it.
"""

from __future__ import annotations

import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset

WORKERS = 3
DEADLINE = time.monotonic() + 240.0  # past the test's own bound (STARTUP)


class Spinning(Dataset[torch.Tensor]):
    """Items that cost CPU to make; each carries the pid of the worker that made it."""

    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, i: int) -> torch.Tensor:
        x = 0
        for j in range(50_000):
            x += j * j
        return torch.tensor([float(os.getpid()), float(x % 7)])


def main() -> None:
    context, ready_dir = sys.argv[1], sys.argv[2]
    launcher = os.getppid()
    dist.init_process_group("gloo", timeout=timedelta(seconds=30))  # a lone rank ends
    rank = dist.get_rank()
    model = DistributedDataParallel(torch.nn.Linear(1, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    loader = DataLoader(
        Spinning(),
        batch_size=1,
        num_workers=WORKERS,
        multiprocessing_context=context,
        persistent_workers=True,
    )
    seen: set[int] = set()
    for batch in loader:
        if time.monotonic() > DEADLINE or os.getppid() != launcher:
            break
        optimizer.zero_grad()
        model(batch[:, 1:]).sum().backward()  # a real DDP step: gradients all-reduced
        optimizer.step()
        if len(seen) < WORKERS:
            seen.add(int(batch[0, 0]))
            if len(seen) == WORKERS:
                path = os.path.join(ready_dir, f"rank{rank}")
                with open(path + ".tmp", "w") as f:
                    f.write(" ".join(map(str, [os.getpid(), *sorted(seen)])))
                os.rename(path + ".tmp", path)
    os._exit(0)  # no process-group teardown: the other rank may be gone already


if __name__ == "__main__":
    main()
