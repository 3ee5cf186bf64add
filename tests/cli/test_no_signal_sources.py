"""Only a live host source may signal: the demo, replays and any other source offer none,
and the kill dialog says why (issue 10, part 3)."""

from __future__ import annotations

import signal
import subprocess

from textual.widgets import Button

from gputop.actions import KillTarget
from gputop.sampler import Sampler
from gputop.sources.base import can_signal, no_signal_reason
from gputop.sources.demo import DemoSource
from gputop.sources.live import LiveSource
from gputop.ui.app import GpuTopApp
from gputop.ui.screens.kill import KillScreen

WIDE = (200, 50)


class _OtherSource:
    """A source someone adds later (a replay, a fleet stream) that says nothing about
    signals: it must get none."""

    kind = "replay"

    def snapshot(self) -> object:  # pragma: no cover - never sampled here
        raise AssertionError

    def close(self) -> None:  # pragma: no cover
        pass


def test_only_a_source_that_says_so_can_signal() -> None:
    assert LiveSource.can_signal is True
    assert can_signal(DemoSource(1)) is False
    assert can_signal(_OtherSource()) is False
    assert no_signal_reason(_OtherSource()) is not None
    assert "past" in (no_signal_reason(_OtherSource()) or "")
    assert "simulated" in (no_signal_reason(DemoSource(1)) or "")
    assert no_signal_reason(None) is not None


async def test_demo_kill_dialog_offers_no_signal_and_says_why() -> None:
    sampler = Sampler(DemoSource(3), interval=0.2)
    app = GpuTopApp(sampler)
    try:
        async with app.run_test(size=WIDE) as pilot:
            for _ in range(100):
                if app.table.cursor_proc is not None:
                    break
                await pilot.pause(0.05)
            assert app.table.cursor_proc is not None
            await pilot.press("k")
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, KillScreen)
            assert screen.readonly and screen.no_signals is not None
            # no signal drawn under "Nothing will be signalled" (issue 32): only the way out
            assert {b.id for b in screen.query(Button)} == {"cancel", "close"}
            title = str(screen.query_one("#kill-title").render())
            note = str(screen.query_one("#kill-note").render())
            assert "No signals from this source" in title
            assert "simulated" in note and "Nothing will be signalled" in note
    finally:
        sampler.stop()


def test_kill_screen_without_signals_refuses_even_when_asked() -> None:
    """Even a direct send() (no button) signals nothing: the dialog is read-only."""
    child = subprocess.Popen(["sleep", "30"])
    try:
        import psutil

        target = KillTarget(
            child.pid, psutil.Process(child.pid).create_time(), None, "sleep", 0, None
        )
        screen = KillScreen([target], no_signals="the demo shows simulated processes")
        assert screen.readonly
        from gputop.actions import send_signals

        (outcome,) = send_signals(screen.targets, signal.SIGTERM, readonly=screen.readonly)
        assert not outcome.ok
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()
