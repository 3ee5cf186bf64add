"""PCIe link arithmetic: what a link can carry, per direction, after the line code only.

Protocol overhead (TLP/DLLP headers, flow control) is counted as payload, so a link
"near its maximum" shows well below 100 % of this figure.
"""

from __future__ import annotations

# generation -> (transfers per second per lane, useful bits per transferred bit); gen6+
# send 256-byte FLITs of which 242 carry data (the rest is FEC and CRC)
_LANE: dict[int, tuple[float, float]] = {
    1: (2.5e9, 8 / 10),
    2: (5.0e9, 8 / 10),
    3: (8.0e9, 128 / 130),
    4: (16.0e9, 128 / 130),
    5: (32.0e9, 128 / 130),
    6: (64.0e9, 242 / 256),
    7: (128.0e9, 242 / 256),
}


def lane_bytes_per_s(gen: int | None) -> float | None:
    """Per direction; None for an unknown generation."""
    if gen is None or gen not in _LANE:
        return None
    rate, efficiency = _LANE[gen]
    return rate * efficiency / 8


def link_max_bytes_per_s(gen: int | None, width: int | None) -> float | None:
    """Per direction; None when unknown."""
    lane = lane_bytes_per_s(gen)
    if lane is None or width is None or width <= 0:
        return None
    return lane * width
