#!/usr/bin/env python3
"""Regenerate screenshots/replay-120x40.{svg,png} and replay-detail-120x40.{svg,png}:
``gputop replay`` on a recording of the seeded demo (20 minutes on its virtual clock),
paused 15 minutes in, its verdicts judged; then the detail screen of GPU 0 (the window
around the cursor: 10 minutes before it, 5 after).

    python scripts/replay_screenshot.py [--out screenshots] [--no-png]

PNG needs cairosvg and fonts-firacode (see scripts/screenshots.py).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

from gputop.record.player import Player  # noqa: E402
from gputop.record.store import Recorder, Recording  # noqa: E402
from gputop.sources.demo import DEMO_EPOCH, DemoSource  # noqa: E402
from scripts.screenshots import write  # noqa: E402


async def shoot(directory: Path) -> tuple[str, str]:
    from gputop.ui.replay import ReplayApp

    rec = Recording(directory)
    player = Player(rec, rec.position(DEMO_EPOCH + 15 * 60))
    player.tick_now()
    app = ReplayApp(player)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(200):
            await pilot.pause(0.05)
            if app.frames and app.judging is None and app.frame and app.frame.after:
                break
        await pilot.pause(0.3)
        svg: str = app.export_screenshot()
        await pilot.press("enter")
        for _ in range(100):
            await pilot.pause(0.05)
            if type(app.screen).__name__ == "DetailScreen":
                break
        await pilot.pause(0.5)
        detail: str = app.export_screenshot()
    player.stop()
    return svg, detail


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots")
    parser.add_argument("--no-png", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gputop-replay-shot-") as tmp:
        src = DemoSource(0, start_time=DEMO_EPOCH, step=1.0)
        rec = Recorder(Path(tmp), interval=1.0, retain=None, max_size=None)
        for _ in range(20 * 60):
            rec.add(src.snapshot())
        rec.close()
        svg, detail = asyncio.run(shoot(Path(tmp)))
    write(args.out, "replay-120x40", svg, not args.no_png)
    write(args.out, "replay-detail-120x40", detail, not args.no_png)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
