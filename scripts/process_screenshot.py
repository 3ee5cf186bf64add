#!/usr/bin/env python3
"""Regenerate screenshots/process-*.{svg,png} (issue 32 §3): the process screen (`e`) of
the seeded demo's first process, its environment of interest as the host source reads
it on a real node (the demo reads none), at 120x40 and 80x24; and the dashboard after
one press of `c` (one line per GPU) at 100x30.

    python scripts/process_screenshot.py [--out screenshots] [--no-png]

PNG needs cairosvg and fonts-firacode (see scripts/screenshots.py).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

from gputop.model import Snapshot  # noqa: E402
from scripts.screenshots import demo_history, write  # noqa: E402

#: What a torchrun rank's environment gives (the demo's processes have none read).
ENVIRONMENT = (("CUDA_VISIBLE_DEVICES", "0"), ("RANK", "0"), ("LOCAL_RANK", "0"),
               ("WORLD_SIZE", "2"), ("OMP_NUM_THREADS", "8"))  # fmt: skip
PID = 41201  # the demo's first training process, on GPU 0


def with_environment(snap: Snapshot) -> Snapshot:
    gpus = tuple(
        replace(g, processes=tuple(
            replace(p, host=replace(p.host, environment=ENVIRONMENT))
            if p.pid == PID and p.host is not None else p
            for p in g.processes
        ))
        for g in snap.gpus
    )  # fmt: skip
    return replace(snap, gpus=gpus)


async def shoot(history: tuple[Snapshot, ...], size: tuple[int, int], keys: tuple[str, ...]) -> str:
    from gputop.ui.app import GpuTopApp

    app = GpuTopApp(sampler=None)
    async with app.run_test(size=size) as pilot:
        app.apply_snapshot(history[-1], history)
        await pilot.pause()
        keys_of = [r.key.value for r in app.table.ordered_rows]
        app.table.move_cursor(row=keys_of.index(f"0:{PID}"))
        await pilot.press(*keys)
        await pilot.pause()
        app.clear_notifications()  # the layout key's toast
        await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        svg: str = app.export_screenshot()
    return svg


async def main_async(out: Path, png: bool) -> None:
    history = tuple(with_environment(s) for s in demo_history(120))
    out.mkdir(parents=True, exist_ok=True)
    for w, h in ((120, 40), (80, 24)):
        write(out, f"process-{w}x{h}", await shoot(history, (w, h), ("e",)), png)
    write(out, "layout-gpu-lines-100x30", await shoot(history, (100, 30), ("c",)), png)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots")
    parser.add_argument("--no-png", action="store_true")
    args = parser.parse_args()
    asyncio.run(main_async(args.out, not args.no_png))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
