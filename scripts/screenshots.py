#!/usr/bin/env python3
"""Regenerate screenshots/ (SVG and PNG) from the seeded demo.

    python scripts/screenshots.py [--out screenshots] [--samples 120] [--no-png]

Makes the dashboard at 80x24 and 200x50, plus the jobs view, the kill dialog (as the demo
shows it: no signals), help and the GPU detail screen at 200x50, the detail screen at 80x24
(one chart at a time), and the dashboard with GPU 4 in MIG mode (``DemoSource(mig=True)``).
Everything comes from ``DemoSource(seed=0)`` on its virtual clock, fed to
``GpuTopApp(sampler=None)`` through ``apply_snapshot``: no timers, no live data.
``h200-*``: the demo's 8-GPU H200 node with GPM and NVLink (``DemoSource(node="h200")``:
SM, TC and the NVL line; ``--only h200`` makes only these).

PNG needs cairosvg (``pip install cairosvg``) and a monospace font with box drawing and
block characters: on Debian/Ubuntu ``apt-get install fonts-firacode`` (rsvg-convert
collapses runs of spaces; do not use it).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

from gputop.model import Snapshot  # noqa: E402
from gputop.sources.demo import DemoSource  # noqa: E402

SIZES = ((80, 24), (200, 50))


def demo_history(samples: int, mig: bool = False, node: str | None = None) -> tuple[Snapshot, ...]:
    source = DemoSource(seed=0, mig=mig, node=node)
    try:
        return tuple(source.snapshot() for _ in range(samples))
    finally:
        source.close()


def help_bindings(app: Any) -> list[tuple[str, str]]:
    """The keys the app's main screen offers, as (key, description)."""
    rows: list[tuple[str, str]] = []
    for key, active in app.active_bindings.items():
        binding = active.binding
        if binding.description:
            rows.append((app.get_key_display(binding) or key, binding.description))
    return rows


async def _shoot(
    history: tuple[Snapshot, ...],
    size: tuple[int, int],
    then: Callable[[Any, Any, tuple[Snapshot, ...]], Awaitable[None]] | None = None,
) -> str:
    from gputop.ui.app import GpuTopApp

    app = GpuTopApp(sampler=None)
    async with app.run_test(size=size) as pilot:
        app.apply_snapshot(history[-1], history)
        await pilot.pause()
        if then is not None:
            await then(app, pilot, history)
            await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        svg: str = app.export_screenshot()
    return svg


async def _kill(app: Any, pilot: Any, history: tuple[Snapshot, ...]) -> None:
    from gputop.actions import KillTarget
    from gputop.sources.base import no_signal_reason
    from gputop.ui.screens.kill import KillScreen
    from gputop.views.process_view import process_rows

    snap = history[-1]
    gpu = (snap.gpu(3) or snap.gpus[0]).index
    rows = [r for r in process_rows(snap) if r.gpu == gpu]
    targets = [KillTarget(r.pid, r.create_time, r.user, r.command, gpu, r.gpu_memory) for r in rows]
    # As the demo shows it: simulated pids are offered no signal (the dialog says why).
    app.push_screen(KillScreen(targets, no_signals=no_signal_reason(DemoSource(seed=0))))


async def _help(app: Any, pilot: Any, history: tuple[Snapshot, ...]) -> None:
    from gputop.ui.screens.help import HelpScreen

    await pilot.press("question_mark")
    await pilot.pause()
    assert isinstance(app.screen, HelpScreen), "? did not open the help screen"


async def _detail(app: Any, pilot: Any, history: tuple[Snapshot, ...]) -> None:
    from gputop.ui.screens.detail import DetailScreen

    # As a user opens it (with the verdict panel): Enter on GPU 2's process.
    app.push_screen(DetailScreen(2, history, verdict=lambda: app.gpu_verdict(2)))


async def _jobs(app: Any, pilot: Any, history: tuple[Snapshot, ...]) -> None:
    await pilot.press("j")


def write(out: Path, name: str, svg: str, png: bool) -> None:
    (out / f"{name}.svg").write_text(svg, encoding="utf-8")
    written = [f"{name}.svg"]
    if png:
        import cairosvg

        cairosvg.svg2png(bytestring=svg.encode("utf-8"), write_to=str(out / f"{name}.png"))
        written.append(f"{name}.png")
    print(" ".join(str(out / w) for w in written))


async def h200_async(out: Path, samples: int, png: bool) -> None:
    history = demo_history(samples, node="h200")
    out.mkdir(parents=True, exist_ok=True)
    for w, h in SIZES:
        write(out, f"h200-{w}x{h}", await _shoot(history, (w, h)), png)

    async def detail(app: Any, pilot: Any, history: tuple[Snapshot, ...]) -> None:
        from gputop.ui.screens.detail import DetailScreen

        app.push_screen(DetailScreen(4, history, verdict=lambda: app.gpu_verdict(4)))

    write(out, "h200-detail-200x50", await _shoot(history, (200, 50), detail), png)


async def main_async(out: Path, samples: int, png: bool) -> None:
    await h200_async(out, samples, png)
    history = demo_history(samples)
    out.mkdir(parents=True, exist_ok=True)
    for w, h in SIZES:
        write(out, f"dashboard-{w}x{h}", await _shoot(history, (w, h)), png)
    for name, then in (("jobs", _jobs), ("kill", _kill), ("help", _help), ("detail", _detail)):
        write(out, f"{name}-200x50", await _shoot(history, (200, 50), then), png)
    # The detail screen at 80x24: one chart at a time (→/← page through them).
    write(out, "detail-80x24", await _shoot(history, (80, 24), _detail), png)
    # GPU 4 partitioned into MIG devices (DemoSource(mig=True)): the MIG lines and verdict
    write(
        out, "dashboard-mig-200x50", await _shoot(demo_history(samples, mig=True), (200, 50)), png
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots")
    parser.add_argument("--samples", type=int, default=120, help="demo snapshots of history")
    parser.add_argument("--no-png", action="store_true", help="SVG only (no cairosvg needed)")
    parser.add_argument("--only", choices=("all", "h200"), default="all", help="which screenshots")
    args = parser.parse_args(argv)
    run = h200_async if args.only == "h200" else main_async
    asyncio.run(run(args.out, args.samples, not args.no_png))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
