#!/usr/bin/env python3
"""Regenerate the fleet screenshots (SVG and PNG) from demo hosts.

    python scripts/fleet_screenshots.py [--out screenshots] [--no-png]

``fleet-16-200x50``: 16 hosts, each a demo server (``DemoSource``, seed = its position)
at a different point of its simulated day, as ``gputop --demo --stream`` would send
them; two hosts are made unreachable and stale, one has no gputop: the states a real
fleet shows. ``fleet-8-80x24``: 8 hosts in 80x24. ``fleet-host-200x50``: Enter on a host.
Everything is fed to the app directly (no ssh, no timers): demo data, said so in the
README. PNG needs cairosvg and fonts-firacode (see scripts/screenshots.py).
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

from scripts.screenshots import write  # noqa: E402
from tests.builders import demo_host_lines  # noqa: E402
from tests.helpers.fleet import FakeFleet  # noqa: E402


def fleet(count: int, problems: bool) -> FakeFleet:
    names = [f"gpu-node-{i + 1:02d}" for i in range(count)]
    f = FakeFleet(names, interval=2.0)
    # Each host at its own point of the demo's day (the verdicts differ), 200 lines in:
    # long enough for every verdict, idle memory holders included. Computed first, fed
    # together: a host's age is the time since it was fed.
    datas = {
        name: demo_host_lines(n, 200, start=1_800_000_000.0 + 1_700.0 * n)[-1]
        for n, name in enumerate(names)
        if not (problems and n in (5, 11))
    }
    for n, name in enumerate(names):
        if problems and n == 5:
            f.fail(name, "ssh: connect to host gpu-node-06 port 22: Connection timed out")
        elif problems and n == 11:
            f.fail(
                name,
                "gputop not found (bash: line 1: gputop: command not found); install it there",
                problem="no-gputop",
            )
        else:
            f.feed(name, datas[name], age=47.0 if problems and n == 9 else 0.0)
    return f


async def shoot(f: FakeFleet, size: tuple[int, int], open_host: str | None = None) -> str:
    from gputop.ui.fleet import FleetApp

    app = FleetApp(f, via="demo data")  # type: ignore[arg-type]
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        if open_host is not None:
            app.open_host(open_host)
            await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        svg: str = app.export_screenshot()
    return svg


async def main_async(out: Path, png: bool) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write(out, "fleet-16-200x50", await shoot(fleet(16, True), (200, 50)), png)
    write(out, "fleet-8-80x24", await shoot(fleet(8, False), (80, 24)), png)
    write(out, "fleet-host-200x50", await shoot(fleet(4, False), (200, 50), "gpu-node-03"), png)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots")
    parser.add_argument("--no-png", action="store_true", help="SVG only (no cairosvg needed)")
    args = parser.parse_args(argv)
    asyncio.run(main_async(args.out, not args.no_png))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
