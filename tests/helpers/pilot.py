"""Waiting in Pilot tests for what a Textual app does a refresh or more later.

``pilot.pause()`` waits for the widgets' queues and then for the process to look idle by
the clock; what runs after the next refresh (a footer composing its keys, a callback of
``call_after_refresh``) may still be ahead of it when the machine is loaded. These wait for
the state itself, with a bound so that a state never reached fails instead of hanging.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.app import App
from textual.pilot import Pilot

from gputop.ui.keybar import KeyBar

#: Pauses before a wait gives up: a bound for a loaded machine, not a timing assertion.
PAUSES = 3000
PAUSE_S = 0.01


async def until(pilot: Pilot[Any], check: Callable[[], object], what: str) -> None:
    """Pause until ``check()`` is true; fail, saying ``what`` never came, after the bound."""
    for _ in range(PAUSES):
        if check():
            return
        await pilot.pause(PAUSE_S)
    raise AssertionError(f"never: {what}")


def listed_keys(footer: KeyBar) -> list[str]:
    """The descriptions of the keys the footer draws now."""
    return [k.description for k in footer.shown]


async def composed_footer(pilot: Pilot[Any]) -> KeyBar:
    """The top screen's footer, once it has composed its keys (one refresh after its mount
    or its screen's push). On the dashboard's main screen that is after its start is over:
    the footer is mounted at the end of the refresh after the first frame, whose last step
    releases the collector and the code cache (GpuTopApp._mount_after_first_frame)."""
    app = pilot.app

    def keys_listed() -> bool:
        footer = app.screen.query_one_optional(KeyBar)
        return footer is not None and bool(listed_keys(footer))

    await until(pilot, keys_listed, f"a footer with keys on {type(app.screen).__name__}")
    return app.screen.query_one(KeyBar)


class Frames:
    """Counts the frames an app writes for its terminal (each update Textual hands to its
    driver; a run_test app's driver drops them): a test that changes what is shown waits
    for the frame after it with :meth:`after` instead of trusting one pause to cover the
    next refresh, which the screen's update timer runs."""

    def __init__(self, app: App[Any]) -> None:
        self.count = 0
        display = app._display

        def counted(screen: Any, renderable: Any) -> None:
            if renderable is not None:
                self.count += 1
            display(screen, renderable)

        app._display = counted  # type: ignore[method-assign]

    async def after(self, pilot: Pilot[Any], change: Callable[[], object], what: str) -> None:
        """Make ``change`` and wait until a frame was written after it."""
        before = self.count
        change()
        await until(pilot, lambda: self.count > before, f"a frame after {what}")
