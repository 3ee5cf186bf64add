#!/usr/bin/env python3
"""Where the dashboard's resident memory goes, against the floor's (issue 32 §5).

    python bench/bench_rss.py [--scenarios 8x2,8x16] [--at 20] [--rounds 1] [--size 200x50]
                              [--age 30] [--tree DIR ...] [--min-kib 40]

Each program runs in its own detached tmux pane of the same size (``bench_ui.py``'s panes)
on the fake 8-GPU scenario (``8xN``: N real ``sleep`` processes per GPU), at a 1 s interval,
with byte code compiled beforehand (``warm_bytecode``), as ``bench_start.py`` runs them:
gputop (``gputop0``, ``gputop1``... with ``--tree``, each started in its own checkout) and
bench_start's floor (the bare Textual app, psutil, pynvml, NVML read once). A round starts
them one at a time, in an order that rotates from round to round, and reads each one's
``/proc/PID/smaps`` ``--at`` seconds after its start, then ends it: one program's start
never runs beside another's.

Printed per program: VmRSS, and per mapping (the file's name, ``[anon]``, ``[heap]``...)
the resident KiB minus the floor's, where that differs by at least ``--min-kib``. The goal
of issue 32 is gputop's RSS at 20 s <= the floor's + 8 MiB. Compare within one run: the
machine's other load moves the figures (the load average is printed).

Needs tmux and gcc (to build the fake). Prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_start import fake_gpus, programs  # noqa: E402
from bench.bench_ui import rotated, tmux, tmux_server  # noqa: E402


def resident_kib(pid: int) -> tuple[int, dict[str, int]]:
    """(VmRSS, Rss per mapping name) in KiB, from /proc/PID/status and smaps."""
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        vmrss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    per: dict[str, int] = {}
    name = "[anon]"
    with open(f"/proc/{pid}/smaps", encoding="utf-8", errors="replace") as f:
        for line in f:
            head, _, rest = line.partition(" ")
            if "-" in head and not head.endswith(":"):
                fields = rest.split()
                name = Path(fields[4]).name if len(fields) > 4 else "[anon]"
            elif head == "Rss:":
                per[name] = per.get(name, 0) + int(rest.split()[0])
    return vmrss, per


def measure(prog_name: str, progs: dict, size: tuple[int, int], at: float) -> tuple[int, dict]:
    pane = progs[prog_name].start(prog_name, size)
    try:
        time.sleep(max(0.0, at - (time.monotonic() - pane.started)))
        return resident_kib(pane.pid)
    finally:
        tmux("kill-session", "-t", pane.session, check=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default="8x2,8x16")
    parser.add_argument("--at", type=float, default=20.0, help="seconds after the start")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--size", default="200x50")
    parser.add_argument("--age", type=float, default=30.0, help="the processes' age first")
    parser.add_argument("--tree", action="append", type=Path, help="a gputop checkout")
    parser.add_argument("--min-kib", type=int, default=40, help="smallest difference shown")
    args = parser.parse_args(argv)
    trees = [t.resolve() for t in args.tree or [ROOT]]
    w, h = (int(v) for v in args.size.lower().split("x"))
    if shutil.which("tmux") is None:
        print("tmux not found", file=sys.stderr)
        return 2
    nvitop = shutil.which("nvitop") or str(Path(sys.executable).parent / "nvitop")
    with (
        tmux_server(),
        tempfile.TemporaryDirectory(prefix="gputop-rss-", ignore_cleanup_errors=True) as tmp,
    ):
        for n_per in (int(s.lower().split("x")[1]) for s in args.scenarios.split(",")):
            with fake_gpus(n_per, trees, Path(tmp), nvitop) as (env, born):
                progs = programs(env, trees)
                names = [n for n in progs if n.startswith("gputop")] + ["floor"]
                time.sleep(max(0.0, args.age - (time.monotonic() - born)))
                print(f"8 GPUs x {n_per} processes, {w}x{h}, RSS at {args.at:g} s")
                for name, tree in zip(names, trees, strict=False):
                    print(f"  {name}: {tree}")
                for r in range(args.rounds):
                    order = rotated(names, r)
                    load = os.getloadavg()[0]
                    got = {n: measure(n, progs, (w, h), args.at) for n in order}
                    floor_rss, floor_maps = got["floor"]
                    print(f"  round {r + 1}, load average {load:.2f}:")
                    print(f"    floor   VmRSS {floor_rss / 1024:6.1f} MiB")
                    for name in names[:-1]:
                        rss, maps = got[name]
                        extra = (rss - floor_rss) / 1024
                        print(f"    {name} VmRSS {rss / 1024:6.1f} MiB  floor + {extra:.1f}")
                        diffs = {
                            m: maps.get(m, 0) - floor_maps.get(m, 0) for m in {*maps, *floor_maps}
                        }
                        for m, d in sorted(diffs.items(), key=lambda kv: -abs(kv[1])):
                            if abs(d) >= args.min_kib:
                                print(f"      {d:+7d} KiB  {m}")
                end = " / ".join(f"{v:.2f}" for v in os.getloadavg())
                print(f"  load average at the end: {end}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
