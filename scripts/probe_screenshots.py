#!/usr/bin/env python3
"""Regenerate screenshots/probe-*.{svg,png}: the demo server whose jobs run gputop's probe
(``gputop --demo --demo-node h200-probe``: kim's ViT input-bound (measured), a rank waiting
more than the other; lena's U-Net not input-bound (measured); mallory's fine-tune with the
caching allocator's hold), as the dashboard, the jobs view and the job detail of the ViT
job (its data-wait and step-time charts), at 120x40 and 80x24. What a user sees of it.

    python scripts/probe_screenshots.py [--out screenshots] [--no-png]

PNG needs cairosvg and fonts-firacode (see scripts/screenshots.py).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

from gputop.model import Snapshot  # noqa: E402
from scripts.screenshots import demo_history, write  # noqa: E402

NODE = "h200-probe"
#: The job shown in the jobs view and the job detail: kim's ViT (its first rank's pid).
VIT_RANK = 70111

SIZES = ((120, 40), (80, 24))
VIEWS = ("dashboard", "jobs", "job-detail")


async def shoot(history: tuple[Snapshot, ...], size: tuple[int, int], view: str) -> str:
    from gputop.ui.app import GpuTopApp
    from gputop.ui.screens.jobs import JobsScreen

    app = GpuTopApp(sampler=None)
    async with app.run_test(size=size) as pilot:
        app.apply_snapshot(history[-1], history)
        await pilot.pause()
        if view != "dashboard":
            await pilot.press("j")
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, JobsScreen), "j did not open the jobs view"
            diagnosis = app.diagnosis()
            assert diagnosis is not None
            job = next(j for j in diagnosis.jobs if VIT_RANK in j.pids)
            screen.job_tree.select_key(f"job:{job.id}")
            await pilot.pause()
        if view == "job-detail":
            await pilot.press("enter")
            await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        svg: str = app.export_screenshot()
    return svg


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots")
    parser.add_argument("--no-png", action="store_true")
    args = parser.parse_args()
    history = demo_history(120, node=NODE)
    for w, h in SIZES:
        for view in VIEWS:
            svg = asyncio.run(shoot(history, (w, h), view))
            write(args.out, f"probe-{view}-{w}x{h}", svg, not args.no_png)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
