"""What every source offers the sampler: a whole snapshot per call."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from gputop.model import Snapshot

#: Why a source that is not this machine's live processes offers no signals, by kind.
NO_SIGNAL_REASONS = {
    "demo": "the demo shows simulated processes: their pids are not processes of this machine",
    "replay": "a replay shows processes of the past: their pids may belong to anyone now",
}

#: The demo's servers by ``--demo-node`` name, the first the default (``demo.NODES`` pairs
#: each with its server): here, so that the argument parser offers them without loading
#: the demo, which no live start needs.
DEMO_NODES: tuple[str, ...] = ("h100", "h200", "h200-probe")


class Source(Protocol):
    """A producer of snapshots. Called from the sampler's worker thread only."""

    #: "nvml", "host-only", "demo", "replay": shown in the header.
    kind: str

    # ``can_signal`` (optional): True only where the pids are this machine's live
    # processes (``LiveSource``); read it with ``can_signal(source)``.
    # ``min_pair_window_s`` (optional): the least time between two readings whose rates it
    # gives (read with ``pair_window(source, window)``).

    def snapshot(self) -> Snapshot:
        """Must not raise for a metric, a GPU or a process going wrong: record it in
        ``Snapshot.errors`` and carry on."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class Deferring(Protocol):
    """A source that can hand over a snapshot before its GPU processes' host side is read
    (``LiveSource``): the dashboard's first frame needs the GPUs and the host only."""

    def snapshot(self, *, processes: bool = True) -> Snapshot:
        """``processes`` False: the snapshot's errors say the rest is being read
        (``model.PROCESSES_PENDING``)."""
        ...

    def complete(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` with what ``snapshot(processes=False)`` left out, read now (the
        same time and readings); any other snapshot as it is."""
        ...


def pair_window(source: object, window: float) -> float:
    """How far apart two readings that make rates must start: ``window``, or more where
    ``source`` says it needs more (``min_pair_window_s``, optional: GPM's two samples)."""
    need = getattr(source, "min_pair_window_s", 0.0)
    return max(window, need) if isinstance(need, int | float) else window


def can_signal(source: object) -> bool:
    """Only when ``source`` says so."""
    return getattr(source, "can_signal", False) is True


def no_signal_reason(source: object | None) -> str | None:
    """In words, why ``source`` offers no signal (None: it does)."""
    if source is None:
        return "these snapshots come from no live source: nothing here can be signalled"
    if can_signal(source):
        return None
    kind = str(getattr(source, "kind", "") or "this")
    return NO_SIGNAL_REASONS.get(
        kind, f"the {kind} source does not show this machine's live processes"
    )
