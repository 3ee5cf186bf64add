"""PCIe link arithmetic: what a link can carry, per direction.

Per-lane raw rate (GT/s) and line-code efficiency by generation:

- gen1 2.5 GT/s, gen2 5 GT/s: 8b/10b (80 %)
- gen3 8, gen4 16, gen5 32 GT/s: 128b/130b
- gen6 64, gen7 128 GT/s: PAM4 with 256-byte FLITs, of which 242 bytes carry data
  (the other 14 are FEC and CRC), so 242/256. This still counts TLP/DLLP headers as
  payload, as the figures for the older generations do.

So gen3 x16 = 8e9 x 128/130 / 8 x 16 = 15.75 GB/s, gen4 x16 = 31.5 GB/s,
gen5 x16 = 63.0 GB/s, gen6 x16 = 121 GB/s. Protocol overhead (headers, flow control)
makes the achievable rate lower still (typically 80-90 % of these), so a link "near its
maximum" shows well below 100 % of this figure.
"""

from __future__ import annotations

# generation -> (transfers per second per lane, useful bits per transferred bit)
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
    """Usable bytes per second of one lane in one direction; None for an unknown generation."""
    if gen is None or gen not in _LANE:
        return None
    rate, efficiency = _LANE[gen]
    return rate * efficiency / 8


def link_max_bytes_per_s(gen: int | None, width: int | None) -> float | None:
    """Usable bytes per second of a gen x width link, per direction; None when unknown."""
    lane = lane_bytes_per_s(gen)
    if lane is None or width is None or width <= 0:
        return None
    return lane * width
