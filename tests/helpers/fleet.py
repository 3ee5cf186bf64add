"""A fleet of demo hosts without processes or threads: host views built from demo lines
(each host its own seed, tests/builders.demo_host_lines), for Pilot tests, screenshots and
benchmarks."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from gputop.sources.remote import summarize
from gputop.sources.streams import HostView
from tests.builders import demo_host_lines


class FakeFleet:
    """Implements gputop.sources.streams.HostViews with views set by the test."""

    def __init__(
        self,
        names: Sequence[str],
        interval: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = interval
        self.on_change: Callable[[], None] | None = None
        self.names = list(names)
        self._clock = clock
        self._views = {n: HostView(n) for n in names}
        self.closed = False
        self.retried = 0

    def views(self) -> tuple[HostView, ...]:
        return tuple(self._views[n] for n in self.names)

    def view(self, name: str) -> HostView:
        return self._views[name]

    def start(self) -> None:
        pass

    def close(self, timeout: float = 3.0) -> None:
        self.closed = True

    def retry_now(self) -> None:
        self.retried += 1

    def feed(self, name: str, data: dict[str, Any], age: float = 0.0) -> None:
        old = self._views[name]
        self._views[name] = replace(
            old,
            report=summarize(data),
            data=data,
            seq=old.seq + 1,
            received=self._clock() - age,
            connected=True,
            failures=0,
            attempts=max(1, old.attempts),
            error=None,
            problem=None,
        )
        if self.on_change is not None:
            self.on_change()

    def fail(self, name: str, error: str, problem: str | None = None) -> None:
        old = self._views[name]
        self._views[name] = replace(
            old,
            connected=False,
            failures=old.failures + 1,
            attempts=old.attempts + 1,
            error=error,
            problem=problem,
        )
        if self.on_change is not None:
            self.on_change()


def demo_fleet(
    names: Sequence[str], ticks: int = 30, interval: float = 2.0
) -> tuple[FakeFleet, dict[str, list[dict[str, Any]]]]:
    """A fleet whose hosts each got ``ticks`` demo lines (seed = position)."""
    fleet = FakeFleet(names, interval)
    datas = {}
    for n, name in enumerate(names):
        datas[name] = demo_host_lines(n, ticks)
        fleet.feed(name, datas[name][-1])
    return fleet, datas
