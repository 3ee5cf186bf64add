#!/usr/bin/env python3
"""Regenerate screenshots/probe-*.{svg,png}: the seeded demo with probe figures attached
by a test builder (``tests.ui.probes.demo_with_probes``: the torchrun ranks with a
straggler, the ResNet job input-bound), as the dashboard, the jobs view and the job
detail of the ResNet job (its data-wait and step-time charts), at 120x40 and 80x24.

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
from scripts.screenshots import write  # noqa: E402
from tests.ui.probes import RESNET, demo_with_probes  # noqa: E402

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
            job = next(j for j in diagnosis.jobs if RESNET in j.pids)
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
    history = demo_with_probes(120)
    for w, h in SIZES:
        for view in VIEWS:
            svg = asyncio.run(shoot(history, (w, h), view))
            write(args.out, f"probe-{view}-{w}x{h}", svg, not args.no_png)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
