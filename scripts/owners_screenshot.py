#!/usr/bin/env python3
"""Regenerate screenshots/owners-200x50.{svg,png} and owners-jobs-200x50.{svg,png}: the
seeded demo as a Kubernetes/Slurm node (two pods, a Slurm job, a Docker container:
``tests.builders.with_owners``), the dashboard with its OWNER column, then the jobs view.

    python scripts/owners_screenshot.py [--out screenshots] [--no-png]

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
from tests.builders import with_owners  # noqa: E402


async def shoot(history: tuple[Snapshot, ...], jobs: bool) -> str:
    from gputop.ui.app import GpuTopApp

    app = GpuTopApp(sampler=None)
    async with app.run_test(size=(200, 50)) as pilot:
        app.apply_snapshot(history[-1], history)
        await pilot.pause()
        if jobs:
            await pilot.press("j")
            await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        svg: str = app.export_screenshot()
    return svg


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots")
    parser.add_argument("--no-png", action="store_true")
    args = parser.parse_args()
    history = tuple(with_owners(s) for s in demo_history(120))
    for name, jobs in (("owners-200x50", False), ("owners-jobs-200x50", True)):
        write(args.out, name, asyncio.run(shoot(history, jobs)), not args.no_png)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
