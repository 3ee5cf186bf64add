#!/usr/bin/env python3
"""What reading the probes' files (gputop.sources.probes) costs the sampler tick.

    python bench/bench_probe_read.py [--procs 1000] [--probed 64] [--ticks 200]

Forks ``--procs`` sleeping processes (this user's) and times ``ProbeReader.attach`` over
their rows, the CPU of the calling thread per tick (mean over ``--ticks`` ticks after a
warm-up tick), in four cases:

- no probe directory at all (what every gputop without a probe pays);
- the first tick (each process's uid read once from /proc/PID/status);
- ``--probed`` of them with an unchanged probe file (the parse cached; opened and checked);
- the same files rewritten before every tick (parsed every tick).

The processes are killed at the end; the directories live in a temporary directory.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gputop.probefile as probefile  # noqa: E402
from gputop.model import ProcessInfo  # noqa: E402
from gputop.sources import procfs  # noqa: E402
from gputop.sources.probes import ProbeReader  # noqa: E402


@contextlib.contextmanager
def sleepers(n: int) -> Iterator[list[int]]:
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(n):
            procs.append(subprocess.Popen(["sleep", "3600"]))
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGKILL)
        for p in procs:
            p.wait()


def probe_text(pid: int, i: int) -> str:
    st = procfs.read_stat(pid)
    assert st is not None
    return json.dumps(
        {
            probefile.MARK: probefile.VERSION,
            "pid": pid,
            "start_ticks": st.starttime,
            "time": time.time(),
            "window_seconds": 20.0,
            "steps": 64 + i,
            "data_wait_ratio": 0.42,
            "step_seconds": 0.31,
            "batches_per_second": 3.2,
            "memory": [{"device": 0, "allocated": 1, "reserved": 2, "peak": 3}],
        }
    )


def write(directory: Path, pid: int, i: int) -> None:
    tmp = directory / f".tmp-{pid}"
    tmp.write_text(probe_text(pid, i))
    os.chmod(tmp, 0o600)
    os.replace(tmp, directory / probefile.file_name(pid))


def per_tick(
    reader: ProbeReader,
    rows: list[ProcessInfo],
    ticks: int,
    before: Callable[[int], None] = lambda _i: None,
) -> float:
    """Mean thread CPU seconds of one attach."""
    spent = 0.0
    for i in range(ticks):
        before(i)
        c0 = time.thread_time()
        reader.attach(rows)
        spent += time.thread_time() - c0
    return spent / ticks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--procs", type=int, default=1000)
    ap.add_argument("--probed", type=int, default=64)
    ap.add_argument("--ticks", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="gputop-bench-probe-"))
    uid = os.geteuid()
    results: dict[str, list[float]] = {}
    try:
        with sleepers(args.procs) as pids:
            rows = [ProcessInfo(pid=p, create_time=1.0, status="sleeping") for p in pids]

            def dirs_of(u: int) -> tuple[str, ...]:
                return (str(base / f"run-{u}"), str(base / f"tmp-{u}"))

            def fresh() -> ProbeReader:
                return ProbeReader(dirs_of=dirs_of, own_dir=str(base / "own"))

            for _ in range(args.rounds):
                shutil.rmtree(base / f"tmp-{uid}", ignore_errors=True)
                r = fresh()
                results.setdefault("first tick (uids read)", []).append(per_tick(r, rows, 1))
                results.setdefault("no probe directory", []).append(per_tick(r, rows, args.ticks))
                d = base / f"tmp-{uid}"
                d.mkdir(mode=0o700)
                for i, pid in enumerate(pids[: args.probed]):
                    write(d, pid, i)
                r.attach(rows)
                out = r.attach(rows)
                assert sum(o.probe is not None for o in out) == args.probed, r.errors
                results.setdefault(f"{args.probed} unchanged files", []).append(
                    per_tick(r, rows, args.ticks)
                )

                def rewrite(i: int, d: Path = d) -> None:
                    for pid in pids[: args.probed]:
                        write(d, pid, i)

                results.setdefault(f"{args.probed} files rewritten each tick", []).append(
                    per_tick(r, rows, max(args.ticks // 4, 1), rewrite)
                )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"{args.procs} processes, {args.rounds} rounds; thread CPU per attach (median of rounds)")
    print("| case | µs per tick |\n|---|---:|")
    for name, values in results.items():
        print(f"| {name} | {statistics.median(values) * 1e6:,.0f} |")


if __name__ == "__main__":
    main()
