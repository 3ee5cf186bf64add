"""Run the dashboard (Textual Pilot) on the fake NVML a subprocess was pointed at, and print
what it shows as JSON: the GPU panel's text per GPU, the process rows, the whole screen.

A process can load one build of the fake only (glibc reuses a library by its soname), so
the tests of each driver profile run this in a subprocess:
``python -m tests.profile_dashboard`` with ``tests.fakenvml.subprocess_env(..., profile=)``.
"""

from __future__ import annotations

import asyncio
import json
import sys

from gputop.sampler import Sampler
from gputop.sources.live import LiveSource
from gputop.sources.nvml import NvmlReader
from gputop.ui.app import GpuTopApp
from tests.helpers.screen import terminal_rows


async def run(width: int, height: int) -> dict[str, object]:
    source = LiveSource(nvml=NvmlReader(), holders=lambda minors, listed: (), hostname="node")
    sampler = Sampler(source, interval=0.2)
    app = GpuTopApp(sampler)
    out: dict[str, object] = {}
    try:
        async with app.run_test(size=(width, height)) as pilot:
            for _ in range(200):
                if app.frames >= 2:
                    break
                await pilot.pause(0.05)
            await pilot.pause(0.1)
            out["gpus"] = {str(i): b.text for i, b in sorted(app.gpu_panel.blocks.items())}
            out["rows"] = sorted(app.table.rows_by_key)
            out["screen"] = "\n".join(terminal_rows(app))
            out["compat"] = list(source.driver.compat)
    finally:
        sampler.stop()
    return out


def main(argv: list[str]) -> int:
    width, height = (int(argv[1]), int(argv[2])) if len(argv) > 2 else (200, 50)
    print(json.dumps(asyncio.run(run(width, height))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
