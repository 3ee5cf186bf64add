"""What every source offers the sampler: a whole snapshot per call."""

from __future__ import annotations

from typing import Protocol

from gputop.model import Snapshot


class Source(Protocol):
    """A producer of snapshots. Called from the sampler's worker thread only."""

    #: "nvml", "host-only", "demo", "replay": shown in the header.
    kind: str

    def snapshot(self) -> Snapshot:
        """Sample everything once. Must not raise for a metric, a GPU or a process going
        wrong: record it in ``Snapshot.errors`` and carry on."""
        ...

    def close(self) -> None:
        """Release what the source holds (NVML is shut down here)."""
        ...
