"""A small real PyTorch (CPU) training loop for tests/probe: it times its own ``next()``
calls (the truth the probe is compared with), then reads what its probe published.

Usage: python trainer.py OUT_JSON [--dataset slow|fast|iterable] [--workers N]
       [--context fork|spawn|forkserver] [--epochs N] [--recreate] [--batches N]
       [--import-probe] [--expect-file] [--ddp]

``OUT_JSON`` gets: pid, start_ticks, the truth (data_wait_ratio, step_seconds over the
probe's window of steps), the result (a sum over every item, the same with or without a
probe), the probe's file as read before exit (or null), the probe directory's entries,
the live threads' names, and whether the DataLoader's ``__next__`` is torch's own.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import threading
import time
from typing import Any

import torch
import torch.utils.data.dataloader as dataloader
from torch.utils.data import DataLoader, Dataset, IterableDataset

from gputop import probefile

ITEMS = 40
LOAD_SECONDS = 0.05  # what a slow item costs a worker (input-bound)
STEP_SECONDS = 0.01  # the "GPU" part of a step
FILE_DEADLINE = 90.0  # seconds to wait for the probe's file to show every step


class Slow(Dataset[torch.Tensor]):
    def __len__(self) -> int:
        return ITEMS

    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(LOAD_SECONDS)
        return torch.tensor([float(i)])


class Fast(Slow):
    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.tensor([float(i)])


class SlowStream(IterableDataset[torch.Tensor]):
    """Each worker yields its share of the items, slowly."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        info = torch.utils.data.get_worker_info()
        n, k = (1, 0) if info is None else (info.num_workers, info.id)
        for i in range(k, ITEMS, n):
            time.sleep(LOAD_SECONDS)
            yield torch.tensor([float(i)])


def loader(args: argparse.Namespace) -> DataLoader[torch.Tensor]:
    dataset = {"slow": Slow, "fast": Fast, "iterable": SlowStream}[args.dataset]()
    extra = {}
    if args.workers:
        extra["multiprocessing_context"] = args.context
    return DataLoader(dataset, batch_size=1, num_workers=args.workers, **extra)


def start_ticks() -> int:
    with open("/proc/self/stat") as f:
        text = f.read()
    return int(text[text.rindex(")") + 2 :].split()[19])


def truth(batches: list[tuple[float, float]], steps: int) -> dict[str, float]:
    """Over the last ``steps`` steps, each from one batch in hand to the next."""
    pairs = list(itertools.pairwise(batches))[-steps:]
    step = sum(t1 - prev for (_, prev), (_, t1) in pairs)
    wait = sum(t1 - t0 for _, (t0, t1) in pairs)
    return {"data_wait_ratio": wait / step, "step_seconds": step / len(pairs), "steps": len(pairs)}


def read_probe(after: float) -> dict[str, Any] | None:
    """This process's file once written after ``after`` (epoch seconds: the last batch's
    arrival): the publisher writes within a second of a new batch, and only then, so that
    is the final one. The last seen at the deadline."""
    path = os.path.join(probefile.own_dir(), probefile.file_name(os.getpid()))
    deadline = time.monotonic() + FILE_DEADLINE
    seen = None
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                seen = json.load(f)
            if seen.get("time", 0) > after:
                return seen
        except (OSError, ValueError):
            pass
        time.sleep(0.1)  # polling a condition, bounded by the deadline
    return seen


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--dataset", default="slow", choices=["slow", "fast", "iterable"])
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--context", default="fork")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--recreate", action="store_true", help="a new DataLoader each epoch")
    p.add_argument("--import-probe", action="store_true")
    p.add_argument("--expect-file", action="store_true")
    p.add_argument("--ddp", action="store_true")
    args = p.parse_args()
    if args.import_probe:
        import gputop.probe  # noqa: F401
    if args.ddp:
        import torch.distributed as dist

        dist.init_process_group("gloo")
    batches: list[tuple[float, float]] = []
    last_batch_at = time.time()
    result = 0.0
    dl = loader(args)
    for epoch in range(args.epochs):
        if args.recreate and epoch:
            dl = loader(args)
        it = iter(dl)
        while True:
            t0 = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                break
            batches.append((t0, time.perf_counter()))
            last_batch_at = time.time()
            result += float(batch.sum())
            time.sleep(STEP_SECONDS)
    out: dict[str, Any] = {
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "start_ticks": start_ticks(),
        "result": result,
        "batches": len(batches),
        "patched": hasattr(dataloader._BaseDataLoaderIter.__next__, "__wrapped__"),
    }
    # A file stamped after the last batch came counts every batch (the probe stamps a file
    # before it copies the batches): waiting for one stamped after the loop's end waited in
    # vain where the last write fell between the last batch and the end.
    probe = read_probe(last_batch_at) if args.expect_file else None
    out["probe"] = probe
    if probe is not None:  # the modes while the file is there
        where = probefile.own_dir()
        out["dir_mode"] = os.stat(where).st_mode & 0o7777
        out["file_mode"] = os.stat(os.path.join(where, probefile.file_name(os.getpid()))).st_mode
        out["file_mode"] &= 0o7777
    steps = probe["steps"] if probe and isinstance(probe.get("steps"), int) else 100
    out["truth"] = truth(batches, min(steps, probefile.WINDOW_STEPS))
    if args.ddp:
        dist.barrier()  # every rank has read its own file: list the directory now
    try:
        out["dir"] = sorted(os.listdir(probefile.own_dir()))
    except OSError:
        out["dir"] = None
    out["threads"] = sorted(t.name for t in threading.enumerate())
    if args.ddp:
        out["rank"] = dist.get_rank()
        dist.barrier()  # no rank leaves (and removes its file) before every rank listed
        dist.destroy_process_group()
        base, ext = os.path.splitext(args.out)
        args.out = f"{base}-{out['rank']}{ext}"
    with open(args.out, "w") as f:
        json.dump(out, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
