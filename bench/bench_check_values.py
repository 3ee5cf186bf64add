#!/usr/bin/env python3
"""The check by value (``model.check_values``), per path that pays it:

- ``check_gpus``: the driver's values of 8 demo GPUs, every NVML tick;
- ``to_snapshot``: one remote line decoded in checked mode (each fleet host, each line);
- ``decode_snapshots``: a recording's block of 60 demo snapshots (its column scan lets a
  sane block skip the full check; ``--no-scan`` is not offered: the tests prove both equal).

    python bench/bench_check_values.py [--repeat 7]

Best of ``--repeat`` passes. It is not a test; on a busy machine run it twice.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputop.present import to_json_dict
from gputop.record import codec
from gputop.sources.demo import DemoSource
from gputop.sources.nvml import check_gpus
from gputop.sources.remote import parse_line, to_snapshot


def best(run: Callable[[], object], n: int, repeat: int) -> float:
    """Seconds per call, the best of ``repeat`` passes of ``n`` calls."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(n):
            run()
        times.append((time.perf_counter() - start) / n)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    src = DemoSource(seed=1, start_time=1.7e9, step=1.0)
    snaps = [src.snapshot() for _ in range(60)]
    payload = codec.encode_rows([codec.flatten(s) for s in snaps])
    gpus = list(snaps[-1].gpus)
    line = parse_line(json.dumps(to_json_dict(snaps[-1])))
    print(f"load average {os.getloadavg()[0]:.1f}")
    block = best(lambda: codec.decode_snapshots(payload), 5, args.repeat)
    print(f"decode_snapshots, a block of 60 demo snapshots: {block * 1e3:.2f} ms")
    nvml = best(lambda: check_gpus(gpus, []), 300, args.repeat)
    print(f"check_gpus, 8 demo GPUs: {nvml * 1e6:.0f} us")
    remote = best(lambda: to_snapshot(line), 50, args.repeat)
    print(f"to_snapshot (checked), one demo line: {remote * 1e6:.0f} us")


if __name__ == "__main__":
    main()
